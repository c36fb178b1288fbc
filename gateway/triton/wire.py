"""The tensors between the gateway and Triton: what a wire format says, whatever the model, and the
batch a model hands out to fill and submit (Batch).

Each detector defines its wire formats beside its decoder (gateway/detection/retinaface.py,
gateway/detection/yunet.py): `uint8` (the default) sends NHWC BGR pixels and the served graph
does the rest; `float32` sends NCHW pixels as the original graph takes them. Each is pinned to
its `config.pbtxt` by tests/unit/test_wire.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

INPUT_NAME = "input"
# The candidates a uint8 graph answers per image, best first (scripts/fetch_model.py's TopK, a
# constant within TensorRT's limit of 3840): a face detector's decoder needs no more.
TOP_K = 3840

# Per image, each output's shape after the batch dimension and its dtype, for an input of (H, W).
OutputLayout = tuple[tuple[str, tuple[int, ...], type[np.generic]], ...]


@dataclass(frozen=True)
class ModelOutputs:
    """One image's candidates: their index into the model's priors (anchors or grid cells), face
    score and regressions, as the model's decoder reads them."""

    anchor_index: np.ndarray  # [K] int
    scores: np.ndarray  # [K] face probability, 0-1
    loc: np.ndarray  # [K, 4]
    landmarks: np.ndarray  # [K, 10]


# One image's answer: each answering model's outputs, in the wire format's order (one model, or a
# joint model's several).
Answer = tuple[ModelOutputs, ...]


class Pending(Protocol):
    def result(self) -> list[Answer]:
        """Each image's answer, in order, once the model has answered."""


@dataclass(frozen=True)
class Batch:
    """A model input to write into (`tensor`, the wire format's layout and dtype), then either
    `run` (the outputs, once the model has answered) or `submit` (the call sent now, waited for
    later, while the caller prepares another batch). Valid inside the `Model.batch` context."""

    tensor: np.ndarray
    submit: Callable[[], Pending]
    run: Callable[[], list[Answer]]


@dataclass(frozen=True)
class WireFormat:
    """A model's input layout and outputs, and how one image's outputs become its Answer (ModelOutputs
    per model it answers for)."""

    name: str  # the value of FACECROP_WIRE_FORMAT
    model_name: str  # the model serving it in Triton's repository
    dtype: type[np.generic]
    triton_datatype: str
    channels_last: bool  # input [N, H, W, 3] (else [N, 3, H, W])
    output_names: tuple[str, ...]
    parse: Callable[[dict[str, np.ndarray]], Answer]
    layout: Callable[[int, int], OutputLayout]  # (H, W) of the input -> its outputs per image
    # uint8: the padding's colour (the served graph centres it to zero, or reads it as grey);
    # float32: subtracted from every pixel (the padding is zero).
    mean: tuple[int, int, int]

    def outputs(self, batch: dict[str, np.ndarray]) -> list[Answer]:
        """Each image's answer from a batch's outputs [N, ...], by output name."""
        count = len(batch[self.output_names[0]])
        return [self.parse({name: batch[name][i] for name in self.output_names}) for i in range(count)]

    def output_bytes(self, height: int, width: int) -> int:
        """Bytes of one image's outputs for an (H, W) input."""
        return sum(math.prod(shape) * np.dtype(dtype).itemsize for _, shape, dtype in self.layout(height, width))


def _best_candidates(named: dict[str, np.ndarray]) -> Answer:
    return (ModelOutputs(named["anchor_index"], named["scores"], named["loc"], named["landmarks"]),)


def _best_candidates_layout(_height: int, _width: int) -> OutputLayout:
    return (
        ("scores", (TOP_K,), np.float32),
        ("anchor_index", (TOP_K,), np.int32),
        ("loc", (TOP_K, 4), np.float32),
        ("landmarks", (TOP_K, 10), np.float32),
    )


def best_candidates_format(model_name: str, mean: tuple[int, int, int]) -> WireFormat:
    """The `uint8` format of a graph scripts/fetch_model.py builds: NHWC uint8 pixels in (padded with
    `mean`), its best TOP_K candidates out: their prior's index, score and regressions."""
    return WireFormat(
        "uint8",
        model_name,
        np.uint8,
        "UINT8",
        True,
        ("scores", "anchor_index", "loc", "landmarks"),
        _best_candidates,
        _best_candidates_layout,
        mean,
    )


def joint_format(model_name: str, parts: tuple[WireFormat, ...]) -> WireFormat:
    """The format of a joint model (a Triton ensemble) answering for `parts`, formats that lay their
    input out alike, in one request: their input, and each part's outputs as `<its model>.<output>`."""
    first = parts[0]
    layout = (first.dtype, first.triton_datatype, first.channels_last, first.mean)
    if any((p.dtype, p.triton_datatype, p.channels_last, p.mean) != layout for p in parts):
        raise ValueError(f"{model_name}: a joint model's parts must take the same input")

    def parse(named: dict[str, np.ndarray]) -> Answer:
        return tuple(
            outputs
            for part in parts
            for outputs in part.parse({name: named[f"{part.model_name}.{name}"] for name in part.output_names})
        )

    def joint_layout(height: int, width: int) -> OutputLayout:
        return tuple(
            (f"{part.model_name}.{name}", shape, dtype)
            for part in parts
            for name, shape, dtype in part.layout(height, width)
        )

    names = tuple(f"{part.model_name}.{name}" for part in parts for name in part.output_names)
    return WireFormat(
        first.name,
        model_name,
        first.dtype,
        first.triton_datatype,
        first.channels_last,
        names,
        parse,
        joint_layout,
        first.mean,
    )
