import json

import numpy as np
import pytest
from retinaface.postprocess import ANCHOR_SIZES, ANCHOR_STRIDES, generate_anchors

from gateway.detection.detections import Detections
from gateway.detection.postprocess import (
    NMS_IOU_THRESHOLD,
    TILE_EDGE_MARGIN,
    TILED_MAX_FACE,
    across_frames,
    detect_faces,
    finish,
    nms,
    tile_candidates,
)
from gateway.detection.retinaface import WIRE_FORMATS, candidates, decode_boxes, decode_landmarks, priors
from gateway.params import MIN_CANDIDATE_CONFIDENCE, DetectOptions
from gateway.processing.answer import faces_json


@pytest.mark.parametrize("height,width", [(1024, 1024), (768, 1024), (1024, 256), (100, 60)])
def test_priors_match_the_reference_implementation(height, width):
    reference = np.concatenate(
        [generate_anchors(s, z, width, height, 1)[0] for s, z in zip(ANCHOR_STRIDES, ANCHOR_SIZES)]
    )
    np.testing.assert_allclose(priors(height, width), reference, rtol=1e-6)


def test_priors_count_and_first_anchor():
    anchors = priors(1024, 1024)
    assert anchors.shape == ((128 * 128 + 64 * 64 + 32 * 32) * 2, 4)
    np.testing.assert_allclose(anchors[0], [4 / 1024, 4 / 1024, 16 / 1024, 16 / 1024])
    np.testing.assert_allclose(anchors[1], [4 / 1024, 4 / 1024, 32 / 1024, 32 / 1024])


@pytest.mark.parametrize("height,width", [(1024, 1024), (576, 1024), (100, 60)])
def test_the_priors_at_some_positions_are_those_positions_of_every_prior(height, width):
    """The decoder asks only for the chosen anchors' priors: each the same as in the whole table."""
    every = priors(height, width)
    index = np.random.default_rng(0).integers(0, len(every), 500)
    index[:3] = [0, len(every) - 1, len(every) - 2]
    np.testing.assert_array_equal(priors(height, width, index), every[index])
    assert priors(height, width, index).dtype == every.dtype == np.float32  # as the model's regressions


def test_zero_offsets_decode_to_the_anchor_itself():
    anchors = np.array([[0.5, 0.25, 0.2, 0.1]], dtype=np.float32)
    np.testing.assert_allclose(decode_boxes(np.zeros((1, 4)), anchors), [[0.4, 0.2, 0.6, 0.3]], rtol=1e-6)
    np.testing.assert_allclose(decode_landmarks(np.zeros((1, 10)), anchors), [[[0.5, 0.25]] * 5], rtol=1e-6)


def test_offsets_move_by_the_anchor_s_own_width_across_and_height_down():
    """A wide anchor (0.2 across, 0.1 down, as on a non-square input): a unit offset moves the
    centre and the landmarks by 0.1 of the width across and 0.1 of the height down."""
    anchors = np.array([[0.5, 0.5, 0.2, 0.1]], dtype=np.float32)
    np.testing.assert_allclose(decode_boxes(np.array([[1.0, 1.0, 0.0, 0.0]]), anchors), [[0.42, 0.46, 0.62, 0.56]])
    np.testing.assert_allclose(decode_landmarks(np.ones((1, 10)), anchors), [[[0.52, 0.51]] * 5], rtol=1e-6)


def test_offsets_use_the_variances():
    anchors = np.array([[0.5, 0.5, 0.2, 0.2]], dtype=np.float32)
    loc = np.array([[1.0, -1.0, np.log(2) / 0.2, 0.0]])
    # centre moves by 0.1 * 0.2 = 0.02; width doubles to 0.4
    np.testing.assert_allclose(decode_boxes(loc, anchors), [[0.32, 0.38, 0.72, 0.58]], rtol=1e-5)
    points = decode_landmarks(np.tile([1.0, 2.0], 5)[None], anchors)
    np.testing.assert_allclose(points[0, 3], [0.52, 0.54], rtol=1e-6)


def test_nms_suppresses_overlaps_and_keeps_disjoint_boxes_best_first():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 10, 10.5]], dtype=float)
    scores = np.array([0.8, 0.9, 0.7, 0.6])
    assert nms(boxes, scores, 0.4).tolist() == [1, 2]
    assert nms(boxes[:0], scores[:0], 0.4).tolist() == []


def synthetic_outputs(input_shape, hits):
    """Raw outputs with every anchor at score 0 but `hits` {anchor index: score} (zero offsets)."""
    count = len(priors(*input_shape))
    conf = np.zeros((count, 2), dtype=np.float32)
    for index, score in hits.items():
        conf[index, 1] = score
    (outputs,) = WIRE_FORMATS["float32"].parse(
        {"loc": np.zeros((count, 4), np.float32), "conf": conf, "landmarks": np.zeros((count, 10), np.float32)}
    )
    return outputs


def test_top_k_outputs_decode_like_raw_ones():
    anchors = priors(256, 1024)
    hits = {int(i): s for i, s in zip(np.flatnonzero(anchors[:, 2] == 64 / 1024)[[10, 400]], (0.9, 0.7))}
    raw = synthetic_outputs((256, 1024), hits)
    order = np.argsort(-raw.scores, kind="stable")[:5000]
    (top,) = WIRE_FORMATS["uint8"].parse(
        {
            "anchor_index": order.astype(np.int32),
            "scores": raw.scores[order],
            "loc": raw.loc[order],
            "landmarks": raw.landmarks[order],
        }
    )
    expected = detect_faces(candidates, raw, (256, 1024), 1.0, (256, 1024), DetectOptions())
    found = detect_faces(candidates, top, (256, 1024), 1.0, (256, 1024), DetectOptions())
    assert len(found) == 2
    np.testing.assert_array_equal(found.boxes, expected.boxes)
    np.testing.assert_array_equal(found.landmarks, expected.landmarks)


def test_detections_are_mapped_back_to_original_pixels():
    anchors = priors(1024, 1024)
    index = int(np.flatnonzero((anchors[:, 2] == 256 / 1024) & (abs(anchors[:, :2] - 0.5) < 0.05).all(axis=1))[0])
    outputs = synthetic_outputs((1024, 1024), {index: 0.97})
    # the original image was 512 x 512, scaled by 2 into the model input
    detections = detect_faces(candidates, outputs, (1024, 1024), 2.0, (512, 512), DetectOptions())
    cx, cy = anchors[index, :2] * 1024 / 2
    np.testing.assert_allclose(detections.boxes[0], [cx - 64, cy - 64, cx + 64, cy + 64], atol=1e-3)
    np.testing.assert_allclose(detections.landmarks[0], [[cx, cy]] * 5, atol=1e-3)
    face = json.loads(faces_json(detections, with_landmarks=True))[0]
    assert face["confidence"] == 97.0
    assert face["face_rectangle"]["width"] == 128
    assert set(face["landmarks"]) == {"left_eye", "right_eye", "nose", "mouth_left", "mouth_right"}


def test_candidates_under_the_candidate_floor_are_never_kept():
    """min_confidence=0 keeps what MIN_CANDIDATE_CONFIDENCE keeps: a candidate just over it, not one
    just under it (anchors far apart, so suppression keeps both where both pass)."""
    anchors = priors(256, 1024)
    small = np.flatnonzero(anchors[:, 2] == 16 / 1024)
    floor = MIN_CANDIDATE_CONFIDENCE / 100
    outputs = synthetic_outputs((256, 1024), {int(small[0]): floor * 1.01, int(small[-1]): floor * 0.99})
    kept = detect_faces(candidates, outputs, (256, 1024), 1.0, (256, 1024), DetectOptions(min_confidence=0))
    assert kept.scores.tolist() == pytest.approx([floor * 1.01])
    assert DetectOptions(min_confidence=0).min_score == DetectOptions(min_confidence=0.3).min_score == floor
    assert DetectOptions(min_confidence=12).min_score == pytest.approx(0.12)


def test_boxes_are_clipped_to_the_image_and_filtered_by_options():
    anchors = priors(256, 1024)
    corner = int(np.flatnonzero(anchors[:, 2] == 512 / 1024)[0])  # big anchor at the top-left
    small = int(np.flatnonzero(anchors[:, 2] == 16 / 1024)[500])
    outputs = synthetic_outputs((256, 1024), {corner: 0.9, small: 0.8})
    detections = detect_faces(candidates, outputs, (256, 1024), 1.0, (200, 1000), DetectOptions(min_confidence=10))
    assert len(detections) == 2
    assert detections.boxes.min() >= 0
    assert (detections.boxes[:, [2, 3]] <= [1000, 200]).all()
    assert detections.scores.tolist() == pytest.approx([0.9, 0.8])
    assert len(detect_faces(candidates, outputs, (256, 1024), 1.0, (200, 1000), DetectOptions(min_face_size=17))) == 1
    assert (
        len(detect_faces(candidates, outputs, (256, 1024), 1.0, (200, 1000), DetectOptions(max_faces=1))) == 2
    )  # max_faces only lists
    assert len(detect_faces(candidates, outputs, (256, 1024), 1.0, (200, 1000), DetectOptions(min_confidence=85))) == 1
    assert "landmarks" not in json.loads(faces_json(detections, with_landmarks=False))[0]


def tile_faces(*boxes: tuple[float, float, float, float]) -> Detections:
    found = np.array(boxes, np.float32).reshape(-1, 4)
    return Detections(np.full(len(found), 0.9, np.float32), found, np.zeros((len(found), 5, 2), np.float32))


def test_a_tile_answers_for_faces_no_inner_edge_comes_near_and_no_larger_than_its_share():
    """A middle tile (neighbours on every side) keeps a face only with TILE_EDGE_MARGIN to spare
    from each edge and no side over TILED_MAX_FACE; a corner tile has no neighbour on its outer
    edges, so faces there count; kept faces move to the scaled picture's pixels."""
    m, size, biggest = TILE_EDGE_MARGIN, 1024, TILED_MAX_FACE
    faces = tile_faces(
        (m, m, m + 50, m + 50),  # exactly at the margin: kept
        (m - 1, 100, 60, 150),  # one pixel into the left margin
        (100, m - 1, 150, 60),  # the top margin
        (1000, 100, size - m + 1, 150),  # the right margin
        (100, 1000, 150, size - m + 1),  # the bottom margin
        (300, 300, 300 + biggest, 320),  # as wide as the tiled pass answers for: kept
        (300, 400, 301 + biggest, 420),  # one wider: the standard pass's
        (500, 300, 520, 301 + biggest),  # one taller
    )
    middle = tile_candidates(faces, (1000, 800), (size, size), (3000, 3000), 2.0)
    np.testing.assert_allclose(middle.boxes, [[(1000 + m) / 2, (800 + m) / 2, (1000 + m + 50) / 2, (800 + m + 50) / 2],
                                              [650, 550, (1300 + biggest) / 2, 560]])  # fmt: skip
    # left and top: the picture's edges
    corner = tile_candidates(faces, (0, 0), (size, size), (size + 500, size + 500), 1.0)
    assert len(corner) == 4 and corner.boxes[1].tolist() == [m - 1, 100, 60, 150]
    alone = tile_candidates(faces, (0, 0), (size, size), (size, size), 1.0)  # a tile that is the whole picture
    assert len(alone) == 6


def test_nms_keeps_every_box_not_suppressed_whatever_its_score_and_as_integers():
    boxes = np.array([[0, 0, 10, 20], [1, 0, 11, 20], [50, 50, 60, 70], [100, 0, 110, 5]], np.float32)
    scores = np.array([0.9, 0.8, 0.01, 0.001], np.float32)
    keep = nms(boxes, scores, 0.4)
    assert keep.tolist() == [0, 2, 3] and keep.dtype == np.int64
    # overlapping at IoU 0.33 (width 10 of a 20-wide union... as rectangles x, y, w, h): both kept at 0.4
    assert nms(np.array([[0, 0, 10, 10], [5, 0, 15, 10]], np.float32), np.array([0.9, 0.8]), 0.4).tolist() == [0, 1]
    assert nms(np.array([[0, 0, 10, 10], [5, 0, 15, 10]], np.float32), np.array([0.9, 0.8]), 0.3).tolist() == [0]


def test_face_objects_are_whole_pixels_and_confidence_to_three_decimals():
    """The API's numbers: integer rectangles and landmark points (JSON 12, not 12.0), rounded
    to the nearest pixel, confidence in percent to three decimals."""
    landmarks = np.array([[[10.4, 20.6], [30.5, 20.49], [25, 30], [14.7, 40.2], [35.2, 40.8]]], np.float32)
    found = Detections(np.array([0.123456], np.float32), np.array([[9.6, 10.4, 50.5, 61.7]], np.float32), landmarks)
    assert faces_json(found, with_landmarks=True) == (
        '[{"confidence": 12.346, "face_rectangle": {"x": 10, "y": 10, "width": 40, "height": 52}, "landmarks": '
        '{"left_eye": [10, 21], "right_eye": [30, 20], "nose": [25, 30], '
        '"mouth_left": [15, 40], "mouth_right": [35, 41]}}]'
    )
    assert faces_json(found[:0], with_landmarks=True) == "[]"


@pytest.mark.parametrize("with_landmarks", [True, False])
def test_faces_json_is_what_json_dumps_writes_of_the_face_objects(with_landmarks):
    """Written directly, the faces' JSON is json.dumps' text of the objects the API documents,
    built here from the arrays: every number, every key in order, every separator."""
    rng = np.random.default_rng(7)
    count = 300
    scores = np.concatenate([rng.uniform(0, 1, count - 3), [0.123455, 1.0, 0.5]]).astype(np.float32)
    boxes = rng.uniform(-3, 9000, (count, 4)).astype(np.float32)
    points = rng.uniform(-3, 9000, (count, 5, 2)).astype(np.float32)
    expected = []
    for score, box, face_points in zip(scores.tolist(), boxes, points):
        x1, y1, x2, y2 = (int(v) for v in np.rint(box))
        face = {
            "confidence": round(score * 100, 3),
            "face_rectangle": {"x": x1, "y": y1, "width": x2 - x1, "height": y2 - y1},
        }
        if with_landmarks:
            names = ("left_eye", "right_eye", "nose", "mouth_left", "mouth_right")
            face["landmarks"] = {name: [int(v) for v in np.rint(p)] for name, p in zip(names, face_points)}
        expected.append(face)
    assert faces_json(Detections(scores, boxes, points), with_landmarks) == json.dumps(expected)


def test_no_faces_and_joined_faces_keep_their_shapes_and_float32():
    empty = Detections.empty()
    assert (empty.scores.shape, empty.boxes.shape, empty.landmarks.shape) == ((0,), (0, 4), (0, 5, 2))
    assert {array.dtype for array in (empty.scores, empty.boxes, empty.landmarks)} == {np.dtype(np.float32)}
    one = tile_faces((0, 0, 10, 10))
    joined = Detections.concatenate([empty, one, empty, one])
    assert (joined.boxes.shape, joined.landmarks.shape) == ((2, 4), (2, 5, 2))
    assert {array.dtype for array in (joined.scores, joined.boxes, joined.landmarks)} == {np.dtype(np.float32)}


def test_a_face_touching_the_far_margins_of_a_tile_is_kept():
    """Right and bottom edges shared with a neighbour: a face ending exactly TILE_EDGE_MARGIN from
    them is the tile's, as one starting exactly that far from the left and top is."""
    m, size = TILE_EDGE_MARGIN, 1024
    faces = tile_faces((900, 100, size - m, 150), (100, 900, 150, size - m))
    assert len(tile_candidates(faces, (1000, 1000), (size, size), (4000, 4000), 1.0)) == 2


def test_an_oblong_tile_s_inner_edges_are_its_own_width_across_and_height_down():
    """A middle tile 640 high and 768 wide: a face ending TILE_EDGE_MARGIN from its right edge
    (768) or its bottom edge (640) is the tile's, one pixel further is the neighbour's."""
    m, rows, cols = TILE_EDGE_MARGIN, 640, 768
    faces = tile_faces(
        (cols - m - 50, 100, cols - m, 150),  # at the right margin: kept
        (cols - m - 49, 200, cols - m + 1, 250),  # one pixel into it
        (100, rows - m - 50, 150, rows - m),  # at the bottom margin: kept
        (200, rows - m - 49, 250, rows - m + 1),  # one pixel into it
        (cols - m - 100, 300, cols - m - 50, 350),  # beyond the bottom's line across, inside the width: kept
    )
    kept = tile_candidates(faces, (700, 600), (rows, cols), (3000, 3000), 1.0)
    assert kept.boxes[:, 0].tolist() == [700 + cols - m - 50, 700 + 100, 700 + cols - m - 100]


def faces_at(*boxes: tuple[float, float, float, float], landmarks: list | None = None) -> Detections:
    found = tile_faces(*boxes)
    scores = np.linspace(0.9, 0.5, len(found)).astype(np.float32)
    points = found.landmarks if landmarks is None else np.array(landmarks, np.float32).reshape(-1, 5, 2)
    return Detections(scores, found.boxes, points)


def test_finish_clips_to_the_picture_and_keeps_faces_from_their_shorter_side_up():
    """In a 100x80 picture: boxes clipped to [0, 100] x [0, 80], landmark points to the last pixel
    (99, 79); a face kept where its shorter side is at least min_face_size and more than nothing."""
    over = [[-4, -2], [120, 90], [50, -7], [-1, 85], [99.5, 79.5]]
    found = finish(faces_at((-5, -3, 50, 40), landmarks=over), (80, 100), DetectOptions(min_face_size=0))
    assert found.boxes.tolist() == [[0, 0, 50, 40]]
    assert found.landmarks.tolist() == [[[0, 0], [99, 79], [50, 0], [0, 79], [99, 79]]]

    wide, tall = (60, 10, 80, 50), (10, 30, 50, 50)  # 20 wide and 40 tall; 40 wide and 20 tall
    for size, kept in ((20, 2), (20.5, 0), (19, 2), (30, 0)):
        assert len(finish(faces_at(wide, tall), (80, 100), DetectOptions(min_face_size=size))) == kept, size
    beyond, sliver = (120, 10, 150, 50), (10, 10, 11, 50)  # clipped to nothing; one pixel wide
    found = finish(faces_at(beyond, sliver), (80, 100), DetectOptions(min_face_size=0))
    assert found.boxes.tolist() == [list(sliver)]


def test_finish_suppresses_overlaps_above_the_nms_threshold_only():
    below, above = 0.3, 0.5  # IoUs around NMS_IOU_THRESHOLD (0.4)
    assert below < NMS_IOU_THRESHOLD < above

    def pair(iou: float) -> Detections:  # two 60x60 boxes side by side, overlapping by `iou`
        shift = 60 * (1 - iou) / (1 + iou)
        return faces_at((10, 10, 70, 70), (10 + shift, 10, 70 + shift, 70))

    assert len(finish(pair(below), (200, 200), DetectOptions(min_face_size=0))) == 2
    assert len(finish(pair(above), (200, 200), DetectOptions(min_face_size=0))) == 1


def test_detect_faces_asks_the_decoder_for_min_confidence_as_a_share():
    asked = []

    def decoder(outputs, input_shape, min_score):
        asked.append(min_score)
        return Detections.empty()

    detect_faces(decoder, {}, (64, 64), 1.0, (64, 64), DetectOptions(min_confidence=50))
    assert asked == [0.5]


def test_a_tile_one_pixel_in_still_has_a_neighbour_before_it():
    """A picture one pixel larger than a tile is cut into tiles at 0 and 1: the second tile's left
    and top edges are shared, so a face in their margin is the first tile's."""
    m, size = TILE_EDGE_MARGIN, 1024
    faces = tile_faces((m - 1, 100, 60, 150), (100, m - 1, 150, 60), (m, m, 60, 60))
    assert tile_candidates(faces, (1, 1), (size, size), (size + 1, size + 1), 1.0).boxes.tolist() == [
        [m + 1, m + 1, 61, 61]
    ]


def scored(*boxes_and_scores: tuple[list[float], float]) -> Detections:
    boxes = np.array([box for box, _ in boxes_and_scores], np.float32).reshape(-1, 4)
    scores = np.array([score for _, score in boxes_and_scores], np.float32)
    return Detections(scores, boxes, np.zeros((len(boxes), 5, 2), np.float32))


def test_an_animation_lists_each_face_once_and_a_frame_s_neighbours_as_two():
    """Two faces side by side that overlap (IoU 0.5: the fusion may leave such a pair) stay two in
    a repeated frame; a face seen again in a later frame is listed once, a new one is added; best
    first. A suppression over both frames together kept one of the pair."""
    left, right, other = [0, 0, 30, 30], [10, 0, 40, 30], [100, 100, 130, 130]
    first = scored((left, 0.9), (right, 0.6))
    later = scored((left, 0.8), (right, 0.7), (other, 0.95))
    listed = across_frames([first, later])
    assert listed.boxes.tolist() == [other, left, right] and listed.scores.tolist() == pytest.approx([0.95, 0.9, 0.6])
    assert len(across_frames([first, first])) == 2 and len(across_frames([Detections.empty(), first])) == 2
