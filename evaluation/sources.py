"""The photos people actually have, made by real encoders for the tests and benchmarks: wide-gamut
profiles (Debian's colord-data, Display P3 written from its primaries, the red/green swap; CMYK and
grey ones from libgs-common),
HEIC (pillow-heif's x265), AVIF, WebP and GIF (Pillow's writers), CMYK, grey and 16-bit sources,
animations, EXIF; and the reference every colour is judged against: LittleCMS (ImageCms)
converting the decoded source to sRGB, then the same area resize."""

from __future__ import annotations

import hashlib
import io
import struct
import zlib
from functools import cache
from pathlib import Path

import cv2
import numpy as np
import pillow_heif
from PIL import Image, ImageChops, ImageCms

COLORD = Path("/usr/share/color/icc/colord")  # Debian's colord-data (`make test` installs it)
GHOSTSCRIPT = Path("/usr/share/color/icc/ghostscript")  # Debian's libgs-common: CMYK and grey profiles
CONTAINERS = ("JPEG", "PNG", "WEBP", "TIFF", "AVIF", "HEIF")
LOSSY = {"JPEG": {"quality": 95}, "WEBP": {"quality": 95}, "AVIF": {"quality": 95}, "HEIF": {"quality": 95}}
SRGB = ImageCms.createProfile("sRGB")
pillow_heif.register_heif_opener()


@cache
def profiles() -> dict[str, bytes]:
    """Wide-gamut RGB profiles by name: Display P3 (written here from its published primaries, apart
    from the gateway's own), Adobe RGB and ProPhoto (colord-data), and colord's diagnostic profile
    that swaps red and green."""
    files = {"adobe-rgb": "AdobeRGB1998.icc", "prophoto": "ProPhotoRGB.icc", "swapped": "SwappedRedAndGreen.icc"}
    return {"display-p3": display_p3(), **{name: (COLORD / file).read_bytes() for name, file in files.items()}}


# Display P3 as published (SMPTE EG 432-1 primaries, the D65 white, IEC 61966-2-1's curve), written
# in the tests as an ICC v2 profile with a sampled curve: not gateway/imaging/profiles.py's
# v4 profile with a parametric one, so that a mistake there is not repeated in the reference.
P3_PRIMARIES = {"red": (0.680, 0.320), "green": (0.265, 0.690), "blue": (0.150, 0.060)}
P3_WHITE = (0.3127, 0.3290)
ICC_D50 = (0.9642, 1.0, 0.8249)  # the profile connection space's white, as ICC.1 gives it
# Bradford's cone response (Lam 1985), rows: rho, gamma, beta.
CONES = np.array([[0.8951, 0.2664, -0.1614], [-0.7502, 1.7135, 0.0367], [0.0389, -0.0685, 1.0296]])


def p3_colorants() -> np.ndarray:
    """Columns: red, green and blue's XYZ under D50 (Bradford-adapted from D65), white Y = 1."""

    def xyz_of(chromaticity: tuple[float, float]) -> np.ndarray:
        x, y = chromaticity
        return np.array([x, y, 1 - x - y]) / y

    primaries = np.column_stack([xyz_of(P3_PRIMARIES[name]) for name in ("red", "green", "blue")])
    white = xyz_of(P3_WHITE)
    scale = np.linalg.solve(primaries, white)  # how much of each primary makes the white
    to_d50 = np.linalg.inv(CONES) @ np.diag(CONES @ np.array(ICC_D50) / (CONES @ white)) @ CONES
    return to_d50 @ (primaries * scale)


@cache
def display_p3() -> bytes:
    """An ICC v2.1 matrix/TRC display profile of Display P3."""

    def fixed(*values: float) -> bytes:
        return b"".join(struct.pack(">i", round(v * 65536)) for v in values)

    def xyz_tag(values) -> bytes:
        return b"XYZ \0\0\0\0" + fixed(*values)

    name = b"Display P3 (tests, from the published primaries)\0"
    code = np.linspace(0, 1, 1024)
    linear = np.where(code <= 0.04045, code / 12.92, ((code + 0.055) / 1.055) ** 2.4)
    curve = b"curv\0\0\0\0" + struct.pack(">I", len(code)) + np.round(linear * 65535).astype(">u2").tobytes()
    colorants = p3_colorants()
    tags = {
        b"desc": b"desc\0\0\0\0" + struct.pack(">I", len(name)) + name + b"\0" * 8 + b"\0" * 3 + b"\0" * 67,
        b"cprt": b"text\0\0\0\0No copyright\0",
        b"wtpt": xyz_tag(ICC_D50),
        b"rXYZ": xyz_tag(colorants[:, 0]),
        b"gXYZ": xyz_tag(colorants[:, 1]),
        b"bXYZ": xyz_tag(colorants[:, 2]),
        b"rTRC": curve,
        b"gTRC": curve,
        b"bTRC": curve,
    }
    offset = 128 + 4 + 12 * len(tags)
    table, body = b"", b""
    for signature, data in tags.items():
        table += struct.pack(">4sII", signature, offset + len(body), len(data))
        body += data + b"\0" * (-len(data) % 4)
    size = offset + len(body)
    header = (
        struct.pack(">II", size, 0)
        + bytes([2, 0x10, 0, 0])  # version 2.1
        + b"mntrRGB XYZ "
        + struct.pack(">6H", 2025, 1, 1, 0, 0, 0)
        + b"acsp"
        + b"\0" * 24  # platform, flags, manufacturer, model, attributes
        + struct.pack(">I", 0)  # perceptual
        + fixed(*ICC_D50)
    )
    header += b"\0" * (128 - len(header))
    return header + struct.pack(">I", len(tags)) + table + body


NCLX_P3 = {"color_primaries": 12, "transfer_characteristics": 13, "matrix_coefficients": 6, "full_range_flag": 1}


def nclx_p3(image: Image.Image, container: str) -> bytes:
    """`image`'s values as Display P3, said by nclx code points (no ICC profile) as phones write them:
    HEIF through libheif's own nclx (pillow-heif); AVIF as Pillow's libavif writes it (nclx 1/13/6,
    which Pillow offers no way to change) with the colr box's primaries made 12, P3 D65."""
    if container == "HEIF":
        buffer = io.BytesIO()
        pillow_heif.from_pillow(image).save(buffer, format="HEIF", quality=95, save_nclx_profile=True, **NCLX_P3)
        return buffer.getvalue()
    data = bytearray(encoded_as(image, "AVIF"))
    at = data.index(b"colrnclx") + 8
    assert struct.unpack(">HHHB", data[at : at + 7]) == (1, 13, 6, 0x80), data[at : at + 7].hex()
    data[at : at + 2] = struct.pack(">H", NCLX_P3["color_primaries"])
    return bytes(data)


def encoded_as(image: Image.Image, container: str, icc: bytes | None = None, **options) -> bytes:
    """`image` written as `container` by its real encoder, with `icc` embedded where given."""
    extra = {**LOSSY.get(container, {}), **({"icc_profile": icc} if icc else {}), **options}
    buffer = io.BytesIO()
    if container == "HEIF":
        pillow_heif.from_pillow(image).save(buffer, format="HEIF", **extra)
    else:
        image.save(buffer, container, **extra)
    return buffer.getvalue()


def decoded(data: bytes) -> Image.Image:
    """A source decoded by Pillow (HEIF through pillow-heif), as RGB."""
    with Image.open(io.BytesIO(data)) as image:
        return image.convert("RGB")


def srgb_reference(data: bytes, icc: bytes, size: tuple[int, int]) -> np.ndarray:
    """LittleCMS's sRGB of the decoded source, area-resized to `size`: RGB, float."""
    transform = ImageCms.buildTransform(ImageCms.ImageCmsProfile(io.BytesIO(icc)), SRGB, "RGB", "RGB")
    converted = np.asarray(ImageCms.applyTransform(decoded(data), transform))
    return cv2.resize(converted, size, interpolation=cv2.INTER_AREA).astype(float)


def colour_error(picture: bytes, reference: np.ndarray) -> tuple[float, float]:
    """Mean and 99th percentile of the absolute difference, in levels, of an answer from the reference."""
    with Image.open(io.BytesIO(picture)) as image:
        error = np.abs(np.asarray(image.convert("RGB"), dtype=float) - reference)
    return float(error.mean()), float(np.percentile(error, 99))


def cmyk_jpeg(image: Image.Image, adobe: bool, icc: bytes | None = None) -> bytes:
    """`image` as a CMYK JPEG: Adobe's kind (inverted samples and its APP14 marker, as Pillow and
    Photoshop write it), or plain samples without the marker."""
    cmyk = image.convert("CMYK")
    data = encoded_as(cmyk if adobe else ImageChops.invert(cmyk), "JPEG", icc)
    if adobe:
        return data
    at = data.index(b"\xff\xee")  # Pillow writes the marker always: the plain kind drops it
    return data[:at] + data[at + 2 + int.from_bytes(data[at + 2 : at + 4], "big") :]


def png16(image: Image.Image, icc: bytes) -> bytes:
    """`image` as a 16-bit RGB PNG (OpenCV writes it) with `icc` in an iCCP chunk."""
    wide = cv2.cvtColor(np.asarray(image.convert("RGB")), cv2.COLOR_RGB2BGR).astype(np.uint16) * 257
    data = cv2.imencode(".png", wide)[1].tobytes()
    payload = b"icc\0\0" + zlib.compress(icc)
    chunk = struct.pack(">I", len(payload)) + b"iCCP" + payload + struct.pack(">I", zlib.crc32(b"iCCP" + payload))
    return data[:33] + chunk + data[33:]  # after the signature and IHDR


def animation(frames: list[Image.Image], container: str, durations: list[int], loop: int | None) -> bytes:
    """An animated GIF, WebP, PNG or AVIF of `frames`, each with its duration (ms); `loop` as Pillow
    takes it."""
    extra = {} if loop is None else {"loop": loop}
    return encoded_as(frames[0], container, save_all=True, append_images=frames[1:], duration=durations, **extra)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]
