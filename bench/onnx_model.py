"""A served model file run in-process, with onnxruntime or OpenVINO, as a drop-in for the Triton model."""

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


class OpenVinoModel(OnnxModel):
    """The pipeline's model for `wire` run by OpenVINO at `precision` (f32, bf16: its float parts as
    asked, bf16 where the CPU has BF16; int8: the committed int8 graph, model.int8.xml, its float
    parts as OpenVINO chooses), on `threads` threads of one stream, as local_triton/model.py runs it."""

    def __init__(self, wire: WireFormat, threads: int, precision: str):
        import openvino

        name = "model.int8.xml" if precision == "int8" else "model.onnx"
        path = PRODUCTION_REPOSITORY / wire.model_name / "1" / name
        config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1", "INFERENCE_NUM_THREADS": str(threads)}
        if precision != "int8":  # int8's float parts as served: OpenVINO's default (bf16 where the CPU has BF16)
            config["INFERENCE_PRECISION_HINT"] = precision
        self.compiled = openvino.Core().compile_model(str(path), "CPU", config)
        self.request = self.compiled.create_infer_request()
        self.outputs = [self.compiled.output(name) for name in wire.output_names]
        self.wire = wire

    @property
    def floats(self) -> str:
        """The precision OpenVINO runs the float parts in: f32, or bf16 where asked and the CPU has BF16."""
        return self.compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()

    def run(self, tensor: np.ndarray) -> list[np.ndarray]:
        answered = self.request.infer({INPUT_NAME: tensor})
        return [np.array(answered[output]) for output in self.outputs]
