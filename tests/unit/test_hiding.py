"""facecrop_hiding against values worked out by hand and against the pixels: the regions grown
about each face, the size rule for unsure faces at its edges, the ellipse and its feathered edge,
and every method hiding the inside while the outside stays exact."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from facecrop_hiding import (
    CONFIDENT,
    FEATHER,
    IMPLAUSIBLE_SIZE,
    Hiding,
    hidden_share,
    hide_faces,
    plausible,
    region_alpha,
    regions,
)


def test_a_region_is_the_box_grown_about_its_centre_in_whole_pixels_inside_the_picture():
    boxes = np.array([[10.0, 20.0, 30.0, 60.0], [90.0, 0.0, 110.0, 10.0]])
    # centre (20, 40), half sides 10 x 1.5 = 15 and 20 x 1.5 = 30; the second clipped at the corner
    np.testing.assert_array_equal(regions(boxes, 1.5, (100, 80)), [[5, 10, 35, 70], [85, 0, 100, 13]])
    # fractions round outward: centre 10.25, half 5.25 -> 5.0 .. 15.5 -> 5 .. 16
    np.testing.assert_array_equal(regions(np.array([[5.0, 5.0, 15.5, 15.5]]), 1.0, (200, 100)), [[5, 5, 16, 16]])
    # a tall picture: x clipped at its width, y at its height
    np.testing.assert_array_equal(regions(np.array([[0.0, 90.0, 40.0, 130.0]]), 2.0, (30, 120)), [[0, 70, 30, 120]])


@pytest.mark.parametrize(
    "scores,sides,hidden",
    [
        ([0.9, 0.9, 0.3], [20, 30, 50], [True, True, True]),  # 50 = 2 x the median 25: hidden
        ([0.9, 0.9, 0.3], [20, 30, 51], [True, True, False]),  # over twice: a hand, a poster
        ([0.5, 0.3], [10, 100], [True, False]),  # 0.5 is confident
        ([0.49, 0.3], [10, 100], [True, True]),  # none confident: every face
        ([0.9, 0.3], [20, 40], [True, True]),
    ],
)
def test_unsure_faces_are_hidden_up_to_twice_the_confident_ones_median_side(scores, sides, hidden):
    assert CONFIDENT == 0.5 and IMPLAUSIBLE_SIZE == 2.0
    boxes = np.array([[0.0, 0.0, side, side * 1.5] for side in sides])  # the shorter side is the width
    assert plausible(np.array(scores), boxes).tolist() == hidden
    tall = np.array([[5.0, 7.0, 5.0 + side * 1.5, 7.0 + side] for side in sides])  # the height, placed off the origin
    assert plausible(np.array(scores), tall).tolist() == hidden


def test_the_region_is_the_inscribed_ellipse_or_the_whole_rectangle():
    ellipse = region_alpha(40, 60, "ellipse", feathered=False)
    assert ellipse.shape == (40, 60) and ellipse.dtype == np.float32
    assert ellipse[20, 30] == 1 and ellipse[0, 0] == 0 and ellipse[39, 59] == 0
    assert ellipse[20, 0] == 1 and ellipse[20, 59] == 1 and ellipse[0, 30] == 1 and ellipse[39, 30] == 1
    assert (ellipse != ellipse[::-1, ::-1]).mean() < 0.015  # centred: symmetric both ways, but for rasterising
    assert abs(ellipse.mean() - np.pi / 4) < 0.03  # the inscribed ellipse's share of the box
    assert (region_alpha(40, 60, "rect", feathered=False) == 1).all()


@pytest.mark.parametrize("shape", ["ellipse", "rect"])
def test_a_feathered_edge_fades_over_a_tenth_of_the_shorter_side(shape):
    alpha = region_alpha(100, 200, shape, feathered=True)
    assert FEATHER == 0.1
    assert alpha[50, 100] == pytest.approx(1.0, abs=1e-5) and alpha[50, 0] < 0.75  # the middle whole, the edge faded
    inner = alpha[50, 10:190] if shape == "rect" else alpha[50, 20:180]
    assert inner.min() > 0.99  # the fade stays within about a tenth of the side of the edge
    assert np.all(np.diff(alpha[50, :100]) >= -1e-6)  # rising towards the middle
    assert 0.05 < alpha[50, 2] < 0.95


@pytest.mark.parametrize("method", ["blur", "pixelate", "fill"])
def test_each_method_hides_the_face_and_leaves_every_pixel_outside_exact(method):
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 255, (120, 160, 3), dtype=np.uint8)
    original = pixels.copy()
    box = np.array([[40.0, 30.0, 80.0, 90.0]])
    hiding = Hiding(method=method, margin=1.0, shape="rect")
    hide_faces(pixels, box, hiding)
    changed = np.any(pixels != original, axis=2)
    assert not changed[:30].any() and not changed[90:].any() and not changed[:, :40].any() and not changed[:, 80:].any()
    inner = cv2.cvtColor(pixels[40:80, 48:72], cv2.COLOR_BGR2GRAY)
    before = cv2.cvtColor(original[40:80, 48:72], cv2.COLOR_BGR2GRAY)
    assert cv2.Laplacian(inner, cv2.CV_64F).var() < 0.3 * cv2.Laplacian(before, cv2.CV_64F).var()
    if method == "fill":
        assert (pixels[30:90, 40:80] == 0).all()  # solid to its edge


def test_the_strength_is_relative_to_the_face():
    """A stronger blur of the same face leaves less of its detail; pixel blocks are about
    strength x half the shorter side."""
    rng = np.random.default_rng(2)
    original = rng.integers(0, 255, (200, 200, 3), dtype=np.uint8)
    box = np.array([[50.0, 50.0, 150.0, 150.0]])
    blocks = hide_faces(original.copy(), box, Hiding(method="pixelate", strength=0.4, margin=1.0, shape="rect"))
    row = blocks[100, 60:140, 0]
    runs = np.flatnonzero(np.diff(row.astype(int)) != 0)
    assert 15 <= np.median(np.diff(runs)) <= 25  # blocks of 0.4 x 50 = 20 pixels
    weak = hide_faces(original.copy(), box, Hiding(strength=0.1, margin=1.0, shape="rect"))
    strong = hide_faces(original.copy(), box, Hiding(strength=1.0, margin=1.0, shape="rect"))
    assert strong[80:120, 80:120].std() < weak[80:120, 80:120].std()


def test_the_share_hidden_counts_each_pixel_once():
    hiding = Hiding(margin=1.0, shape="rect")
    boxes = np.array([[0.0, 0.0, 50.0, 50.0], [25.0, 0.0, 75.0, 50.0]])  # overlapping by half
    assert hidden_share(boxes, hiding, (100, 100)) == pytest.approx(75 * 50 / 10_000)
    assert hidden_share(boxes[:0], hiding, (100, 100)) == 0.0
    ellipse = hidden_share(boxes[:1], Hiding(margin=1.0), (100, 100))
    assert ellipse == pytest.approx(2500 * np.pi / 4 / 10_000, rel=0.05)
