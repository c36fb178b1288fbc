"""The sources facecrop reads, told apart by their bytes (never by a name or a Content-Type):
JPEG, PNG, WebP, BMP, GIF and TIFF (decoded by OpenCV, else Pillow), AVIF (Pillow's libavif) and
HEIC/HEIF (pi-heif: libheif with libde265, a decoder only). GIF, WebP, APNG and AVIF sequences are
animations (gateway/imaging/animation.py).

HEIF's rotation and mirroring (irot, imir) are applied by libheif as it decodes: its size is the
upright one and its EXIF orientation 1. AVIF's come as an EXIF orientation, applied like a JPEG's.

A header's colour: its ICC profile (JPEG APP2, PNG iCCP, WebP ICCP, TIFF, AVIF and HEIF colr
`prof`), or, for AVIF and HEIF that describe their colour by code points (colr `nclx`), Display P3
as a profile (BT.709 is sRGB's own: no profile).
"""

from __future__ import annotations

import struct

import pi_heif
from PIL import AvifImagePlugin, Image

pi_heif.register_heif_opener()
# One decoding thread each: requests already run in parallel on the workers' threads.
pi_heif.options.DECODE_THREADS = 1
AvifImagePlugin.DEFAULT_MAX_THREADS = 1
AVIF_SPEED = 8  # libavif's 0 (slowest, smallest) to 10: 2.3x faster than its default 6, files 1 % larger

from gateway.imaging.profiles import DISPLAY_P3  # noqa: E402 - after the opener is registered

SUPPORTED_FORMATS = frozenset({"JPEG", "PNG", "WEBP", "BMP", "GIF", "TIFF", "AVIF", "HEIF"})
ANIMATED_FORMATS = frozenset({"GIF", "WEBP", "PNG", "AVIF"})
NCLX_P3 = (12, 13)  # colour primaries (SMPTE EG 432-1, P3 D65), transfer (IEC 61966-2-1, sRGB's)
NCLX_SEARCH_BYTES = 1 << 16  # the colr box sits in the header, near the start
NEW_SUBFILE_TYPE, REDUCED_RESOLUTION = 254, 1  # a TIFF tag, and its bit for a preview of another image
DNG_VERSION = 50706  # the TIFF tag every DNG has
PREVIEW_ONLY = (
    "a camera RAW file (DNG, NEF, ...) or a TIFF whose first image is a preview of another is not supported "
    "(its photo cannot be read, only a small preview): send the photo as JPEG, HEIC, PNG, WebP or AVIF"
)


def preview_only(image: Image.Image) -> bool:
    """Whether the TIFF Pillow reads from is a camera RAW (a DNG, or a first image marked as a
    reduced-resolution preview of another, as NEF and ARW files have): Pillow would read that
    small preview, not the photo."""
    if image.format != "TIFF":
        return False
    tags = getattr(image, "tag_v2", {})
    return DNG_VERSION in tags or bool(int(tags.get(NEW_SUBFILE_TYPE, 0)) & REDUCED_RESOLUTION)


def first_played(image: Image.Image) -> int:
    """The index of the first frame a viewer plays: 1 where an APNG's default image (IDAT, a still
    for viewers without APNG, often a notice that they cannot play it) is not part of its
    animation, else 0."""
    return int(bool(image.info.get("default_image")) and getattr(image, "n_frames", 1) > 1)


def colour_profile(image: Image.Image, data: bytes) -> bytes | None:
    """The ICC profile the image's pixels are in, as its header says (None: sRGB)."""
    icc = image.info.get("icc_profile")
    if icc:
        return bytes(icc)
    code_points: tuple[object, object] | None
    if image.format == "HEIF":
        nclx = image.info.get("nclx_profile") or {}
        code_points = (nclx.get("color_primaries"), nclx.get("transfer_characteristics"))
    elif image.format == "AVIF":
        code_points = avif_nclx(data)
    else:
        return None
    return DISPLAY_P3 if code_points == NCLX_P3 else None


def avif_nclx(data: bytes) -> tuple[int, int] | None:
    """An AVIF's colr nclx (primaries, transfer), which Pillow does not expose."""
    at = data.find(b"colrnclx", 0, NCLX_SEARCH_BYTES)
    if at < 0 or len(data) < at + 12:
        return None
    primaries, transfer = struct.unpack(">HH", data[at + 8 : at + 12])
    return primaries, transfer


def png_exif_chunk(data: bytes) -> bytes | None:
    """A PNG's eXIf chunk, wherever it lies, found by walking the chunks' headers (Pillow's reader
    decodes the whole picture to look for one after the pixels)."""
    at = 8  # after the signature
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        if kind == b"eXIf":
            return data[at + 8 : at + 8 + length]
        if kind == b"IEND":
            return None
        at += 12 + length  # length, type, data, CRC
    return None


WEBP_ALPHA_FLAG = 0x10  # VP8X's flags: some of the picture may be transparent
WEBP_ANIMATION_FLAG = 0x02  # it is an animation


def webp_said_transparent(data: bytes) -> bytes:
    """An animated WebP with its alpha flag set. libwebp's animation encoder leaves it unset where
    every frame it wrote is an opaque rectangle on the transparent canvas (its first one too), and
    readers that trust the flag (Pillow) then show that canvas black where browsers show it
    transparent; other data (a still WebP too) as it is."""
    if len(data) < 21 or data[:4] != b"RIFF" or data[8:16] != b"WEBPVP8X":
        return data
    if data[20] & WEBP_ALPHA_FLAG or not data[20] & WEBP_ANIMATION_FLAG:
        return data
    return data[:20] + bytes([data[20] | WEBP_ALPHA_FLAG]) + data[21:]
