"""The detection's passes judged by pixels: a stand-in model that "finds" every white square of its
input (OpenCV's connected components on the very tensor the gateway sends) stands in for the face
models, so the boxes that come back must be the squares drawn on the picture, in the upright
picture's pixels, through the standard pass, the tiled pass (detail=high), EXIF orientations and
an animation's frames; no model's judgement is involved. Stills go in as bytes, as the detect step
sends them (processing's `faces_in`), frames through the detection's door (`find`)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from evaluation.images import encoded
from gateway.config import Settings
from gateway.detection import Detections, Found, Limits, decode_scale, find
from gateway.errors import ImageTooLarge, ProcessingTimeout
from gateway.imaging.decode import DecodedImage
from gateway.imaging.normalise import BGR, WHITE
from gateway.params import DetectOptions
from gateway.processing.answer import faces_in
from gateway.timing import NEVER, Deadline, StageTimer
from tests.support import TickingClock, square_finder, squares_picture, stored_with_orientation

SIZE = (1600, 1200)  # (width, height): the standard pass scales by 1024 / 1600
LARGE = [(100, 150, 120), (900, 500, 200)]  # (x, y, side) in the upright picture
SMALL = [(1200, 900, 14), (300, 1000, 12)]  # under 10 px at the standard pass: found by tiles only


@pytest.fixture
def finder():
    with square_finder() as served:
        yield served


def picture(marks: list[tuple[int, int, int]], size: tuple[int, int] = SIZE) -> Image.Image:
    return Image.fromarray(squares_picture(marks, size))


def boxes_of(marks: list[tuple[int, int, int]]) -> np.ndarray:
    return np.array(sorted([x, y, x + side, y + side] for x, y, side in marks), np.float32)


def found(detections: Detections) -> np.ndarray:
    return np.array(sorted(detections.boxes.tolist()), np.float32).reshape(-1, 4)


def frames_of(*marks: list[tuple[int, int, int]]) -> list[np.ndarray]:
    return [np.asarray(picture(m))[:, :, ::-1].copy() for m in marks]


def search(
    frames: list[np.ndarray], detectors, options: DetectOptions, deadline: Deadline = NEVER, background: BGR = WHITE
) -> Found:
    """An animation's `frames` (upright BGR, or premultiplied BGRA) through the detection's door."""
    height, width = frames[0].shape[:2]
    images = [DecodedImage(frame, "frame", (width, height)) for frame in frames]
    return find(images, options, detectors, Limits(), StageTimer(), deadline, background)


@pytest.mark.parametrize("orientation", [1, 6, 8])
def test_the_standard_pass_answers_in_the_upright_picture_s_pixels(finder, orientation):
    detectors, _ = finder
    data = stored_with_orientation(orientation, picture(LARGE + SMALL))
    result = faces_in(data, detectors, Settings(), DetectOptions(min_confidence=50))
    assert result.tiles == 0 and result.passes == "standard"
    np.testing.assert_allclose(found(result.faces), boxes_of(LARGE), atol=3)  # the small ones are < 10 px


@pytest.mark.parametrize("orientation", [1, 6, 8])
def test_the_tiled_pass_finds_the_small_squares_where_they_are(finder, orientation):
    detectors, model = finder
    data = stored_with_orientation(orientation, picture(LARGE + SMALL))
    result = faces_in(data, detectors, Settings(), DetectOptions(min_confidence=50, detail="high"))
    assert result.tiles > 1 and result.passes == "standard, tiled"
    # one batch of tiles, fitted: the 2048x1536 picture at 1.28x as 3x2 tiles of 768 wide, 832 high
    assert model.shapes[-1] == (6, 832, 768, 3) and result.tiles == 6
    np.testing.assert_allclose(found(result.faces), boxes_of(LARGE + SMALL), atol=3)


def test_the_tiled_pass_of_a_reduced_decode_finds_the_small_squares_where_they_are(finder):
    """A 5000x3750 phone photo at detail=high is decoded at half size (the tiled pass needs 0.41 of
    each side): the tiles are cut at the tiled scale relative to those decoded pixels, and the
    squares, 8 pixels at the standard pass (found by tiles only), come back in the original's."""
    detectors, _ = finder
    marks = [(500, 600, 400), (3000, 2500, 40), (1200, 3000, 44), (4500, 300, 40)]
    data = stored_with_orientation(6, picture(marks, (5000, 3750)))
    options = DetectOptions(min_confidence=50, detail="high")
    assert 0.4 < decode_scale((3750, 5000), options, Limits()) < 0.5  # what the detection asks of the decode
    result = faces_in(data, detectors, Settings(), options)
    assert result.tiles > 1
    np.testing.assert_allclose(found(result.faces), boxes_of(marks), atol=3)


def test_auto_tiles_only_where_the_standard_pass_saw_small_faces(finder):
    detectors, _ = finder
    options = DetectOptions(min_confidence=50, detail="auto")
    plain = faces_in(stored_with_orientation(1, picture(LARGE)), detectors, Settings(), options)
    assert plain.tiles == 0
    small = [(700, 300, 30)]  # 19 px at the standard pass: a small face, so smaller ones are likely
    tiled = faces_in(stored_with_orientation(6, picture(LARGE + small + SMALL)), detectors, Settings(), options)
    assert tiled.tiles > 1
    np.testing.assert_allclose(found(tiled.faces), boxes_of(LARGE + small + SMALL), atol=3)


def test_fast_runs_the_standard_pass_at_640(finder):
    detectors, model = finder
    result = faces_in(stored_with_orientation(1, picture(LARGE)), detectors, Settings(), DetectOptions(detail="fast"))
    assert result.passes == "fast" and max(model.shapes[-1][1:3]) == 640
    np.testing.assert_allclose(found(result.faces), boxes_of(LARGE), atol=4)


def test_each_frame_answers_its_own_squares_in_batches(finder):
    detectors, model = finder
    frames = []
    for index in range(20):  # more than one call's worth (MAX_BATCH 16)
        marks = [(40 + 30 * index, 60, 80), (500, 40 + 10 * index, 90)]
        frames.append((np.asarray(picture(marks, (800, 600)))[:, :, ::-1].copy(), marks))
    result = search([f for f, _ in frames], detectors, DetectOptions(min_confidence=50))
    assert result.models == ("squares",) and [shape[0] for shape in model.shapes] == [16, 4]
    assert result.tiles == 0 and result.passes == "standard"  # frames of 800: no tiled pass at any detail
    for detections, (_, marks) in zip(result.per_frame, frames, strict=True):
        np.testing.assert_allclose(found(detections), boxes_of(marks), atol=2)


@pytest.mark.parametrize("detail", ["standard", "auto", "high"])
def test_an_animations_frames_are_tiled_as_its_detail_asks(finder, detail):
    """Frames of 1600x1200, each with squares under 10 px at the standard pass: the tiled pass
    finds them in every frame at detail=high, and at auto as well, since one frame shows a face
    small enough (19 px) for smaller ones to be likely: the second frame alone would not tile."""
    detectors, model = finder
    small = [(700, 300, 30)]
    moved = [(x + 40, y - 30, side) for x, y, side in SMALL]
    marks = [LARGE + small + SMALL, LARGE + moved]
    result = search(frames_of(*marks), detectors, DetectOptions(min_confidence=50, detail=detail))
    if detail == "standard":
        assert result.tiles == 0 and result.passes == "standard"
        expected = [LARGE + small, LARGE]
    else:
        assert result.tiles == 12 and result.passes == "standard, tiled"  # each frame's 3x2 tiles
        assert model.shapes[-2:] == [(6, 832, 768, 3)] * 2
        expected = marks
    for detections, frame_marks in zip(result.per_frame, expected, strict=True):
        np.testing.assert_allclose(found(detections), boxes_of(frame_marks), atol=3)


def test_an_animations_detection_stops_at_its_deadline_before_the_next_call(finder):
    """The deadline is checked before each call: the standard pass's, then each frame's tiled pass
    (a 78-frame crowd at detail=auto took 29 s of the 30)."""
    detectors, model = finder
    frames = frames_of(LARGE + SMALL, LARGE + SMALL, LARGE + SMALL)
    clock = TickingClock()
    with pytest.raises(ProcessingTimeout) as stopped:
        search(frames, detectors, DetectOptions(detail="high"), Deadline(3.0, clock))
    assert str(stopped.value).endswith("before the tiled pass of frame 2 of 3")
    assert clock.reads == 3 and len(model.shapes) == 2  # the standard pass, the first frame's tiles


def test_transparent_frames_are_searched_flattened_onto_the_background_in_both_passes(finder):
    """Premultiplied BGRA frames, white squares on transparency: on black every square shows, the
    small ones to the tiled pass; on white, none (the finder sees one white picture)."""
    detectors, _ = finder
    square = np.asarray(picture(LARGE + SMALL)).max(axis=2)
    frames = [np.dstack([square, square, square, square])] * 2  # premultiplied: white where opaque
    options = DetectOptions(min_confidence=50, detail="high")
    on_black = search(frames, detectors, options, background=(0, 0, 0))
    assert on_black.tiles > 0
    for detections in on_black.per_frame:
        np.testing.assert_allclose(found(detections), boxes_of(LARGE + SMALL), atol=3)
    on_white = search(frames, detectors, options, background=(255, 255, 255))
    for detections in on_white.per_frame:
        np.testing.assert_allclose(found(detections), [[0, 0, *SIZE]], atol=1)


def test_auto_tiles_no_frame_of_an_animation_without_small_faces(finder):
    detectors, model = finder
    result = search(frames_of(LARGE, LARGE[:1]), detectors, DetectOptions(min_confidence=50, detail="auto"))
    assert result.tiles == 0 and [shape[0] for shape in model.shapes] == [2]
    for detections, marks in zip(result.per_frame, [LARGE, LARGE[:1]], strict=True):
        np.testing.assert_allclose(found(detections), boxes_of(marks), atol=3)


def test_every_step_is_timed_and_the_header_limits_hold(finder):
    detectors, _ = finder
    data = stored_with_orientation(6, picture(LARGE + SMALL))
    timer = StageTimer()
    faces_in(data, detectors, Settings(), DetectOptions(detail="high"), timer)
    assert set(timer.seconds) == set(timer.cpu_seconds) == {"decode", "resize", "preprocess", "infer", "postprocess"}
    assert all(seconds > 0 for seconds in timer.seconds.values())
    with pytest.raises(ImageTooLarge):
        faces_in(data, detectors, Settings(max_side=1500), DetectOptions())


def test_auto_decodes_a_large_photo_again_larger_where_it_tiles(finder):
    """A 4096x3072 JPEG: the standard pass decodes it at a quarter of its size; where it tiles (a
    small square seen), the tiled pass needs half and decodes it again, larger: two squares 3 pixels
    apart are two faces there, one in the quarter-size pixels enlarged."""
    marks = [(400, 500, 300), (2000, 1200, 90), (3000, 2500, 36), (3039, 2500, 36), (600, 2600, 30)]  # 90: 22 px
    data = stored_with_orientation(8, picture(marks, (4096, 3072)))
    result = faces_in(data, detectors_of(finder), Settings(), DetectOptions(min_confidence=50, detail="auto"))
    assert result.tiles > 1
    np.testing.assert_allclose(found(result.faces), boxes_of(marks), atol=4)


def test_min_confidence_is_a_percentage_kept_from_its_value_up(finder):
    """Grey squares of 128, which the finder scores exactly 0.5: kept at 50 %, not above."""
    data = encoded(Image.fromarray(squares_picture(LARGE, SIZE, level=128)), "PNG")
    at = faces_in(data, detectors_of(finder), Settings(), DetectOptions(min_confidence=50))
    assert len(at.faces) == len(LARGE)
    above = faces_in(data, detectors_of(finder), Settings(), DetectOptions(min_confidence=50.01))
    assert len(above.faces) == 0


def detectors_of(finder):
    return finder[0]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    frames=st.integers(1, 5),
    small_in=st.sets(st.integers(0, 4), max_size=2),
    tiny_in=st.sets(st.integers(0, 4), max_size=3),
)
def test_auto_tiles_every_frame_exactly_when_any_frame_shows_a_small_face(finder, frames, small_in, tiny_in):
    """Generated animations: a small face (19 px at the standard pass) in chosen frames, tiny ones
    (under 10 px: the tiled pass's alone) in others. At detail=auto the tiled pass runs on every frame,
    earlier and later ones alike, where any frame shows a small face, and on none where none does;
    every face of every frame is then found where it is."""
    detectors, _ = finder
    small_in, tiny_in = {i for i in small_in if i < frames}, {i for i in tiny_in if i < frames}
    marks = [
        LARGE
        + ([(700 + 10 * i, 300, 30)] if i in small_in else [])
        + ([(x + 8 * i, y, s) for x, y, s in SMALL] if i in tiny_in else [])
        for i in range(frames)
    ]
    result = search(frames_of(*marks), detectors, DetectOptions(min_confidence=50, detail="auto"))
    assert result.tiles == (6 * frames if small_in else 0)  # each frame's 3x2 tiles, or none
    for index, (detections, frame_marks) in enumerate(zip(result.per_frame, marks, strict=True)):
        seen = frame_marks if small_in else [m for m in frame_marks if m[2] >= 20]
        np.testing.assert_allclose(found(detections), boxes_of(seen), atol=3, err_msg=f"frame {index}")
