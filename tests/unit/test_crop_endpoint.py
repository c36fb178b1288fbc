"""The /v1/crop wiring with an in-process stand-in for Triton (no faces)."""

import io

import pytest
from PIL import Image

from gateway.config import Settings


def jpeg(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (90, 120, 150)).save(buffer, "JPEG")
    return buffer.getvalue()


@pytest.mark.parametrize("settings", [Settings(max_pixels=1_000_000)])
def test_an_output_over_the_pixel_limit_is_refused(client):
    response = client.post("/v1/crop?width=2000&height=2000", data=jpeg(400, 300), content_type="image/jpeg")
    assert response.status_code == 400
    assert response.json["error"]["code"] == "output_too_large"


def test_a_side_that_follows_the_regions_aspect_is_bounded_at_4096_as_a_given_side_is(client):
    """height alone: the width follows the 4:3 region, enlarged to 4096 at most, 4097 refused; a
    region not enlarged comes back at its own size, however long its side."""
    made = client.post("/v1/crop?height=3072&format=jpeg", data=jpeg(400, 300), content_type="image/jpeg")
    assert Image.open(io.BytesIO(made.data)).size == (4096, 3072)
    refused = client.post("/v1/crop?height=3073", data=jpeg(400, 300), content_type="image/jpeg")
    assert refused.status_code == 400
    assert refused.json["error"] == {
        "code": "output_too_large",
        "message": "a 4097x3073 output has a side over the limit of 4096 pixels",
    }
    whole = client.post("/v1/crop?format=png", data=jpeg(6000, 40), content_type="image/jpeg")
    assert Image.open(io.BytesIO(whole.data)).size == (6000, 40)
    shrunk = client.post("/v1/crop?height=20&format=png", data=jpeg(6000, 40), content_type="image/jpeg")
    assert Image.open(io.BytesIO(shrunk.data)).size == (3000, 20)


def test_no_size_returns_the_region_at_its_own_resolution(client):
    response = client.post("/v1/crop?format=png", data=jpeg(400, 300), content_type="image/jpeg")
    assert response.headers["X-Crop-Rect"] == "0,0,400,300"
    assert Image.open(io.BytesIO(response.data)).size == (400, 300)
