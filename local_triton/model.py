"""Triton Python-backend model: runs the repository's model file on CPU with the runtime its config
names (local_triton/render.py writes the choice of local_triton/cpu.py): onnxruntime for fp32, as the
production `onnxruntime_onnx` platform would, or OpenVINO for bf16 and int8, as Triton's `openvino`
backend would (neither is in the `tritonserver` bundled with nvidia-pytriton). Requests that arrive
together are grouped by input shape and each group runs as one batch, as those backends would.
"""

import json
import os
import sys

# The backend stub embeds the base interpreter and ignores PYTHONPATH, whose entries (the
# project's virtual environment) must come before the base site-packages: the stub would
# otherwise import the base interpreter's numpy, and numpy 2 yields empty output tensors.
sys.path[:0] = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]

import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402


def onnxruntime_session(path: str, threads: int, input_name: str, output_names: list[str]):
    """A function running `path` with onnxruntime on `threads` threads (0: every core)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle onnxruntime threads would spin on cores the gateway and tritonserver need.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return lambda batch: session.run(output_names, {input_name: batch}), "fp32"


def openvino_model(path: str, threads: int, precision: str, input_name: str, output_names: list[str]):
    """A function running `path` with OpenVINO on one stream of `threads` threads, as Triton's openvino
    backend configured by render.cpu_config would, and the precision it actually runs its float parts
    in (bf16 asked for on a CPU without BF16 runs as f32)."""
    import openvino

    config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1"}
    if threads:
        config["INFERENCE_NUM_THREADS"] = str(threads)
    if precision == "bf16":
        config["INFERENCE_PRECISION_HINT"] = "bf16"
    compiled = openvino.Core().compile_model(path, "CPU", config)
    outputs = [compiled.output(name) for name in output_names]
    request = compiled.create_infer_request()  # one instance runs one batch at a time

    def run(batch: np.ndarray) -> list[np.ndarray]:
        answered = request.infer({input_name: batch})
        return [np.array(answered[output]) for output in outputs]

    return run, compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()  # f32 or bf16


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        config = json.loads(args["model_config"])
        parameters = {k: v["string_value"] for k, v in config.get("parameters", {}).items()}
        threads = int(parameters.get("threads", "0"))
        precision = parameters.get("precision", "fp32")
        folder = os.path.join(args["model_repository"], args["model_version"])
        path = os.path.join(folder, parameters.get("model_file", "model.onnx"))
        self.input_name = config["input"][0]["name"]
        self.output_names = [output["name"] for output in config["output"]]
        if parameters.get("runtime") == "openvino":
            self.run, ran = openvino_model(path, threads, precision, self.input_name, self.output_names)
        else:
            self.run, ran = onnxruntime_session(path, threads, self.input_name, self.output_names)
        runtime = parameters.get("runtime", "onnxruntime")
        print(
            f"{config['name']}: {precision} ({runtime}; float parts in {ran}), {threads or 'every'} thread(s)",
            flush=True,
        )

    def execute(self, requests: list) -> list:
        inputs = [pb_utils.get_input_tensor_by_name(r, self.input_name).as_numpy() for r in requests]
        responses: list = [None] * len(requests)
        by_shape: dict[tuple, list[int]] = {}
        for index, tensor in enumerate(inputs):
            by_shape.setdefault(tensor.shape[1:], []).append(index)
        for indices in by_shape.values():
            batch = np.concatenate([inputs[i] for i in indices])
            outputs = self.run(batch)
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
