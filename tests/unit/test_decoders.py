"""The detection's arithmetic against values worked out by hand from the models' documentation:
YuNet's grid decoder (../shared/models/README.md: centre (loc[:2] + cell) * stride, size
exp(loc[2:]) * stride, landmarks (kps + cell) * stride), its scores, and the Detections type's
moves and the API's face objects."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gateway.detection import yunet
from gateway.detection.detections import Detections
from gateway.processing.answer import faces_json
from gateway.triton.wire import ModelOutputs

SHAPE = (64, 96)  # (H, W): stride-8 grid 8 x 12 (96 cells), stride 16 4 x 6 (24), stride 32 2 x 3 (6)


def outputs(cells: list[int], raw: list[float], loc: list[list[float]], points: list[list[float]]) -> ModelOutputs:
    return ModelOutputs(
        np.array(cells, np.int32),
        np.array(raw, np.float32),
        np.array(loc, np.float32).reshape(-1, 4),
        np.array(points, np.float32).reshape(-1, 10),
    )


def test_yunet_cells_decode_to_the_documented_boxes_and_landmarks():
    """Cell 13 of the stride-8 grid is column 1, row 1; cell 96 + 7 of the stride-16 grid is
    column 1, row 1 of that grid."""
    found = yunet.candidates(
        outputs(
            [13, 96 + 7],
            [1.0, 0.9],
            [[0.5, 0.25, 0.0, np.log(2)], [0.0, 0.5, np.log(3), 0.0]],
            [[0, 0, 1, 0, 0.5, 0.5, 0, 1, 1, 1], [0.5] * 10],
        ),
        SHAPE,
        0.0,
    )
    # stride 8: centre ((0.5 + 1) * 8, (0.25 + 1) * 8) = (12, 10), size (8, 16)
    np.testing.assert_allclose(found.boxes[0], [8, 2, 16, 18], atol=1e-4)
    np.testing.assert_allclose(found.landmarks[0], [[8, 8], [16, 8], [12, 12], [8, 16], [16, 16]], atol=1e-4)
    # stride 16: centre (16, 24), size (48, 16)
    np.testing.assert_allclose(found.boxes[1], [-8, 16, 40, 32], atol=1e-4)
    np.testing.assert_allclose(found.landmarks[1], [[24, 24]] * 5, atol=1e-4)


def test_yunet_cells_at_each_grid_s_first_and_last_position():
    """(column, row, stride) of a cell by its position in the outputs: the first and last cell of
    each stride's grid, one by one and as the whole table's rows."""
    index = np.array([0, 95, 96, 119, 120, 125])
    expected = [(0, 0, 8), (11, 7, 8), (0, 0, 16), (5, 3, 16), (0, 0, 32), (2, 1, 32)]
    np.testing.assert_array_equal(yunet.grid(*SHAPE, index), expected)
    assert yunet.grid(*SHAPE, index).dtype == np.float32  # as the model's regressions
    every = yunet.grid(*SHAPE)
    assert every.shape == (126, 3)
    np.testing.assert_array_equal(every[index], expected)


def test_yunet_keeps_what_reaches_the_threshold_best_first_on_retinafaces_scale():
    raw = [0.3, 0.95, 0.6]
    scores = yunet.calibrated(np.array(raw, np.float32))
    assert scores.dtype == np.float32
    found = yunet.candidates(outputs([0, 1, 2], raw, [[0, 0, 0, 0]] * 3, [[0] * 10] * 3), SHAPE, float(scores[2]))
    assert found.scores.tolist() == [scores[1], scores[2]]  # the 0.6 exactly at the threshold is kept
    np.testing.assert_allclose(found.boxes[:, 0], [8 - 4, 16 - 4])  # cells 1 and 2: centres 8 and 16, 8 wide


def test_yunet_scores_are_class_times_objectness_each_clipped():
    classes, objectness = np.array([-0.5, 1.5, 0.5, 0.5]), np.array([0.5, 0.5, 1.2, -0.1])
    np.testing.assert_allclose(yunet.face_scores(classes, objectness), [0, 0.5, 0.5, 0])


def test_cell_counts_of_shapes_not_a_multiple_of_32_count_whole_cells():
    assert yunet.cell_counts(70, 100) == (8 * 12, 4 * 6, 2 * 3)
    assert all(isinstance(count, int) for count in yunet.cell_counts(70, 100))


def test_detections_move_by_their_offset_then_scale_per_axis():
    faces = Detections(
        np.array([0.9], np.float32),
        np.array([[10, 20, 30, 60]], np.float32),
        np.array([[[10, 20], [30, 60], [20, 40], [12, 50], [28, 50]]], np.float32),
    )
    moved = faces.scaled((2, 4), np.array([2.0, 4.0]))
    np.testing.assert_allclose(moved.boxes, [[6, 6, 16, 16]])
    np.testing.assert_allclose(moved.landmarks[0, :2], [[6, 6], [16, 16]])
    assert moved.boxes.dtype == np.float32 and moved.landmarks.dtype == np.float32


def test_concatenated_detections_keep_their_shapes_even_empty():
    one = Detections(np.ones(1, np.float32), np.zeros((1, 4), np.float32), np.zeros((1, 5, 2), np.float32))
    both = Detections.concatenate([one, Detections.empty(), one])
    assert (both.scores.shape, both.boxes.shape, both.landmarks.shape) == ((2,), (2, 4), (2, 5, 2))
    none = Detections.concatenate([Detections.empty(), Detections.empty()])
    assert (none.boxes.shape, none.landmarks.shape) == ((0, 4), (0, 5, 2))


@pytest.mark.parametrize("with_landmarks", [True, False])
def test_the_apis_face_object_rounds_corners_and_points(with_landmarks):
    faces = Detections(
        np.array([0.98765], np.float32),
        np.array([[10.4, 20.6, 30.5, 61.49]], np.float32),
        np.array([[[10.6, 20.4], [30, 40], [20, 50], [12, 55], [28, 56]]], np.float32),
    )
    [face] = json.loads(faces_json(faces, with_landmarks))
    expected: dict = {"confidence": 98.765, "face_rectangle": {"x": 10, "y": 21, "width": 20, "height": 40}}
    if with_landmarks:
        points = {"left_eye": [11, 20], "right_eye": [30, 40], "nose": [20, 50]}
        expected["landmarks"] = {**points, "mouth_left": [12, 55], "mouth_right": [28, 56]}
    assert face == expected
    assert all(type(value) is int for value in face["face_rectangle"].values())
