"""Two models' faces fused: a face both found is one face, where the two boxes agree; a face one
alone found is kept."""

import numpy as np

from gateway.detection.detections import Detections
from gateway.detection.fusion import fuse, fuse_pair, iou_matrix, matches
from gateway.detection.yunet import calibrated


def faces(scores, boxes) -> Detections:
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2
    return Detections(np.asarray(scores, np.float32), boxes, np.repeat(centres[:, None], 5, axis=1))


def test_each_face_is_matched_to_its_best_overlap_only_both_ways():
    a = faces([0.9, 0.8], [[0, 0, 10, 10], [100, 100, 120, 120]])
    b = faces([0.7, 0.6, 0.5], [[101, 101, 121, 121], [1, 0, 11, 10], [300, 300, 310, 310]])
    in_a, in_b = matches(a, b, 0.5)
    assert sorted(zip(in_a.tolist(), in_b.tolist())) == [(0, 1), (1, 0)]
    assert len(matches(a, faces([0.9], [[5, 5, 15, 15]]), 0.5)[0]) == 0  # IoU 0.14: not the same face


def test_a_matched_pair_is_merged_with_the_scores_as_weights():
    a = faces([0.9], [[0, 0, 10, 10]])
    b = faces([0.3], [[2, 0, 12, 10]])
    fused = fuse_pair(a, b, 0.5)
    assert len(fused) == 1
    np.testing.assert_allclose(fused.boxes[0], [0.5, 0, 10.5, 10], atol=1e-5)  # 3:1 towards a's box
    np.testing.assert_allclose(fused.landmarks[0, 0], [5.5, 5], atol=1e-5)
    # either model right: 1 - 0.1 x 0.7, above the higher score (no face scores less than its model gave it)
    assert fused.scores[0] == np.float32(0.93)


def test_faces_one_model_alone_found_keep_their_scores_and_everything_is_best_first():
    a = faces([0.9, 0.4], [[0, 0, 10, 10], [50, 50, 60, 60]])
    b = faces([0.8, 0.95], [[0, 0, 10, 10], [200, 200, 260, 260]])
    fused = fuse_pair(a, b, 0.5)
    np.testing.assert_allclose(fused.scores, [0.98, 0.95, 0.4], atol=1e-6)  # the pair 1 - 0.1 x 0.2


def test_one_model_passes_through_and_empty_lists_fuse():
    a = faces([0.9], [[0, 0, 10, 10]])
    assert fuse({"yunet": a}) is a
    empty = faces([], [])
    assert len(fuse({"retinaface": empty, "yunet": empty})) == 0
    assert len(fuse({"retinaface": a, "yunet": empty})) == 1


def test_yunet_scores_are_calibrated_onto_retinaface_s_scale_in_order():
    raw = np.linspace(0, 1, 201)
    scaled = calibrated(raw)
    assert scaled[0] == 0 and scaled[-1] == 1
    assert (np.diff(scaled) > 0).all()  # YuNet's own order is kept: no two raw scores tie
    # a clear face YuNet scores 0.89 (the astronaut) is as sure as RetinaFace's 0.998
    assert calibrated(np.array([0.89]))[0] > 0.99


def test_three_models_fuse_into_one_face_each_averaged_over_every_model_that_found_it():
    """A face all three found: its box the score-weighted mean of the three, its score the chance
    that any is right; a face two found, merged the same way; one only one found, kept."""
    a = faces([0.9, 0.5], [[0, 0, 10, 10], [100, 0, 110, 10]])
    b = faces([0.6], [[1, 0, 11, 10]])
    c = faces([0.5, 0.7, 0.8], [[3, 0, 13, 10], [101, 0, 111, 10], [300, 0, 320, 20]])
    fused = fuse({"a": a, "b": b, "c": c})
    assert len(fused) == 3
    every = fused[np.argsort(fused.boxes[:, 0])]
    np.testing.assert_allclose(every.boxes[0], [(0 * 0.9 + 1 * 0.6 + 3 * 0.5) / 2.0, 0, 10 + 2.1 / 2.0, 10], atol=1e-5)
    assert every.scores[0] == np.float32(1 - 0.1 * 0.4 * 0.5)
    np.testing.assert_allclose(every.boxes[1], [(100 * 0.5 + 101 * 0.7) / 1.2, 0, (110 * 0.5 + 111 * 0.7) / 1.2, 10])
    assert every.scores[1] == np.float32(1 - 0.5 * 0.3) and every.scores[2] == np.float32(0.8)
    assert fused.scores.tolist() == sorted(fused.scores.tolist(), reverse=True)
    # two models fuse as they always did
    pair = fuse_pair(a, b, 0.3)
    np.testing.assert_array_equal(fuse({"a": a, "b": b}).boxes, pair.boxes)


def test_iou_of_rectangles_and_of_boxes_apart():
    """IoU of non-square boxes (the areas' widths times heights), and 0 for boxes apart."""
    a = np.array([[0.0, 0.0, 10.0, 20.0]])  # 10 wide, 20 tall
    b = np.array([[5.0, 0.0, 25.0, 10.0], [30.0, 30.0, 40.0, 40.0]])  # 20 x 10; far away
    np.testing.assert_allclose(iou_matrix(a, b), [[50 / (200 + 200 - 50), 0.0]])
    np.testing.assert_allclose(iou_matrix(b, a), [[50 / 350], [0.0]])


def test_boxes_side_by_side_or_one_above_the_other_do_not_overlap():
    """Boxes that share rows but not columns (or columns but not rows) overlap nowhere: IoU 0, not
    the strip one side's overlap would make if the other's were counted as a pixel."""
    a = np.array([[0.0, 0.0, 10.0, 10.0]])
    b = np.array([[12.0, 0.0, 22.0, 10.0], [0.0, 12.0, 10.0, 22.0], [10.0, 0.0, 20.0, 10.0]])  # beside, below, touching
    np.testing.assert_array_equal(iou_matrix(a, b), [[0.0, 0.0, 0.0]])


def test_iou_does_not_depend_on_the_boxes_scale():
    """The same two boxes, 1000 times smaller (under a square pixel each), the same IoU."""
    a = np.array([[0.0, 0.0, 10.0, 20.0]])
    b = np.array([[5.0, 0.0, 25.0, 10.0]])
    np.testing.assert_allclose(iou_matrix(a / 1000, b / 1000), iou_matrix(a, b), rtol=1e-5)


def test_a_pair_matches_at_its_own_overlap_not_the_best_in_the_picture():
    """Two faces each other's best overlap at IoU 0.1 are not one face, however well another pair
    overlaps; at exactly the threshold they are."""
    a = faces([0.9, 0.9], [[0, 0, 10, 10], [100, 0, 110, 10]])
    b = faces([0.9, 0.9], [[0, 0, 10, 10], [108.18, 0, 118.18, 10]])  # IoU 1, and about 0.1
    in_a, in_b = matches(a, b, 0.3)
    assert in_a.tolist() == [0] and in_b.tolist() == [0]
    edge_a, edge_b = faces([0.9], [[0, 0, 2, 1]]), faces([0.9], [[1, 0, 3, 1]])  # IoU exactly 1/3
    assert len(matches(edge_a, edge_b, 1 / 3)[0]) == 1


def test_low_scores_are_weights_too():
    """Scores summing to under 1 still weight the merged box as their shares (0.2 : 0.3)."""
    fused = fuse_pair(faces([0.2], [[0, 0, 10, 10]]), faces([0.3], [[5, 0, 15, 10]]), 0.3)
    np.testing.assert_allclose(fused.boxes[0], [3, 0, 13, 10], atol=1e-5)


def test_faces_of_equal_score_keep_their_order_pairs_first_then_each_models():
    """Ties (a crowd's many faces at one score) keep one order: merged pairs, then the first
    model's faces alone, then the second's, each as it came (a stable sort)."""
    count = 40
    a = faces([0.5] * count, [[i * 20, 0, i * 20 + 10, 10] for i in range(count)])
    b = faces([0.5] * count, [[i * 20, 100, i * 20 + 10, 110] for i in range(count)])
    fused = fuse_pair(a, b, 0.3)
    expected = np.vstack([a.boxes, b.boxes])
    np.testing.assert_array_equal(fused.boxes, expected)
