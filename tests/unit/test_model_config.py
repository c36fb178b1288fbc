"""Each production config.pbtxt and its local rendering parse with Triton's ModelConfig and fit the ONNX file."""

import re
from pathlib import Path

import onnxruntime
import pytest
import yaml
from tritonclient.grpc import model_config_pb2

from gateway.detection.detectors import every_wire_format
from gateway.detection.preprocess import plan_input
from local_triton import PROJECT_ROOT
from local_triton.cpu import PRECISIONS, Choice, available_cpus, choose, cpu_flags, model_threads
from local_triton.processes import PRODUCTION_REPOSITORY
from local_triton.render import cuda_variant_text, load_config, local_config, render_repository

MODELS = sorted(w.model_name for w in every_wire_format())
ONNX_TYPES = {
    "tensor(float)": model_config_pb2.TYPE_FP32,
    "tensor(uint8)": model_config_pb2.TYPE_UINT8,
    "tensor(int32)": model_config_pb2.TYPE_INT32,
}


def config_of(model: str) -> model_config_pb2.ModelConfig:
    return load_config(PRODUCTION_REPOSITORY / model / "config.pbtxt")


def assert_matches_onnx(config: model_config_pb2.ModelConfig) -> None:
    path = PRODUCTION_REPOSITORY / config.name / "1" / "model.onnx"
    if not path.is_file():
        pytest.fail(f"{path} is missing: `make model` puts it in place")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for tensors, declared in ((session.get_inputs(), config.input), (session.get_outputs(), config.output)):
        assert [t.name for t in tensors] == [d.name for d in declared]
        for tensor, entry in zip(tensors, declared):
            assert ONNX_TYPES[tensor.type] == entry.data_type, entry.name
            assert isinstance(tensor.shape[0], str), "the ONNX batch dimension must be dynamic"
            assert len(tensor.shape) == len(entry.dims) + 1  # Triton's dims leave out the batch
            for onnx_dim, dim in zip(tensor.shape[1:], entry.dims):
                assert dim == (onnx_dim if isinstance(onnx_dim, int) else -1)


@pytest.mark.parametrize("model", MODELS)
def test_production_config(model):
    config = config_of(model)
    assert config.name == model and config.platform == "onnxruntime_onnx"
    assert config.max_batch_size >= 8
    assert all(g.kind == model_config_pb2.ModelInstanceGroup.KIND_GPU for g in config.instance_group)
    assert config.dynamic_batching.preferred_batch_size
    assert_matches_onnx(config)


def gpu_pad_multiple() -> int:
    """FACECROP_PAD_MULTIPLE as the GPU deployments set it: docker-compose.yml's default, which the
    Kubernetes gateway must repeat."""
    compose = yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())
    value = re.fullmatch(
        r"\$\{FACECROP_PAD_MULTIPLE:-(\d+)\}", compose["services"]["gateway"]["environment"]["FACECROP_PAD_MULTIPLE"]
    )
    assert value, "docker-compose.yml sets FACECROP_PAD_MULTIPLE with a default"
    documents = yaml.safe_load_all((PROJECT_ROOT / "deploy" / "kubernetes" / "gateway.yaml").read_text())
    gateway = next(d for d in documents if d["kind"] == "Deployment")
    env = {e["name"]: e.get("value") for e in gateway["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["FACECROP_PAD_MULTIPLE"] == value[1]
    return int(value[1])


@pytest.mark.parametrize("model", MODELS)
def test_warmup_covers_every_canonical_shape(model):
    """The GPU deployments' shapes, each warmed up (engines built before traffic)."""
    config = config_of(model)
    channels_first = list(config.input[0].dims).index(3) == 0
    sides, pad = range(1, 3000, 7), gpu_pad_multiple()  # from 1 pixel (enlarged three times) to large photos
    canonical = {plan_input(h, w, 1024, pad).size for h in sides for w in sides}
    layout = {(3, h, w) if channels_first else (h, w, 3) for h, w in canonical}
    warmups = [w.inputs["input"] for w in config.model_warmup]
    assert {tuple(w.dims) for w in warmups} == layout
    assert all(w.data_type == config.input[0].data_type for w in warmups)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_local_rendering_keeps_everything_the_gateway_sees(model, precision):
    production = config_of(model)
    local = local_config(production, Choice(precision), threads=2)
    assert local.backend == "python" and not local.platform
    assert [g.kind for g in local.instance_group] == [model_config_pb2.ModelInstanceGroup.KIND_CPU]
    for field in ("name", "max_batch_size", "input", "output", "dynamic_batching", "model_warmup"):
        assert getattr(local, field) == getattr(production, field), field
    parameters = {key: value.string_value for key, value in local.parameters.items()}
    runtime, model_file = {"int8": ("openvino", "model.int8.xml"), "bf16": ("openvino", "model.onnx")}.get(
        precision, ("onnxruntime", "model.onnx")
    )
    assert parameters == {"runtime": runtime, "precision": precision, "model_file": model_file, "threads": "2"}
    assert_matches_onnx(local)


@pytest.mark.parametrize("precision", ["", "fp32", "int8"])
def test_rendered_repository(tmp_path: Path, precision):
    render_repository(PRODUCTION_REPOSITORY, tmp_path, precision=precision)
    threads = model_threads(available_cpus())
    for model in MODELS:
        choice = choose(model, cpu_flags(), precision)
        assert load_config(tmp_path / model / "config.pbtxt") == local_config(config_of(model), choice, threads)
        for served in (PRODUCTION_REPOSITORY / model / "1").iterdir():  # model.onnx, an int8 IR's files
            assert (tmp_path / model / "1" / served.name).read_bytes() == served.read_bytes()
        assert (tmp_path / model / "1" / "model.py").is_file()
        assert (tmp_path / model / "1" / choice.model_file).is_file()


@pytest.mark.parametrize("model", MODELS)
def test_tensorrt_profile_spans_every_canonical_shape(model):
    config = config_of(model)
    (tensorrt,) = config.optimization.execution_accelerators.gpu_execution_accelerator
    assert tensorrt.name == "tensorrt" and tensorrt.parameters["precision_mode"] == "FP16"
    assert tensorrt.parameters["trt_engine_cache_enable"] == "1"
    assert tensorrt.parameters["trt_engine_cache_path"].startswith("/trt-cache/")

    def profile(key):
        name, dims = tensorrt.parameters[key].split(":")
        assert name == config.input[0].name
        return [int(d) for d in dims.split("x")]

    low, high = profile("trt_profile_min_shapes"), profile("trt_profile_max_shapes")
    assert low[0] == 1 and high[0] == config.max_batch_size
    for warmup in config.model_warmup:
        dims = list(warmup.inputs["input"].dims)
        assert all(lo <= d <= hi for lo, d, hi in zip(low[1:], dims, high[1:])), dims


@pytest.mark.parametrize("model", MODELS)
def test_cuda_variant_is_the_production_config_without_tensorrt(model):
    committed = (PRODUCTION_REPOSITORY / model / "configs" / "cuda.pbtxt").read_text()
    assert committed == cuda_variant_text(PRODUCTION_REPOSITORY / model / "config.pbtxt"), (
        "run python -m local_triton.render"
    )
    variant = load_config(PRODUCTION_REPOSITORY / model / "configs" / "cuda.pbtxt")
    assert not variant.optimization.execution_accelerators.gpu_execution_accelerator
    assert variant.instance_group == config_of(model).instance_group
    assert_matches_onnx(variant)


def test_a_stack_s_ports_are_never_the_same_twice():
    """A stack's Triton (three ports) and gateways each get a port of their own: the system offers a
    closed port again at once, and Triton refuses to start with two of its ports the same."""
    from local_triton.processes import TritonPorts, free_port

    ports = [port for _ in range(50) for port in vars(TritonPorts.free()).values()] + [free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports) == 200
