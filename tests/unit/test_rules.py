"""The two size rules: when detail=auto tiles, and which low-confidence faces /v1/anonymize hides."""

import numpy as np
import pytest

from facecrop_hiding import Hiding, hidden_share, hide_faces, plausible
from gateway.detection.detections import Detections
from gateway.detection.passes import AUTO_MIN_SCORE, AUTO_SMALL_FACE, needs_tiles


def boxes_of(sides: list[float]) -> np.ndarray:
    corners = [[10 * i, 0, 10 * i + side, side * 1.2] for i, side in enumerate(sides)]
    return np.array(corners, dtype=np.float32).reshape(-1, 4)


def detections(scores: list[float], sides: list[float]) -> Detections:
    return Detections(np.array(scores, np.float32), boxes_of(sides), np.zeros((len(sides), 5, 2), np.float32))


def test_auto_tiles_only_for_a_confident_small_face():
    small, large = AUTO_SMALL_FACE - 1, AUTO_SMALL_FACE + 1
    assert needs_tiles(detections([0.9, AUTO_MIN_SCORE], [200, small]))
    assert not needs_tiles(detections([0.9, AUTO_MIN_SCORE - 0.01], [200, small]))  # unsure: no reason to tile
    assert not needs_tiles(detections([0.9, 0.8], [200, large]))
    assert not needs_tiles(detections([], []))


def test_anonymize_drops_only_unsure_faces_far_larger_than_the_sure_ones():
    scores = np.array([0.9, 0.8, 0.3, 0.2, 0.1])
    keep = plausible(scores, boxes_of([20, 30, 40, 60, 200]))  # median of the sure ones: 25
    assert keep.tolist() == [True, True, True, False, False]
    assert plausible(np.array([0.3, 0.1]), boxes_of([20, 400])).all()  # none sure: every face is hidden
    assert plausible(np.array([0.9, 0.95]), boxes_of([20, 400])).all()  # sure faces are never dropped


@pytest.mark.parametrize("shape", ["ellipse", "rect"])
def test_hidden_share_is_what_a_fill_hides(shape):
    rng = np.random.default_rng(7)
    corners = rng.uniform(0, 300, (6, 2))
    boxes = np.hstack([corners, corners + rng.uniform(3, 90, (6, 2))])  # some overlap, some cross the edge
    hiding = Hiding(method="fill", margin=1.4, shape=shape)
    white = np.full((240, 320, 3), 255, np.uint8)
    filled = (hide_faces(white, boxes, hiding) == 0).all(axis=2).mean()
    assert 0 < hidden_share(boxes, hiding, (320, 240)) == pytest.approx(filled, abs=1e-12)
