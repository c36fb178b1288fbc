"""The /v1/crop wiring with an in-process stand-in for Triton (no faces)."""

import io

import numpy as np
from PIL import Image

from gateway.app import create_app
from gateway.config import Settings
from gateway.postprocess import ModelOutputs


class NoFacesModel:
    def __call__(self, tensor):
        empty = ModelOutputs(np.zeros(0, np.int32), np.zeros(0, np.float32), np.zeros((0, 4), np.float32), np.zeros((0, 10), np.float32))
        return [empty] * len(tensor)

    def is_ready(self):
        return True


def client(**settings):
    return create_app(Settings(**settings), NoFacesModel()).test_client()


def jpeg(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (90, 120, 150)).save(buffer, "JPEG")
    return buffer.getvalue()


def test_an_output_over_the_pixel_limit_is_refused():
    response = client(max_pixels=1_000_000).post("/v1/crop?width=2000&height=2000", data=jpeg(400, 300), content_type="image/jpeg")
    assert response.status_code == 400
    assert response.json["error"]["code"] == "output_too_large"


def test_no_size_returns_the_region_at_its_own_resolution():
    response = client().post("/v1/crop?format=png", data=jpeg(400, 300), content_type="image/jpeg")
    assert response.headers["X-Crop-Rect"] == "0,0,400,300"
    assert Image.open(io.BytesIO(response.data)).size == (400, 300)
