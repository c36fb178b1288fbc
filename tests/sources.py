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

from gateway.imaging.profiles import DISPLAY_P3

COLORD = Path("/usr/share/color/icc/colord")  # Debian's colord-data (`make test` installs it)
GHOSTSCRIPT = Path("/usr/share/color/icc/ghostscript")  # Debian's libgs-common: CMYK and grey profiles
CONTAINERS = ("JPEG", "PNG", "WEBP", "TIFF", "AVIF", "HEIF")
LOSSY = {"JPEG": {"quality": 95}, "WEBP": {"quality": 95}, "AVIF": {"quality": 95}, "HEIF": {"quality": 95}}
SRGB = ImageCms.createProfile("sRGB")
pillow_heif.register_heif_opener()


@cache
def profiles() -> dict[str, bytes]:
    """Wide-gamut RGB profiles by name: Display P3 (from its published primaries), Adobe RGB and
    ProPhoto (colord-data), and colord's diagnostic profile that swaps red and green."""
    files = {"adobe-rgb": "AdobeRGB1998.icc", "prophoto": "ProPhotoRGB.icc", "swapped": "SwappedRedAndGreen.icc"}
    return {"display-p3": DISPLAY_P3, **{name: (COLORD / file).read_bytes() for name, file in files.items()}}


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
    """An animated GIF or WebP of `frames`, each with its duration (ms); `loop` as Pillow takes it."""
    extra = {} if loop is None else {"loop": loop}
    return encoded_as(frames[0], container, save_all=True, append_images=frames[1:], duration=durations, **extra)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:12]
