"""Trim, flip and rotate (gateway/imaging/geometry.py), each value worked out by hand: the kept
rectangle, the border found, the pixels cut from a reduced decode, and faces moved with the picture."""

import numpy as np
import pytest

from gateway.detection.detections import Detections
from gateway.imaging.geometry import Geometry, Trim, border_rect, trim_rect, turn_pixels, turn_points

SIZE = (100, 80)


@pytest.mark.parametrize(
    ("trim", "dpr", "rect"),
    [
        (Trim(left=1, top=1), 1.0, (1, 1, 100, 80)),  # 1 is a pixel, not the whole side
        (Trim(left=1.5, top=1.5), 2.0, (3, 3, 100, 80)),  # pixels times dpr
        (Trim(left=0.25, right=0.5, top=0.5), 1.0, (25, 40, 50, 80)),  # fractions of the side
        (Trim(left=10, width=0.5, top=20, height=0.25), 1.0, (10, 20, 60, 40)),  # a size kept, as a fraction
        (Trim(left=10, width=30, top=20, height=15), 2.0, (20, 40, 80, 70)),
        (Trim(left=5000, top=5000), 1.0, (99, 79, 100, 80)),  # past the picture: its last pixel
        (Trim(left=50, width=0.001, top=40, height=0.001), 1.0, (50, 40, 51, 41)),  # under a pixel: one
    ],
)
def test_the_kept_rectangle(trim, dpr, rect):
    assert trim_rect(trim, SIZE, dpr) == rect


def frame(size: tuple[int, int], colour: int) -> np.ndarray:
    return np.full((size[1], size[0], 3), colour, np.uint8)


def test_trim_border_keeps_what_differs_from_the_top_left_pixels_colour_by_more_than_the_tolerance():
    pixels = frame((20, 20), 100)
    pixels[5:8, 4:9] = 111  # just over the tolerance (10)
    pixels[12:15, 2:3] = 110  # at it: border
    assert border_rect(pixels, Trim(border=True), 1.0) == (4, 5, 9, 8)
    corner = frame((20, 20), 0)
    corner[0, 0] = 255  # the border's colour is this one pixel's, not its neighbours'
    corner[5:11, 5:11] = 128
    assert border_rect(corner, Trim(border=True), 1.0) == (0, 0, 20, 20)


def test_trim_border_from_a_reduced_decode_is_in_original_pixels_with_keep_in_them_too():
    pixels = frame((50, 40), 255)  # a 100 x 80 picture decoded at 1/2
    pixels[10:20, 20:30] = 0
    assert border_rect(pixels, Trim(border=True), 0.5) == (40, 20, 60, 40)
    assert border_rect(pixels, Trim(border=True, keep=4), 0.5) == (36, 16, 64, 44)
    assert border_rect(frame((50, 40), 7), Trim(border=True), 0.5) == (0, 0, 100, 80)  # one colour: all kept
    dot = frame((50, 40), 255)
    dot[10, 20] = 0
    assert border_rect(dot, Trim(border=True), 1.0) == (20, 10, 21, 11)  # one pixel differs: that pixel


def test_trimmed_pixels_from_a_reduced_decode_are_the_same_place():
    original = np.arange(80 * 100, dtype=np.int64).reshape(80, 100) % 251
    reduced = np.dstack([original[::2, ::2]] * 3).astype(np.uint8)  # decoded at 1/2: 50 x 40
    cut = turn_pixels(reduced, (20, 10, 60, 50), 0.5, Geometry())
    np.testing.assert_array_equal(cut[:, :, 0], original[10:50:2, 20:60:2])
    edge = turn_pixels(reduced, (99, 79, 100, 80), 0.5, Geometry())  # the last pixel: the last reduced one
    np.testing.assert_array_equal(edge[:, :, 0], original[78:79, 98:99])
    thin = turn_pixels(reduced, (40, 30, 41, 31), 0.5, Geometry())  # narrower than a reduced pixel
    np.testing.assert_array_equal(thin[:, :, 0], original[30:31, 40:41])
    odd = turn_pixels(reduced, (40, 31, 41, 32), 0.5, Geometry())  # both its edges round to one row
    np.testing.assert_array_equal(odd, reduced[16:17, 20:21])


def test_points_move_with_a_trimmed_picture_flipped_and_turned():
    rect = (10, 20, 110, 70)  # 100 x 50, not at the origin
    point = np.array([[10.0, 20.0], [30.0, 25.0]])
    assert turn_points(point, rect, Geometry()).tolist() == [[0, 0], [20, 5]]
    assert turn_points(point, rect, Geometry(flip="h")).tolist() == [[100, 0], [80, 5]]
    assert turn_points(point, rect, Geometry(flip="v")).tolist() == [[0, 50], [20, 45]]
    assert turn_points(point, rect, Geometry(rotate=90)).tolist() == [[50, 0], [45, 20]]
    assert turn_points(point, rect, Geometry(rotate=180)).tolist() == [[100, 50], [80, 45]]
    assert turn_points(point, rect, Geometry(rotate=270)).tolist() == [[0, 100], [5, 80]]


def face(box: list[float], eyes: list[list[float]], mouth: list[list[float]]) -> Detections:
    landmarks = [eyes[0], eyes[1], [(box[0] + box[2]) / 2, (box[1] + box[3]) / 2], mouth[0], mouth[1]]
    return Detections(np.array([0.9]), np.array([box], np.float32), np.array([landmarks], np.float32))


def test_a_flipped_face_keeps_its_left_eye_and_mouth_corner_on_the_pictures_left():
    found = face([20, 10, 40, 40], [[25, 20], [35, 22]], [[26, 33], [34, 35]])
    flipped = found.turned((0, 0, 100, 80), Geometry(flip="h"))
    assert flipped.boxes.tolist() == [[60, 10, 80, 40]]
    assert flipped.landmarks[0, [0, 1, 3, 4]].tolist() == [[65, 22], [75, 20], [66, 35], [74, 33]]
    low = face([40, 100, 70, 140], [[50, 110], [60, 112]], [[52, 130], [58, 131]])  # y over x
    assert low.turned((0, 0, 100, 150), Geometry()).landmarks.tolist() == low.landmarks.tolist()
    assert low.turned((0, 0, 100, 150), Geometry(flip="h")).landmarks[0, [0, 1, 3, 4]].tolist() == [
        [40, 112],
        [50, 110],
        [42, 131],
        [48, 130],
    ]


def test_faces_are_clipped_to_the_trim_and_those_trimmed_away_go():
    rect = (30, 0, 100, 80)  # the left 30 columns trimmed away
    partly = face([20, 10, 40, 40], [[25, 20], [35, 22]], [[26, 33], [34, 35]])
    assert partly.turned(rect, Geometry()).boxes.tolist() == [[0, 10, 10, 40]]
    gone = face([5, 10, 25, 40], [[10, 20], [20, 22]], [[11, 33], [19, 35]])  # wholly left of the trim
    assert len(gone.turned(rect, Geometry())) == 0
    touching = face([10, 10, 30, 40], [[15, 20], [25, 22]], [[16, 33], [24, 35]])  # ends at the trim's edge
    assert len(touching.turned(rect, Geometry())) == 0
    below = face([40, 60, 60, 80], [[45, 65], [55, 66]], [[46, 75], [54, 76]])
    assert len(below.turned((0, 0, 100, 60), Geometry())) == 0  # ends at the trim's bottom edge
    past = face([90, 10, 130, 40], [[95, 20], [105, 22]], [[96, 33], [104, 35]])
    assert past.turned((0, 0, 100, 80), Geometry()).boxes.tolist() == [[90, 10, 100, 40]]
