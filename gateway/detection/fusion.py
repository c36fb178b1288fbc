"""The models' faces as one list: each face several models found, merged; each only one found, kept.

Each model's faces arrive suppressed on their own (no two of one model overlap much). The models
are taken in turn: a face of the next model and a face fused so far are the same face where each
is the other's best overlap, at least MATCH_IOU; the merged box and landmarks are the average of
every model's, weighted by their scores (weighted box fusion, Solovyev et al.), and its score is
the chance that any of the models is right, 1 - (1 - a)(1 - b)...: the scores are on one scale
(YuNet's calibrated to RetinaFace's, gateway/detection/yunet.py), agreement ranks a face up, and
no face scores less than its model gave it: at any min_confidence, fusing finds every face any
model finds alone (docs/defaults.md, "Detectors"; chosen by `python -m bench.detectors`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gateway.detection.detections import Detections

MATCH_IOU = 0.3

PairScore = Callable[[np.ndarray, np.ndarray], np.ndarray]  # a matched pair's two scores -> its score


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every corner box (x1, y1, x2, y2) in `a` [N, 4] with every one in `b` [M, 4]."""
    ax1, ay1, ax2, ay2 = a.T[:, :, None]  # each [N, 1]
    bx1, by1, bx2, by2 = b.T[:, None, :]  # each [1, M]
    width = np.minimum(ax2, bx2) - np.maximum(ax1, bx1)
    height = np.minimum(ay2, by2) - np.maximum(ay1, by1)
    intersection = np.maximum(width, 0, out=width) * np.maximum(height, 0, out=height)
    union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - intersection
    return intersection / np.maximum(union, 1e-9, out=union)


def matches(a: Detections, b: Detections, min_iou: float) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (into `a`, into `b`) of faces that are each other's best overlap, at least `min_iou`."""
    if not len(a) or not len(b):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    overlaps = iou_matrix(a.boxes, b.boxes)
    best_in_b = overlaps.argmax(axis=1)
    best_in_a = overlaps.argmax(axis=0)
    in_a = np.flatnonzero((best_in_a[best_in_b] == np.arange(len(a))) & (overlaps.max(axis=1) >= min_iou))
    return in_a, best_in_b[in_a]


def fuse(per_model: dict[str, Detections]) -> Detections:
    """The models' faces (each already suppressed) as one list, best first: any number of models,
    taken in their order."""
    parts = list(per_model.values())
    if len(parts) == 1:
        return parts[0]
    fused, weights = parts[0], parts[0].scores
    for part in parts[1:]:
        fused, weights = merged(fused, weights, part, MATCH_IOU, either)
    return fused


def either(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A pair's score as the chance that either model is right: 1 - (1 - a)(1 - b), at least the higher."""
    return 1 - (1 - a) * (1 - b)


def fuse_pair(a: Detections, b: Detections, match_iou: float, pair_score: PairScore = either) -> Detections:
    """Two models' faces as one list, best first: matched pairs merged (scored by `pair_score` of
    the two scores), the others kept."""
    return merged(a, a.scores, b, match_iou, pair_score)[0]


def merged(
    a: Detections, weights: np.ndarray, b: Detections, match_iou: float, pair_score: PairScore
) -> tuple[Detections, np.ndarray]:
    """`a` (faces fused so far, each `weights` the sum of the scores averaged into it) and one more
    model's faces `b` as one list, best first, and its weights: matched faces merged, the others kept."""
    in_a, in_b = matches(a, b, match_iou)
    weights_a, weights_b = weights[in_a, None], b.scores[in_b, None]
    total = np.maximum(weights_a + weights_b, 1e-9)
    pairs = Detections(
        pair_score(a.scores[in_a], b.scores[in_b]),
        (a.boxes[in_a] * weights_a + b.boxes[in_b] * weights_b) / total,
        (a.landmarks[in_a] * weights_a[:, :, None] + b.landmarks[in_b] * weights_b[:, :, None]) / total[:, :, None],
    )
    only_a, only_b = unmatched(len(a), in_a), unmatched(len(b), in_b)
    every = Detections.concatenate([pairs, a[only_a], b[only_b]])
    every_weight = np.concatenate([total[:, 0], weights[only_a], b.scores[only_b]])
    order = np.argsort(-every.scores, kind="stable")
    return every[order], every_weight[order]


def unmatched(count: int, matched: np.ndarray) -> np.ndarray:
    """A mask of the `count` faces whose index is not in `matched`."""
    mask = np.ones(count, dtype=bool)
    mask[matched] = False
    return mask
