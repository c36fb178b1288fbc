"""The tensors between the gateway and Triton: one definition per wire format.

`uint8` (the default): NHWC BGR pixels in (the model centres them), and out only the best
anchors (`retinaface_uint8`, built by scripts/fetch_model.py). `float32`: NCHW pixels minus
the mean in, and every anchor out (`retinaface`, the original graph). Both are pinned to
their `config.pbtxt` by tests/unit/test_wire.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

INPUT_NAME = "input"


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

    def outputs(self, batch: dict[str, np.ndarray]) -> list[ModelOutputs]:
        """Each image's outputs from a batch's outputs [N, ...], by output name."""
        count = len(batch[self.output_names[0]])
        return [self.parse({name: batch[name][i] for name in self.output_names}) for i in range(count)]


WIRE_FORMATS = {
    "uint8": WireFormat(
        "uint8",
        "retinaface_uint8",
        np.uint8,
        "UINT8",
        True,
        ("scores", "anchor_index", "loc", "landmarks"),
        _best_anchors,
    ),
    "float32": WireFormat(
        "float32", "retinaface", np.float32, "FP32", False, ("loc", "conf", "landmarks"), _every_anchor
    ),
}
