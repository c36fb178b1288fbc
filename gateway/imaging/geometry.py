"""Cloudflare's geometry, before the resize and in its order: trim (`dpr` applied to its pixels),
flip, then rotate (clockwise, as sharp and Cloudflare's own local emulator turn). Width and height
then refer to the turned picture's axes.

Faces are found once, on the upright source, and mapped into the turned picture (one detection
per source, whatever the variant: Detections.turned moves them with `turn_points`); the picture
itself is turned at the resolution its decode has.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

ROTATIONS = {90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180, 270: cv2.ROTATE_90_COUNTERCLOCKWISE}
FLIPS = {"h": 1, "v": 0, "hv": -1}
BORDER_TOLERANCE = 10  # trim=border's default: how far (per channel) a pixel may be from the border's colour


@dataclass(frozen=True)
class Trim:
    """What trim asks for: pixels (1 and more) or fractions of the side (below 1) off each side, or
    the size kept from the left and top; or, with `border`, whatever surrounds the picture in one
    colour (its own, or `color`, BGR), within `tolerance`, less `keep` pixels of it."""

    top: float = 0
    right: float = 0
    bottom: float = 0
    left: float = 0
    width: float | None = None
    height: float | None = None
    border: bool = False
    color: tuple[int, int, int] | None = None
    tolerance: int = BORDER_TOLERANCE
    keep: float = 0


@dataclass(frozen=True)
class Geometry:
    """Trim, flip and rotate of a URL's options; the default changes nothing."""

    trim: Trim | None = None
    flip: str = ""  # "", "h", "v" or "hv"
    rotate: int = 0  # clockwise: 0, 90, 180 or 270
    dpr: float = 1.0  # trim's pixels are multiplied by it

    @property
    def changes(self) -> bool:
        return self.trim is not None or bool(self.flip) or bool(self.rotate)


def _amount(value: float, side: int, dpr: float) -> float:
    """Pixels of a trim value: a fraction of `side` below 1, else pixels times `dpr`."""
    return value * side if value < 1 else value * dpr


def trim_rect(trim: Trim | None, size: tuple[int, int], dpr: float) -> tuple[int, int, int, int]:
    """The kept rectangle (x0, y0, x1, y1) of a picture of `size` (W, H), at least a pixel."""
    width, height = size
    if trim is None or trim.border:
        return 0, 0, width, height
    x0, y0 = _amount(trim.left, width, dpr), _amount(trim.top, height, dpr)
    x1 = x0 + _amount(trim.width, width, dpr) if trim.width else width - _amount(trim.right, width, dpr)
    y1 = y0 + _amount(trim.height, height, dpr) if trim.height else height - _amount(trim.bottom, height, dpr)
    x0, y0 = min(max(0, round(x0)), width - 1), min(max(0, round(y0)), height - 1)
    return x0, y0, min(max(x0 + 1, round(x1)), width), min(max(y0 + 1, round(y1)), height)


def border_rect(pixels: np.ndarray, trim: Trim, scale: float) -> tuple[int, int, int, int]:
    """trim=border on upright BGR `pixels` (a decode at `scale` of the original): the rectangle, in
    original pixels, of what differs from the border's colour (the top-left pixel's, or `color`)
    by more than `tolerance`, grown by `keep` pixels of the border."""
    colour = np.empty_like(pixels)
    colour[...] = trim.color if trim.color is not None else pixels[0, 0]
    difference = cv2.absdiff(pixels, colour).max(axis=2)
    differs = difference > trim.tolerance
    rows, columns = np.flatnonzero(differs.any(axis=1)), np.flatnonzero(differs.any(axis=0))
    height, width = pixels.shape[:2]
    if not len(rows):  # one colour throughout: nothing to keep but the picture
        return 0, 0, round(width / scale), round(height / scale)
    keep = trim.keep * scale
    box = (columns[0] - keep, rows[0] - keep, columns[-1] + 1 + keep, rows[-1] + 1 + keep)
    x0, y0, x1, y1 = (round(max(0, value) / scale) for value in box)
    return x0, y0, max(x0 + 1, min(x1, round(width / scale))), max(y0 + 1, min(y1, round(height / scale)))


def turned_size(rect: tuple[int, int, int, int], rotate: int) -> tuple[int, int]:
    """(W, H) of a trimmed `rect` once turned."""
    width, height = rect[2] - rect[0], rect[3] - rect[1]
    return (height, width) if rotate in (90, 270) else (width, height)


def cut_scaled(
    pixels: np.ndarray, rect: tuple[float, float, float, float], scale: tuple[float, float] | np.ndarray
) -> np.ndarray:
    """The part of `pixels` (a decode at `scale`, x and y, of the original) that `rect` (x0, y0, x1,
    y1 in original pixels) covers: at least one pixel, inside them."""
    height, width = pixels.shape[:2]
    x0, y0 = min(round(rect[0] * scale[0]), width - 1), min(round(rect[1] * scale[1]), height - 1)
    x1 = min(max(x0 + 1, round(rect[2] * scale[0])), width)
    y1 = min(max(y0 + 1, round(rect[3] * scale[1])), height)
    return pixels[y0:y1, x0:x1]


def turn_pixels(pixels: np.ndarray, rect: tuple[int, int, int, int], scale: float, geometry: Geometry) -> np.ndarray:
    """Upright `pixels` (a decode at `scale` of the original) trimmed to `rect` (original pixels),
    flipped and rotated."""
    turned = cut_scaled(pixels, rect, (scale, scale))
    if geometry.flip:
        turned = cv2.flip(turned, FLIPS[geometry.flip])
    if geometry.rotate:
        turned = cv2.rotate(turned, ROTATIONS[geometry.rotate])
    return turned


def turn_points(points: np.ndarray, rect: tuple[int, int, int, int], geometry: Geometry) -> np.ndarray:
    """Points [..., 2] (x, y) of the original moved into the trimmed, flipped and rotated picture."""
    width, height = rect[2] - rect[0], rect[3] - rect[1]
    x, y = points[..., 0] - rect[0], points[..., 1] - rect[1]
    if "h" in geometry.flip:
        x = width - x
    if "v" in geometry.flip:
        y = height - y
    turned = {0: (x, y), 90: (height - y, x), 180: (width - x, height - y), 270: (y, width - x)}[geometry.rotate]
    return np.stack(turned, axis=-1)
