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
    KEPT_MASK_PIXELS,
    Hiding,
    blend_weights,
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


@pytest.mark.parametrize("method", ["blur", "pixelate", "fill"])
@pytest.mark.parametrize("shape", ["ellipse", "rect"])
def test_16_bit_samples_are_hidden_as_8_bit_ones_are(method, shape):
    """A 10-bit video's frames are hidden as 16-bit samples: the same regions, the same blend, to
    within the 8-bit picture's rounding (its stack blur rounds each pass: up to 2 levels, 514 in 16 bits)."""
    pixels = cv2.resize(np.random.default_rng(3).integers(0, 256, (30, 40, 3), dtype=np.uint8), (160, 120))
    boxes = np.array([[40.0, 30.0, 80.0, 90.0], [100.0, 10.0, 150.0, 60.0]])
    hiding = Hiding(method=method, shape=shape)
    deep = hide_faces(pixels.astype(np.uint16) * 257, boxes, hiding)
    eight = hide_faces(pixels.copy(), boxes, hiding)
    assert deep.dtype == np.uint16
    assert np.abs(deep / 257 - eight).max() <= 2.5, np.abs(deep / 257 - eight).max()
    assert np.abs(deep / 257 - pixels).mean() > 5  # hidden, not left as it was


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


def test_the_size_rule_measures_each_face_by_its_shorter_side_wherever_it_is():
    """Faces far from the picture's origin, narrower or wider than tall: a side is x2 - x1 or
    y2 - y1, the shorter one."""
    confident = [1000.0, 500.0, 1010.0, 600.0]  # 10 wide, 100 tall: side 10
    wide_short = [1000.0, 500.0, 1100.0, 530.0]  # side 30: over twice 10
    narrow = [1000.0, 500.0, 1015.0, 530.0]  # side 15: hidden
    boxes = np.array([confident, wide_short, narrow])
    assert plausible(np.array([0.9, 0.3, 0.3]), boxes).tolist() == [True, False, True]


def dot_spread(hidden: np.ndarray, centre: tuple[int, int]) -> int:
    """How far from `centre` (y, x) a single white dot on black was spread: the Chebyshev radius
    of the changed pixels."""
    ys, xs = np.nonzero(hidden[..., 0] > 1e-3)
    return int(max(np.abs(ys - centre[0]).max(), np.abs(xs - centre[1]).max()))


@pytest.mark.parametrize(("strength", "radius"), [(0.1, 1), (0.2, 2), (0.6, 6)])
def test_the_blur_radius_is_strength_times_half_the_shorter_side(strength, radius):
    """A 20x40 face: half its shorter side is 10, so a blur of radius strength x 10, applied
    twice (two stack blurs: the support of a dot spreads by twice the radius). In float pixels,
    so that no tail of the blur rounds away."""
    pixels = np.zeros((200, 200, 3), np.float32)
    pixels[100, 100] = 255
    for box in ([90.0, 80.0, 110.0, 120.0], [80.0, 90.0, 120.0, 110.0]):  # 20 wide; 20 tall
        hidden = hide_faces(pixels.copy(), np.array([box]), Hiding(method="blur", strength=strength, margin=3.0))
        assert dot_spread(hidden, (100, 100)) == 2 * radius, box


def test_pixel_blocks_are_the_means_of_what_they_cover():
    from facecrop_hiding import pixelated

    rng = np.random.default_rng(3)
    patch = rng.integers(0, 256, (8, 12, 3), dtype=np.uint8)
    blocks = pixelated(patch, 4)
    means = patch.reshape(2, 4, 3, 4, 3).mean(axis=(1, 3))
    assert np.abs(np.repeat(np.repeat(means, 4, 0), 4, 1) - blocks).max() <= 1
    small = rng.integers(0, 256, (3, 5, 3), dtype=np.uint8)  # smaller than one block: one colour, its mean
    one = pixelated(small, 12)
    assert (one == one[0, 0]).all() and np.abs(one[0, 0] - small.reshape(-1, 3).mean(axis=0)).max() <= 1


def test_the_ellipse_is_the_upright_inscribed_one_and_its_feathered_edge_stays_inside_it():
    """Against the ellipse's equation, within a pixel of its edge (OpenCV rasterises it):
    everything a pixel inside it hidden, nothing more than 1.5 pixels outside."""

    def within(height: int, width: int, grow: float) -> np.ndarray:
        ys, xs = np.mgrid[0:height, 0:width]
        u, v = (xs - (width - 1) / 2) / (width / 2 + grow), (ys - (height - 1) / 2) / (height / 2 + grow)
        return u**2 + v**2 <= 1

    for height, width in ((200, 400), (40, 80), (60, 30)):
        sharp = region_alpha(height, width, "ellipse", feathered=False)
        assert (sharp[within(height, width, -1)] == 1).all() and within(height, width, 1.5)[sharp > 0].all()
        soft = region_alpha(height, width, "ellipse", feathered=True)
        assert not soft[sharp == 0].any()  # nothing outside the ellipse hidden


def test_a_small_region_fades_over_its_outermost_pixel_only():
    """20 pixels: a tenth of it is 2, so the fade spans one pixel on each side."""
    alpha = region_alpha(20, 20, "rect", feathered=True)
    assert alpha[10, 0] < 0.9 and alpha[0, 10] < 0.9
    assert alpha[10, 1] == pytest.approx(1.0, abs=1e-5) and alpha[10, 10] == pytest.approx(1.0, abs=1e-5)


def test_blurred_and_pixelated_edges_fade_into_the_picture():
    """Feathered (blur, pixelate): the region's outer pixels change far less than its middle;
    a fill is solid to its edge."""
    rng = np.random.default_rng(4)
    original = rng.integers(0, 256, (300, 300, 3), dtype=np.uint8)
    box = np.array([[50.0, 50.0, 250.0, 250.0]])
    for method in ("blur", "pixelate"):
        hidden = hide_faces(original.copy(), box, Hiding(method=method, margin=1.0, shape="rect"))
        change = np.abs(hidden.astype(int) - original).mean(axis=2)
        assert change[50, 100:200].mean() < 0.7 * change[150, 100:200].mean(), method


def test_the_share_hidden_takes_overlaps_in_any_order_and_no_face_outside():
    hiding = Hiding(margin=1.0)  # ellipses: their corners are not hidden
    a, b = [10.0, 10.0, 60.0, 60.0], [40.0, 40.0, 90.0, 90.0]
    both = hidden_share(np.array([a, b]), hiding, (100, 100))
    assert both == pytest.approx(hidden_share(np.array([b, a]), hiding, (100, 100)))
    assert both > max(hidden_share(np.array([a]), hiding, (100, 100)), hidden_share(np.array([b]), hiding, (100, 100)))
    beyond = np.array([[120.0, 10.0, 150.0, 40.0]])  # right of a 100-wide picture: clipped to nothing
    assert hidden_share(beyond, hiding, (100, 100)) == 0.0
    pixels = np.full((100, 100, 3), 7, np.uint8)
    assert (hide_faces(pixels, beyond, hiding) == 7).all()


def test_the_ellipse_is_opencv_s_inscribed_ellipse_of_the_box_at_every_size():
    """Drawn from whole-pixel sizes with OpenCV's first overload: the same pixels as its box form
    (centre and size as floats), odd and even sides, slivers to large regions."""
    for height, width in [(1, 1), (1, 7), (2, 3), (9, 4), (40, 60), (41, 61), (333, 120), (1001, 778)]:
        box = np.zeros((height, width), np.float32)
        cv2.ellipse(box, (((width - 1) / 2, (height - 1) / 2), (float(width), float(height)), 0), (1.0,), thickness=-1)
        assert np.array_equal(region_alpha(np.int64(height), np.int64(width), "ellipse", feathered=False), box)


@pytest.mark.parametrize("side", [300, 400, 500, 560, 700, 1200])
def test_a_large_bright_face_is_blurred_to_its_own_colours_not_white(side):
    """A face of 300-1200 pixels, mostly light (a lit face, a white mask): blurred to about the
    colours it had, at every size: OpenCV's stack blur itself turns such pixels white at radii of
    181-254 (half a 362-508 pixel face) and some beyond, so larger blurs are made smaller."""
    rng = np.random.default_rng(side)
    pixels = np.full((side + 200, side + 200, 3), (90, 200, 230), np.uint8)
    pixels[100 : side + 100, 100 : side + 100] += rng.integers(0, 20, (side, side, 1), dtype=np.uint8)
    face = np.array([[100.0, 100.0, side + 100.0, side + 100.0]])
    before = pixels[100 : side + 100, 100 : side + 100].reshape(-1, 3).astype(float)
    hidden = hide_faces(pixels.copy(), face, Hiding(method="blur", margin=1.0))
    inside = hidden[100 : side + 100, 100 : side + 100][region_alpha(side, side, "ellipse", True) > 0.99]
    assert np.abs(inside.astype(float) - before.mean(axis=0)).max() <= 12
    assert inside[:, 0].std() < 2.5  # blurred: the texture (std 5.8) gone


@pytest.mark.parametrize("kernel", [(9, 9), (361, 361), (363, 363), (401, 401), (501, 301), (301, 501), (723, 723)])
def test_a_stack_blur_of_any_radius_is_opencv_s_on_float_pixels(kernel):
    """Against OpenCV's stack blur of the same pixels in float (which has no overflow): the same
    bytes up to a radius of STACK_BLUR_MAX, within 2 levels past it (made smaller, then enlarged)."""
    from facecrop_hiding import STACK_BLUR_MAX, stack_blurred

    rng = np.random.default_rng(7)
    pixels = cv2.resize(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), (800, 600), interpolation=cv2.INTER_CUBIC)
    expected = cv2.stackBlur(pixels.astype(np.float32), kernel)
    got = stack_blurred(pixels, kernel)
    if max(kernel) <= 2 * STACK_BLUR_MAX + 1:
        assert np.array_equal(got, cv2.stackBlur(pixels, kernel))
    assert got.shape == pixels.shape and np.abs(got - expected).max() <= 2


def test_small_regions_blend_weights_are_kept_read_only_and_large_ones_made_each_time():
    """A crowd's hundreds of small faces reuse their masks (the same arrays, which no one may change);
    a large region's are made afresh, so kept masks stay small; kept or not, they are the region's."""
    for height, width, kept in ((20, 30, True), (64, 64, True), (65, 64, False), (300, 200, False)):
        alpha, inverse = blend_weights(height, width, "ellipse", True)
        np.testing.assert_array_equal(alpha, region_alpha(height, width, "ellipse", True))
        np.testing.assert_array_equal(inverse, 1 - alpha)
        again = blend_weights(height, width, "ellipse", True)
        assert (again[0] is alpha and again[1] is inverse) == kept, (height, width)
        assert alpha.flags.writeable != kept and inverse.flags.writeable != kept
    assert KEPT_MASK_PIXELS == 64 * 64
