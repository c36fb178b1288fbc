"""Each uint8 wire model finds exactly what its original float32 model finds, on real photos; what
scripts/fetch_model.py builds them from."""

import hashlib
import importlib.util
import shutil

import numpy as np
import pytest

from bench.onnx_model import OnnxModel
from evaluation.images import photo
from gateway.config import Settings
from gateway.detection.detectors import KINDS, serve
from gateway.params import DetectOptions
from gateway.processing.answer import faces_in
from local_triton.processes import PRODUCTION_REPOSITORY


@pytest.fixture(scope="module")
def fetch_model():
    """scripts/fetch_model.py, loaded from its file (it is no package)."""
    spec = importlib.util.spec_from_file_location(
        "fetch_model", PRODUCTION_REPOSITORY.parent / "scripts" / "fetch_model.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("detector", sorted(KINDS))
@pytest.mark.parametrize(
    "name", ["demo/widertest_20_Family_Group_Family_Group_20_435.jpg", "demo/skimage_astronaut.jpg"]
)
def test_same_faces_from_both_wire_formats(detector, name):
    data = photo(name).read_bytes()
    options = DetectOptions(min_confidence=2, max_faces=1000)
    results = {}
    for fmt in KINDS[detector].wire_formats:
        detectors = serve((detector,), fmt, lambda wire: OnnxModel(wire, threads=2))
        results[fmt] = faces_in(data, detectors, Settings(wire_format=fmt), options).faces
    assert len(results["uint8"]) == len(results["float32"]) > 0
    np.testing.assert_allclose(results["uint8"].scores, results["float32"].scores, atol=1e-5)
    np.testing.assert_allclose(results["uint8"].boxes, results["float32"].boxes, atol=0.05)
    np.testing.assert_allclose(results["uint8"].landmarks, results["float32"].landmarks, atol=0.05)


def test_the_wire_model_builder_uses_the_gateways_constants(fetch_model):
    """scripts/fetch_model.py stays standalone (the init image has no gateway); its copies must agree."""
    from gateway.detection.retinaface import BGR_MEAN, PRE_NMS_TOP_K
    from gateway.detection.yunet import STRIDES

    assert fetch_model.PRE_NMS_TOP_K == PRE_NMS_TOP_K
    assert list(fetch_model.BGR_MEAN) == list(BGR_MEAN)
    assert fetch_model.YUNET_STRIDES == STRIDES


def test_yunet_is_refused_unless_it_is_the_pinned_file(fetch_model, tmp_path):
    """A wrong or missing YuNet file stops the install saying so, before any model is written."""
    repository = tmp_path / "repository"
    with pytest.raises(SystemExit, match=r"YuNet-n is missing: .* is committed with the repository"):
        fetch_model.install_models(repository)
    (repository / "yunet_n").mkdir(parents=True)
    (repository / fetch_model.YUNET_SOURCE).write_bytes(b"not a model")
    with pytest.raises(SystemExit, match=fetch_model.YUNET_SHA256):
        fetch_model.install_models(repository)
    assert [p.name for p in repository.rglob("*") if p.is_file()] == ["yunet_n_dynamic.onnx"]


def test_the_repository_carries_yunet_and_its_licence():
    """A clone has every model `make serve` needs (no ../shared beside it): YuNet-n's pinned bytes,
    its Apache-2.0 licence and a NOTICE naming where they come from."""
    folder = PRODUCTION_REPOSITORY / "yunet_n"
    data = (folder / "yunet_n_dynamic.onnx").read_bytes()
    assert hashlib.sha256(data).hexdigest() == "104ee26c71d5c270ce79a6b3dced91c91013260d29a6bf18f9296c5b8c4c2b12"
    assert "Apache License" in (folder / "LICENSE").read_text()
    notice = (folder / "NOTICE").read_text()
    assert "libfacedetection.train" in notice and "0047ac24afb1a50a0c6105001c89d1b5b805dbf1" in notice


def test_the_int8_graph_is_refused_unless_pinned_and_made_from_the_wire_graph(fetch_model, tmp_path, monkeypatch):
    """scripts/int8/ (scripts/quantize.py's output) goes in place only as committed, and only beside the
    wire graph it was made from: a changed wire graph needs the int8 graph made again."""
    wire = fetch_model.wrap_for_wire(fetch_model.original_bytes())
    files = fetch_model.int8_files(wire)
    assert sorted(p.name for p in files) == ["model.int8.bin", "model.int8.xml"]
    with pytest.raises(SystemExit, match="made from another retinaface_uint8 graph"):
        fetch_model.int8_files(wire + b"\0")
    altered = tmp_path / "int8"
    shutil.copytree(fetch_model.INT8, altered)
    weights = bytearray((altered / "retinaface_uint8.bin").read_bytes())
    weights[0] ^= 1
    (altered / "retinaface_uint8.bin").write_bytes(bytes(weights))
    monkeypatch.setattr(fetch_model, "INT8", altered)
    with pytest.raises(SystemExit, match=r"retinaface_uint8\.bin has sha256"):
        fetch_model.int8_files(wire)
