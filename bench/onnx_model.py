"""A served ONNX file run in-process with onnxruntime, as a drop-in for the Triton model."""

from __future__ import annotations

import numpy as np
import onnxruntime

from gateway.postprocess import ModelOutputs, batch_outputs


class OnnxModel:
    def __init__(self, path: str, threads: int):
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        self.input_name = self.session.get_inputs()[0].name
        self.output_names = [output.name for output in self.session.get_outputs()]

    def run(self, tensor: np.ndarray) -> list[np.ndarray]:
        return self.session.run(self.output_names, {self.input_name: tensor})

    def __call__(self, tensor: np.ndarray) -> list[ModelOutputs]:
        return batch_outputs(dict(zip(self.output_names, self.run(tensor))))

    def is_ready(self) -> bool:
        return True
