"""YuNet-n (libfacedetection.train): its wire formats and its anchor-free grid decoder.

One prior per cell of the stride-8, 16 and 32 grids, cells in row-major order, strides in
that order: a face's centre and landmarks are offsets from the cell's corner in strides, its
size the exponent of a regression in strides (OpenCV's `cv::FaceDetectorYN`). Pixels go in
as BGR 0-255, without a mean; each side a multiple of 32.
"""

from __future__ import annotations

import numpy as np

from gateway.detection.detections import Detections, by_level
from gateway.triton.wire import TOP_K, Answer, ModelOutputs, OutputLayout, WireFormat, best_candidates_format

STRIDES = (8, 16, 32)
STRIDE_ARRAY = np.array(STRIDES)
# YuNet's scores on RetinaFace's scale: a face YuNet scores RAW_SCORES[i] gets the score at which
# RetinaFace's faces are as often right (isotonic precision on every labeled set at detail=standard,
# fitted by `python -m bench.detectors --calibrate`; docs/detectors.md, "Detectors"), linear between. So a
# min_confidence means the same whichever model found a face, and fused faces rank on one scale.
RAW_SCORES = (
    0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45,
    0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1,
)  # fmt: skip
CALIBRATED_SCORES = (
    0, 0.02, 0.0641, 0.1308, 0.1813, 0.1841, 0.2363, 0.2578, 0.383, 0.4784, 0.6225,
    0.6226, 0.7685, 0.7747, 0.9182, 0.9555, 0.9782, 0.9979, 0.998, 0.9981, 0.9982, 1,
)  # fmt: skip
GREY = (104, 117, 123)  # the uint8 padding: RetinaFace's mean, so both models can read one tensor
BLACK = (0, 0, 0)


def cell_counts(height: int, width: int) -> tuple[int, ...]:
    """Cells of each stride's grid for an (H, W) input (each side a multiple of 32)."""
    return tuple((height // s) * (width // s) for s in STRIDES)


def grid(height: int, width: int, index: np.ndarray | None = None) -> np.ndarray:
    """Cells' (column, row, stride) [K, 3] of an (H, W) input: those at `index` (positions in the
    model's output order), every one where None. Only the cells asked for are computed: no table
    per input shape to build or keep."""
    level, within = by_level(cell_counts(height, width), index)
    stride = STRIDE_ARRAY[level]
    row, col = np.divmod(within, width // stride)
    return np.stack([col, row, stride], axis=1).astype(np.float32)


def calibrated(raw: np.ndarray) -> np.ndarray:
    """YuNet's face scores on RetinaFace's scale (CALIBRATED_SCORES)."""
    return np.interp(raw, RAW_SCORES, CALIBRATED_SCORES).astype(np.float32)


def candidates(outputs: ModelOutputs, input_shape: tuple[int, int], min_score: float) -> Detections:
    """The best TOP_K cells scoring at least `min_score` (on RetinaFace's scale), best first,
    decoded to model-input pixels."""
    scores, cells_here = calibrated(outputs.scores), sum(cell_counts(*input_shape))
    chosen = np.flatnonzero((scores >= min_score) & (outputs.anchor_index < cells_here))  # not the graph's padding
    chosen = chosen[np.argsort(-scores[chosen], kind="stable")[:TOP_K]]  # the uint8 graph's cut, for float32 too
    cells = grid(*input_shape, outputs.anchor_index[chosen])
    corner, stride = cells[:, :2], cells[:, 2:]
    loc = outputs.loc[chosen]
    centres = (loc[:, :2] + corner) * stride
    half_sizes = np.exp(loc[:, 2:]) * stride / 2
    points = (outputs.landmarks[chosen].reshape(-1, 5, 2) + corner[:, None]) * stride[:, None]
    return Detections(scores[chosen], np.hstack([centres - half_sizes, centres + half_sizes]), points)


def face_scores(classes: np.ndarray, objectness: np.ndarray) -> np.ndarray:
    """A cell's face score: its class and objectness scores, each clipped to 0-1, multiplied."""
    return np.clip(classes, 0, 1) * np.clip(objectness, 0, 1)


RAW_WIDTHS = {"cls": 1, "obj": 1, "bbox": 4, "kps": 10}  # the original graph's outputs, per stride
RAW_OUTPUTS = tuple(f"{kind}_{s}" for kind in RAW_WIDTHS for s in STRIDES)


def _raw_outputs(named: dict[str, np.ndarray]) -> Answer:
    def joined(kind: str) -> np.ndarray:
        return np.concatenate([named[f"{kind}_{s}"] for s in STRIDES])

    scores = face_scores(joined("cls"), joined("obj")).reshape(-1)
    return (ModelOutputs(np.arange(len(scores)), scores, joined("bbox"), joined("kps")),)


def _raw_layout(height: int, width: int) -> OutputLayout:
    counts = cell_counts(height, width)
    return tuple(
        (f"{kind}_{s}", (count, size), np.float32)
        for kind, size in RAW_WIDTHS.items()
        for s, count in zip(STRIDES, counts)
    )


# uint8: pixels in, the best TOP_K cells' scores, box and landmark regressions out (`yunet_n_uint8`,
# built by scripts/fetch_model.py); float32: the original graph's twelve outputs (`yunet_n`), every cell.
WIRE_FORMATS = {
    "uint8": best_candidates_format("yunet_n_uint8", GREY),
    "float32": WireFormat(
        "float32", "yunet_n", np.float32, "FP32", False, RAW_OUTPUTS, _raw_outputs, _raw_layout, BLACK
    ),
}
