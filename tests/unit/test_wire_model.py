"""The uint8 wire model finds exactly what the original float32 model finds, on real photos."""

import numpy as np
import pytest

from bench.onnx_model import OnnxModel
from gateway.config import Settings
from gateway.params import DetectOptions
from gateway.pipeline import run_detection
from gateway.triton.wire import WIRE_FORMATS
from local_triton.processes import PRODUCTION_REPOSITORY
from tests.support import photo


@pytest.fixture(scope="module")
def models():
    return {fmt: OnnxModel(wire, threads=2) for fmt, wire in WIRE_FORMATS.items()}


@pytest.mark.parametrize(
    "name", ["demo/widertest_20_Family_Group_Family_Group_20_435.jpg", "demo/skimage_astronaut.jpg"]
)
def test_same_faces_from_both_wire_formats(models, name):
    data = photo(name).read_bytes()
    options = DetectOptions(min_confidence=2, max_faces=1000)
    results = {
        fmt: run_detection(data, model, Settings(wire_format=fmt), options).detections for fmt, model in models.items()
    }
    assert len(results["uint8"]) == len(results["float32"]) > 0
    np.testing.assert_allclose(results["uint8"].scores, results["float32"].scores, atol=1e-5)
    np.testing.assert_allclose(results["uint8"].boxes, results["float32"].boxes, atol=0.05)
    np.testing.assert_allclose(results["uint8"].landmarks, results["float32"].landmarks, atol=0.05)


def test_the_wire_model_builder_uses_the_gateways_constants():
    """scripts/fetch_model.py stays standalone (the init image has no gateway); its copies must agree."""
    import importlib.util

    from gateway.detection.postprocess import PRE_NMS_TOP_K
    from gateway.detection.preprocess import BGR_MEAN

    spec = importlib.util.spec_from_file_location(
        "fetch_model", PRODUCTION_REPOSITORY.parent / "scripts" / "fetch_model.py"
    )
    fetch_model = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fetch_model)
    assert fetch_model.PRE_NMS_TOP_K == PRE_NMS_TOP_K
    assert list(fetch_model.BGR_MEAN) == BGR_MEAN.tolist()
