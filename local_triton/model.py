"""Triton Python-backend model: runs the repository's `model.onnx` with onnxruntime on CPU.

The local stand-in for the production `onnxruntime_onnx` platform, which the `tritonserver`
bundled with nvidia-pytriton lacks. Requests that arrive together are grouped by input
shape and each group runs as one onnxruntime batch, as the ONNX Runtime backend would.
"""

import json
import os
import sys

# The backend stub embeds the base interpreter and ignores PYTHONPATH, whose entries (the
# project's virtual environment) must come before the base site-packages: the stub would
# otherwise import the base interpreter's numpy, and numpy 2 yields empty output tensors.
sys.path[:0] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]

import numpy as np  # noqa: E402
import onnxruntime  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        config = json.loads(args["model_config"])
        parameters = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = int(parameters.get("intra_op_threads", "0"))
        options.inter_op_num_threads = 1
        # Idle onnxruntime threads would spin on cores the gateway and tritonserver need.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        model_path = os.path.join(args["model_repository"], args["model_version"], "model.onnx")
        self.session = onnxruntime.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
        self.input_name = config["input"][0]["name"]
        self.output_names = [output["name"] for output in config["output"]]

    def execute(self, requests: list) -> list:
        inputs = [pb_utils.get_input_tensor_by_name(r, self.input_name).as_numpy() for r in requests]
        responses: list = [None] * len(requests)
        by_shape: dict[tuple, list[int]] = {}
        for index, tensor in enumerate(inputs):
            by_shape.setdefault(tensor.shape[1:], []).append(index)
        for indices in by_shape.values():
            batch = np.concatenate([inputs[i] for i in indices])
            outputs = self.session.run(self.output_names, {self.input_name: batch})
            start = 0
            for i in indices:
                stop = start + len(inputs[i])
                tensors = [
                    pb_utils.Tensor(name, np.ascontiguousarray(output[start:stop]))
                    for name, output in zip(self.output_names, outputs)
                ]
                responses[i] = pb_utils.InferenceResponse(output_tensors=tensors)
                start = stop
        return responses
