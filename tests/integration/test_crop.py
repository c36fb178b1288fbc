"""POST /v1/crop through the real gateway and the real Triton."""

import io

import numpy as np
import pytest
import requests
from PIL import Image, ImageSequence

from evaluation.images import ASTRONAUT, CROWD, astronauts_moved, encoded, labeled_set, moving_face_frames, photo
from tests.support import holds_every_face, rectangle


def crop(stack, data: bytes, params=None):
    return requests.post(f"{stack.gateway}/v1/crop", files={"image": ("photo", data)}, params=params, timeout=30)


def crop_rect(response) -> tuple[int, int, int, int]:
    return tuple(int(v) for v in response.headers["X-Crop-Rect"].split(","))


@pytest.mark.parametrize(
    "fmt,content_type,pil_format",
    [("jpeg", "image/jpeg", "JPEG"), ("png", "image/png", "PNG"), ("webp", "image/webp", "WEBP")],
)
def test_each_format_has_the_exact_size_and_content_type(stack, fmt, content_type, pil_format):
    response = crop(stack, photo(CROWD).read_bytes(), {"width": 300, "height": 200, "format": fmt, "quality": 70})
    assert response.status_code == 200
    assert response.headers["Content-Type"] == content_type
    output = Image.open(io.BytesIO(response.content))
    assert output.format == pil_format and output.size == (300, 200)
    assert int(response.headers["X-Face-Count"]) >= 10


def test_default_format_follows_the_input(stack):
    image = Image.open(photo(ASTRONAUT))
    assert crop(stack, encoded(image, "PNG"), {"width": 64}).headers["Content-Type"] == "image/png"
    assert crop(stack, encoded(image, "BMP"), {"width": 64}).headers["Content-Type"] == "image/jpeg"
    assert crop(stack, photo(ASTRONAUT).read_bytes(), {"width": 64}).headers["Content-Type"] == "image/jpeg"
    assert crop(stack, encoded(image, "GIF"), {"width": 64}).headers["Content-Type"] == "image/jpeg"  # a still GIF
    assert crop(stack, encoded(image, "GIF"), {"width": 64, "format": "gif"}).headers["Content-Type"] == "image/gif"


def test_an_uploaded_animation_is_cropped_frame_by_frame_around_its_moving_face(stack):
    """A GIF whose face moves: an animated GIF of as many frames, one window holding the face of
    each of the four frames spread over it, each frame Pillow's crop of the source's frame at that
    window (resized); format=png answers the first frame alone."""
    frames, faces = moving_face_frames()
    data = encoded(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    with Image.open(io.BytesIO(data)) as image:
        source = [frame.convert("RGB") for frame in ImageSequence.Iterator(image)]
    response = crop(stack, data, {"width": 160, "height": 160})
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "image/gif" and response.headers["X-Frames"] == str(len(frames))
    x, y, w, h = crop_rect(response)
    for fx, fy, fw, fh in (faces[0], faces[2], faces[3], faces[5]):  # the frames sampled (steps.SAMPLED_FRAMES)
        assert x <= fx and y <= fy and fx + fw <= x + w and fy + fh <= y + h, ((x, y, w, h), (fx, fy, fw, fh))
    with Image.open(io.BytesIO(response.content)) as image:
        got = [np.asarray(frame.convert("RGB"), dtype=int) for frame in ImageSequence.Iterator(image)]
    assert len(got) == len(frames)
    for index, (before, after) in enumerate(zip(source, got, strict=True)):
        expected = np.asarray(before.crop((x, y, x + w, y + h)).resize((160, 160), Image.Resampling.BOX), dtype=int)
        assert after.shape == expected.shape and np.abs(after - expected).mean() < 8, index
    still = crop(stack, data, {"width": 160, "height": 160, "format": "png"})
    assert still.headers["Content-Type"] == "image/png" and "X-Frames" not in still.headers


def test_json_describes_the_crop_and_the_faces(stack):
    data = photo(CROWD).read_bytes()
    body = crop(stack, data, {"width": 256, "height": 256, "format": "json"}).json()
    detected = requests.post(f"{stack.gateway}/v1/detect", files={"image": data}, timeout=30).json()
    assert body["image"] == detected["image"] and body["faces"] == detected["faces"]
    assert body["output"] == {"width": 256, "height": 256}
    assert body["crop"]["width"] == body["crop"]["height"]


@pytest.mark.parametrize(
    "params", [{"zoom": "0.5"}, {"zoom": "0.9", "width": "400"}, {"width": "1024", "height": "683", "zoom": "0.3"}]
)
def test_region_contains_every_face_when_the_aspect_allows(stack, params):
    response = crop(stack, photo(CROWD).read_bytes(), {**params, "format": "json"})
    body = response.json()
    c = body["crop"]
    assert crop_rect(response) == (c["x"], c["y"], c["width"], c["height"])
    for face in body["faces"]:
        x, y, w, h = rectangle(face)
        assert c["x"] <= x and c["y"] <= y and x + w <= c["x"] + c["width"] and y + h <= c["y"] + c["height"]


def test_largest_face_and_zoom_frame_one_face_tightly(stack):
    body = crop(stack, photo(CROWD).read_bytes(), {"faces": "largest", "zoom": "1", "format": "json"}).json()
    largest = max(body["faces"], key=lambda f: f["face_rectangle"]["width"] * f["face_rectangle"]["height"])
    r, c = largest["face_rectangle"], body["crop"]
    assert abs(c["width"] - r["width"]) <= 1 and abs(c["height"] - r["height"]) <= 1


def test_a_photo_without_faces_is_cropped_at_the_centre(stack):
    gradient = np.tile(np.linspace(0, 255, 900, dtype=np.uint8), (500, 1))
    response = crop(stack, encoded(Image.fromarray(gradient).convert("RGB"), "JPEG"), {"width": 100, "height": 100})
    assert response.status_code == 200
    assert response.headers["X-Face-Count"] == "0"
    assert crop_rect(response) == (200, 0, 500, 500)
    assert Image.open(io.BytesIO(response.content)).size == (100, 100)


def test_exif_rotated_portrait_comes_back_upright(stack):
    upright = Image.open(photo(ASTRONAUT)).crop((0, 0, 384, 512))  # a portrait
    stored = upright.transpose(Image.Transpose.ROTATE_90)
    exif = stored.getexif()
    exif[0x0112] = 6
    rotated = crop(stack, encoded(stored, "JPEG", exif=exif, quality=95), {"width": 128, "height": 128})
    reference = crop(stack, encoded(upright, "JPEG", quality=95), {"width": 128, "height": 128})
    assert np.allclose(crop_rect(rotated), crop_rect(reference), atol=2)  # JPEG noise moves the face a pixel
    output = Image.open(io.BytesIO(rotated.content))
    assert output.size == (128, 128)
    assert output.getexif().get(0x0112) is None
    difference = np.abs(
        np.asarray(output, dtype=int) - np.asarray(Image.open(io.BytesIO(reference.content)), dtype=int)
    )
    assert difference.mean() < 6


def listed_boxes(body: dict) -> np.ndarray:
    rects = [rectangle(face) for face in body["faces"]]
    return np.array([[x, y, x + w, y + h] for x, y, w, h in rects], dtype=float).reshape(-1, 4)


def centred_window(boxes: np.ndarray, image: tuple[int, int], output: tuple[int, int]) -> tuple[int, int, int, int]:
    """Cloudflare's rule at zoom 0, written out independently: the largest window of the output's
    aspect ratio, centred on the box around the faces, shifted inside the image."""
    aspect = output[0] / output[1]
    width, height = (image[1] * aspect, image[1]) if image[0] / image[1] > aspect else (image[0], image[0] / aspect)
    width, height = min(round(width), image[0]), min(round(height), image[1])
    centre = (boxes[:, :2].min(0) + boxes[:, 2:].max(0)) / 2
    x = min(max(round(centre[0] - width / 2), 0), image[0] - width)
    y = min(max(round(centre[1] - height / 2), 0), image[1] - height)
    return x, y, width, height


def holds(window: tuple[int, int, int, int], boxes: np.ndarray, slack: float = 0) -> np.ndarray:
    x, y, w, h = window
    return (
        (boxes[:, 0] >= x + slack)
        & (boxes[:, 1] >= y + slack)
        & (boxes[:, 2] <= x + w - slack)
        & (boxes[:, 3] <= y + h - slack)
    )


@pytest.mark.parametrize("output", [(256, 256), (1200, 400), (400, 1200)])
def test_over_the_shared_sets_crops_that_held_every_face_still_do_and_the_others_keep_more(stack, output):
    kept = 0
    whole_faces, largest_whole = np.zeros(2, int), np.zeros(2, int)  # (centred, the service's), where they differ
    for name in ("wider_val_native", "wider_val_416sq", "facemask", "dlib_voc_faces"):
        images, truths = labeled_set(name)
        for truth in truths[::4]:
            params = {"width": output[0], "height": output[1], "zoom": 0, "max_faces": 1000, "format": "json"}
            body = crop(stack, (images / truth["image"]).read_bytes(), params).json()
            boxes = listed_boxes(body)
            if not len(boxes):
                continue
            image = (body["image"]["width"], body["image"]["height"])
            c = body["crop"]
            window, centred = (c["x"], c["y"], c["width"], c["height"]), centred_window(boxes, image, output)
            assert window[2:] == centred[2:]
            if holds(centred, boxes, slack=1).all():  # clear of rounding: the listed faces are whole pixels
                assert abs(window[0] - centred[0]) <= 1 and abs(window[1] - centred[1]) <= 1, (window, centred)
                kept += 1
            elif window != centred:
                largest = boxes[[int(np.argmax(np.prod(boxes[:, 2:] - boxes[:, :2], axis=1)))]]
                whole_faces += [holds(centred, boxes).sum(), holds(window, boxes, slack=-1).sum()]
                largest_whole += [holds(centred, largest).all(), holds(window, largest, slack=-1).all()]
    assert kept >= 5, kept
    assert whole_faces[1] > whole_faces[0] and largest_whole[1] >= largest_whole[0], (whole_faces, largest_whole)


def test_a_portrait_of_a_wide_group_holds_whole_faces_not_halves(stack):
    params = {"width": 400, "height": 1200, "zoom": 0, "format": "json"}
    body = crop(stack, photo(CROWD).read_bytes(), params).json()
    boxes = listed_boxes(body)
    image = (body["image"]["width"], body["image"]["height"])
    c = body["crop"]
    window, centred = (c["x"], c["y"], c["width"], c["height"]), centred_window(boxes, image, (400, 1200))
    overlapping = (boxes[:, 0] < window[0] + window[2]) & (boxes[:, 2] > window[0])
    assert holds(window, boxes).sum() > holds(centred, boxes).sum()  # centring: 3 whole, 4 cut at the edges
    assert not (overlapping & ~holds(window, boxes)).any()


@pytest.mark.parametrize(
    "params,name",
    [
        ({"width": "0"}, "width"),
        ({"height": "5000"}, "height"),
        ({"zoom": "2"}, "zoom"),
        ({"gravity": "up"}, "gravity"),
        ({"faces": "two"}, "faces"),
        ({"fit": "fill"}, "fit"),
        ({"format": "tiff"}, "format"),
        ({"quality": "0"}, "quality"),
        ({"min_confidence": "-1"}, "min_confidence"),
    ],
)
def test_bad_crop_parameters(stack, params, name):
    response = crop(stack, photo(ASTRONAUT).read_bytes(), params)
    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": "invalid_parameter",
        "parameter": name,
        "message": response.json()["error"]["message"],
    }


def test_detect_errors_apply_to_crop(stack):
    assert requests.post(f"{stack.gateway}/v1/crop", timeout=10).json()["error"]["code"] == "missing_image"
    assert crop(stack, b"not an image").status_code == 415


ZOOM_ONE_SHAPES = ((256, 256), (400, 300), (300, 400))


@pytest.mark.parametrize("name", sorted(astronauts_moved()))
def test_zoom_one_holds_the_whole_face_in_every_shape(stack, name):
    """zoom=1 asks for the face to fill the window: it holds all of the face /v1/detect finds, however
    the face's box rounds (issue #51: the window went just past it, showing the neck and suit)."""
    data = astronauts_moved()[name]
    faces = requests.post(f"{stack.gateway}/v1/detect", files={"image": data}, timeout=30).json()["faces"]
    assert len(faces) == 1, faces
    for width, height in ZOOM_ONE_SHAPES:
        response = crop(stack, data, {"width": width, "height": height, "zoom": "1"})
        assert response.status_code == 200, response.text
        holds_every_face(crop_rect(response), faces)
