"""POST /v1/detect through the real gateway and the real Triton."""

import io
import os

import numpy as np
import pytest
import requests
from PIL import Image, TiffImagePlugin

from evaluation.images import ASTRONAUT, ASTRONAUT_FACE, CROWD, encoded, photo, png_declaring
from gateway.config import Settings
from gateway.params import MIN_CANDIDATE_CONFIDENCE
from local_triton.cpu import choose, cpu_flags
from tests.support import detect, error_of, iou, rectangle


def test_known_photo_gives_the_expected_face(stack):
    response = detect(stack, photo(ASTRONAUT).read_bytes())
    assert response.status_code == 200
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert body["image"] == {"width": 512, "height": 512}
    [face] = body["faces"]
    assert face["confidence"] > 99
    assert iou(rectangle(face), ASTRONAUT_FACE) > 0.8
    left_eye, right_eye = face["landmarks"]["left_eye"], face["landmarks"]["right_eye"]
    assert left_eye[0] < right_eye[0]
    x, y, w, h = rectangle(face)
    for point in face["landmarks"].values():
        assert x <= point[0] <= x + w and y <= point[1] <= y + h


def test_crowd_faces_are_sorted_integers_inside_the_image(stack):
    body = detect(stack, photo(CROWD).read_bytes()).json()
    width, height = body["image"]["width"], body["image"]["height"]
    confidences = [face["confidence"] for face in body["faces"]]
    assert len(confidences) >= 10
    assert confidences == sorted(confidences, reverse=True)
    assert all(50 <= c <= 100 and round(c, 3) == c for c in confidences)
    for face in body["faces"]:
        x, y, w, h = rectangle(face)
        assert all(isinstance(v, int) for v in (x, y, w, h))
        assert x >= 0 and y >= 0 and x + w <= width and y + h <= height and w > 0 and h > 0
        for px, py in face["landmarks"].values():
            assert 0 <= px < width and 0 <= py < height


def test_parameters_change_the_answer(stack):
    data = photo(CROWD).read_bytes()
    everything = detect(stack, data, {"min_confidence": "2", "max_faces": "1000"}).json()["faces"]
    default = detect(stack, data).json()["faces"]
    assert len(everything) > len(default)
    assert len(detect(stack, data, {"max_faces": "3"}).json()["faces"]) == 3
    median_side = sorted(min(rectangle(f)[2:]) for f in default)[len(default) // 2]
    large = detect(stack, data, {"min_face_size": str(median_side)}).json()["faces"]
    assert 0 < len(large) < len(default)
    assert all(min(rectangle(f)[2:]) >= median_side - 1 for f in large)
    form = requests.post(f"{stack.gateway}/v1/detect", files={"image": data}, data={"landmarks": "false"}, timeout=30)
    bare = form.json()["faces"]
    assert bare and all("landmarks" not in face for face in bare)


def test_a_min_confidence_under_the_candidate_floor_finds_what_the_floor_finds(stack):
    """Candidates under MIN_CANDIDATE_CONFIDENCE (0.5 %) are never kept: min_confidence=0 on a crowd
    at detail=high kept 13,550 of them (8 s of suppression). Under it, every value answers what 0.5
    answers; 0.5 still finds more than the evaluations' lowest threshold, 2."""
    data = photo(CROWD).read_bytes()

    def faces(min_confidence: str) -> list[dict]:
        params = {"min_confidence": min_confidence, "max_faces": "1000", "detail": "high", "landmarks": "false"}
        return detect(stack, data, params).json()["faces"]

    floor = faces(str(MIN_CANDIDATE_CONFIDENCE))
    assert faces("0") == faces("0.1") == floor
    assert len(floor) > len(faces("2"))


@pytest.mark.parametrize("fmt", ["PNG", "WEBP", "BMP"])
def test_other_formats_and_raw_bodies_find_the_same_face(stack, fmt):
    image = Image.open(photo(ASTRONAUT))
    data = encoded(image, fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    response = requests.post(
        f"{stack.gateway}/v1/detect", data=data, headers={"Content-Type": f"image/{fmt.lower()}"}, timeout=30
    )
    [face] = response.json()["faces"]
    assert iou(rectangle(face), ASTRONAUT_FACE) > 0.8


def test_exif_orientation_is_respected(stack):
    image = Image.open(photo(ASTRONAUT))
    stored = image.transpose(Image.Transpose.ROTATE_90)  # stored sideways, viewed upright
    exif = stored.getexif()
    exif[0x0112] = 6
    body = detect(stack, encoded(stored, "JPEG", exif=exif, quality=95)).json()
    [face] = body["faces"]
    assert iou(rectangle(face), ASTRONAUT_FACE) > 0.8


def test_missing_image(stack):
    url = f"{stack.gateway}/v1/detect"
    error_of(requests.post(url, timeout=10), 400, "missing_image")
    error_of(requests.post(url, files={"other": ("x.jpg", b"abc")}, timeout=10), 400, "missing_image")
    error_of(requests.post(url, data=b"", headers={"Content-Type": "image/jpeg"}, timeout=10), 400, "missing_image")


@pytest.mark.parametrize("data", [b"this is not an image", b"\xff\xd8\xff\xe0" + b"\x00" * 64, b"GIF89a"])
def test_undecodable_bytes(stack, data):
    error_of(detect(stack, data), 415, "unsupported_image")


def test_a_camera_raw_is_refused_not_answered_from_its_preview(stack):
    """A DNG whose first image is its 256-pixel preview (as Apple's ProRAW): Pillow reads that
    preview, and its seven faces were answered (hidden in a 256x212 JPEG) as if it were the photo."""
    directory = TiffImagePlugin.ImageFileDirectory_v2()
    directory[254], directory.tagtype[254] = 1, 4  # NewSubFileType: a reduced-resolution image
    directory[50706], directory.tagtype[50706] = b"\x01\x04\x00\x00", 1  # DNGVersion 1.4
    preview = Image.open(photo("demo/widertest_20_Family_Group_Family_Group_20_217.jpg")).resize((256, 212))
    buffer = io.BytesIO()
    preview.save(buffer, "TIFF", tiffinfo=directory)
    dng = {"Content-Type": "image/x-adobe-dng"}
    for path in ("/v1/detect", "/v1/anonymize"):
        answer = requests.post(f"{stack.gateway}{path}", data=buffer.getvalue(), headers=dng, timeout=30)
        assert "camera RAW" in error_of(answer, 415, "unsupported_image")["message"]


@pytest.mark.parametrize(
    "params,name",
    [
        ({"min_confidence": "abc"}, "min_confidence"),
        ({"min_confidence": "150"}, "min_confidence"),
        ({"max_faces": "0"}, "max_faces"),
        ({"max_faces": "1001"}, "max_faces"),
        ({"min_face_size": "-1"}, "min_face_size"),
        ({"landmarks": "perhaps"}, "landmarks"),
        ({"min_confidnce": "3"}, "min_confidnce"),
        ([("max_faces", "3"), ("max_faces", "4")], "max_faces"),
    ],
)
def test_bad_parameters_are_named(stack, params, name):
    error = error_of(detect(stack, photo(ASTRONAUT).read_bytes(), params), 400, "invalid_parameter")
    assert error["parameter"] == name and name in error["message"]


def test_repeated_image_field(stack):
    data = photo(ASTRONAUT).read_bytes()
    files = [("image", ("a.jpg", data)), ("image", ("b.jpg", data))]
    response = requests.post(f"{stack.gateway}/v1/detect", files=files, timeout=10)
    assert error_of(response, 400, "invalid_parameter")["parameter"] == "image"


def test_body_over_the_size_limit(stack):
    error_of(detect(stack, b"\xff" * (21 * 1024 * 1024)), 413, "payload_too_large")


def test_a_chunked_body_is_read_whole_up_to_the_limit_and_refused_past_it(stack):
    """A raw body sent chunked (no Content-Length: `curl -T -`, a stream piped in) over the limit was
    cut at it by Werkzeug without a word and decoded: 415 "corrupt or truncated" for a large photo,
    200 for one whose last bytes were padding. At the limit exactly it is taken, one byte over it is
    413, and under it the faces are those of the photo sent with its length."""
    limit = Settings().max_upload_bytes
    data = photo(CROWD).read_bytes()

    def chunked(body: bytes):
        yield from (body[start : start + (1 << 20)] for start in range(0, len(body), 1 << 20))

    def post(body: bytes, sent_in_chunks: bool = True) -> requests.Response:
        url, headers = f"{stack.gateway}/v1/detect", {"Content-Type": "image/jpeg"}
        return requests.post(url, data=chunked(body) if sent_in_chunks else body, headers=headers, timeout=60)

    assert post(data).json() == post(data, sent_in_chunks=False).json()
    padded = data + b"\0" * (limit - len(data))  # JPEG decoders stop at its end marker
    assert post(padded).status_code == 200
    error_of(post(padded + b"\0"), 413, "payload_too_large")


def test_decompression_bomb_is_refused_before_decoding(stack):
    error_of(detect(stack, png_declaring(60_000, 60_000)), 413, "image_too_large")


def test_unknown_routes_and_methods_answer_json(stack):
    assert requests.get(f"{stack.gateway}/nope", timeout=10).json()["error"]["code"] == "not_found"
    response = requests.get(f"{stack.gateway}/v1/detect", timeout=10)
    assert response.status_code == 405 and response.json()["error"]["code"] == "method_not_allowed"


def test_health_and_readiness_which_says_what_each_model_runs(stack):
    """/readyz names each served model's precision and runtime as this CPU's rule chose them
    (local_triton/cpu.py: int8 or bf16 on OpenVINO where the CPU has VNNI or BF16, else fp32 on
    onnxruntime), the ensemble its steps."""
    assert requests.get(f"{stack.gateway}/healthz", timeout=5).json() == {"status": "ok"}
    ready = requests.get(f"{stack.gateway}/readyz", timeout=5)
    assert ready.status_code == 200
    chosen = {
        m: choose(m, cpu_flags(), os.environ.get("FACECROP_PRECISION", ""))
        for m in ("retinaface_uint8", "yunet_n_uint8")
    }
    expected = {model: f"{choice.precision} ({choice.runtime})" for model, choice in chosen.items()}
    assert ready.json() == {
        "status": "ready",
        "models": {**expected, "faces_uint8": "ensemble of retinaface_uint8, yunet_n_uint8"},
    }


def test_grayscale_and_tiny_images_are_answered(stack):
    gray = Image.fromarray(np.asarray(Image.open(photo(ASTRONAUT)).convert("L")))
    [face] = detect(stack, encoded(gray, "PNG")).json()["faces"]
    assert iou(rectangle(face), ASTRONAUT_FACE) > 0.7
    response = detect(stack, encoded(Image.new("RGB", (1, 1)), "PNG"))
    assert response.status_code == 200 and response.json() == {"image": {"width": 1, "height": 1}, "faces": []}
    strip = detect(stack, encoded(Image.new("RGB", (12000, 10)), "PNG"))  # the longest side allowed
    assert strip.status_code == 200 and strip.json()["image"] == {"width": 12000, "height": 10}
    error_of(detect(stack, encoded(Image.new("RGB", (12001, 10)), "PNG")), 413, "image_too_large")
