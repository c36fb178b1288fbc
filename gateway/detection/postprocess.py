"""Model outputs to faces in original-image pixels: priors, box decoding, NMS, mapping."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np

from gateway.detection.preprocess import TILE_MIN_OVERLAP, Tiling
from gateway.params import DetectOptions
from gateway.triton.wire import ANCHOR_STEPS, TOP_K, ModelOutputs

MIN_SIZES = ((16, 32), (64, 128), (256, 512))
VARIANCES = (0.1, 0.2)
NMS_IOU_THRESHOLD = 0.4
PRE_NMS_TOP_K = TOP_K  # the uint8 model's cut; the same for float32
# detail=high: a tile's face counts only if no edge shared with a neighbour tile comes within
# TILE_EDGE_MARGIN of it, and only up to TILED_MAX_FACE (the standard pass owns larger faces),
# so every face the tiled pass is responsible for lies whole, with margins, in some tile.
TILE_EDGE_MARGIN = 4
TILED_MAX_FACE = TILE_MIN_OVERLAP - 2 * TILE_EDGE_MARGIN
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

    def scaled(self, offset: tuple[float, float], scale: float | np.ndarray) -> Detections:
        """Moved by `offset` (x, y), then divided by `scale` (one, or x and y): from a tile's or a
        resized image's pixels to the pixels it was made from."""
        shift = np.asarray(offset, dtype=np.float32)
        per_axis = np.broadcast_to(np.asarray(scale, dtype=np.float32), (2,))
        boxes = (self.boxes + np.tile(shift, 2)) / np.tile(per_axis, 2)
        return Detections(self.scores, boxes, (self.landmarks + shift) / per_axis)

    @staticmethod
    def concatenate(parts: list[Detections]) -> Detections:
        return Detections(
            np.concatenate([p.scores for p in parts]),
            np.concatenate([p.boxes for p in parts]).reshape(-1, 4),
            np.concatenate([p.landmarks for p in parts]).reshape(-1, 5, 2),
        )


@lru_cache(maxsize=16)
def priors(height: int, width: int) -> np.ndarray:
    """RetinaFace anchors [A, 4] as (cx, cy, w, h), relative to the input; cached per shape."""
    levels = []
    for step, sizes in zip(ANCHOR_STEPS, MIN_SIZES):
        rows, cols = math.ceil(height / step), math.ceil(width / step)
        cy, cx = np.meshgrid(
            (np.arange(rows) + 0.5) * step / height, (np.arange(cols) + 0.5) * step / width, indexing="ij"
        )
        centres = np.stack([cx.ravel(), cy.ravel()], axis=1).repeat(len(sizes), axis=0)
        extents = np.tile(np.array([[s / width, s / height] for s in sizes]), (rows * cols, 1))
        levels.append(np.hstack([centres, extents]))
    anchors = np.concatenate(levels).astype(np.float32)
    anchors.flags.writeable = False
    return anchors


def decode_boxes(loc: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """Regression offsets [K, 4] to corner boxes (x1, y1, x2, y2), relative to the input."""
    centres = anchors[:, :2] + loc[:, :2] * VARIANCES[0] * anchors[:, 2:]
    sizes = anchors[:, 2:] * np.exp(loc[:, 2:] * VARIANCES[1])
    return np.hstack([centres - sizes / 2, centres + sizes / 2])


def decode_landmarks(offsets: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """Landmark offsets [K, 10] to points [K, 5, 2], relative to the input."""
    points = offsets.reshape(-1, 5, 2)
    return anchors[:, None, :2] + points * VARIANCES[0] * anchors[:, None, 2:]


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Greedy non-maximum suppression (OpenCV's): indices of every kept box, best first."""
    if not len(boxes):
        return np.zeros(0, dtype=np.int64)
    corners = boxes.astype(np.float64)
    rects = np.hstack([corners[:, :2], corners[:, 2:] - corners[:, :2]])
    # top_k=0: no cut before suppression (a cut there drops faces, not just candidates).
    keep = cv2.dnn.NMSBoxes(rects, scores.astype(np.float32), 0.0, iou_threshold, top_k=0)  # type: ignore[arg-type]
    return np.asarray(keep, dtype=np.int64).reshape(-1)


def candidates(outputs: ModelOutputs, input_shape: tuple[int, int], min_score: float) -> Detections:
    """The best PRE_NMS_TOP_K anchors scoring at least `min_score`, decoded to model-input pixels."""
    scores = outputs.scores
    chosen = np.flatnonzero(scores >= min_score)
    chosen = chosen[np.argsort(-scores[chosen], kind="stable")[:PRE_NMS_TOP_K]]
    anchors = priors(*input_shape)[outputs.anchor_index[chosen]]
    size = np.array([input_shape[1], input_shape[0]], dtype=np.float32)
    boxes = decode_boxes(outputs.loc[chosen], anchors) * np.tile(size, 2)
    landmarks = decode_landmarks(outputs.landmarks[chosen], anchors) * size
    return Detections(scores[chosen], boxes, landmarks)


def tile_candidates(
    found: Detections, origin: tuple[int, int], tile_size: int, scaled_size: tuple[int, int], scale: float
) -> Detections:
    """A tile's candidates (tile pixels) that the tiled pass answers for, in the pixels of the
    image the tiles were cut from: those no longer than TILED_MAX_FACE that no inner tile edge cuts."""
    x, y = origin
    height, width = scaled_size
    boxes = found.boxes
    keep = np.maximum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]) <= TILED_MAX_FACE
    low, high = TILE_EDGE_MARGIN, tile_size - TILE_EDGE_MARGIN
    if x > 0:
        keep &= boxes[:, 0] >= low
    if y > 0:
        keep &= boxes[:, 1] >= low
    if x + tile_size < width:
        keep &= boxes[:, 2] <= high
    if y + tile_size < height:
        keep &= boxes[:, 3] <= high
    return found[keep].scaled(origin, scale)


def tiled_candidates(outputs: list[ModelOutputs], tiles: Tiling, min_score: float) -> list[Detections]:
    """Each tile's candidates that the tiled pass answers for, in the pixels the tiles were cut from."""
    size = (tiles.tile_size, tiles.tile_size)
    return [
        tile_candidates(candidates(output, size, min_score), origin, tiles.tile_size, tiles.scaled_size, tiles.scale)
        for output, origin in zip(outputs, tiles.origins)
    ]


def finish(found: Detections, image_shape: tuple[int, int], options: DetectOptions) -> Detections:
    """Clip candidates in original pixels to the image (H, W), drop small ones, suppress overlaps.

    Every face is kept: `max_faces` limits only what a response lists, not what is found.
    """
    height, width = image_shape
    boxes = np.clip(found.boxes, 0, [width, height, width, height])
    sides = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    big_enough = (sides >= options.min_face_size) & (sides > 0)
    landmarks = np.clip(found.landmarks, 0, [width - 1, height - 1])
    kept = Detections(found.scores, boxes, landmarks)[big_enough]
    return kept[nms(kept.boxes, kept.scores, NMS_IOU_THRESHOLD)]


def detect_faces(
    outputs: ModelOutputs,
    input_shape: tuple[int, int],
    scale: float,
    image_shape: tuple[int, int],
    options: DetectOptions,
) -> Detections:
    """Decode, filter and suppress one image's outputs; map them to its original pixels.

    `input_shape` is the (padded) model input's (H, W), `scale` the model-input pixels per
    original pixel and `image_shape` the original (H, W) that results are clipped to.
    """
    found = candidates(outputs, input_shape, options.min_confidence / 100).scaled((0, 0), scale)
    return finish(found, image_shape, options)


def face_objects(detections: Detections, with_landmarks: bool) -> list[dict]:
    """The API's face objects: percent confidence, integer rectangle and landmark points."""
    corners = np.rint(detections.boxes).astype(int)
    points = np.rint(detections.landmarks).astype(int)
    faces = []
    for score, (x1, y1, x2, y2), face_points in zip(detections.scores, corners.tolist(), points.tolist()):
        face = {
            "confidence": round(float(score) * 100, 3),
            "face_rectangle": {"x": x1, "y": y1, "width": x2 - x1, "height": y2 - y1},
        }
        if with_landmarks:
            face["landmarks"] = dict(zip(LANDMARK_NAMES, face_points))
        faces.append(face)
    return faces
