"""What the detection needs of a model: a batch input to fill in place, then a call it can wait for
(the Batch of gateway/triton/wire.py); a model in ordinary memory, for models in the same process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gateway.triton.wire import Answer, Batch


class Model(Protocol):
    """The served model: Triton over gRPC, or onnxruntime in-process."""

    def batch(self, shape: tuple[int, ...]) -> AbstractContextManager[Batch]:
        """A batch input of `shape` to fill, then submit; its memory is released on exit."""

    def is_ready(self) -> bool:
        """Whether the model can answer now."""


@dataclass(frozen=True)
class Done:
    """A call that has already answered."""

    outputs: list[Answer]

    def result(self) -> list[Answer]:
        return self.outputs


@contextmanager
def in_process_batch(
    shape: tuple[int, ...], dtype: type[np.generic], run: Callable[[np.ndarray], list[Answer]]
) -> Iterator[Batch]:
    """A batch in ordinary memory, run by `run` when submitted (models in the same process)."""
    tensor = np.empty(shape, dtype)
    yield Batch(tensor, lambda: Done(run(tensor)), lambda: run(tensor))


def infer(model: Model, tensor: np.ndarray) -> list[Answer]:
    """Run a tensor made elsewhere through `model` (copied into one of its batches)."""
    with model.batch(tensor.shape) as batch:
        batch.tensor[...] = tensor
        return batch.run()
