"""BGR pixels to JPEG, PNG or WebP bytes (no metadata, so no EXIF orientation tag)."""

from __future__ import annotations

import cv2
import numpy as np

CONTENT_TYPES = {"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp"}
ENCODABLE_INPUTS = {"JPEG": "jpeg", "PNG": "png", "WEBP": "webp"}


def output_format(requested: str | None, input_format: str) -> str:
    """The requested format, else the input's when it is JPEG, PNG or WebP, else jpeg."""
    return requested or ENCODABLE_INPUTS.get(input_format, "jpeg")


def encode_image(pixels: np.ndarray, fmt: str, quality: int) -> bytes:
    """Encode upright BGR pixels; `quality` (1-100) applies to jpeg and webp."""
    flags = {
        "jpeg": [cv2.IMWRITE_JPEG_QUALITY, quality],
        "webp": [cv2.IMWRITE_WEBP_QUALITY, quality],
        "png": [cv2.IMWRITE_PNG_COMPRESSION, 3],
    }[fmt]
    ok, encoded = cv2.imencode(f".{fmt}", pixels, flags)
    if not ok:
        raise ValueError(f"OpenCV could not encode {pixels.shape} pixels as {fmt}")
    return encoded.tobytes()
