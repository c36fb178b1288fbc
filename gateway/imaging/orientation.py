"""EXIF orientation (1-8) applied to decoded pixels with OpenCV's rotate, flip and transpose, as a
viewer turns a picture upright; into a given array where the caller has one (the model's input)."""

from __future__ import annotations

from collections.abc import Callable

import cv2
import numpy as np

ORIENTATIONS: dict[int, Callable[[np.ndarray, np.ndarray | None], np.ndarray]] = {
    1: lambda p, out: p if out is None else _copied(p, out),
    2: lambda p, out: cv2.flip(p, 1, dst=out),
    3: lambda p, out: cv2.rotate(p, cv2.ROTATE_180, dst=out),
    4: lambda p, out: cv2.flip(p, 0, dst=out),
    5: lambda p, out: cv2.transpose(p, dst=out),
    6: lambda p, out: cv2.rotate(p, cv2.ROTATE_90_CLOCKWISE, dst=out),
    7: lambda p, out: cv2.transpose(cv2.flip(p, -1), dst=out),
    8: lambda p, out: cv2.rotate(p, cv2.ROTATE_90_COUNTERCLOCKWISE, dst=out),
}


def _copied(pixels: np.ndarray, out: np.ndarray) -> np.ndarray:
    out[...] = pixels
    return out


def apply_orientation(pixels: np.ndarray, orientation: int, out: np.ndarray | None = None) -> np.ndarray:
    """Turn pixels stored with EXIF `orientation` (1-8) upright, as a viewer would show them;
    into `out` (of the upright shape) where given."""
    return ORIENTATIONS[orientation](pixels, out)
