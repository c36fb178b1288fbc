"""The production config.pbtxt and its local rendering parse with Triton's ModelConfig and fit the ONNX file."""

from pathlib import Path

import onnxruntime
import pytest
from tritonclient.grpc import model_config_pb2

from local_triton.processes import PRODUCTION_REPOSITORY
from local_triton.render import load_config, local_config, render_repository
from gateway.preprocess import canonical_shape

CONFIG = PRODUCTION_REPOSITORY / "retinaface" / "config.pbtxt"
ONNX = PRODUCTION_REPOSITORY / "retinaface" / "1" / "model.onnx"
ONNX_TYPES = {"tensor(float)": model_config_pb2.TYPE_FP32}


def model_session() -> onnxruntime.InferenceSession:
    if not ONNX.is_file():
        pytest.fail(f"{ONNX} is missing: `make model` puts it in place")
    return onnxruntime.InferenceSession(str(ONNX), providers=["CPUExecutionProvider"])


def assert_matches_onnx(config: model_config_pb2.ModelConfig) -> None:
    session = model_session()
    for tensors, declared in ((session.get_inputs(), config.input), (session.get_outputs(), config.output)):
        assert [t.name for t in tensors] == [d.name for d in declared]
        for tensor, entry in zip(tensors, declared):
            assert ONNX_TYPES[tensor.type] == entry.data_type
            assert isinstance(tensor.shape[0], str), "the ONNX batch dimension must be dynamic"
            assert len(tensor.shape) == len(entry.dims) + 1  # Triton's dims leave out the batch
            for onnx_dim, dim in zip(tensor.shape[1:], entry.dims):
                assert dim == (onnx_dim if isinstance(onnx_dim, int) else -1)


def test_production_config():
    config = load_config(CONFIG)
    assert config.name == "retinaface" and config.platform == "onnxruntime_onnx"
    assert config.max_batch_size >= 8
    assert all(g.kind == model_config_pb2.ModelInstanceGroup.KIND_GPU for g in config.instance_group)
    assert config.dynamic_batching.preferred_batch_size
    assert_matches_onnx(config)


def test_warmup_covers_every_canonical_shape():
    shapes = {tuple(w.inputs["input"].dims) for w in load_config(CONFIG).model_warmup}
    canonical = {(3, *canonical_shape(h, w, 1024, 256)) for h in range(1, 1025, 7) for w in (1024,)}
    canonical |= {(c, w, h) for c, h, w in canonical}
    assert shapes == canonical


def test_local_rendering_keeps_everything_the_gateway_sees(tmp_path: Path):
    production = load_config(CONFIG)
    local = local_config(production, intra_op_threads=2)
    assert local.backend == "python" and not local.platform
    assert [g.kind for g in local.instance_group] == [model_config_pb2.ModelInstanceGroup.KIND_CPU]
    for field in ("name", "max_batch_size", "input", "output", "dynamic_batching", "model_warmup"):
        assert getattr(local, field) == getattr(production, field), field
    assert_matches_onnx(local)
    render_repository(PRODUCTION_REPOSITORY, tmp_path)
    assert load_config(tmp_path / "retinaface" / "config.pbtxt") == local_config(production, 0)
    assert (tmp_path / "retinaface" / "1" / "model.onnx").read_bytes() == ONNX.read_bytes()
