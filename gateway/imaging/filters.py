"""Cloudflare's filters, on the resized picture (after trim, rotate and resize, before encoding),
with its scales: `blur` a radius of 1-250 output pixels (an approximate Gaussian: OpenCV's stack
blur, whose cost does not grow with the radius), `sharpen` 0-10 (an unsharp mask of radius 1
pixel, half the difference added per unit: 1, Cloudflare's advice for downscaled pictures, adds
half), `brightness` and `contrast` factors (1 changes nothing; contrast about mid-grey), `gamma`
an exposure factor (Cloudflare: "a value of 0.5 darkens the image, and a value of 2.0 lightens
the image": levels to the power 1/gamma, the ends staying), `saturation` a factor (0 grey, 2 twice
as saturated). Brightness, contrast and gamma are one lookup table.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from facecrop_hiding import stack_blurred

SHARPEN_SIGMA = 1.0
SHARPEN_PER_UNIT = 0.5


@dataclass(frozen=True)
class Filters:
    blur: float = 0
    sharpen: float = 0
    brightness: float = 1
    contrast: float = 1
    gamma: float = 1
    saturation: float = 1

    @property
    def changes(self) -> bool:
        return self != Filters()


def tone_table(brightness: float, contrast: float, gamma: float) -> np.ndarray:
    """The 256 output levels of brightness, then contrast, then gamma."""
    levels = np.arange(256, dtype=np.float32) * brightness
    levels = (levels - 127.5) * contrast + 127.5
    levels = 255 * (np.clip(levels, 0, 255) / 255) ** (1 / gamma)
    return np.clip(np.rint(levels), 0, 255).astype(np.uint8)


def apply_filters(pixels: np.ndarray, filters: Filters) -> np.ndarray:
    """BGR `pixels` filtered as `filters` say, in Cloudflare's terms."""
    if filters.blur:
        height, width = pixels.shape[:2]
        sides = [min(2 * round(filters.blur) + 1, side - (1 - side % 2)) for side in (width, height)]
        pixels = stack_blurred(pixels, (max(1, sides[0]), max(1, sides[1])))  # the kernel within the picture
    if filters.sharpen:
        soft = cv2.GaussianBlur(pixels, (0, 0), SHARPEN_SIGMA)
        pixels = cv2.addWeighted(
            pixels, 1 + filters.sharpen * SHARPEN_PER_UNIT, soft, -filters.sharpen * SHARPEN_PER_UNIT, 0
        )
    if (filters.brightness, filters.contrast, filters.gamma) != (1, 1, 1):
        pixels = cv2.LUT(pixels, tone_table(filters.brightness, filters.contrast, filters.gamma))
    if filters.saturation != 1:  # grey + (pixel - grey) * saturation, grey the luma (Rec. 601)
        grey = cv2.cvtColor(cv2.cvtColor(pixels, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
        pixels = cv2.addWeighted(pixels, filters.saturation, grey, 1 - filters.saturation, 0)
    return pixels
