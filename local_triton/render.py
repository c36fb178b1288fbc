"""Derive the variants of the production model configs: the local CPU rendering, the production CPU
config (Triton's own backends, `configs/cpu.pbtxt`, selected with `--model-config-name=cpu`) and
the production config without TensorRT (`configs/cuda.pbtxt`, `--model-config-name=cuda`).

The production `config.pbtxt` stays the one source of truth. The local rendering changes only
what the local `tritonserver` cannot run and nothing the gateway can see:

- `platform: onnxruntime_onnx` becomes `backend: python` (local_triton/model.py running the
  model's file with the runtime and precision local_triton/cpu.py chooses for this CPU: onnxruntime
  fp32, OpenVINO bf16 or int8), with `runtime`, `precision`, `model_file` and `threads` parameters;
- `KIND_GPU` instance groups become `KIND_CPU` instances (one by default);
- GPU execution accelerators (TensorRT, CUDA options) under `optimization` are dropped.

An ensemble (one request for several models) runs on any Triton as it is: copied unchanged.

Name, inputs, outputs, `max_batch_size`, dynamic batching and warmup are kept as they are.

`python -m local_triton.render` writes every `configs/cuda.pbtxt`; `python -m local_triton.render
--cpu REPOSITORY` (the model-init's last step) writes each model's `configs/cpu.pbtxt` for this host.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from local_triton.cpu import Choice, available_cpus, choose, cpu_flags, model_threads

PYTHON_MODEL = Path(__file__).with_name("model.py")
ENSEMBLE = "ensemble"
CPU = model_config_pb2.ModelInstanceGroup.KIND_CPU


def load_config(path: Path) -> model_config_pb2.ModelConfig:
    """Parse a `config.pbtxt` with Triton's own ModelConfig protobuf."""
    return text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())


def host_choices(production_repo: Path, precision: str | None = None) -> dict[str, Choice]:
    """Each model's runtime and precision on this machine's CPU, as `precision` forces them (a
    FACECROP_PRECISION value; None: that variable's)."""
    flags = cpu_flags()
    setting = os.environ.get("FACECROP_PRECISION", "") if precision is None else precision
    return {
        path.parent.name: choose(path.parent.name, flags, setting) for path in production_repo.glob("*/config.pbtxt")
    }


def local_config(
    production: model_config_pb2.ModelConfig, choice: Choice, threads: int, instances: int = 1
) -> model_config_pb2.ModelConfig:
    """The Python-backend, CPU-only variant of a production ONNX Runtime config (an ensemble as it is)."""
    config = model_config_pb2.ModelConfig()
    config.CopyFrom(production)
    if config.platform == ENSEMBLE:
        return config
    config.ClearField("platform")
    config.backend = "python"
    config.ClearField("optimization")
    del config.instance_group[:]
    config.instance_group.add(count=instances, kind=CPU)
    described = {"runtime": choice.runtime, "precision": choice.precision, "model_file": choice.model_file}
    for key, value in {**described, "threads": str(threads)}.items():
        config.parameters[key].string_value = value
    return config


def cpu_config(
    production: model_config_pb2.ModelConfig, choice: Choice | None, threads: int, output_dims: dict[str, list[int]]
) -> model_config_pb2.ModelConfig:
    """The production config for a CPU host, on Triton's own backends: `choice`'s runtime (OpenVINO's
    backend for bf16 and int8, ONNX Runtime's for fp32) on one CPU instance of `threads` threads.

    Triton's openvino backend fixes a model's batch at `max_batch_size` (a smaller batch is an error,
    its padding is broken: openvino_backend#115), so every CPU config takes the batch as a dimension
    of its own (`max_batch_size: 0`, no dynamic batching: on CPU a batch costs what its pictures do),
    and states each output's dimensions as the model does (`output_dims`, the batch left out: the
    backend compares them exactly). An ensemble (`choice` None) takes the batch dimension too."""
    config = model_config_pb2.ModelConfig()
    config.CopyFrom(production)
    config.max_batch_size = 0
    for tensor in config.input:
        tensor.dims[:] = [-1, *tensor.dims]
    for tensor in config.output:
        tensor.dims[:] = [-1, *(output_dims.get(tensor.name) or tensor.dims)]
    if config.platform == ENSEMBLE or choice is None:
        return config
    for field in ("dynamic_batching", "model_warmup", "optimization", "platform", "backend"):
        config.ClearField(field)
    del config.instance_group[:]
    config.instance_group.add(count=1, kind=CPU)
    config.default_model_filename = choice.model_file
    if choice.runtime == "openvino":
        config.backend = "openvino"
        parameters = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1", "INFERENCE_NUM_THREADS": str(threads)}
        if choice.precision == "bf16":
            parameters["HINT_BF16"] = "YES"
    else:
        config.platform = "onnxruntime_onnx"
        parameters = {"intra_op_thread_count": str(threads), "inter_op_thread_count": "1"}
    # read by the gateway (what each model runs), ignored by the backends
    parameters |= {"runtime": choice.runtime, "precision": choice.precision}
    for key, value in parameters.items():
        config.parameters[key].string_value = value
    return config


def model_output_dims(model_file: Path) -> dict[str, list[int]]:
    """Each output's dimensions as OpenVINO reads the model (the batch left out; -1 where dynamic)."""
    import openvino

    model = openvino.Core().read_model(str(model_file))
    return {
        output.get_any_name(): [dim.get_length() if dim.is_static else -1 for dim in output.get_partial_shape()][1:]
        for output in model.outputs
    }


def write_cpu_configs(repository: Path) -> dict[str, Choice]:
    """Each model's `configs/cpu.pbtxt` in `repository` (its model files in place) for this host: the
    choice of local_triton/cpu.py, the cores FACECROP_TRITON_CPUS gives (else this machine's) shared
    by the two detectors."""
    choices, threads = host_choices(repository), model_threads(available_cpus())
    for config_path in sorted(repository.glob("*/config.pbtxt")):
        production = load_config(config_path)
        choice = None if production.platform == ENSEMBLE else choices[production.name]
        dims = model_output_dims(config_path.parent / "1" / choice.model_file) if choice else {}
        target = config_path.parent / "configs" / "cpu.pbtxt"
        target.parent.mkdir(exist_ok=True)
        target.write_text(
            CPU_VARIANT_HEADER + text_format.MessageToString(cpu_config(production, choice, threads, dims))
        )
        if choice is None:
            del choices[production.name]  # an ensemble runs its steps' choices
    return choices


CPU_VARIANT_HEADER = (
    "# Written by the model-init (python -m local_triton.render --cpu) from ../config.pbtxt for this\n"
    "# host's CPU (local_triton/cpu.py). Select it with tritonserver --model-config-name=cpu.\n"
)
CUDA_VARIANT_HEADER = (
    "# Generated by `python -m local_triton.render` from ../config.pbtxt, minus TensorRT:\n"
    "# plain CUDA execution provider. Select it with tritonserver --model-config-name=cuda.\n"
)


def cuda_config(production: model_config_pb2.ModelConfig) -> model_config_pb2.ModelConfig:
    """The production config with the GPU execution accelerators (TensorRT) removed."""
    config = model_config_pb2.ModelConfig()
    config.CopyFrom(production)
    config.optimization.execution_accelerators.ClearField("gpu_execution_accelerator")
    if not config.optimization.execution_accelerators.ListFields():
        config.optimization.ClearField("execution_accelerators")
    if not config.optimization.ListFields():
        config.ClearField("optimization")
    return config


def cuda_variant_text(config_path: Path) -> str:
    return CUDA_VARIANT_HEADER + text_format.MessageToString(cuda_config(load_config(config_path)))


def write_cuda_variants(production_repo: Path) -> None:
    """Write `<model>/configs/cuda.pbtxt` beside every production config."""
    for config_path in sorted(production_repo.glob("*/config.pbtxt")):
        target = config_path.parent / "configs" / "cuda.pbtxt"
        target.parent.mkdir(exist_ok=True)
        target.write_text(cuda_variant_text(config_path))


def render_repository(
    production_repo: Path, local_repo: Path, intra_op_threads: int = 0, instances: int = 1, precision: str | None = None
) -> None:
    """Write the local rendering of every model in `production_repo` into `local_repo`: each on the
    runtime and precision this CPU runs fastest (or `precision` forces: FACECROP_PRECISION's
    values), on `intra_op_threads` threads (0: its share of the cores, as a CPU host's configs give it)."""
    if local_repo.exists():
        shutil.rmtree(local_repo)
    choices = host_choices(production_repo, precision)
    threads = intra_op_threads or model_threads(available_cpus())
    for config_path in sorted(production_repo.glob("*/config.pbtxt")):
        model_dir = config_path.parent
        target = local_repo / model_dir.name
        production = load_config(config_path)
        config = local_config(production, choices[model_dir.name], threads, instances)
        for version_dir in sorted(p for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()):
            (target / version_dir.name).mkdir(parents=True)
            if config.platform == ENSEMBLE:
                continue  # its version folder is empty
            shutil.copy(PYTHON_MODEL, target / version_dir.name / "model.py")
            for model_file in version_dir.iterdir():  # model.onnx, and an int8 IR's xml and bin
                (target / version_dir.name / model_file.name).symlink_to(model_file.resolve())
        (target / "config.pbtxt").write_text(text_format.MessageToString(config))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Write configs/cuda.pbtxt (or, --cpu, this host's cpu.pbtxt)")
    parser.add_argument("--cpu", type=Path, metavar="REPOSITORY", help="write configs/cpu.pbtxt in REPOSITORY")
    arguments = parser.parse_args()
    if arguments.cpu:
        for model, choice in write_cpu_configs(arguments.cpu).items():
            print(f"{model}: {choice.describe()}")
    else:
        write_cuda_variants(Path(__file__).resolve().parent.parent / "model_repository")
