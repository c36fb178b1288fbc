"""Derive the local CPU rendering of the production model repository.

The production `config.pbtxt` stays the one source of truth. The rendering changes only
what the local `tritonserver` cannot run and nothing the gateway can see:

- `platform: onnxruntime_onnx` becomes `backend: python` (local_triton/model.py running the
  same `model.onnx` with onnxruntime), with an `intra_op_threads` parameter;
- `KIND_GPU` instance groups become one `KIND_CPU` instance;
- GPU execution accelerators (TensorRT, CUDA options) under `optimization` are dropped.

Name, inputs, outputs, `max_batch_size`, dynamic batching and warmup are kept as they are.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

PYTHON_MODEL = Path(__file__).with_name("model.py")


def load_config(path: Path) -> model_config_pb2.ModelConfig:
    """Parse a `config.pbtxt` with Triton's own ModelConfig protobuf."""
    return text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())


def local_config(production: model_config_pb2.ModelConfig, intra_op_threads: int) -> model_config_pb2.ModelConfig:
    """The Python-backend, CPU-only variant of a production ONNX Runtime config."""
    config = model_config_pb2.ModelConfig()
    config.CopyFrom(production)
    config.ClearField("platform")
    config.backend = "python"
    config.ClearField("optimization")
    del config.instance_group[:]
    config.instance_group.add(count=1, kind=model_config_pb2.ModelInstanceGroup.KIND_CPU)
    config.parameters["intra_op_threads"].string_value = str(intra_op_threads)
    return config


def render_repository(production_repo: Path, local_repo: Path, intra_op_threads: int = 0) -> None:
    """Write the local rendering of every model in `production_repo` into `local_repo`."""
    if local_repo.exists():
        shutil.rmtree(local_repo)
    for config_path in sorted(production_repo.glob("*/config.pbtxt")):
        model_dir = config_path.parent
        target = local_repo / model_dir.name
        config = local_config(load_config(config_path), intra_op_threads)
        for version_dir in sorted(p for p in model_dir.iterdir() if p.is_dir()):
            (target / version_dir.name).mkdir(parents=True)
            shutil.copy(PYTHON_MODEL, target / version_dir.name / "model.py")
            (target / version_dir.name / "model.onnx").symlink_to((version_dir / "model.onnx").resolve())
        (target / "config.pbtxt").write_text(text_format.MessageToString(config))
