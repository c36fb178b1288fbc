"""Faces as arrays: scores, corner boxes and landmark points, in one pixel frame."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from facecrop_hiding import plausible
from gateway.imaging.geometry import Geometry, turn_points, turned_size

LANDMARK_NAMES = ("left_eye", "right_eye", "nose", "mouth_left", "mouth_right")


@dataclass(frozen=True)
class Detections:
    """Face candidates or faces: scores, corner boxes and landmark points, in one pixel frame."""

    scores: np.ndarray  # [K], 0-1
    boxes: np.ndarray  # [K, 4] x1, y1, x2, y2
    landmarks: np.ndarray  # [K, 5, 2] x, y

    def __len__(self) -> int:
        return len(self.scores)

    def __getitem__(self, selection: slice | np.ndarray) -> Detections:
        """The detections at `selection` (a slice, indices or a boolean mask), in that order."""
        return Detections(self.scores[selection], self.boxes[selection], self.landmarks[selection])

    def to_hide(self) -> Detections:
        """The faces anonymizing hides (/v1/anonymize, the URL form's anonymize): facecrop_hiding's
        rule, faces of low confidence only at a plausible size."""
        return self[plausible(self.scores, self.boxes)]

    def scaled(self, offset: tuple[float, float], scale: float | np.ndarray) -> Detections:
        """Moved by `offset` (x, y), then divided by `scale` (one, or x and y): from a tile's or a
        resized image's pixels to the pixels it was made from."""
        x, y = offset
        across, down = scale.tolist() if isinstance(scale, np.ndarray) else (scale, scale)
        boxes, landmarks = self.boxes, self.landmarks
        if x or y:
            boxes, landmarks = boxes + np.array([x, y, x, y], np.float32), landmarks + np.array([x, y], np.float32)
        divisors = np.array([across, down, across, down], np.float32)
        return Detections(self.scores, boxes / divisors, landmarks / divisors[:2])

    def turned(self, rect: tuple[int, int, int, int], geometry: Geometry) -> Detections:
        """These faces of the original in the picture trimmed to `rect`, flipped and rotated as
        `geometry` says: boxes clipped to it (a face trimmed away goes), landmarks moved with them,
        the left eye and mouth corner again the ones on the picture's left."""
        corners = turn_points(self.boxes.reshape(-1, 2, 2), rect, geometry)
        boxes = np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1)
        width, height = turned_size(rect, geometry.rotate)
        boxes = np.clip(boxes, 0, [width, height, width, height])
        inside = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        landmarks = turn_points(self.landmarks, rect, geometry)
        for left, right in ((0, 1), (3, 4)):  # eyes, mouth corners
            swap = landmarks[:, left, 0] > landmarks[:, right, 0]
            landmarks[swap, left], landmarks[swap, right] = landmarks[swap, right], landmarks[swap, left].copy()
        return Detections(self.scores, boxes.astype(np.float32), landmarks.astype(np.float32))[inside]

    @staticmethod
    def concatenate(parts: list[Detections]) -> Detections:
        return Detections(
            np.concatenate([p.scores for p in parts]),
            np.concatenate([p.boxes for p in parts]).reshape(-1, 4),
            np.concatenate([p.landmarks for p in parts]).reshape(-1, 5, 2),
        )

    @staticmethod
    def empty() -> Detections:
        return Detections(np.zeros(0, np.float32), np.zeros((0, 4), np.float32), np.zeros((0, 5, 2), np.float32))


def by_level(counts: Sequence[int], index: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Positions in a model's outputs laid out level after level (`counts` each; every position
    where `index` is None): each one's level and its position within that level (the decoders'
    priors of the chosen anchors or cells)."""
    ends = np.cumsum(counts)
    if index is None:
        index = np.arange(ends[-1])
    level = np.searchsorted(ends, index, side="right")
    return level, index - (ends - np.asarray(counts))[level]
