"""The production CPU configs (`configs/cpu.pbtxt`, written by the model-init for its host) checked
statically against what Triton's backends accept, since the openvino backend cannot run here: each
model read by OpenVINO itself (names, element types, each dimension static or dynamic) and held to
the backend's rules as its source applies them (openvino_backend's openvino.cc and openvino_utils.cc
at r26.08): only its documented parameters, with their values' grammar; KIND_CPU; every input named;
with `max_batch_size: 0`, every dimension compared exactly (-1 only where the model's is dynamic, no
bounded range, which no config can state: openvino_backend#84); no batching or warmup, which it
breaks (a batch smaller than max_batch_size is refused, its padding is broken: openvino_backend#115).
And the rule that chooses them: local_triton/cpu.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import onnxruntime
import openvino
import pytest
from tritonclient.grpc import model_config_pb2

from gateway.triton.client import runtime_of
from local_triton.cpu import (
    PREFERENCE,
    Choice,
    PrecisionError,
    choose,
    cpu_flags,
    forced,
    model_threads,
)
from local_triton.processes import PRODUCTION_REPOSITORY
from local_triton.render import (
    ENSEMBLE,
    cpu_config,
    cuda_config,
    load_config,
    model_output_dims,
    write_cpu_configs,
)

MODELS = sorted(PREFERENCE)
# The openvino backend's parameters (openvino.cc's ParseParameters) and what each value may be; the
# gateway's own two (what it reports), which the backend ignores
OPENVINO_PARAMETERS = {
    "PERFORMANCE_HINT": lambda v: v.upper() in ("LATENCY", "THROUGHPUT", "CUMULATIVE_THROUGHPUT"),
    "NUM_STREAMS": lambda v: v.isdigit() or v in ("AUTO", "NUMA"),
    "INFERENCE_NUM_THREADS": str.isdigit,
    "COMPILATION_NUM_THREADS": str.isdigit,
    "HINT_BF16": lambda v: v == "YES",  # anything else is an error
    "runtime": lambda v: v == "openvino",
    "precision": lambda v: v in ("int8", "bf16"),
}
ONNXRUNTIME_PARAMETERS = {
    "intra_op_thread_count": str.isdigit,
    "inter_op_thread_count": str.isdigit,
    "runtime": lambda v: v == "onnxruntime",
    "precision": lambda v: v == "fp32",
}
TYPES = {  # OpenVINO's element types as Triton's; the backend refuses STRING, BF16 and FP64
    "u8": model_config_pb2.TYPE_UINT8,
    "f32": model_config_pb2.TYPE_FP32,
    "i32": model_config_pb2.TYPE_INT32,
}
AVX512_VNNI_BF16 = frozenset({"avx2", "avx512f", "avx512_vnni", "avx512_bf16"})  # AMD Zen 4, Sapphire Rapids
VNNI_ONLY = frozenset({"avx2", "avx512f", "avx512_vnni"})  # Cascade Lake
AVX2 = frozenset({"avx2", "fma"})  # Zen 2 and 3, Haswell to Coffee Lake


def production(model: str) -> model_config_pb2.ModelConfig:
    return load_config(PRODUCTION_REPOSITORY / model / "config.pbtxt")


def model_file(model: str, choice: Choice) -> Path:
    path = PRODUCTION_REPOSITORY / model / "1" / choice.model_file
    if not path.is_file():
        pytest.fail(f"{path} is missing: `make model` puts it in place")
    return path


def rendered(model: str, precision: str, threads: int = 3) -> tuple[model_config_pb2.ModelConfig, Path]:
    choice = Choice(precision)
    path = model_file(model, choice)
    return cpu_config(production(model), choice, threads, model_output_dims(path)), path


def assert_fits(config: model_config_pb2.ModelConfig, path: Path, exact_dims: bool) -> None:
    """`config`'s inputs and outputs as the backend checks them against the model OpenVINO reads:
    every input, outputs by name, types, and (max_batch_size 0) every dimension."""
    model = openvino.Core().read_model(str(path))
    assert len(config.input) == len(model.inputs), "the backend wants every input, no more"
    ports = {name: port for port in (*model.inputs, *model.outputs) for name in port.get_names()}
    for tensor in (*config.input, *config.output):
        assert tensor.name in ports, f"{tensor.name} is no tensor name of {path.name}"
        port = ports[tensor.name]
        assert TYPES[port.get_element_type().get_type_name()] == tensor.data_type, tensor.name
        shape = port.get_partial_shape()
        assert shape.rank.get_length() == len(tensor.dims), tensor.name
        for dim, stated in zip(shape, tensor.dims):
            assert dim.is_static or dim.get_max_length() == -1, f"{tensor.name}: a bounded range no config can state"
            if exact_dims:
                assert stated == (dim.get_length() if dim.is_static else -1), (tensor.name, list(tensor.dims), shape)


@pytest.mark.parametrize(("model", "precision"), [(m, p) for m in MODELS for p in PREFERENCE[m] if p != "fp32"])
def test_an_openvino_config_is_one_the_backend_loads(model, precision):
    config, path = rendered(model, precision)
    assert config.backend == "openvino" and not config.platform
    assert config.default_model_filename == path.name and (path.suffix != ".xml" or path.with_suffix(".bin").is_file())
    assert [(g.kind, g.count) for g in config.instance_group] == [(model_config_pb2.ModelInstanceGroup.KIND_CPU, 1)]
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching") and not config.model_warmup
    assert not config.HasField("optimization")
    parameters = {key: value.string_value for key, value in config.parameters.items()}
    assert set(parameters) <= set(OPENVINO_PARAMETERS), set(parameters) - set(OPENVINO_PARAMETERS)
    assert all(OPENVINO_PARAMETERS[key](value) for key, value in parameters.items()), parameters
    assert parameters["INFERENCE_NUM_THREADS"] == "3" and parameters["NUM_STREAMS"] == "1"
    assert ("HINT_BF16" in parameters) == (precision == "bf16")
    assert_fits(config, path, exact_dims=True)
    assert runtime_of(text_to_json(config)) == f"{precision} (openvino)"


@pytest.mark.parametrize("model", MODELS)
def test_an_onnxruntime_cpu_config_is_one_the_backend_loads(model):
    config, path = rendered(model, "fp32")
    assert config.platform == "onnxruntime_onnx" and config.default_model_filename == "model.onnx"
    assert [g.kind for g in config.instance_group] == [model_config_pb2.ModelInstanceGroup.KIND_CPU]
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    parameters = {key: value.string_value for key, value in config.parameters.items()}
    assert set(parameters) == set(ONNXRUNTIME_PARAMETERS)
    assert all(ONNXRUNTIME_PARAMETERS[key](value) for key, value in parameters.items()), parameters
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [t.name for t in session.get_inputs()] == [t.name for t in config.input]
    assert [t.name for t in session.get_outputs()] == [t.name for t in config.output]
    assert_fits(config, path, exact_dims=False)  # onnxruntime's -1 matches any dimension
    assert runtime_of(text_to_json(config)) == "fp32 (onnxruntime)"


def test_the_ensemble_takes_the_batch_as_a_dimension_as_its_steps_do():
    """Triton refuses an ensemble that batches over steps that do not (max_batch_size 0)."""
    ensemble = cpu_config(production("faces_uint8"), None, 3, {})
    assert ensemble.platform == ENSEMBLE and ensemble.max_batch_size == 0
    steps = {step.model_name: step for step in ensemble.ensemble_scheduling.step}
    for name, step in steps.items():
        config, _ = rendered(name, PREFERENCE[name][0])
        assert config.max_batch_size == 0
        (inputs,) = config.input
        assert list(inputs.dims) == list(ensemble.input[0].dims) == [-1, -1, -1, 3]
        for output in config.output:
            stated = next(o for o in ensemble.output if o.name == step.output_map[output.name])
            assert len(stated.dims) == len(output.dims) and stated.data_type == output.data_type


def test_the_model_init_writes_each_models_cpu_config_for_its_host(tmp_path, monkeypatch):
    """`python -m local_triton.render --cpu` on a repository the model-init wrote: configs/cpu.pbtxt
    beside each config, FACECROP_PRECISION obeyed, the threads FACECROP_TRITON_CPUS gives shared."""
    repository = tmp_path / "models"
    shutil.copytree(PRODUCTION_REPOSITORY, repository, symlinks=True)
    monkeypatch.setenv("FACECROP_TRITON_CPUS", "8")
    monkeypatch.setenv("FACECROP_PRECISION", "retinaface_uint8=int8,yunet_n_uint8=fp32")
    choices = write_cpu_configs(repository)
    assert choices["retinaface_uint8"] == Choice("int8", forced=True)
    for model in MODELS:
        written = load_config(repository / model / "configs" / "cpu.pbtxt")
        assert written.max_batch_size == 0
        assert written.parameters["precision"].string_value == choices[model].precision
        threads = written.parameters[
            "INFERENCE_NUM_THREADS" if choices[model].runtime == "openvino" else "intra_op_thread_count"
        ]
        assert threads.string_value == "4"  # 8 cores, two detectors at once
    assert load_config(repository / "faces_uint8" / "configs" / "cpu.pbtxt").max_batch_size == 0
    assert load_config(repository / "retinaface_uint8" / "config.pbtxt") == production("retinaface_uint8")  # GPU's kept


@pytest.mark.parametrize(
    ("flags", "retinaface", "yunet"),
    [
        (AVX512_VNNI_BF16, "int8", "bf16"),
        (VNNI_ONLY, "int8", "fp32"),
        (frozenset({"avx2", "avx_vnni"}), "int8", "fp32"),  # Alder Lake's VNNI on AVX2
        (frozenset({"avx512f", "amx_bf16", "amx_int8"}), "int8", "bf16"),
        (AVX2, "fp32", "fp32"),  # OpenVINO's f32 ran YuNet at 0.73x onnxruntime's: nothing slower than today
        (frozenset(), "fp32", "fp32"),
    ],
)
def test_each_model_runs_the_fastest_precision_the_cpu_has(flags, retinaface, yunet):
    assert choose("retinaface_uint8", flags).precision == retinaface
    assert choose("yunet_n_uint8", flags).precision == yunet
    assert choose("retinaface", flags).precision == ("bf16" if yunet == "bf16" else "fp32")  # no int8 file
    assert {choose(m, flags).runtime for m in MODELS if choose(m, flags).precision == "fp32"} <= {"onnxruntime"}


def test_a_precision_can_be_forced_per_model_or_for_all_that_have_it():
    assert choose("retinaface_uint8", AVX2, "int8") == Choice("int8", forced=True)
    assert choose("yunet_n_uint8", AVX2, "int8") == Choice("fp32")  # no int8 file: the rule's
    assert choose("yunet_n_uint8", AVX512_VNNI_BF16, "fp32") == Choice("fp32", forced=True)
    assert choose("yunet_n_uint8", AVX2, "yunet_n_uint8=bf16") == Choice("bf16", forced=True)
    assert forced(" AUTO ") == forced("") == {}
    for wrong in ("int4", "yunet_n_uint8=int8", "nobody=fp32"):
        with pytest.raises(PrecisionError):
            forced(wrong)


def test_the_detectors_share_the_cores_and_the_flags_are_read_from_cpuinfo(tmp_path):
    assert [model_threads(cpus) for cpus in (1, 2, 3, 16)] == [1, 1, 1, 8]
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_vnni\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert cpu_flags(cpuinfo) == {"fpu", "avx2", "avx512_vnni"}
    assert cpu_flags(tmp_path / "absent") == frozenset()


@pytest.mark.parametrize(
    ("config", "said"),
    [
        (production("retinaface_uint8"), "fp16 (tensorrt)"),
        (cuda_config(production("retinaface_uint8")), "fp32 (onnxruntime_onnx)"),
        (production("faces_uint8"), "ensemble of retinaface_uint8, yunet_n_uint8"),
    ],
)
def test_what_a_model_runs_is_read_from_its_config(config, said):
    assert runtime_of(text_to_json(config)) == said


def text_to_json(config: model_config_pb2.ModelConfig) -> dict:
    """The config as Triton's get_model_config(as_json=True) gives it."""
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(config, preserving_proto_field_name=True)
