"""Model outputs to faces in original-image pixels: priors, box decoding, NMS, mapping."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import cv2
import numpy as np

from gateway.params import DetectOptions

MIN_SIZES = ((16, 32), (64, 128), (256, 512))
STEPS = (8, 16, 32)
VARIANCES = (0.1, 0.2)
NMS_IOU_THRESHOLD = 0.4
PRE_NMS_TOP_K = 5000
LANDMARK_NAMES = ("left_eye", "right_eye", "nose", "mouth_left", "mouth_right")


@dataclass(frozen=True)
class ModelOutputs:
    """One image's candidate anchors: their index into `priors`, face score and regressions."""

    anchor_index: np.ndarray  # [K] int
    scores: np.ndarray  # [K] face probability, 0-1
    loc: np.ndarray  # [K, 4]
    landmarks: np.ndarray  # [K, 10]


def model_outputs(named: dict[str, np.ndarray]) -> ModelOutputs:
    """One image's outputs from either served model, by output name.

    `retinaface_uint8` already gives the best anchors (`scores`, `anchor_index`, `loc`,
    `landmarks`); the raw `retinaface` gives every anchor (`loc`, `conf`, `landmarks`).
    """
    if "anchor_index" in named:
        return ModelOutputs(named["anchor_index"], named["scores"], named["loc"], named["landmarks"])
    conf = named["conf"]
    return ModelOutputs(np.arange(len(conf)), conf[:, 1], named["loc"], named["landmarks"])


@dataclass(frozen=True)
class Detections:
    """Faces in original-image pixels, sorted by score, highest first."""

    scores: np.ndarray  # [K], 0-1
    boxes: np.ndarray  # [K, 4] x1, y1, x2, y2
    landmarks: np.ndarray  # [K, 5, 2] x, y

    def __len__(self) -> int:
        return len(self.scores)


@lru_cache(maxsize=16)
def priors(height: int, width: int) -> np.ndarray:
    """RetinaFace anchors [A, 4] as (cx, cy, w, h), relative to the input; cached per shape."""
    levels = []
    for step, sizes in zip(STEPS, MIN_SIZES):
        rows, cols = math.ceil(height / step), math.ceil(width / step)
        cy, cx = np.meshgrid((np.arange(rows) + 0.5) * step / height, (np.arange(cols) + 0.5) * step / width, indexing="ij")
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


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float, limit: int) -> np.ndarray:
    """Greedy non-maximum suppression (OpenCV's); indices of at most `limit` kept boxes, best first."""
    if not len(boxes):
        return np.zeros(0, dtype=np.int64)
    corners = boxes.astype(np.float64)
    rects = np.hstack([corners[:, :2], corners[:, 2:] - corners[:, :2]])
    keep = cv2.dnn.NMSBoxes(rects, scores.astype(np.float32), 0.0, iou_threshold, top_k=limit)
    return np.asarray(keep, dtype=np.int64).reshape(-1)


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
    scores = outputs.scores
    candidates = np.flatnonzero(scores >= options.min_confidence / 100)
    candidates = candidates[np.argsort(-scores[candidates], kind="stable")[:PRE_NMS_TOP_K]]
    anchors = priors(*input_shape)
    to_pixels = np.array([input_shape[1], input_shape[0]], dtype=np.float32) / scale
    boxes = decode_boxes(outputs.loc[candidates], anchors[outputs.anchor_index[candidates]]) * np.tile(to_pixels, 2)
    height, width = image_shape
    boxes = np.clip(boxes, 0, [width, height, width, height])
    sides = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    big_enough = (sides >= options.min_face_size) & (sides > 0)
    candidates, boxes = candidates[big_enough], boxes[big_enough]
    keep = nms(boxes, scores[candidates], NMS_IOU_THRESHOLD, options.max_faces)
    chosen = candidates[keep]
    landmarks = decode_landmarks(outputs.landmarks[chosen], anchors[outputs.anchor_index[chosen]]) * to_pixels
    landmarks = np.clip(landmarks, 0, [width - 1, height - 1])
    return Detections(scores=scores[chosen], boxes=boxes[keep], landmarks=landmarks)


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
