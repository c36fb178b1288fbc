"""Phone-sized photos through the service: 12 MP JPEGs, EXIF-rotated, decoded reduced."""

from __future__ import annotations

import io
from functools import cache

import cv2
import numpy as np
import pytest
import requests
from PIL import Image

from evaluation.images import encoded
from tests.support import PHONE_SIZE, iou, rectangle, stored_with_orientation, upright_phone_photo


@cache
def textured_phone_photo() -> Image.Image:
    """The 12 MP crowd photo with pixel-level detail (a fixed noise), which only a full-size decode keeps."""
    noise = np.random.default_rng(7).integers(-24, 25, (PHONE_SIZE[1], PHONE_SIZE[0], 1))
    return Image.fromarray(np.clip(np.asarray(upright_phone_photo()) + noise, 0, 255).astype(np.uint8))


def post(stack, endpoint: str, data: bytes, params: dict) -> requests.Response:
    response = requests.post(f"{stack.gateway}/v1/{endpoint}", params=params, files={"image": data}, timeout=60)
    assert response.status_code == 200, response.text
    return response


def test_a_rotated_12_mp_photo_finds_the_faces_of_the_1024_pixel_one(stack):
    small = encoded(upright_phone_photo().resize((1024, 768), Image.Resampling.LANCZOS), "JPEG", quality=95)
    reference = post(stack, "detect", small, {"max_faces": "1000"}).json()["faces"]
    body = post(stack, "detect", stored_with_orientation(6), {"max_faces": "1000"}).json()
    assert body["image"] == {"width": 4032, "height": 3024}
    faces = body["faces"]
    assert abs(len(faces) - len(reference)) <= 0.1 * len(reference)
    matched = 0
    for face in reference:
        x, y, w, h = (value * 3.9375 for value in rectangle(face))  # 4032 / 1024
        matched += max((iou((x, y, w, h), rectangle(other)) for other in faces), default=0) > 0.7
    assert matched >= 0.9 * len(reference)


def reference_crop(region: tuple[int, int, int, int], size: tuple[int, int], source: Image.Image) -> np.ndarray:
    x, y, w, h = region
    cut = np.asarray(source)[y : y + h, x : x + w, ::-1]
    return cv2.resize(cut, size, interpolation=cv2.INTER_AREA if w * h > size[0] * size[1] else cv2.INTER_CUBIC)


@pytest.mark.parametrize(
    "params",
    [
        {"width": "512", "height": "512"},  # an avatar: cut from the reduced decode
        {"width": "3000", "height": "2250", "zoom": "0"},  # more pixels than the reduced decode has
    ],
)
def test_crops_of_a_12_mp_photo_have_the_pixels_of_a_full_decode(stack, params):
    source = textured_phone_photo()
    response = post(stack, "crop", stored_with_orientation(6, source), {**params, "format": "png"})
    output = np.asarray(Image.open(io.BytesIO(response.content)).convert("RGB"))[:, :, ::-1].astype(int)
    size = (int(params["width"]), int(params["height"]))
    assert output.shape == (size[1], size[0], 3)
    region = tuple(int(v) for v in response.headers["X-Crop-Rect"].split(","))
    full = reference_crop(region, size, source)
    # what a cut from a quarter-size decode would give: without the detail where it must be enlarged
    quarter = source.resize((1008, 756), Image.Resampling.BOX)
    soft = reference_crop(tuple(v // 4 for v in region), size, quarter)
    assert np.abs(output - full).mean() < 2.5
    if size[0] > region[2] / 2:  # the output needs more than a 1/2 decode: it must have come from full size
        assert np.abs(output - full).mean() < 0.5 * np.abs(soft.astype(int) - full).mean()


@pytest.mark.parametrize("orientation", [6, 8])
def test_the_tiled_pass_finds_the_upright_photos_faces_in_an_exif_rotated_one(stack, orientation):
    """detail=high on a 12 MP photo stored on its side: the faces of the same photo stored upright
    (turned by Pillow), at the same places, the tiled pass having run on both."""
    upright = encoded(upright_phone_photo(), "JPEG", quality=90)
    params = {"max_faces": "1000", "detail": "high"}
    reference = post(stack, "detect", upright, params)
    rotated = post(stack, "detect", stored_with_orientation(orientation), params)
    assert reference.headers["X-Passes"] == rotated.headers["X-Passes"] == "standard, tiled"
    expected, found = reference.json()["faces"], rotated.json()["faces"]
    assert abs(len(found) - len(expected)) <= max(2, 0.05 * len(expected)), (len(found), len(expected))
    matched = sum(
        max((iou(rectangle(face), rectangle(other)) for other in found), default=0) > 0.7 for face in expected
    )
    assert matched >= 0.95 * len(expected), (matched, len(expected))
