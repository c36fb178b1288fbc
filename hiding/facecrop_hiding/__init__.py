"""Hide faces: grow each face box into a region (an ellipse or a rectangle) and blur, pixelate or
fill it, in place, leaving every pixel outside the regions as it was.

One implementation for both sides: the gateway's /v1/anonymize and the client's `facecrop video`
(which hides at full resolution what /v1/detect found). It ships in the client distribution and
is copied into the gateway image; it needs only numpy and OpenCV.

The strength is relative to each face, so a 12-pixel face and a 600-pixel one are equally
unrecognisable: the blur's radius, or the pixel blocks' side, is `strength` times half the
face's shorter side (before the margin): at the default 1.0, half the face, which leaves no
detail in faces of 10-20 pixels either (at 0.5 video frames kept it: docs/video.md, "Video"). Each
blurred or pixelated region's edge is feathered inside it, so overlapping regions leave no seams;
a fill stays solid to its edge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np


@dataclass(frozen=True)
class Hiding:
    """How faces are hidden; the defaults are /v1/anonymize's."""

    method: str = "blur"  # blur, pixelate or fill
    strength: float = 1.0  # blur radius or block side, times half of each face's shorter side
    margin: float = 1.4  # each region is the face box grown this many times about its centre
    shape: str = "ellipse"  # or rect


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
# bench/anonymize.py (docs/defaults.md, "Anonymize").
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


# OpenCV's stackBlur is wrong past this radius (4.11: at 181-254, pixels of 128 and up come out
# white; further on, at some radii): a face 362 pixels and up at strength 1 came out a white and
# yellow blob, not blurred. Larger blurs are made on the pixels scaled down.
STACK_BLUR_MAX = 180


def stack_blurred(pixels: np.ndarray, kernel: tuple[int, int], passes: int = 1) -> np.ndarray:
    """OpenCV's stack blur with an odd (width, height) `kernel`, `passes` times, right at any size:
    a radius past STACK_BLUR_MAX is made on the pixels scaled down by a whole factor, and scaled back."""
    factor = -(-max(kernel) // (2 * STACK_BLUR_MAX + 1))
    height, width = pixels.shape[:2]
    if factor > 1:
        pixels = cv2.resize(
            pixels, (max(1, round(width / factor)), max(1, round(height / factor))), interpolation=cv2.INTER_AREA
        )
        kernel = (2 * round(kernel[0] // 2 / factor) + 1, 2 * round(kernel[1] // 2 / factor) + 1)
    for _ in range(passes):
        pixels = cv2.stackBlur(pixels, kernel)
    return cv2.resize(pixels, (width, height), interpolation=cv2.INTER_LINEAR) if factor > 1 else pixels


def blurred(patch: np.ndarray, size: int) -> np.ndarray:
    """A strong, even blur whose radius is about `size` pixels, at a cost that does not grow with it."""
    kernel = 2 * max(1, size) + 1
    return stack_blurred(patch, (kernel, kernel), passes=2)


def pixelated(patch: np.ndarray, size: int) -> np.ndarray:
    """Blocks of about `size` pixels, each of its mean colour."""
    height, width = patch.shape[:2]
    small = cv2.resize(patch, (max(1, round(width / size)), max(1, round(height / size))), interpolation=cv2.INTER_AREA)
    return cv2.resize(small, (width, height), interpolation=cv2.INTER_NEAREST)


def filled(patch: np.ndarray, size: int) -> np.ndarray:
    return np.zeros_like(patch)


METHODS: dict[str, Callable[[np.ndarray, int], np.ndarray]] = {"blur": blurred, "pixelate": pixelated, "fill": filled}


FEATHER = 0.1  # share of a region's shorter side over which its edge fades in
ELLIPSE_SHIFT = 16  # fractional bits of an ellipse's centre and axes (OpenCV's most)


def region_alpha(height: int, width: int, shape: str, feathered: bool) -> np.ndarray:
    """How much of each pixel of a `height` x `width` region is hidden ([H, W] float32, 0-1): all of the
    rectangle or the inscribed ellipse, 0 outside; `feathered`, fading to 0 towards the edge."""
    if shape == "rect":
        inside = np.ones((height, width), dtype=np.float32)
    else:
        inside = np.zeros((height, width), dtype=np.float32)
        # The inscribed ellipse, in 1/2**SHIFT pixels: OpenCV's first overload, so no failed overload
        # builds an error message mid-call (a Ctrl-C landing there crashed opencv-python 4.11).
        centre = ((width - 1) << (ELLIPSE_SHIFT - 1), (height - 1) << (ELLIPSE_SHIFT - 1))
        axes = (width << (ELLIPSE_SHIFT - 1), height << (ELLIPSE_SHIFT - 1))
        cv2.ellipse(inside, centre, axes, 0, 0, 360, (1.0,), -1, shift=ELLIPSE_SHIFT)
    if feathered:
        kernel = 2 * max(1, round(FEATHER * min(height, width) / 2)) + 1
        faded = cv2.GaussianBlur(inside, (kernel, kernel), 0, borderType=cv2.BORDER_CONSTANT)
        inside *= faded
    return inside


KEPT_MASK_PIXELS = 64 * 64  # masks of regions this small (a crowd's faces, most of one size or another) are kept


def blend_weights(height: int, width: int, shape: str, feathered: bool) -> tuple[np.ndarray, np.ndarray]:
    """`region_alpha` and 1 minus it, the weights of the hidden and the original pixels; a small
    region's are kept, read-only, for the next region of its size (a crowd photo hides hundreds)."""
    if height * width <= KEPT_MASK_PIXELS:
        return _kept_weights(height, width, shape, feathered)
    return _weights(height, width, shape, feathered)


def _weights(height: int, width: int, shape: str, feathered: bool) -> tuple[np.ndarray, np.ndarray]:
    alpha = region_alpha(height, width, shape, feathered)
    return alpha, 1 - alpha


@lru_cache(maxsize=256)
def _kept_weights(height: int, width: int, shape: str, feathered: bool) -> tuple[np.ndarray, np.ndarray]:
    weights = _weights(height, width, shape, feathered)
    for array in weights:
        array.flags.writeable = False
    return weights


def hidden_share(boxes: np.ndarray, hiding: Hiding, size: tuple[int, int]) -> float:
    """The share of a picture of `size` (width, height) inside the regions that hide `boxes`, as
    hide_faces draws them (before feathering), each pixel counted once where they overlap."""
    if not len(boxes):
        return 0.0
    mask = np.zeros((size[1], size[0]), dtype=bool)
    for x1, y1, x2, y2 in regions(boxes, hiding.margin, size):
        if x2 > x1 and y2 > y1:
            mask[y1:y2, x1:x2] |= region_alpha(y2 - y1, x2 - x1, hiding.shape, feathered=False) > 0
    return float(mask.mean())


def hide_faces(pixels: np.ndarray, boxes: np.ndarray, hiding: Hiding) -> np.ndarray:
    """Hide every face of `boxes` (corner boxes in the pixels' coordinates) in `pixels` (8 or 16-bit
    samples), in place."""
    height, width = pixels.shape[:2]
    hide = METHODS[hiding.method]
    deep = pixels.dtype == np.uint16  # a 10-bit video's samples: OpenCV blurs and blends them right as floats
    sides = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    for (x1, y1, x2, y2), side in zip(regions(boxes, hiding.margin, (width, height)), sides):
        if x2 <= x1 or y2 <= y1:
            continue
        patch = pixels[y1:y2, x1:x2]
        alpha, inverse = blend_weights(y2 - y1, x2 - x1, hiding.shape, hiding.method != "fill")
        work = patch.astype(np.float32) if deep else patch
        hidden = hide(work, max(1, round(hiding.strength * side / 2)))
        patch[...] = cv2.blendLinear(hidden, work, alpha, inverse)  # one pass, no float copies of 8-bit pixels
    return pixels
