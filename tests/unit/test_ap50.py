import pytest

from evaluation.ap50 import average_precision

TRUTHS = [
    {"image": "a", "boxes": [[0, 0, 20, 20], [50, 50, 20, 20], [90, 90, 5, 5]]},
    {"image": "b", "boxes": [[10, 10, 30, 30]], "ignore": [1]},
]


def test_perfect_detections_score_one_and_ignored_boxes_count_neither_way():
    detections = {
        "a": [(0.9, [0, 0, 20, 20]), (0.8, [50, 50, 20, 20]), (0.7, [90, 90, 5, 5])],
        "b": [(0.95, [10, 10, 30, 30])],
    }
    assert average_precision(TRUTHS, detections) == pytest.approx(1.0)


def test_misses_and_false_positives_lower_the_score():
    half = {"a": [(0.9, [0, 0, 20, 20])]}
    assert average_precision(TRUTHS, half) == pytest.approx(0.5)
    ranked_low = {"a": [(0.9, [200, 200, 20, 20]), (0.8, [0, 0, 20, 20]), (0.7, [50, 50, 20, 20])]}
    assert average_precision(TRUTHS, ranked_low) == pytest.approx(2 / 3)  # precision interpolated
    duplicate = {"a": [(0.9, [0, 0, 20, 20]), (0.8, [1, 1, 20, 20]), (0.7, [50, 50, 20, 20])]}
    assert average_precision(TRUTHS, duplicate) == pytest.approx(1.0 * 0.5 + 2 / 3 * 0.5)
