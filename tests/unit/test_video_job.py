"""`facecrop video`'s pure parts: a face missed between two sightings hidden where it should be (--hold),
which frames are sent with detail=auto, the boxes read from an answer, an unreadable file's message."""

from pathlib import Path

import numpy as np
import pytest

from facecrop_client.presets import FAST
from facecrop_client.video import VideoError, VideoJob, corner_boxes, held, open_video, same_faces


def box(x: float, y: float, side: float = 20.0, score: float = 0.9) -> list[float]:
    return [x, y, x + side, y + side, score]


def test_a_face_missed_between_two_sightings_is_interpolated():
    other = box(300, 300)
    before, own, after = [np.array([box(100, 50), other])], np.array([other]), [np.array([box(104, 54), other])]
    boxes = held(before, own, after)
    assert len(boxes) == 2
    np.testing.assert_allclose(boxes[1], box(102, 52))


def test_faces_already_found_or_seen_on_one_side_only_are_not_added():
    seen = np.array([box(100, 50)])
    assert len(held([seen], seen, [seen])) == 1  # found in the frame itself
    assert len(held([seen], np.zeros((0, 5)), [np.zeros((0, 5))])) == 0  # gone afterwards: not carried on
    assert len(held([np.array([box(100, 50)])], np.zeros((0, 5)), [np.array([box(200, 50)])])) == 0  # another face


def test_same_faces_needs_close_centres_and_similar_sizes():
    a = np.array([box(100, 100)])
    assert same_faces(a, np.array([box(108, 100), box(115, 100), box(100, 100, side=40)])).tolist() == [
        [True, False, False]
    ]


def test_the_default_job_sends_every_second_frame_with_detail_auto():
    """docs/defaults.md, "Video": detail=auto on frames 0, 2, 4, ... (the tiled pass where the standard
    pass sees small faces), the standard pass on the others; --fast never; a detail given wins."""
    job = VideoJob(Path("in.mp4"), Path("out.mp4"), params={"min_confidence": 12.0})
    assert [job.params_for(i).get("detail") for i in range(5)] == ["auto", None, "auto", None, "auto"]
    fast = VideoJob(Path("in.mp4"), Path("out.mp4"), tile_every=FAST.tile_every)
    assert all("detail" not in fast.params_for(i) for i in range(5))
    given = VideoJob(Path("in.mp4"), Path("out.mp4"), params={"detail": "high"})
    assert all(given.params_for(i)["detail"] == "high" for i in range(5))


def test_a_face_is_placed_by_how_far_each_sighting_is():
    """Seen two frames before and one after: two thirds of the way from the earlier sighting (the
    frames before come oldest first; the nearest sighting on each side counts)."""
    empty = np.zeros((0, 5))

    def face(x: float) -> np.ndarray:
        return np.array([box(x, 50, side=80)])  # 30 px apart: one face (centres within half a side)

    after = [face(120), empty]  # frames +1 and +2
    [found] = held([face(90), empty], empty, after)  # seen at -2 and +1
    np.testing.assert_allclose(found, face(110)[0])
    [found] = held([face(80), face(90)], empty, after)  # seen at -2 and -1: the nearer, -1, counts
    np.testing.assert_allclose(found, face(105)[0])
    [found] = held([empty, face(90)], empty, [empty, face(120)])  # -1 and +2: one frame of three
    np.testing.assert_allclose(found, face(100)[0])


def test_same_faces_at_each_edge_of_the_rule_and_for_boxes_off_the_origin():
    """One face: centres less than half the shorter side apart, sides less than 1.5x each other;
    each side measured as its own box's (boxes placed away from the origin, one tall, one wide)."""

    def rect(x: float, y: float, w: float, h: float) -> list[float]:
        return [x, y, x + w, y + h, 0.9]

    a = np.array([rect(200, 300, 40, 60)])  # shorter side 40: centres within 20
    near = np.array([rect(219.9, 300, 40, 60), rect(220, 300, 40, 60), rect(200, 319.9, 60, 40)])
    assert same_faces(a, near).tolist() == [[True, False, True]]
    sized = np.array([rect(200, 300, 59.9, 80), rect(190, 290, 60, 80), rect(200, 300, 40, 60)])
    assert same_faces(a, sized).tolist() == [[True, False, True]]  # 59.9 < 1.5 x 40; 60 is not
    tiny = np.array([rect(500, 500, 0.5, 0.5)])  # under a pixel: the same rule, not a pixel's
    assert same_faces(tiny, np.array([rect(500, 500, 0.7, 0.7), rect(500, 500, 0.8, 0.8)])).tolist() == [[True, False]]


def test_each_missing_face_is_carried_once_even_when_seen_in_several_frames_after():
    """A face missed now, seen before and in both frames after, is carried once (from the nearest
    sighting after), not once per later frame."""
    empty = np.zeros((0, 5))
    face = np.array([box(100, 50, side=80)])
    assert len(held([face], empty, [face, face])) == 1


def test_a_face_s_side_is_the_shorter_of_its_width_and_height_wherever_it_is():
    """A wide box off the top edge: its side is its height (38), so a box 20 pixels along is
    another face (more than half of 38 away), whatever its top's place."""
    wide = np.array([[0.0, 2.0, 100.0, 40.0, 0.9]])
    step = np.array([1.0, 0.0, 1.0, 0.0, 0.0])
    assert not same_faces(wide, wide + 20 * step).any() and same_faces(wide, wide + 18 * step).all()
    low = wide + np.array([0.0, 300.0, 0.0, 300.0, 0.0])  # the same box far from the top: still one face with itself
    assert same_faces(low, low).all() and same_faces(low, low + 18 * step).all()


def test_corner_boxes_are_floats_with_the_score_in_0_to_1():
    answer = {
        "faces": [
            {"confidence": 99, "face_rectangle": {"x": 10, "y": 20, "width": 30, "height": 40}},
            {"confidence": 12.5, "face_rectangle": {"x": 0, "y": 0, "width": 5, "height": 7}},
        ]
    }
    boxes = corner_boxes(answer)
    assert boxes.dtype == np.float64
    assert boxes.tolist() == [[10, 20, 40, 60, 0.99], [0, 0, 5, 7, 0.125]]
    assert corner_boxes({"faces": []}).shape == (0, 5)


def test_a_file_the_system_cannot_read_is_told_in_its_own_words():
    """Linux answers EIO to reading /proc/self/mem where nothing is mapped (offset 0)."""
    with pytest.raises(VideoError, match=r"^/proc/self/mem: Input/output error$"):
        open_video(Path("/proc/self/mem"))
