"""What goes out is sRGB, as Cloudflare, imgproxy and sharp make it: "colour profiles are applied
even if the metadata is discarded".

A source's ICC profile rides with its decoded pixels (gateway/imaging/decode.py); only what goes out, the
crop after resizing, is converted to sRGB, by LittleCMS (Pillow's ImageCms) with the perceptual
intent (for matrix/TRC profiles, nearly all RGB ones, the same as relative colorimetric), and the
profile is then dropped: untagged pixels are sRGB. RGB and grey profiles are converted so;
a profile equivalent to sRGB is found once (a probe of colours) and skipped from then on. CMYK
sources are converted as they are decoded (their profile, else the plain inversion). A profile
LittleCMS cannot read, or of another colour space than the source's samples (a grey profile on a
colour JPEG, an RGB one on a grey picture: `fits`), is ignored, as Chrome and libvips ignore it: the
pixels are taken as sRGB, and the answer says so (gateway/processing/: X-Color-Profile).
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image, ImageChops, ImageCms

SRGB = ImageCms.createProfile("sRGB")
INTENT = ImageCms.Intent.PERCEPTUAL
CACHED_PROFILES = 64  # transforms kept per worker, by the profile's digest
# Converted, kept as sRGB already, or ignored: what the X-Color-Profile header says.
CONVERTED, SRGB_ALREADY, IGNORED = "converted", "srgb", "ignored"
JPEG_CONTAINERS = frozenset({"JPEG", "MPO"})  # an MPO's first picture is a JPEG
GREY_MODES = frozenset({"1", "L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "I;16N", "F"})  # Pillow's grey samples
_PROBE = np.random.default_rng(7).integers(0, 256, (1, 512, 3), dtype=np.uint8)
# Rows converted at a time: whole-picture temporaries (Pillow's convert, alpha_composite and array
# copies, float colour) cost 4 to 12 times the picture (a 98 MP RGBA PNG: +2 GiB to detect, +4.3 to hide).
BAND_ROWS = 256


def banded_bgr(height: int, width: int, rgb_rows: Callable[[int, int], Image.Image], alpha: bool = False) -> np.ndarray:
    """BGR pixels (BGRA with `alpha`) made BAND_ROWS rows at a time from `rgb_rows(top, bottom)`, an
    RGB (RGBA, or premultiplied RGBa) Pillow picture of those rows (each conversion works pixel by
    pixel: the same pixels as at once)."""
    bgr = np.empty((height, width, 4 if alpha else 3), np.uint8)
    code = cv2.COLOR_RGBA2BGRA if alpha else cv2.COLOR_RGB2BGR
    for top in range(0, height, BAND_ROWS):
        bottom = min(top + BAND_ROWS, height)
        cv2.cvtColor(np.asarray(rgb_rows(top, bottom)), code, dst=bgr[top:bottom])
    return bgr


@dataclass(frozen=True)
class Conversion:
    """How pixels in one profile become sRGB: `transform` from `mode` ("RGB", "L" or "CMYK"), or
    none (the profile is sRGB's, or ignored: `status`)."""

    transform: ImageCms.ImageCmsTransform | None
    mode: str
    status: str


_conversions: OrderedDict[bytes, Conversion] = OrderedDict()
_lock = threading.Lock()


def conversion(icc: bytes) -> Conversion:
    """The (cached) conversion from `icc` to sRGB."""
    digest = hashlib.blake2b(icc, digest_size=16).digest()
    with _lock:
        if digest in _conversions:
            _conversions.move_to_end(digest)
            return _conversions[digest]
    found = _build(icc)
    with _lock:
        _conversions[digest] = found
        while len(_conversions) > CACHED_PROFILES:
            _conversions.popitem(last=False)
    return found


def _build(icc: bytes) -> Conversion:
    try:
        profile = ImageCms.ImageCmsProfile(io.BytesIO(icc))
        mode = {"RGB": "RGB", "GRAY": "L", "CMYK": "CMYK"}.get(profile.profile.xcolor_space.strip(), "")
        if not mode:
            return Conversion(None, "", IGNORED)
        transform = ImageCms.buildTransform(profile, SRGB, mode, "RGB", INTENT)
    except (OSError, ImageCms.PyCMSError, ValueError, TypeError):
        return Conversion(None, "", IGNORED)
    if mode == "RGB":
        probe = np.asarray(ImageCms.applyTransform(Image.fromarray(_PROBE), transform))
        if np.abs(probe.astype(np.int16) - _PROBE).max() <= 1:
            return Conversion(None, mode, SRGB_ALREADY)
    return Conversion(transform, mode, CONVERTED)


def fits(icc: bytes, mode: str) -> bool:
    """Whether profile `icc` describes samples of Pillow's `mode`, by the colour space its header
    names: a grey profile grey samples, a CMYK one CMYK samples, an RGB one every other kind."""
    wanted = b"GRAY" if mode in GREY_MODES else b"CMYK" if mode == "CMYK" else b"RGB "
    return icc[16:20] == wanted


def to_srgb(pixels: np.ndarray, icc: bytes | None) -> tuple[np.ndarray, str | None]:
    """BGR `pixels` in profile `icc` (one that `fits` the source) as sRGB, and what was done (None:
    no profile)."""
    if not icc:
        return pixels, None
    found = conversion(icc)
    if found.transform is None:
        return pixels, found.status
    transform = found.transform

    def srgb_rows(top: int, bottom: int) -> Image.Image:
        rows = pixels[top:bottom]
        if found.mode == "L":
            image = Image.fromarray(np.ascontiguousarray(rows[:, :, 0]))  # grey: the three channels are one
        else:
            image = Image.fromarray(cv2.cvtColor(rows, cv2.COLOR_BGR2RGB))
        converted = ImageCms.applyTransform(image, transform)
        assert converted is not None
        return converted

    height, width = pixels.shape[:2]
    return banded_bgr(height, width, srgb_rows), CONVERTED


def cmyk_to_srgb(image: Image.Image) -> tuple[np.ndarray, str]:
    """A decoded CMYK picture as BGR sRGB pixels: through its own profile, else the plain inversion.
    The rule of its container: Pillow reads every CMYK JPEG as Adobe's inverted kind, so one without
    Adobe's marker is inverted back; a TIFF's samples are as they are stored."""
    icc = image.info.get("icc_profile")
    inverted = image.format in JPEG_CONTAINERS and "adobe" not in image.info
    found = conversion(bytes(icc)) if icc else None
    transform = found.transform if found is not None and found.mode == "CMYK" else None

    def rgb_rows(top: int, bottom: int) -> Image.Image:
        rows = image.crop((0, top, image.width, bottom))
        if inverted:
            rows = ImageChops.invert(rows)
        converted = rows.convert("RGB") if transform is None else ImageCms.applyTransform(rows, transform)
        assert converted is not None
        return converted

    done = CONVERTED if transform is not None or not icc else IGNORED
    return banded_bgr(image.height, image.width, rgb_rows), done
