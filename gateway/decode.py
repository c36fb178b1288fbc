"""Uploaded bytes to upright BGR pixels, refusing oversized images before they are decoded."""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image

from gateway.errors import ImageTooLarge, UnsupportedImage

SUPPORTED_FORMATS = frozenset({"JPEG", "PNG", "WEBP", "BMP", "GIF", "TIFF"})
EXIF_ORIENTATION_TAG = 0x0112


@dataclass(frozen=True)
class ImageHeader:
    format: str
    width: int
    height: int
    orientation: int


@dataclass(frozen=True)
class DecodedImage:
    pixels: np.ndarray  # H x W x 3, uint8, BGR, EXIF orientation applied
    format: str  # the container format, as Pillow names it: JPEG, PNG, WEBP, ...


def read_header(data: bytes, max_pixels: int) -> ImageHeader:
    """Format, size and EXIF orientation from the header alone; nothing is decoded yet."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                header = ImageHeader(image.format or "", image.width, image.height, _orientation(image))
    except Image.DecompressionBombError:
        raise ImageTooLarge(f"the image declares more than {max_pixels} pixels") from None
    except Exception:  # Pillow raises many types for bytes that are not an image
        raise UnsupportedImage("the upload is not a readable JPEG, PNG, WebP, BMP, GIF or TIFF image") from None
    if header.format not in SUPPORTED_FORMATS:
        raise UnsupportedImage(f"image format {header.format or 'unknown'} is not supported")
    if header.width < 1 or header.height < 1:
        raise UnsupportedImage("the image has no pixels")
    if header.width * header.height > max_pixels:
        raise ImageTooLarge(f"{header.width}x{header.height} is more than the limit of {max_pixels} pixels")
    return header


def _orientation(image: Image.Image) -> int:
    try:
        value = image.getexif().get(EXIF_ORIENTATION_TAG, 1)
    except Exception:  # a corrupt EXIF block does not make the pixels unusable
        return 1
    return value if value in range(1, 9) else 1


def apply_orientation(pixels: np.ndarray, orientation: int) -> np.ndarray:
    """Turn pixels stored with EXIF `orientation` (1-8) upright, as a viewer would show them."""
    oriented = {
        1: lambda p: p,
        2: lambda p: p[:, ::-1],
        3: lambda p: p[::-1, ::-1],
        4: lambda p: p[::-1],
        5: lambda p: p.swapaxes(0, 1),
        6: lambda p: np.rot90(p, -1),
        7: lambda p: p[::-1, ::-1].swapaxes(0, 1),
        8: lambda p: np.rot90(p, 1),
    }[orientation](pixels)
    return np.ascontiguousarray(oriented)


def decode_pixels(data: bytes) -> np.ndarray:
    """Decode to 8-bit BGR as stored (no orientation): OpenCV first, Pillow for the rest (GIF)."""
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)
    if pixels is not None:
        return pixels
    try:
        with Image.open(io.BytesIO(data)) as image:
            rgb = np.asarray(image.convert("RGB"))
    except Exception:
        raise UnsupportedImage("the image data is corrupt or truncated") from None
    return cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)


def decode_image(data: bytes, max_pixels: int) -> DecodedImage:
    """Check the header against `max_pixels`, then decode and orient the pixels."""
    if not data:
        raise UnsupportedImage("the upload is empty")
    header = read_header(data, max_pixels)
    pixels = apply_orientation(decode_pixels(data), header.orientation)
    return DecodedImage(pixels=pixels, format=header.format)
