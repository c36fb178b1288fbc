"""Where the crop window goes when it cannot hold every face (gateway/framing/placement.py through plan_crop)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.framing.crop import (
    Rect,
    face_box,
    focal_point,
    framed_faces,
    in_whole_pixels,
    place,
    plan_crop,
    region_size,
    widen_to_aspect,
)
from gateway.framing.placement import best_offset, face_weights
from gateway.params import CROPPING_FITS, GRAVITIES, CropOptions

SQUARE = CropOptions(width=256, height=256, zoom=0)


def whole(region: Rect, boxes: np.ndarray) -> np.ndarray:
    return (
        (boxes[:, 0] >= region.x)
        & (boxes[:, 1] >= region.y)
        & (boxes[:, 2] <= region.x + region.width)
        & (boxes[:, 3] <= region.y + region.height)
    )


def cut(region: Rect, boxes: np.ndarray) -> np.ndarray:
    """Faces an edge of the region passes through."""
    overlapping = (
        (boxes[:, 0] < region.x + region.width)
        & (boxes[:, 2] > region.x)
        & (boxes[:, 1] < region.y + region.height)
        & (boxes[:, 3] > region.y)
    )
    return overlapping & ~whole(region, boxes)


def row(count: int, side: float, gap: float, top: float = 100, left: float = 20) -> np.ndarray:
    return np.array([[left + i * (side + gap), top, left + i * (side + gap) + side, top + side] for i in range(count)])


def test_a_row_wider_than_a_square_window_keeps_a_whole_number_of_faces_and_cuts_none():
    faces = row(7, side=100, gap=50, left=100)  # 1000 px of faces in a 1200 x 300 photo; the window is 300 x 300
    plan = plan_crop(faces, (1200, 300), SQUARE)
    assert (plan.region.width, plan.region.height) == (300, 300)
    assert whole(plan.region, faces).sum() == 2 and not cut(plan.region, faces).any()
    # centring (the old rule) cut three faces: two whole plus halves at both edges
    centred = Rect(round((faces[0, 0] + faces[-1, 2]) / 2 - 150), 0, 300, 300)
    assert whole(centred, faces).sum() == 1 and cut(centred, faces).sum() == 2


def test_of_equal_windows_the_one_nearest_the_faces_centre_wins():
    faces = row(7, side=100, gap=50, left=100)
    plan = plan_crop(faces, (1200, 300), SQUARE)
    centre = (faces[0, 0] + faces[-1, 2]) / 2
    others = [x for x in range(0, 901) if whole(Rect(x, 0, 300, 300), faces).sum() == 2]
    assert abs(plan.region.x + 150 - centre) == min(abs(x + 150 - centre) for x in others)


def test_the_main_subject_wins_over_a_background_crowd():
    big = np.array([[50.0, 100.0, 250.0, 300.0]])
    crowd = row(10, side=30, gap=10, top=150, left=600)  # ten faces that a 400-pixel window could all hold
    plan = plan_crop(np.vstack([big, crowd]), (1200, 400), SQUARE)
    assert whole(plan.region, big).all()
    # a crowd of faces as large as the subject outweighs it
    peers = row(4, side=150, gap=10, top=100, left=560)
    plan = plan_crop(np.vstack([big, peers]), (1200, 400), SQUARE)
    assert whole(plan.region, peers).sum() == 2 and not whole(plan.region, big).any()


def test_a_window_that_holds_every_face_is_centred_on_them_as_before():
    faces = np.array([[300.0, 100.0, 400.0, 200.0], [500.0, 120.0, 580.0, 200.0]])
    plan = plan_crop(faces, (1200, 400), SQUARE)  # a 400 x 400 window, the faces span 280 px
    assert plan.region == Rect(240, 0, 400, 400)
    assert plan_crop(faces, (1200, 400), CropOptions(zoom=0.5)).region == Rect(160, 50, 560, 200)


def test_faces_largest_frames_the_largest_face_alone():
    big = np.array([[900.0, 100.0, 1100.0, 300.0]])
    crowd = row(10, side=40, gap=10, top=150, left=20)
    plan = plan_crop(
        np.vstack([crowd, big]), (1200, 400), CropOptions(width=256, height=256, zoom=0.5, faces="largest")
    )
    assert plan.region == Rect(800, 0, 400, 400)


def test_an_offset_keeps_the_most_weight_then_cuts_least():
    starts, ends = np.array([0.0, 120.0, 240.0]), np.array([100.0, 220.0, 300.0])
    # a window 230 long over [0, 300] holds the first two faces at offset 0, or the last two at 70,
    # where its edge cuts the first
    ones = np.ones(3, dtype=np.int64)
    assert best_offset(starts, ends, ones, 230, 70, 60) == 0
    assert best_offset(starts, ends, np.array([1, 1, 5]), 230, 70, 0) == 70


def test_weights_favour_larger_faces_and_are_whole_numbers():
    boxes = np.array([[0, 0, 100, 100], [0, 0, 50, 80], [0, 0, 1, 1]], dtype=float)
    assert face_weights(boxes).tolist() == [1000, 250, 1]


@settings(max_examples=300, deadline=None)
@given(
    image=st.tuples(st.integers(1, 3000), st.integers(1, 3000)),
    corners=st.lists(st.tuples(*[st.floats(0, 1)] * 4), min_size=1, max_size=40),
    output=st.tuples(st.integers(1, 4096), st.integers(1, 4096)),
    zoom=st.one_of(st.just(0.0), st.floats(1e-6, 1)),
)
def test_the_window_stays_inside_the_image_keeps_its_size_and_moves_only_when_faces_do_not_fit(
    image, corners, output, zoom
):
    width, height = image
    unit = np.array(corners)
    low, high = np.minimum(unit[:, :2], unit[:, 2:]), np.maximum(unit[:, :2], unit[:, 2:])
    boxes = np.hstack([low * image, high * image + 1e-3])
    region = plan_crop(boxes, image, CropOptions(width=output[0], height=output[1], zoom=zoom)).region
    # Cloudflare's rule, step by step, on the faces in whole pixels
    boxes = in_whole_pixels(boxes, image)
    box = face_box(boxes)
    size = widen_to_aspect(region_size(box, zoom, image), output[0] / output[1], image)
    centred = place(size, focal_point(box, GRAVITIES["face"], image), image)
    assert (region.width, region.height) == (centred.width, centred.height)
    assert 0 <= region.x <= width - region.width and 0 <= region.y <= height - region.height
    if whole(centred, boxes).all():
        assert region == centred


def holds(region: Rect, box: np.ndarray) -> bool:
    """Whether the window holds the whole box, judged on the box as found (not rounded)."""
    return bool(
        region.x <= box[0]
        and region.y <= box[1]
        and region.x + region.width >= box[2]
        and region.y + region.height >= box[3]
    )


@settings(max_examples=2000, deadline=None)
@given(
    image=st.tuples(st.integers(2, 3000), st.integers(2, 3000)),
    corners=st.lists(st.tuples(*[st.floats(0, 1)] * 4), min_size=1, max_size=3),
    output=st.tuples(st.one_of(st.none(), st.integers(1, 4096)), st.one_of(st.none(), st.integers(1, 4096))),
    fit=st.sampled_from(sorted(CROPPING_FITS)),
    zoom=st.one_of(st.just(1.0), st.floats(0.05, 1)),
    faces=st.sampled_from(["all", "largest"]),
)
def test_a_window_of_the_outputs_shape_that_can_hold_the_faces_holds_them(image, corners, output, fit, zoom, faces):
    """zoom up to 1 asks for the faces whole: wherever a window of the output's aspect ratio holding
    them fits in the picture, the window holds every framed face, whatever the boxes' fractions of a
    pixel round to (issue #51: zoom=1 put the window just past the face)."""
    width, height = image
    unit = np.array(corners)
    low, high = np.minimum(unit[:, :2], unit[:, 2:]), np.maximum(unit[:, :2], unit[:, 2:])
    boxes = np.hstack([low * image, high * image])
    plan = plan_crop(boxes, image, CropOptions(width=output[0], height=output[1], zoom=zoom, fit=fit, faces=faces))
    box = face_box(framed_faces(boxes, faces))
    # the smallest window of the output's aspect ratio holding the faces in whole pixels
    span_x, span_y = np.ceil(box[2]) - np.floor(box[0]), np.ceil(box[3]) - np.floor(box[1])
    aspect = output[0] / output[1] if output[0] and output[1] else None
    need = (max(span_x, span_y * aspect), max(span_y, span_x / aspect)) if aspect else (span_x, span_y)
    if need[0] <= width and need[1] <= height:
        assert holds(plan.region, box), (plan.region, box.tolist())


@pytest.mark.parametrize("output", [(256, 256), (400, 300), (300, 400)])
@pytest.mark.parametrize("shift", [0.0, 0.2, 0.45, 0.5, 0.55, 0.8])
def test_zoom_one_frames_a_face_whose_sides_round_either_way(output, shift):
    """The report's case: a 92.x by 122.x face at zoom=1 (the window just past it before)."""
    face = np.array([[178 + shift, 58 + shift, 270.3 + shift, 180.4 + shift]])
    region = plan_crop(face, (512, 512), CropOptions(width=output[0], height=output[1], zoom=1)).region
    assert holds(region, face[0]), region


def test_a_face_no_window_of_the_shape_can_hold_keeps_the_window_centred_on_it():
    """A face taller than any 3:1 window of the picture: the window cannot hold it, so it stays
    centred on the face (the face counts neither whole nor cut), not beside it."""
    face = np.array([[250.0, 300.0, 350.0, 600.0]])
    region = plan_crop(face, (600, 800), CropOptions(width=300, height=100, zoom=1)).region
    assert (region.width, region.height) == (600, 200)
    assert region.y == 350  # the face's centre, 450, minus half the window
    # beside a smaller face that fits, the window keeps that one whole, clear of the large one
    small = np.array([[20.0, 100.0, 60.0, 140.0]])
    region = plan_crop(np.vstack([face, small]), (600, 800), CropOptions(width=300, height=100, zoom=1)).region
    assert holds(region, small[0])
