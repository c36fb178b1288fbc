"""gateway/processing judged by pixels, in process: the stand-in model (tests/support.py's square
finder) takes every light square for a face, so an answer's hidden faces, its window, its headers
and its JSON must be where the squares are in the picture that Pillow trims, flips, turns and crops,
frame by frame for an animation. Neither a face model's judgement nor the code's own regions are
involved: hidden squares are filled black, rectangles of exactly the square (margin 1), so every
expected pixel is Pillow's."""

from __future__ import annotations

import io
from dataclasses import replace

import cv2
import numpy as np
import pytest
from PIL import Image, ImageSequence

from evaluation import sources
from evaluation.images import encoded
from facecrop_hiding import Hiding
from gateway.config import Settings
from gateway.detection.detectors import serve
from gateway.processing.answer import Answer, process
from gateway.processing.steps import SAMPLED_FRAMES
from gateway.request import ImageRequest, anonymize_request, crop_request, detect_request
from gateway.web.url.options import parse_url_options
from tests.support import NoFacesModel, square_finder, squares_picture

SIZE = (640, 480)
MARKS = [(60, 80, 40), (400, 300, 60), (250, 40, 30)]  # (x, y, side): white squares, "faces"
EXACT = Hiding("fill", margin=1.0, shape="rect")  # each face's box filled black, nothing more
QUADRANTS = [(90, 20, 40), (20, 90, 40), (40, 20, 90), (60, 60, 20)]  # RGB, none over 100 in every channel


@pytest.fixture
def finder():
    with square_finder() as served:
        yield served


def background(size: tuple[int, int]) -> np.ndarray:
    """Four quadrants of different colours: a flip or a turn shows in every pixel."""
    width, height = size
    pixels = np.empty((height, width, 3), np.uint8)
    half_w, half_h = width // 2, height // 2
    pixels[:half_h, :half_w], pixels[:half_h, half_w:] = QUADRANTS[0], QUADRANTS[1]
    pixels[half_h:, :half_w], pixels[half_h:, half_w:] = QUADRANTS[2], QUADRANTS[3]
    return pixels


def still(marks=MARKS, size=SIZE, level: int = 255) -> np.ndarray:
    return squares_picture(marks, size, background(size), level)


def hidden(pixels: np.ndarray, marks) -> np.ndarray:
    """`pixels` with each mark filled black: what hiding them exactly does."""
    return squares_picture(marks, (pixels.shape[1], pixels.shape[0]), pixels, level=0)


def geometry_of(options: str) -> dict[str, str]:
    return dict(item.split("=") for item in options.split(",") if item)


def pillow_turned(image: Image.Image, options: str) -> Image.Image:
    """Cloudflare's trim (top;right;bottom;left pixels), flip, then clockwise rotate, by Pillow."""
    geometry = geometry_of(options)
    if "trim" in geometry:
        top, right, bottom, left = (int(v) for v in geometry["trim"].split(";"))
        image = image.crop((left, top, image.width - right, image.height - bottom))
    flip = geometry.get("flip", "")
    if "h" in flip:
        image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    if "v" in flip:
        image = image.transpose(Image.Transpose.FLIP_TOP_BOTTOM)
    return image.rotate(-int(geometry.get("rotate", 0)), expand=True)


def url_request(options: str, fmt: str = "png", hiding: Hiding | None = EXACT) -> ImageRequest:
    """The URL form's request for `options` (empty ones left out), hiding faces by `hiding` where it does."""
    request = parse_url_options(",".join(filter(None, options.split(",")))).request(fmt, 85)
    return replace(request, hiding=hiding) if request.hiding is not None else request


def answer_of(finder, pixels: np.ndarray | bytes, request: ImageRequest) -> Answer:
    data = pixels if isinstance(pixels, bytes) else encoded(Image.fromarray(pixels), "PNG")
    return process(data, request, Settings(), finder[0])


def picture_of(answer: Answer) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(answer.body)).convert("RGB"))


def assert_hidden_as(got: np.ndarray, expected: Image.Image, rect: tuple[int, int, int, int] | None = None) -> None:
    """`got` is `expected` (cut to `rect`) but where a hidden (black) region's edge is a pixel off: a
    model's box on a picture it sees enlarged (6.4 times a 160-pixel animation) is within a pixel."""
    pixels = np.asarray(expected)
    black = (pixels == 0).all(axis=2).astype(np.uint8)
    edges = cv2.dilate(black, np.ones((3, 3), np.uint8)) != cv2.erode(black, np.ones((3, 3), np.uint8))
    x0, y0, x1, y1 = rect or (0, 0, expected.width, expected.height)
    expected, edges = pixels[y0:y1, x0:x1], edges[y0:y1, x0:x1]
    wrong = (got != expected).any(axis=2)
    assert got.shape == expected.shape and not (wrong & ~edges).any(), np.argwhere(wrong & ~edges)[:5]


def crop_rect(answer: Answer) -> tuple[int, int, int, int]:
    x, y, width, height = (int(v) for v in answer.headers["X-Crop-Rect"].split(","))
    return x, y, x + width, y + height


GEOMETRIES = [
    "",
    "flip=h",
    "flip=v",
    "flip=hv",
    "rotate=90",
    "rotate=180",
    "rotate=270,flip=h",
    "trim=20;30;40;50",
    "trim=10;0;60;90,rotate=90,flip=v",
]


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_each_hidden_face_lands_on_its_square_in_the_turned_picture(finder, geometry):
    expected = pillow_turned(Image.fromarray(hidden(still(), MARKS)), geometry)
    answer = answer_of(finder, still(), url_request(f"anonymize=fill,{geometry}"))
    assert answer.headers["X-Face-Count"] == str(len(MARKS))
    np.testing.assert_array_equal(picture_of(answer), np.asarray(expected))


@pytest.mark.parametrize("geometry", GEOMETRIES)
def test_each_hidden_face_lands_on_its_square_in_a_window_cut_from_it(finder, geometry):
    """A window half the turned picture's width, as high: cut, not resized, so every pixel is Pillow's."""
    expected = pillow_turned(Image.fromarray(hidden(still(), MARKS)), geometry)
    window = f"width={expected.width // 2},height={expected.height},fit=crop"
    answer = answer_of(finder, still(), url_request(f"anonymize=fill,{geometry},{window}"))
    rect = crop_rect(answer)
    assert (rect[2] - rect[0], rect[3] - rect[1]) == (expected.width // 2, expected.height)
    np.testing.assert_array_equal(picture_of(answer), np.asarray(expected.crop(rect)))


@pytest.mark.parametrize("geometry", ["", "rotate=90,flip=h"])
def test_hidden_faces_are_moved_into_a_resized_window(finder, geometry):
    """A window shrunk to a third: the hidden squares land where Pillow's shrunk picture has them."""
    full = pillow_turned(Image.fromarray(hidden(still(), MARKS)), geometry)
    width, height = full.width // 3, full.height * 2 // 3
    request = url_request(f"anonymize=fill,{geometry},width={width},height={height},fit=crop")
    answer = answer_of(finder, still(), request)
    expected = np.asarray(full.crop(crop_rect(answer)).resize((width, height), Image.Resampling.BOX), np.int16)
    got = picture_of(answer).astype(np.int16)
    assert got.shape == expected.shape and np.mean(np.abs(got - expected).max(axis=2) > 40) < 0.002
    assert not (got.min(axis=2) > 200).any()  # no white left: every square hidden


def test_only_the_faces_the_rule_hides_are_hidden_listed_and_counted(finder):
    """A dim square (score ~0.43) four times the size of the confident ones is no face anonymizing
    hides (facecrop_hiding's plausible size): left as it is, not counted, not listed, not framed."""
    dim = (80, 200, 160)
    pixels = squares_picture([dim], SIZE, still(), level=110)
    request = url_request("anonymize=fill,min-confidence=20")
    answer = answer_of(finder, pixels, request)
    np.testing.assert_array_equal(picture_of(answer), hidden(pixels, MARKS))
    assert answer.headers["X-Face-Count"] == str(len(MARKS))
    document = answer_of(finder, pixels, replace(request, output=replace(request.output, format="json"))).document
    assert document is not None and sorted(rectangles(document["faces"])) == sorted(MARKS)
    # without hiding, the dim square is a face like the others
    found = answer_of(finder, pixels, detect_request({"min_confidence": "20"}))
    assert found.headers["X-Face-Count"] == "4" and found.document is not None
    assert matched(rectangles(found.document["faces"]), [*MARKS, dim], within=2)


def matched(found: list[tuple[int, int, int]], marks: list[tuple[int, int, int]], within: int) -> bool:
    """Whether each found square is one of `marks`, `within` pixels, one to one."""
    left = list(marks)
    for square in found:
        near = [mark for mark in left if np.abs(np.subtract(square, mark)).max() <= within]
        if not near:
            return False
        left.remove(near[0])
    return not left


def rectangles(faces: list[dict]) -> list[tuple[int, int, int]]:
    """(x, y, side) of each listed face (the squares': width == height)."""
    shown = [face["face_rectangle"] for face in faces]
    assert all(r["width"] == r["height"] for r in shown), shown
    return [(r["x"], r["y"], r["width"]) for r in shown]


def grid(count: int, side: int = 20, size=SIZE) -> list[tuple[int, int, int]]:
    step = side * 2
    per_row = (size[0] - side) // step
    return [(10 + step * (i % per_row), 10 + step * (i // per_row), side) for i in range(count)]


def test_anonymize_json_lists_and_regions_every_hidden_face_however_many(finder):
    """120 faces, more than /v1/detect lists by default (100): /v1/anonymize lists every one hidden,
    and each region is its square grown 1.4 times about its centre (the default margin)."""
    marks = grid(120)
    answer = answer_of(finder, still(marks), anonymize_request({"format": "json"}))
    document = answer.document
    assert document is not None and answer.headers["X-Face-Count"] == "120"
    assert sorted(rectangles(document["faces"])) == sorted(marks)
    regions = sorted((r["x"], r["y"], r["width"], r["height"]) for r in document["regions"])
    assert regions == sorted((x - 4, y - 4, side + 8, side + 8) for x, y, side in marks)  # 20 x 1.4 = 28
    assert document["image"] == {"width": SIZE[0], "height": SIZE[1]} and "crop" not in document


def test_detect_json_lists_max_faces_and_counts_every_face(finder):
    marks = grid(30)
    answer = answer_of(finder, still(marks), detect_request({"max_faces": "7", "landmarks": "false"}))
    assert answer.document is not None and len(answer.document["faces"]) == 7
    assert set(rectangles(answer.document["faces"])) <= set(marks) and "landmarks" not in answer.document["faces"][0]
    assert answer.headers["X-Face-Count"] == "30"
    assert "regions" not in answer.document and "X-Crop-Rect" not in answer.headers


def test_a_window_follows_the_face_and_says_so(finder):
    marks = [(500, 360, 50)]
    answer = answer_of(finder, still(marks), crop_request({"width": "120", "height": "120", "format": "png"}))
    x0, y0, x1, y1 = crop_rect(answer)
    assert (x0 + x1) / 2 == 525 and (y0 + y1) / 2 == 385 and x1 - x0 == y1 - y0 >= 50  # centred on it
    shown = picture_of(answer)
    assert shown.shape == (120, 120, 3)
    white = np.argwhere(shown.min(axis=2) > 200)  # the square, enlarged as the window is
    side = 50 * 120 / (x1 - x0)
    corners = [white.min(axis=0), white.max(axis=0) + 1]
    np.testing.assert_allclose(corners, [[60 - side / 2] * 2, [60 + side / 2] * 2], atol=1)
    document = answer_of(finder, still(marks), crop_request({"width": "120", "height": "120", "format": "json"}))
    assert document.document is not None and document.document["focus"] == "faces"
    assert document.document["crop"] == {"x": x0, "y": y0, "width": x1 - x0, "height": y1 - y0}
    assert document.document["output"] == {"width": 120, "height": 120}


def test_a_window_in_a_turned_picture_follows_the_face_where_pillow_turns_it(finder):
    marks = [(500, 360, 50)]
    answer = answer_of(finder, still(marks), url_request("rotate=90,flip=v,width=100,height=100,fit=crop,gravity=face"))
    turned = np.asarray(pillow_turned(Image.fromarray(still(marks)), "rotate=90,flip=v"))
    x0, y0, x1, y1 = crop_rect(answer)
    white = np.argwhere(turned.min(axis=2) > 200)
    (top, left), (bottom, right) = white.min(axis=0), white.max(axis=0)
    assert x0 <= left and y0 <= top and x1 > right and y1 > bottom, ((x0, y0, x1, y1), (left, top, right, bottom))


def test_a_window_that_hides_faces_frames_the_confident_ones_only(finder):
    """Anonymizing, the window follows the confident faces: a dim square (hidden, as it is no larger
    than they are) is not framed; not anonymizing, it is a face like any."""
    pixels = squares_picture([(520, 40, 40)], SIZE, still([(40, 380, 40)]), level=110)
    window = "min-confidence=20,width=100,height=100,fit=crop,zoom=1,gravity=face"
    hiding = answer_of(finder, pixels, url_request(f"anonymize=fill,{window}", "json")).document
    assert hiding is not None and hiding["focus"] == "faces" and len(hiding["faces"]) == 2  # both hidden
    assert hiding["crop"] == {"x": 40, "y": 380, "width": 40, "height": 40}  # the confident one alone
    plain = answer_of(finder, pixels, url_request(window, "json")).document
    assert plain is not None and plain["crop"]["x"] <= 520 and plain["crop"]["y"] <= 40  # the dim one framed too


def test_without_faces_auto_frames_the_most_salient_window_where_pillow_turns_it(finder):
    """A picture with no squares and one patch of fine texture: gravity=auto puts the window on it, in
    the turned picture (a tall window is placed across, a wide one up and down)."""
    rng = np.random.default_rng(1)
    pixels = np.full((SIZE[1], SIZE[0], 3), 50, np.uint8)
    pixels[60:140, 480:560] = rng.integers(0, 100, (80, 80, 3), dtype=np.uint8)
    for geometry in ["", "rotate=90", "rotate=270,flip=h", "flip=v"]:
        turned = np.asarray(pillow_turned(Image.fromarray(pixels), geometry)).astype(int)
        rows, cols = np.nonzero(np.abs(turned - 50).max(axis=2))
        for (width, height), axis, where in [((40, 160), "x", cols.mean()), ((160, 40), "y", rows.mean())]:
            options = f"{geometry},width={width},height={height},fit=crop,gravity=auto"
            document = answer_of(finder, pixels, url_request(options, "json")).document
            assert document is not None and document["focus"] == "saliency"
            crop = document["crop"]
            side = crop["width"] if axis == "x" else crop["height"]
            assert abs(crop[axis] + side / 2 - where) < side / 4, (geometry, axis, crop, where)


def test_trim_border_keeps_what_is_inside_the_border_and_hides_its_faces(finder):
    inside = still([(30, 40, 40), (200, 150, 50)], (300, 220))
    pixels = np.full((SIZE[1], SIZE[0], 3), (200, 30, 30), np.uint8)
    pixels[100:320, 150:450] = inside
    answer = answer_of(finder, pixels, url_request("trim=border,anonymize=fill"))
    np.testing.assert_array_equal(picture_of(answer), hidden(inside, [(30, 40, 40), (200, 150, 50)]))
    assert answer.headers["X-Crop-Rect"] == "0,0,300,220"


def test_the_headers_name_the_passes_and_models_that_ran(finder):
    pixels = still()
    for detail, passes in [("fast", "fast"), ("standard", "standard")]:  # tiled: tests/unit/test_passes.py
        answer = answer_of(finder, pixels, detect_request({"detail": detail}))
        assert answer.headers["X-Passes"] == passes and answer.headers["X-Detectors"] == "squares"
        assert answer.headers["X-Face-Count"] == str(len(MARKS))
    plain = answer_of(finder, pixels, url_request("width=100,height=100"))  # gravity=center
    assert "X-Passes" not in plain.headers and "X-Face-Count" not in plain.headers  # no faces looked for


FRAMES = 6
ANIMATION = (160, 120)


def frame_marks(index: int) -> list[tuple[int, int, int]]:
    """A square moving right, and in the first two frames a second one."""
    return [(10 + 20 * index, 50, 24)] + ([(120, 10, 20)] if index < 2 else [])


def animation() -> bytes:
    frames = [Image.fromarray(still(frame_marks(i), ANIMATION)) for i in range(FRAMES)]
    return gif_of(frames)


def hidden_frame(index: int, geometry: str) -> Image.Image:
    """Frame `index` with its squares hidden, turned by Pillow."""
    marks = frame_marks(index)
    return pillow_turned(Image.fromarray(hidden(still(marks, ANIMATION), marks)), geometry)


def gif_of(frames: list[Image.Image]) -> bytes:
    """An endless GIF of `frames`, 80 ms each."""
    return sources.animation(frames, "GIF", [80] * len(frames), loop=0)


def frames_of(answer: Answer) -> list[np.ndarray]:
    with Image.open(io.BytesIO(answer.body)) as image:
        return [np.asarray(frame.convert("RGB")) for frame in ImageSequence.Iterator(image)]


@pytest.mark.parametrize("geometry", ["", "rotate=90,flip=h", "trim=10;20;0;5,flip=v", "flip=hv"])
def test_each_frame_hides_its_own_faces_where_pillow_turns_it(finder, geometry):
    answer = answer_of(finder, animation(), url_request(f"anonymize=fill,{geometry}", "gif"))
    assert answer.media_type == "image/gif" and answer.headers["X-Frames"] == str(FRAMES)
    assert sum(shape[0] for shape in finder[1].shapes) == FRAMES  # every frame looked at
    for index, frame in enumerate(frames_of(answer)):
        assert_hidden_as(frame, hidden_frame(index, geometry))


def test_each_frame_of_a_window_hides_its_own_faces(finder):
    request = url_request("anonymize=fill,rotate=270,width=60,height=160,fit=crop", "gif")
    answer = answer_of(finder, animation(), request)
    rect = crop_rect(answer)
    for index, frame in enumerate(frames_of(answer)):
        assert_hidden_as(frame, hidden_frame(index, "rotate=270"), rect)


def test_an_animation_s_window_looks_at_frames_spread_from_the_first_to_the_last(finder):
    """Not hiding, SAMPLED_FRAMES of the six frames are looked at (0, 2, 3, 5): their squares, and
    only theirs, are the faces format=json lists."""
    answer = answer_of(finder, animation(), url_request("width=80,height=120,fit=crop,gravity=face", "json"))
    looked_at = [0, 2, 3, 5]
    assert len(looked_at) == SAMPLED_FRAMES and sum(shape[0] for shape in finder[1].shapes) == SAMPLED_FRAMES
    assert answer.document is not None
    expected = {mark for index in looked_at for mark in frame_marks(index)}
    assert set(rectangles(answer.document["faces"])) == expected
    assert answer.headers["X-Frames"] == str(FRAMES) and answer.headers["X-Face-Count"] == str(len(expected))


def test_a_face_of_exactly_the_confident_score_is_framed_where_faces_are_hidden(finder):
    """A grey square of 128 scores exactly 0.5 (CONFIDENT): framed like the white one, not left out."""
    pixels = squares_picture([(300, 200, 60)], (1024, 768), still([(40, 40, 60)], (1024, 768)), level=128)
    window = "anonymize=fill,width=100,height=100,fit=crop,zoom=1,gravity=face,min-confidence=20"
    document = answer_of(finder, pixels, url_request(window, "json")).document
    assert document is not None and len(document["faces"]) == 2
    crop = document["crop"]
    assert crop["x"] <= 40 and crop["x"] + crop["width"] >= 360  # both framed: the window spans them


def test_the_detection_sees_transparency_on_the_background_the_answer_shows():
    """A transparent square over black: on white (the default) it is a light square the finder takes
    for a face; on background=black there is nothing to find."""
    rgba = np.zeros((480, 640, 4), np.uint8)
    rgba[..., 3] = 255
    rgba[100:180, 200:280, 3] = 0  # transparent: the colour beneath shows
    data = encoded(Image.fromarray(rgba, "RGBA"), "PNG")
    with square_finder() as detectors:
        window = "width=320,height=240,fit=crop,gravity=face"
        on_white = answer_of(detectors, data, url_request(window, "json")).document
        on_black = answer_of(detectors, data, url_request(f"{window},background=black", "json")).document
    assert on_white is not None and rectangles(on_white["faces"]) == [(200, 100, 80)]
    assert on_black is not None and on_black["faces"] == []


def bordered_animation() -> bytes:
    """Four frames: the first with a 12-pixel blue border around its picture, the others without."""
    frames = []
    for index in range(4):
        pixels = still([(30 + 10 * index, 30, 20)], (160, 120))
        if index == 0:
            pixels[:12], pixels[-12:], pixels[:, :12], pixels[:, -12:] = (
                (0, 0, 255),
                (0, 0, 255),
                (0, 0, 255),
                (0, 0, 255),
            )
        frames.append(Image.fromarray(pixels))
    return gif_of(frames)


def test_an_animation_s_border_is_found_on_its_first_frame(finder):
    answer = answer_of(finder, bordered_animation(), url_request("trim=border,format=gif", "gif"))
    assert answer.headers["X-Crop-Rect"] == "0,0,136,96"
    assert frames_of(answer)[0].shape[:2] == (96, 136)


def transparent_webp(frames: list[np.ndarray]) -> bytes:
    """An animated lossless WebP of RGBA `frames`."""
    pictures = [Image.fromarray(frame, "RGBA") for frame in frames]
    return encoded(pictures[0], "WEBP", save_all=True, append_images=pictures[1:], lossless=True, duration=80)


def test_a_transparent_animation_is_searched_as_shown_on_white_and_stays_transparent(finder):
    """Frames of an opaque ground with square holes that move: shown on white (as the detection
    sees a transparent picture) the holes are the white squares the finder finds, each frame's
    own; the answer keeps them transparent and the ground opaque, in every frame."""
    holes = [[(60 + 40 * i, 80, 40), (400, 300 - 30 * i, 60)] for i in range(3)]
    frames = []
    for marks in holes:
        rgba = np.dstack([background(SIZE), np.full(SIZE[::-1], 255, np.uint8)])
        for x, y, side in marks:
            rgba[y : y + side, x : x + side, 3] = 0
        frames.append(rgba)
    data = transparent_webp(frames)
    document = answer_of(finder, data, url_request("anonymize=fill,format=json", "json")).document
    assert document is not None and matched(
        rectangles(document["faces"]), [mark for marks in holes for mark in marks], within=2
    )
    answer = answer_of(finder, data, url_request("anonymize=fill,format=webp", "webp"))
    assert answer.headers["X-Face-Count"] == str(len(document["faces"]))  # found on the frames kept transparent
    with Image.open(io.BytesIO(answer.body)) as image:
        alphas = [np.asarray(frame.convert("RGBA"))[..., 3] for frame in ImageSequence.Iterator(image)]
    assert len(alphas) == len(frames)
    for alpha, frame in zip(alphas, frames, strict=True):
        assert (alpha == frame[..., 3]).all()


def test_a_transparent_animation_s_border_is_what_shows_on_white(finder):
    """trim=border on frames whose black square stands on transparency: shown on white, the border
    is the transparency around the square (white, as trim.border.color may say it)."""
    rgba = np.zeros((120, 160, 4), np.uint8)
    rgba[30:90, 40:100, 3] = 255  # opaque black
    rgba[50:60, 60:70, 3] = 0  # with a hole: libwebp writes a picture without one as opaque, cut to the square
    data = transparent_webp([rgba, rgba[::-1, ::-1].copy()])
    for options in ("trim=border", "trim=border,trim.border.color=white"):
        answer = answer_of(finder, data, url_request(options, "webp"))
        with Image.open(io.BytesIO(answer.body)) as image:
            assert image.size == (60, 60) and image.n_frames == 2, options
            assert np.asarray(image.convert("RGBA"))[20:30, 20:30, 3].max() == 0  # the hole, still transparent


def test_a_transparent_animation_without_faces_frames_what_shows_on_white():
    """gravity=auto: black shapes on transparency at the right, shown on white, are the salient
    window (on the transparency's own black they would be nothing)."""
    rgba = np.zeros((240, 320, 4), np.uint8)
    for left, top in [(230, 40), (270, 90), (240, 150), (280, 190)]:
        rgba[top : top + 24, left : left + 24, 3] = 255  # opaque black squares
    rgba[0, 0, 3] = 128  # some transparency in every sub-frame libwebp writes
    moved = rgba.copy()
    moved[0, 1, 3] = 128  # two frames, not one (identical frames are merged)
    data = transparent_webp([rgba, moved])
    no_faces = serve(Settings().detectors, Settings().wire_format, NoFacesModel)  # the finder sees the white
    request = url_request("width=100,height=240,fit=crop,gravity=auto", "webp")  # frames kept transparent
    answer = process(data, request, Settings(), no_faces)
    assert int(answer.headers["X-Crop-Rect"].split(",")[0]) >= 200, answer.headers["X-Crop-Rect"]


def test_an_animation_too_costly_once_trimmed_and_turned_is_refused_before_a_frame_is_decoded(finder, monkeypatch):
    """Four frames of 100x25: turned (rotate=90) and enlarged to 1800 wide, 1800x7200 each, 52 MP in all
    (over 50): refused before any frame is decoded. Trimmed to 100x20 first, the same enlargement
    without the turn is 1800x360: made."""
    from gateway.errors import ImageTooLarge
    from gateway.imaging import animation as animation_module

    frames = [Image.fromarray(still([(10 + 20 * i, 2, 12)], (100, 25))) for i in range(4)]
    gif = gif_of(frames)
    decoded: list[int] = []
    real = animation_module.pillow_to_bgr
    monkeypatch.setattr(animation_module, "pillow_to_bgr", lambda *args: decoded.append(1) or real(*args))
    with pytest.raises(ImageTooLarge):
        answer_of(finder, gif, url_request("rotate=90,width=1800,fit=scale-up,format=gif", "gif"))
    assert not decoded
    trimmed = answer_of(finder, gif, url_request("trim=0;0;5;0,width=1800,fit=scale-up,format=gif", "gif"))
    assert frames_of(trimmed)[0].shape[:2] == (360, 1800)
    # eight frames of 100x100 trimmed to 100x10 and enlarged to 2600 wide: 2600x260 each, made (the
    # bound is the trimmed picture's: untrimmed, 2600x2600 each would be over 50 MP)
    tall = [Image.fromarray(still([(5 + 10 * i, 2, 12)], (100, 100))) for i in range(8)]
    gif = gif_of(tall)
    flat = answer_of(finder, gif, url_request("trim=0;0;90;0,width=2600,fit=scale-up,format=gif", "gif"))
    assert frames_of(flat)[0].shape[:2] == (260, 2600)


def test_an_animation_without_faces_frames_the_salient_window_of_its_first_frame_where_pillow_turns_it(finder):
    """gravity=auto on an animation: its first frame's textured patch (the later frames' is elsewhere),
    in the turned picture."""
    rng = np.random.default_rng(2)
    frames, patches = [], [(10, 200), (170, 10)]  # (top, left) of each frame's patch
    for top, left in patches + patches:
        pixels = np.full((240, 320, 3), 50, np.uint8)
        pixels[top : top + 60, left : left + 60] = rng.integers(0, 100, (60, 60, 3), dtype=np.uint8)
        frames.append(Image.fromarray(pixels))
    gif = gif_of(frames)
    turned = np.asarray(pillow_turned(frames[0], "trim=0;0;0;40,rotate=90")).astype(int)
    rows, _ = np.nonzero(np.abs(turned - 50).max(axis=2))
    options = "trim=0;0;0;40,rotate=90,width=240,height=60,fit=crop,gravity=auto"
    document = answer_of(finder, gif, url_request(options, "json")).document
    assert document is not None and document["focus"] == "saliency"
    crop = document["crop"]
    assert abs(crop["y"] + crop["height"] / 2 - rows.mean()) < crop["height"] / 4, (crop, rows.mean())
