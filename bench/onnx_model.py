"""A served ONNX file run in-process with onnxruntime, as a drop-in for the Triton model."""

from __future__ import annotations

from contextlib import AbstractContextManager

import numpy as np
import onnxruntime

from gateway.detection.model import in_process_batch
from gateway.triton.wire import INPUT_NAME, Answer, Batch, WireFormat
from local_triton.processes import PRODUCTION_REPOSITORY


class OnnxModel:
    """The pipeline's model for `wire`, from its `model.onnx` in the production repository."""

    def __init__(self, wire: WireFormat, threads: int):
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        path = PRODUCTION_REPOSITORY / wire.model_name / "1" / "model.onnx"
        self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.wire = wire

    def run(self, tensor: np.ndarray) -> list[np.ndarray]:
        return self.session.run(list(self.wire.output_names), {INPUT_NAME: tensor})

    def __call__(self, tensor: np.ndarray) -> list[Answer]:
        return self.wire.outputs(dict(zip(self.wire.output_names, self.run(tensor))))

    def batch(self, shape: tuple[int, ...]) -> AbstractContextManager[Batch]:
        return in_process_batch(shape, self.wire.dtype, self)

    def is_ready(self) -> bool:
        return True
