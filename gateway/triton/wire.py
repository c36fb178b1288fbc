"""The tensors between the gateway and Triton: one definition per wire format.

`uint8` (the default): NHWC BGR pixels in (the model centres them), and out only the best
anchors (`retinaface_uint8`, built by scripts/fetch_model.py). `float32`: NCHW pixels minus
the mean in, and every anchor out (`retinaface`, the original graph). Both are pinned to
their `config.pbtxt` by tests/unit/test_wire.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

INPUT_NAME = "input"
ANCHOR_STEPS = (8, 16, 32)  # the model's strides: two anchors per cell of each level
ANCHORS_PER_CELL = 2
TOP_K = 3840  # the uint8 model's constant TopK K (scripts/fetch_model.py): anchors out per image

# Per image, each output's shape after the batch dimension and its dtype, for an input of (H, W).
OutputLayout = tuple[tuple[str, tuple[int, ...], type[np.generic]], ...]


def anchor_count(height: int, width: int) -> int:
    """Anchors of an (H, W) input: the float32 model's outputs per image."""
    return ANCHORS_PER_CELL * sum(math.ceil(height / s) * math.ceil(width / s) for s in ANCHOR_STEPS)


@dataclass(frozen=True)
class ModelOutputs:
    """One image's candidate anchors: their index into the priors, face score and regressions."""

    anchor_index: np.ndarray  # [K] int
    scores: np.ndarray  # [K] face probability, 0-1
    loc: np.ndarray  # [K, 4]
    landmarks: np.ndarray  # [K, 10]


def _best_anchors(named: dict[str, np.ndarray]) -> ModelOutputs:
    return ModelOutputs(named["anchor_index"], named["scores"], named["loc"], named["landmarks"])


def _every_anchor(named: dict[str, np.ndarray]) -> ModelOutputs:
    conf = named["conf"]
    return ModelOutputs(np.arange(len(conf)), conf[:, 1], named["loc"], named["landmarks"])


@dataclass(frozen=True)
class WireFormat:
    """A model's input layout and outputs, and how one image's outputs become ModelOutputs."""

    name: str  # the value of FACECROP_WIRE_FORMAT
    model_name: str  # the model serving it in Triton's repository
    dtype: type[np.generic]
    triton_datatype: str
    channels_last: bool  # input [N, H, W, 3] (else [N, 3, H, W])
    output_names: tuple[str, ...]
    parse: Callable[[dict[str, np.ndarray]], ModelOutputs]
    layout: Callable[[int, int], OutputLayout]  # (H, W) of the input -> its outputs per image

    def outputs(self, batch: dict[str, np.ndarray]) -> list[ModelOutputs]:
        """Each image's outputs from a batch's outputs [N, ...], by output name."""
        count = len(batch[self.output_names[0]])
        return [self.parse({name: batch[name][i] for name in self.output_names}) for i in range(count)]

    def output_bytes(self, height: int, width: int) -> int:
        """Bytes of one image's outputs for an (H, W) input."""
        return sum(math.prod(shape) * np.dtype(dtype).itemsize for _, shape, dtype in self.layout(height, width))


def _best_anchors_layout(_height: int, _width: int) -> OutputLayout:
    return (
        ("scores", (TOP_K,), np.float32),
        ("anchor_index", (TOP_K,), np.int32),
        ("loc", (TOP_K, 4), np.float32),
        ("landmarks", (TOP_K, 10), np.float32),
    )


def _every_anchor_layout(height: int, width: int) -> OutputLayout:
    count = anchor_count(height, width)
    return (("loc", (count, 4), np.float32), ("conf", (count, 2), np.float32), ("landmarks", (count, 10), np.float32))


WIRE_FORMATS = {
    "uint8": WireFormat(
        "uint8",
        "retinaface_uint8",
        np.uint8,
        "UINT8",
        True,
        ("scores", "anchor_index", "loc", "landmarks"),
        _best_anchors,
        _best_anchors_layout,
    ),
    "float32": WireFormat(
        "float32",
        "retinaface",
        np.float32,
        "FP32",
        False,
        ("loc", "conf", "landmarks"),
        _every_anchor,
        _every_anchor_layout,
    ),
}
