"""Crowd photos: `max_faces` limits only the faces listed, crops frame every face, and
`detail=high` finds the small faces (real Triton, real gateway, shared photos)."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests
from PIL import Image

from evaluation.images import astronaut, labeled_set, photo, photos_in
from evaluation.service import model_statistics
from tests.support import needing_shared_data, rectangle

CROWDS = needing_shared_data(lambda: photos_in("demo", "wider_val_native/images"))


def post(stack, endpoint: str, path: Path, params: dict) -> dict:
    with open(path, "rb") as image:
        response = requests.post(f"{stack.gateway}/v1/{endpoint}", params=params, files={"image": image}, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


def answers(face: dict) -> tuple:
    return face["confidence"], rectangle(face)


def check_limits_and_framing(stack, path: Path) -> int:
    """Defaults and max_faces=5 list a prefix of the full answer; the crop frames every face."""
    everything = post(stack, "detect", path, {"max_faces": "1000"})["faces"]
    default = post(stack, "detect", path, {})["faces"]
    five = post(stack, "detect", path, {"max_faces": "5"})["faces"]
    assert [answers(f) for f in default] == [answers(f) for f in everything[:100]], path.name
    assert [answers(f) for f in five] == [answers(f) for f in everything[:5]], path.name
    body = post(
        stack, "crop", path, {"width": "300", "height": "200", "zoom": "0.5", "max_faces": "5", "format": "json"}
    )
    c = body["crop"]
    assert len(body["faces"]) == min(5, len(everything))
    rectangles = [rectangle(f) for f in everything]
    if rectangles:
        left, top = min(r[0] for r in rectangles), min(r[1] for r in rectangles)
        right, bottom = max(r[0] + r[2] for r in rectangles), max(r[1] + r[3] for r in rectangles)
        fits = right - left <= c["width"] and bottom - top <= c["height"]
        if fits:  # the 3:2 region can hold the box around all faces: it must
            assert (
                c["x"] <= left and c["y"] <= top and right <= c["x"] + c["width"] and bottom <= c["y"] + c["height"]
            ), path.name
    return len(everything)


def test_max_faces_lists_a_prefix_and_crops_frame_every_face(stack):
    with ThreadPoolExecutor(3) as pool:
        counts = dict(zip((p.name for p in CROWDS), pool.map(lambda p: check_limits_and_framing(stack, p), CROWDS)))
    # The defect this guards against kept 21 of 27 faces here at the defaults.
    assert counts["biubug6_Pytorch_Retinaface_test.jpg"] >= 25
    assert max(counts.values()) > 100, "some crowd photo should have more faces than the default max_faces"


def test_largest_face_is_chosen_among_all_faces(stack):
    path = photo("demo/widertest_2_Demonstration_Protesters_2_750.jpg")
    everything = post(stack, "detect", path, {"max_faces": "1000", "min_confidence": "30"})["faces"]
    largest = max(everything, key=lambda f: f["face_rectangle"]["width"] * f["face_rectangle"]["height"])
    body = post(
        stack,
        "crop",
        path,
        {"faces": "largest", "zoom": "1", "max_faces": "1", "min_confidence": "30", "format": "json"},
    )
    x, y, w, h = rectangle(largest)
    c = body["crop"]
    assert c["x"] <= x and c["y"] <= y and x + w <= c["x"] + c["width"] and y + h <= c["y"] + c["height"]
    assert abs(c["width"] - w) <= 1 and abs(c["height"] - h) <= 1


def test_detail_high_tiles_run_as_one_batch(stack, tmp_path):
    """A square photo at detail=high: the standard pass plus 3x3 tiles, in 2 executions."""
    path = tmp_path / "square.jpg"
    Image.open(photo("wider_val_native/images/0_Parade_marchingband_1_410.jpg")).resize((1024, 1024)).save(
        path, quality=95
    )
    before = model_statistics(stack)
    high = post(stack, "detect", path, {"detail": "high", "max_faces": "1000"})["faces"]
    after = model_statistics(stack)
    standard = post(stack, "detect", path, {"max_faces": "1000"})["faces"]
    assert int(after["inference_count"]) - int(before["inference_count"]) == 10
    assert int(after["execution_count"]) - int(before["execution_count"]) == 2
    assert len(high) > len(standard)


def test_detail_high_on_a_small_photo_is_the_standard_answer(stack):
    images, truths = labeled_set("wider_val_416sq")
    path = images / truths[0]["image"]
    assert post(stack, "detect", path, {"detail": "high"}) == post(stack, "detect", path, {})


def detect_with_passes(stack, data: bytes, detail: str) -> tuple[str, dict]:
    response = requests.post(
        f"{stack.gateway}/v1/detect",
        params={"detail": detail, "max_faces": "1000"},
        data=data,
        headers={"Content-Type": "image/jpeg"},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    return response.headers["X-Passes"], response.json()


def test_detail_auto_tiles_a_crowd_with_the_answer_of_high(stack):
    """A crowd of small faces: auto runs the tiled pass, and answers exactly as detail=high."""
    data = (photo("wider_val_native/images/0_Parade_marchingband_1_410.jpg")).read_bytes()
    auto_passes, auto = detect_with_passes(stack, data, "auto")
    high_passes, high = detect_with_passes(stack, data, "high")
    standard_passes, standard = detect_with_passes(stack, data, "standard")
    assert auto_passes == high_passes == "standard, tiled" and standard_passes == "standard"
    assert auto == high and len(high["faces"]) > len(standard["faces"])


def test_detail_auto_leaves_a_portrait_to_the_standard_pass(stack):
    """Large faces only, in a photo the tiled pass would see larger: auto is the standard answer."""
    buffer = io.BytesIO()
    astronaut().resize((3024, 3024), Image.Resampling.BICUBIC).save(buffer, "JPEG", quality=90)  # tiled pass: 2x
    data = buffer.getvalue()
    auto_passes, auto = detect_with_passes(stack, data, "auto")
    high_passes, _ = detect_with_passes(stack, data, "high")
    assert auto_passes == "standard" and high_passes == "standard, tiled"
    assert auto == detect_with_passes(stack, data, "standard")[1] and len(auto["faces"]) == 1
