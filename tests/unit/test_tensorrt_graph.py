"""What TensorRT (through ONNX Runtime's TensorRT provider) needs of each served graph,
checked without a GPU: uint8 only into a Cast, a constant TopK K within TensorRT's limit (and
K rows for an input with fewer candidates), and a profile for every dynamic input."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, numpy_helper

from gateway.detection.detectors import KINDS, every_wire_format
from gateway.detection.retinaface import PRE_NMS_TOP_K, priors
from gateway.detection.yunet import cell_counts
from gateway.triton.wire import TOP_K
from local_triton.processes import PRODUCTION_REPOSITORY
from local_triton.render import load_config

TENSORRT_MAX_TOP_K = 3840  # TensorRT's TopK layer: K <= 3840
MODELS = sorted(w.model_name for w in every_wire_format())


def load_graph(model: str) -> onnx.GraphProto:
    path = PRODUCTION_REPOSITORY / model / "1" / "model.onnx"
    if not path.is_file():
        pytest.fail(f"{path} is missing: `make model` puts it in place")
    return onnx.shape_inference.infer_shapes(onnx.load(str(path))).graph


def element_types(graph: onnx.GraphProto) -> dict[str, int]:
    values = list(graph.input) + list(graph.value_info) + list(graph.output)
    types = {v.name: v.type.tensor_type.elem_type for v in values}
    types.update({t.name: t.data_type for t in graph.initializer})
    return types


def uint8_consumers(graph: onnx.GraphProto) -> list[str]:
    """Nodes other than Cast that read a uint8 tensor (TensorRT runs none of them)."""
    types = element_types(graph)
    return [
        f"{node.op_type} {node.name or node.output[0]}"
        for node in graph.node
        if node.op_type != "Cast" and any(types.get(name) == TensorProto.UINT8 for name in node.input)
    ]


def top_k_values(graph: onnx.GraphProto) -> list[int | None]:
    """Each TopK's K when it is a constant (an initializer or a Constant node), else None."""
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    return [
        int(np.asarray(constants[node.input[1]]).reshape(-1)[0]) if node.input[1] in constants else None
        for node in graph.node
        if node.op_type == "TopK"
    ]


@pytest.mark.parametrize("model", MODELS)
def test_only_a_cast_reads_uint8(model):
    assert uint8_consumers(load_graph(model)) == []


@pytest.mark.parametrize("model", MODELS)
def test_top_k_is_a_constant_within_tensorrts_limit(model):
    for k in top_k_values(load_graph(model)):
        assert k is not None, "TopK's K must be a constant for TensorRT"
        assert k <= TENSORRT_MAX_TOP_K and k == PRE_NMS_TOP_K


@pytest.mark.parametrize("detector", ["retinaface", "yunet"])
@pytest.mark.parametrize("shape", [(256, 640), (64, 96)])
def test_a_uint8_graph_answers_k_rows_even_for_an_input_with_fewer_candidates(detector, shape):
    """detail=fast's narrowest shape (256x640: YuNet has 3,360 cells) and a tiny one (a small pad
    multiple, where RetinaFace has 252 anchors): TopK's constant K still has K rows, the padding's
    zero rows past the input's own, which the decoder leaves out even at min_confidence 0."""
    kind = KINDS[detector]
    wire = kind.wire_formats["uint8"]
    session = onnxruntime.InferenceSession(str(PRODUCTION_REPOSITORY / wire.model_name / "1" / "model.onnx"))
    pixels = np.random.default_rng(0).integers(0, 255, (1, *shape, 3), dtype=np.uint8)
    named = dict(zip(wire.output_names, session.run(list(wire.output_names), {"input": pixels})))
    [(outputs,)] = wire.outputs(named)
    own = len(priors(*shape)) if detector == "retinaface" else sum(cell_counts(*shape))
    assert len(outputs.scores) == TOP_K
    padding = outputs.anchor_index >= own
    assert padding.sum() == max(0, TOP_K - own) and not outputs.scores[padding].any()
    assert len(kind.candidates(outputs, shape, 0.0)) == min(own, TOP_K)  # real candidates, none of the padding


@pytest.mark.parametrize("model", MODELS)
def test_tensorrt_profiles_name_every_graph_input(model):
    config = load_config(PRODUCTION_REPOSITORY / model / "config.pbtxt")
    (tensorrt,) = config.optimization.execution_accelerators.gpu_execution_accelerator
    inputs = {i.name for i in load_graph(model).input}
    for key in ("trt_profile_min_shapes", "trt_profile_opt_shapes", "trt_profile_max_shapes"):
        named = {entry.split(":")[0] for entry in tensorrt.parameters[key].split(",")}
        assert named == inputs, key


def test_the_checks_catch_what_they_guard_against():
    """The checks above fail on the graph shape the issue found (Transpose reading uint8, runtime K)."""
    from onnx import helper

    graph = helper.make_graph(
        [
            helper.make_node("Transpose", ["input"], ["nchw"], perm=[0, 3, 1, 2]),
            helper.make_node("Cast", ["nchw"], ["pixels"], to=TensorProto.FLOAT),
            helper.make_node("ReduceMax", ["pixels"], ["scores"], axes=[1, 3], keepdims=0),
            helper.make_node("Shape", ["scores"], ["shape"]),
            helper.make_node("TopK", ["scores", "shape"], ["top", "index"], axis=1),
        ],
        "bad",
        [helper.make_tensor_value_info("input", TensorProto.UINT8, ["n", "h", "w", 3])],
        [helper.make_tensor_value_info("top", TensorProto.FLOAT, None)],
    )
    inferred = onnx.shape_inference.infer_shapes(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    ).graph
    assert uint8_consumers(inferred) == ["Transpose nchw"]
    assert top_k_values(inferred) == [None]
