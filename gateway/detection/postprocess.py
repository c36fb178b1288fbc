"""A model's candidates to faces in original-image pixels: tiles, clipping, NMS.

The decoders (gateway/detection/retinaface.py, yunet.py) turn outputs into candidates in
model-input pixels; this module maps them back, keeps what each pass answers for and
suppresses overlaps; gateway/detection/fusion.py merges the models' faces.
"""

from __future__ import annotations

import cv2
import numpy as np

from gateway.detection.detections import Detections
from gateway.detection.detectors import Decoder
from gateway.detection.fusion import iou_matrix
from gateway.detection.preprocess import TILE_MIN_OVERLAP, Tiling
from gateway.params import DetectOptions
from gateway.triton.wire import ModelOutputs

NMS_IOU_THRESHOLD = 0.4
# detail=high: a tile's face counts only if no edge shared with a neighbour tile comes within
# TILE_EDGE_MARGIN of it, and only up to TILED_MAX_FACE (the standard pass owns larger faces),
# so every face the tiled pass is responsible for lies whole, with margins, in some tile.
TILE_EDGE_MARGIN = 4
TILED_MAX_FACE = TILE_MIN_OVERLAP - 2 * TILE_EDGE_MARGIN


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Greedy non-maximum suppression (OpenCV's): indices of every kept box, best first."""
    if not len(boxes):
        return np.zeros(0, dtype=np.int64)
    corners = boxes.astype(np.float64)
    rects = np.hstack([corners[:, :2], corners[:, 2:] - corners[:, :2]])
    # top_k=0: no cut before suppression (a cut there drops faces, not just candidates).
    keep = cv2.dnn.NMSBoxes(rects, scores.astype(np.float32), 0.0, iou_threshold, top_k=0)  # type: ignore[arg-type]
    return np.asarray(keep, dtype=np.int64).reshape(-1)


def tile_candidates(
    found: Detections, origin: tuple[int, int], tile_shape: tuple[int, int], scaled_size: tuple[int, int], scale: float
) -> Detections:
    """A tile's candidates (tile pixels) that the tiled pass answers for, in the pixels of the
    image the tiles were cut from: those no longer than TILED_MAX_FACE that no inner tile edge cuts."""
    x, y = origin
    (rows, cols), (height, width) = tile_shape, scaled_size
    boxes = found.boxes
    keep = np.maximum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]) <= TILED_MAX_FACE
    if x > 0:
        keep &= boxes[:, 0] >= TILE_EDGE_MARGIN
    if y > 0:
        keep &= boxes[:, 1] >= TILE_EDGE_MARGIN
    if x + cols < width:
        keep &= boxes[:, 2] <= cols - TILE_EDGE_MARGIN
    if y + rows < height:
        keep &= boxes[:, 3] <= rows - TILE_EDGE_MARGIN
    return found[keep].scaled(origin, scale)


def tiled_candidates(decode: Decoder, outputs: list[ModelOutputs], tiles: Tiling, min_score: float) -> list[Detections]:
    """Each tile's candidates that the tiled pass answers for, in the pixels the tiles were cut from."""
    return [
        tile_candidates(
            decode(output, tiles.tile_shape, min_score), origin, tiles.tile_shape, tiles.scaled_size, tiles.scale
        )
        for output, origin in zip(outputs, tiles.origins)
    ]


def finish(found: Detections, image_shape: tuple[int, int], options: DetectOptions) -> Detections:
    """Clip candidates in original pixels to the image (H, W), drop small ones, suppress overlaps.

    Every face is kept: `max_faces` limits only what a response lists, not what is found.
    """
    height, width = image_shape
    boxes = np.minimum(np.maximum(found.boxes, 0), np.array([width, height, width, height]))
    sides = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    big_enough = (sides >= options.min_face_size) & (sides > 0)
    landmarks = np.minimum(np.maximum(found.landmarks, 0), np.array([width - 1, height - 1]))
    kept = Detections(found.scores, boxes, landmarks)[big_enough]
    return kept[nms(kept.boxes, kept.scores, NMS_IOU_THRESHOLD)]


def across_frames(frames: list[Detections]) -> Detections:
    """The faces of a sequence of frames (each `finish`ed), each face once, best first: every face
    of a frame but those overlapping one of an earlier frame by more than NMS_IOU_THRESHOLD (the
    same face, seen again). Faces side by side in one frame stay two, as `finish` left them (a
    suppression over every frame's faces together merged some: a crowd animation of one repeated
    frame listed 1,750 faces where its still lists 1,868)."""
    listed = Detections.empty()
    for faces in frames:
        if len(listed) and len(faces):
            faces = faces[~(iou_matrix(faces.boxes, listed.boxes) > NMS_IOU_THRESHOLD).any(axis=1)]
        listed = Detections.concatenate([listed, faces])
    return listed[np.argsort(-listed.scores, kind="stable")]


def detect_faces(
    decode: Decoder,
    outputs: ModelOutputs,
    input_shape: tuple[int, int],
    scale: float,
    image_shape: tuple[int, int],
    options: DetectOptions,
) -> Detections:
    """Decode, filter and suppress one image's outputs of one model; map them to its original pixels.

    `input_shape` is the (padded) model input's (H, W), `scale` the model-input pixels per
    original pixel and `image_shape` the original (H, W) that results are clipped to.
    """
    found = decode(outputs, input_shape, options.min_score).scaled((0, 0), scale)
    return finish(found, image_shape, options)
