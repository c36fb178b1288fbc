"""Hostile and odd uploads and parameters: always the documented 4xx or a correct 200, never a 5xx."""

import io
import struct

import cv2
import numpy as np
import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from evaluation.corpus import png_chunk, png_chunks
from evaluation.images import astronaut, encoded, png_declaring
from gateway.params import CROP_PARAMETERS, DETECT_PARAMETERS
from tests.support import MAGIC, clean_images

ASTRONAUT = astronaut()


def jpeg_declaring(width: int, height: int) -> bytes:
    """A tiny baseline JPEG whose SOF0 header declares width x height."""
    data = bytearray(encoded(Image.new("RGB", (8, 8)), "JPEG"))
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    return bytes(data)


def animated(fmt: str) -> bytes:
    frames = [ASTRONAUT, ASTRONAUT.transpose(Image.Transpose.ROTATE_180)]
    buffer = io.BytesIO()
    frames[0].save(buffer, fmt, save_all=True, append_images=frames[1:], duration=100, loop=0)
    return buffer.getvalue()


def apng_with_repeated_controls() -> bytes:
    """A malformed APNG: acTL and fcTL again before its second IDAT chunk (16-bit noise makes
    several). OpenCV's APNG reader crashed the worker on it (a segmentation fault, no answer)."""
    noise = np.random.default_rng(0).integers(0, 65536, (40, 50, 3), dtype=np.uint16)
    png = cv2.imencode(".png", noise)[1].tobytes()

    def control(sequence: int) -> bytes:
        return png_chunk(b"fcTL", struct.pack(">IIIIIHHBB", sequence, 50, 40, 0, 0, 1, 10, 0, 0))

    chunks = png_chunks(png)
    data = [body for kind, body in chunks if kind == b"IDAT"]
    frame = b"".join(png_chunk(b"fdAT", struct.pack(">I", 2 + i) + body) for i, body in enumerate(data))
    out = png[:8]
    for kind, body in chunks:
        if kind == b"IDAT":
            out += png_chunk(b"acTL", struct.pack(">II", 2, 0)) + control(0) + png_chunk(kind, body)
        elif kind == b"IEND":
            out += control(1) + frame + png_chunk(kind, body)
        else:
            out += png_chunk(kind, body)
    return out


def corrupted(data: bytes) -> bytes:
    middle = len(data) // 2
    return data[:middle] + bytes(b ^ 0x5A for b in data[middle : middle + 256]) + data[middle + 256 :]


CLEAN = clean_images()

CORPUS = {
    # name: (bytes, content type, expected status)
    **{f"truncated-half-{n}": (d[: len(d) // 2], "image/" + n, {200, 415}) for n, d in CLEAN.items()},
    **{f"truncated-header-{n}": (d[:12], "image/" + n, {415}) for n, d in CLEAN.items()},
    **{f"corrupted-{n}": (corrupted(d), "image/" + n, {200, 415}) for n, d in CLEAN.items()},
    "zero-bytes": (b"", "image/jpeg", {400}),
    "png-sent-as-jpeg": (CLEAN["png"], "image/jpeg", {200}),
    "text-sent-as-png": (b"hello, this is not a picture", "image/png", {415}),
    "html-sent-as-jpeg": (b"<html><script>alert(1)</script></html>", "image/jpeg", {415}),
    "cmyk-jpeg": (encoded(ASTRONAUT.convert("CMYK"), "JPEG"), "image/jpeg", {200}),
    "16-bit-png": (encoded(ASTRONAUT.convert("L").convert("I;16"), "PNG"), "image/png", {200}),
    "palette-png": (encoded(ASTRONAUT.convert("P"), "PNG"), "image/png", {200}),
    "grayscale-jpeg": (encoded(ASTRONAUT.convert("L"), "JPEG"), "image/jpeg", {200}),
    "rgba-png": (encoded(ASTRONAUT.convert("RGBA"), "PNG"), "image/png", {200}),
    "la-png": (encoded(ASTRONAUT.convert("LA"), "PNG"), "image/png", {200}),
    "animated-gif": (animated("GIF"), "image/gif", {200}),
    "animated-webp": (animated("WEBP"), "image/webp", {200}),
    "one-pixel": (encoded(Image.new("RGB", (1, 1), (255, 0, 0)), "PNG"), "image/png", {200}),
    "strip-12000x10": (encoded(Image.new("RGB", (12000, 10)), "PNG"), "image/png", {200}),
    "strip-20000x10": (encoded(Image.new("RGB", (20000, 10)), "PNG"), "image/png", {413}),
    "bomb-png": (png_declaring(65_000, 65_000), "image/png", {413}),
    "apng-repeated-controls": (apng_with_repeated_controls(), "image/png", {200, 415}),
    "bomb-jpeg": (jpeg_declaring(65_000, 65_000), "image/jpeg", {413}),
}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus(stack, name):
    data, content_type, expected = CORPUS[name]
    for path in ("/v1/detect", "/v1/crop"):
        response = requests.post(
            f"{stack.gateway}{path}", data=data, headers={"Content-Type": content_type}, timeout=30
        )
        assert response.status_code in expected, (path, response.status_code, response.text[:200])
        if response.status_code >= 400:
            assert response.json()["error"]["code"]


def test_animated_images_use_the_first_frame(stack):
    for fmt in ("GIF", "WEBP"):
        response = requests.post(
            f"{stack.gateway}/v1/detect", data=animated(fmt), headers={"Content-Type": "image/x"}, timeout=30
        )
        [face] = response.json()["faces"]
        assert face["face_rectangle"]["y"] < 100  # upright, as in the first frame (the second is upside down)


@pytest.mark.parametrize(
    "files,data",
    [
        ({}, {"min_confidence": "50"}),
        ({"picture": ("a.jpg", CLEAN["jpeg"])}, {}),
        ([("image", ("a.jpg", CLEAN["jpeg"])), ("image", ("b.jpg", CLEAN["jpeg"]))], {}),
        ({"image": ("a.jpg", CLEAN["jpeg"])}, [("max_faces", "3"), ("max_faces", "4")]),
        ({"image": ("a.jpg", b"")}, {}),
    ],
)
def test_odd_multipart_bodies(stack, files, data):
    response = requests.post(f"{stack.gateway}/v1/detect", files=files, data=data, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"]["code"] in {"missing_image", "invalid_parameter"}


PARAMETERS = sorted(DETECT_PARAMETERS | CROP_PARAMETERS)
NASTY_VALUES = st.one_of(
    st.sampled_from(
        [
            "nan",
            "NaN",
            "inf",
            "-Infinity",
            "1e309",
            "-1",
            "0",
            "",
            " ",
            "1" * 400,
            "0x10",
            "٣",
            "½",
            "\u202e1",
            "0.5x0.5x0.5",
        ]
    ),
    st.text(max_size=20),
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=st.dictionaries(st.sampled_from(PARAMETERS), NASTY_VALUES, max_size=4))
def test_fuzzed_parameters(stack, params):
    response = requests.post(
        f"{stack.gateway}/v1/crop",
        params=params,
        data=CLEAN["jpeg"],
        headers={"Content-Type": "image/jpeg"},
        timeout=30,
    )
    assert response.status_code in {200, 400}, (params, response.text[:200])
    if response.status_code == 400:
        assert response.json()["error"]["code"] in {"invalid_parameter", "output_too_large"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    prefix=st.sampled_from(MAGIC),
    body=st.binary(max_size=2048),
    content_type=st.sampled_from(["image/jpeg", "image/png", "application/octet-stream", "image/anything"]),
)
def test_fuzzed_bytes(stack, prefix, body, content_type):
    response = requests.post(
        f"{stack.gateway}/v1/detect", data=prefix + body, headers={"Content-Type": content_type}, timeout=30
    )
    assert response.status_code in {200, 400, 413, 415}, response.text[:200]
    assert response.headers["Content-Type"] == "application/json"
