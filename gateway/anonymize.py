"""Hide faces: grow each face box into a region (an ellipse or a rectangle) and blur, pixelate or
fill it, in place, leaving every pixel outside the regions as it was.

The strength is relative to each face, so a 12-pixel face and a 600-pixel one are equally
unrecognisable: the blur's radius, or the pixel blocks' side, is `strength` times half the
face's shorter side (before the margin): at the default 0.5, a quarter of the face.
"""

from __future__ import annotations

from collections.abc import Callable

import cv2
import numpy as np

from gateway.params import AnonymizeOptions


def regions(boxes: np.ndarray, margin: float, image: tuple[int, int]) -> np.ndarray:
    """Face boxes [K, 4] (x1, y1, x2, y2) grown `margin` times about their centres, in whole
    pixels, clipped to the image (width, height)."""
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2
    halves = (boxes[:, 2:] - boxes[:, :2]) * margin / 2
    grown = np.hstack([np.floor(centres - halves), np.ceil(centres + halves)])
    return np.clip(grown, 0, [image[0], image[1], image[0], image[1]]).astype(int)


# /v1/anonymize hides faces below CONFIDENT only at a plausible size: no more than
# IMPLAUSIBLE_SIZE times the median shorter side of the photo's confident faces (a hand, a patch
# of crowd or a poster scored low is usually far larger than the faces around it). Chosen with
# bench/anonymize.py (README, "Anonymize").
CONFIDENT = 0.5
IMPLAUSIBLE_SIZE = 2.0


def plausible(scores: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Which faces (scores 0-1, corner boxes [K, 4]) to hide: every confident one, and the others
    no larger than IMPLAUSIBLE_SIZE times the confident ones' median (all where none is confident)."""
    sides = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    confident = scores >= CONFIDENT
    if not confident.any():
        return np.ones(len(scores), dtype=bool)
    return confident | (sides <= IMPLAUSIBLE_SIZE * np.median(sides[confident]))


def blurred(patch: np.ndarray, size: int) -> np.ndarray:
    """A strong, even blur whose radius is about `size` pixels, at a cost that does not grow with it."""
    kernel = 2 * max(1, size) + 1
    return cv2.stackBlur(cv2.stackBlur(patch, (kernel, kernel)), (kernel, kernel))


def pixelated(patch: np.ndarray, size: int) -> np.ndarray:
    """Blocks of about `size` pixels, each of its mean colour."""
    height, width = patch.shape[:2]
    small = cv2.resize(patch, (max(1, round(width / size)), max(1, round(height / size))), interpolation=cv2.INTER_AREA)
    return cv2.resize(small, (width, height), interpolation=cv2.INTER_NEAREST)


def filled(patch: np.ndarray, size: int) -> np.ndarray:
    return np.zeros_like(patch)


METHODS: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {"blur": blurred, "pixelate": pixelated, "fill": filled}


def region_mask(height: int, width: int, shape: str) -> np.ndarray:
    """Which pixels of a `height` x `width` region are hidden: all (rect) or the inscribed ellipse."""
    if shape == "rect":
        return np.ones((height, width), dtype=bool)
    mask = np.zeros((height, width), dtype=np.uint8)
    centre = ((width - 1) / 2, (height - 1) / 2)
    cv2.ellipse(mask, (centre, (float(width), float(height)), 0), (1,), thickness=-1)
    return mask.astype(bool)


def anonymize(pixels: np.ndarray, boxes: np.ndarray, options: AnonymizeOptions) -> np.ndarray:
    """Hide every face of `boxes` (corner boxes in the pixels' coordinates) in `pixels`, in place."""
    height, width = pixels.shape[:2]
    hide = METHODS[options.method]
    sides = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    for (x1, y1, x2, y2), side in zip(regions(boxes, options.margin, (width, height)), sides):
        if x2 <= x1 or y2 <= y1:
            continue
        patch = pixels[y1:y2, x1:x2]
        mask = region_mask(y2 - y1, x2 - x1, options.shape)
        patch[mask] = hide(patch, max(1, round(options.strength * side / 2)))[mask]
    return pixels
