"""VOC-style average precision at IoU 0.5 with the ignore rules of ../shared/faces/README.md."""

from __future__ import annotations

import numpy as np

MIN_SIDE = 10  # ground-truth boxes whose shorter side is below this are ignored


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every (x, y, w, h) box in `a` [N, 4] with every box in `b` [M, 4]."""
    a_corners, b_corners = a.copy(), b.copy()
    a_corners[:, 2:] += a[:, :2]
    b_corners[:, 2:] += b[:, :2]
    top_left = np.maximum(a_corners[:, None, :2], b_corners[None, :, :2])
    bottom_right = np.minimum(a_corners[:, None, 2:], b_corners[None, :, 2:])
    intersection = np.prod(np.clip(bottom_right - top_left, 0, None), axis=2)
    union = (a[:, 2] * a[:, 3])[:, None] + (b[:, 2] * b[:, 3])[None, :] - intersection
    return intersection / np.maximum(union, 1e-9)


def ignored(ground_truth: dict) -> np.ndarray:
    """Per ground-truth box: flagged `ignore`, or shorter side under MIN_SIDE pixels."""
    boxes = np.asarray(ground_truth["boxes"], dtype=float).reshape(-1, 4)
    flags = np.asarray(ground_truth.get("ignore", [0] * len(boxes)), dtype=bool)
    return flags | (np.minimum(boxes[:, 2], boxes[:, 3]) < MIN_SIDE)


def average_precision(ground_truths: list[dict], detections: dict[str, list[tuple[float, list[float]]]]) -> float:
    """AP50 (all points) over images; `detections` maps image name to (score, [x, y, w, h]) pairs.

    A detection whose best-overlapping ground truth is ignored counts neither way.
    """
    records = []  # (score, is_true_positive) for each detection that counts
    positives = 0
    for truth in ground_truths:
        boxes = np.asarray(truth["boxes"], dtype=float).reshape(-1, 4)
        skip = ignored(truth)
        positives += int((~skip).sum())
        found = sorted(detections.get(truth["image"], []), key=lambda d: -d[0])
        if not found:
            continue
        overlaps = iou_matrix(np.asarray([box for _, box in found], dtype=float), boxes) if len(boxes) else None
        matched = np.zeros(len(boxes), dtype=bool)
        for index, (score, _) in enumerate(found):
            if overlaps is None:
                records.append((score, False))
                continue
            best = int(np.argmax(overlaps[index]))
            if overlaps[index, best] >= 0.5 and skip[best]:
                continue
            hit = overlaps[index, best] >= 0.5 and not matched[best]
            matched[best] |= hit
            records.append((score, hit))
    if not positives:
        return 0.0
    records.sort(key=lambda r: -r[0])
    hits = np.array([hit for _, hit in records], dtype=float)
    true_positives = np.cumsum(hits)
    recall = true_positives / positives
    precision = true_positives / np.arange(1, len(hits) + 1)
    recall = np.concatenate([[0.0], recall, [1.0]])
    precision = np.concatenate([[0.0], precision, [0.0]])
    precision = np.maximum.accumulate(precision[::-1])[::-1]
    steps = np.flatnonzero(recall[1:] != recall[:-1])
    return float(np.sum((recall[steps + 1] - recall[steps]) * precision[steps + 1]))
