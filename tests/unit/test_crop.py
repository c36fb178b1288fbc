import numpy as np
import pytest

from gateway.errors import InvalidParameter
from gateway.framing.crop import (
    CropPlan,
    Rect,
    face_box,
    focal_point,
    framed_faces,
    in_whole_pixels,
    output_size,
    pad_to,
    place,
    plan_crop,
    region_size,
    render_crop,
    widen_to_aspect,
)
from gateway.imaging.decode import DecodedImage
from gateway.params import GRAVITIES, CropOptions, Gravity
from gateway.request import crop_request

SQUARE = (2048, 2048)
# The reference's worked example: faces spanning 200 x 1000 in a 2048 x 2048 image.
SPAN = np.array([[900.0, 500.0, 1100.0, 1500.0]])


def test_worked_example_from_the_reference():
    assert region_size(SPAN[0], 0.5, SQUARE) == (400, 2000)
    assert region_size(SPAN[0], 0.25, SQUARE) == (800, 2048)
    assert plan_crop(SPAN, SQUARE, CropOptions(zoom=0.5)).region == Rect(800, 0, 400, 2000)
    assert plan_crop(SPAN, SQUARE, CropOptions(zoom=0.25)).region == Rect(600, 0, 800, 2048)


def test_zoom_one_is_the_face_box_and_zoom_zero_the_whole_image():
    assert plan_crop(SPAN, SQUARE, CropOptions(zoom=1)).region == Rect(900, 500, 200, 1000)
    assert plan_crop(SPAN, SQUARE, CropOptions(zoom=0)).region == Rect(0, 0, 2048, 2048)


def test_face_box_holds_all_faces_or_the_largest():
    boxes = np.array([[10, 10, 30, 30], [100, 50, 160, 130], [300, 20, 320, 44]], dtype=float)
    assert face_box(framed_faces(boxes, "all")).tolist() == [10, 10, 320, 130]
    assert face_box(framed_faces(boxes, "largest")).tolist() == [100, 50, 160, 130]
    assert face_box(boxes[:0]) is None


def test_no_face_falls_back_to_the_centre_or_the_given_point():
    assert focal_point(None, GRAVITIES["face"], (1000, 600)) == (500, 300)
    assert focal_point(None, Gravity("point", (0.25, 0.1)), (1000, 600)) == (250, 60)
    plan = plan_crop(np.zeros((0, 4)), (1000, 600), CropOptions(width=100, height=100))
    assert plan.region == Rect(200, 0, 600, 600)
    assert plan.output == (100, 100)


def test_center_and_focal_gravity_ignore_faces():
    boxes = np.array([[0.0, 0.0, 50.0, 50.0]])
    assert plan_crop(boxes, (1000, 600), CropOptions(gravity=GRAVITIES["center"], width=1, height=1)).region == Rect(
        200, 0, 600, 600
    )
    assert plan_crop(boxes, (1000, 600), CropOptions(gravity=GRAVITIES["right"], width=1, height=1)).region == Rect(
        400, 0, 600, 600
    )


def test_region_is_widened_never_shrunk_to_the_output_aspect():
    assert widen_to_aspect((400, 2000), 1.0, SQUARE) == (2000, 2000)
    assert widen_to_aspect((400, 200), 1.0, SQUARE) == (400, 400)
    assert widen_to_aspect((400, 400), 2.0, SQUARE) == (800, 400)


def test_a_region_with_no_height_is_widened_to_the_aspect_without_dividing_by_it():
    """Faces rounded to whole pixels at the image's bottom edge are 0 high (floats: a division raises)."""
    assert widen_to_aspect((400.0, 0.0), 2.0, SQUARE) == (400, 200)
    assert widen_to_aspect((0.0, 0.0), 2.0, SQUARE) == (0, 0)


def test_a_tall_region_in_a_wide_image_becomes_the_largest_fitting_one():
    # 3:4 portrait output from a 1600 x 900 image whose faces span the full height
    assert widen_to_aspect((200, 900), 0.75, (1600, 900)) == (675, 900)
    # a 4:1 output from a 1000 x 1000 image: the full width, a quarter of the height
    assert widen_to_aspect((800, 800), 4.0, (1000, 1000)) == (1000, 250)


def test_faces_at_the_border_shift_the_region_inside():
    assert place((400, 400), (50, 1990), SQUARE) == Rect(0, 1648, 400, 400)
    assert place((400, 400), (2040, 10), SQUARE) == Rect(1648, 0, 400, 400)
    corner = np.array([[0.0, 0.0, 100.0, 100.0]])
    plan = plan_crop(corner, (1000, 800), CropOptions(width=256, height=256))
    assert plan.region == Rect(0, 0, 200, 200)


def test_output_size_rules():
    boxes = np.array([[400.0, 300.0, 600.0, 500.0]])  # 200 x 200 face in 1000 x 800
    assert plan_crop(boxes, (1000, 800), CropOptions()).output == (400, 400)
    assert plan_crop(boxes, (1000, 800), CropOptions(width=100)).output == (100, 100)
    assert plan_crop(boxes, (1000, 800), CropOptions(height=50, zoom=1.0)).output == (50, 50)
    cover = plan_crop(boxes, (1000, 800), CropOptions(width=800, height=400, zoom=1.0))
    assert cover.region == Rect(300, 300, 400, 200) and cover.output == (800, 400)
    crop = plan_crop(boxes, (1000, 800), CropOptions(width=800, height=400, zoom=1.0, fit="aspect-crop"))
    assert crop.output == (400, 200)
    assert plan_crop(boxes, (1000, 800), CropOptions(width=100, height=50, fit="aspect-crop")).output == (100, 50)


def test_render_crop_cuts_and_resizes():
    pixels = np.arange(100 * 80 * 3, dtype=np.uint32).astype(np.uint8).reshape(80, 100, 3)
    image = DecodedImage(pixels, "PNG", (100, 80))
    same = render_crop(image, CropPlan(Rect(10, 20, 30, 40), (30, 40)))
    np.testing.assert_array_equal(same, pixels[20:60, 10:40])
    assert render_crop(image, CropPlan(Rect(0, 0, 100, 80), (25, 20))).shape == (20, 25, 3)
    assert render_crop(image, CropPlan(Rect(0, 0, 10, 8), (50, 40))).shape == (40, 50, 3)


def test_render_crop_from_a_reduced_decode_cuts_the_same_place():
    pixels = np.zeros((400, 600, 3), np.uint8)
    pixels[100:200, 300:450] = 255  # a white block at x 300-450, y 100-200 of the original
    reduced = DecodedImage(pixels[::4, ::4].copy(), "JPEG", (600, 400))  # decoded at 1/4
    cut = render_crop(reduced, CropPlan(Rect(300, 100, 150, 100), (30, 20)))
    assert cut.shape == (20, 30, 3) and cut.min() == 255
    assert CropPlan(Rect(300, 100, 150, 100), (30, 20)).source_scale == pytest.approx(0.2)
    assert CropPlan(Rect(0, 0, 100, 100), (512, 512)).source_scale == 1.0


def test_crop_parameters():
    assert crop_request({}).window == CropOptions()
    values = {
        "width": "256",
        "gravity": "0.5x0.33",
        "zoom": "1",
        "faces": "largest",
        "fit": "crop",
        "format": "webp",
        "quality": "70",
    }
    request = crop_request(values)
    assert request.window == CropOptions(256, None, Gravity("point", (0.5, 0.33)), 1.0, "largest", "aspect-crop")
    assert (request.output.format, request.output.quality, request.output.animated) == ("webp", 70, True)
    assert not crop_request({"anim": "false"}).output.animated
    assert crop_request({"gravity": "center"}).window.gravity == Gravity("point", (0.5, 0.5))


@pytest.mark.parametrize(
    "name,value",
    [
        ("width", "0"),
        ("width", "4097"),
        ("height", "-5"),
        ("zoom", "1.5"),
        ("zoom", "nan"),
        ("gravity", "north"),
        ("gravity", "1.5x0.5"),
        ("gravity", "0.5x"),
        ("gravity", "nanxnan"),
        ("faces", "some"),
        ("fit", "contain"),
        ("format", "png8"),
        ("format", "JPEG"),
        ("anim", "yes"),
        ("quality", "0"),
        ("quality", "101"),
    ],
)
def test_bad_crop_parameters_are_named(name, value):
    with pytest.raises(InvalidParameter) as error:
        crop_request({name: value})
    assert error.value.parameter == name


def test_the_largest_face_is_the_one_of_the_largest_area():
    """The small face lies far from the origin (its corners' sums are large), the large one at it."""
    small, large = [900.0, 100.0, 950.0, 150.0], [0.0, 0.0, 60.0, 60.0]
    assert framed_faces(np.array([small, large]), "largest").tolist() == [large]
    tall, square = [500.0, 0.0, 510.0, 300.0], [0.0, 400.0, 40.0, 440.0]  # 10 x 300 against 40 x 40
    assert framed_faces(np.array([square, tall]), "largest").tolist() == [tall]


def test_faces_count_in_whole_pixels_inside_the_picture():
    boxes = np.array([[10.2, 20.7, 30.1, 40.0], [-3.2, -1.5, 1002.7, 600.2]])
    assert in_whole_pixels(boxes, (1000, 600)).tolist() == [[10, 20, 31, 40], [0, 0, 1000, 600]]


def test_a_given_point_is_followed_even_where_there_are_faces():
    box = np.array([100.0, 100.0, 200.0, 200.0])
    assert focal_point(box, Gravity("point", (0.25, 0.1)), (1000, 600)) == (250, 60)
    assert focal_point(box, GRAVITIES["face"], (1000, 600)) == (150, 150)


def test_a_region_that_fits_the_picture_is_not_made_the_largest_fitting_one():
    """Wider than the picture is high, but inside it: kept as it is."""
    assert widen_to_aspect((1000, 500), 2.0, (1600, 900)) == (1000, 500)


def test_a_region_under_a_pixel_is_one_pixel():
    assert place((0.2, 0.4), (10, 20), (100, 100)) == Rect(10, 20, 1, 1)


@pytest.mark.parametrize(
    ("fit", "asked", "output"),
    [
        # a 400 x 200 region: each fit with both sides, one side, and sides larger than the region's
        ("contain", (100, 100), (100, 50)),
        ("pad", (100, 100), (100, 50)),
        ("scale-down", (100, 100), (100, 50)),
        ("scale-down", (800, 800), (400, 200)),
        ("scale-up", (100, 100), (400, 200)),
        ("scale-up", (800, 800), (800, 400)),
        ("scale-up", (None, 300), (600, 300)),
        ("cover", (100, 100), (100, 100)),
        ("squeeze", (50, 300), (50, 300)),
        ("aspect-crop", (800, 100), (400, 50)),
        ("aspect-crop", (100, 800), (25, 200)),
        ("aspect-crop", (300, 150), (300, 150)),
        ("cover", (None, 100), (200, 100)),
    ],
)
def test_output_size_by_fit(fit, asked, output):
    assert output_size(Rect(0, 0, 400, 200), CropOptions(width=asked[0], height=asked[1], fit=fit)) == output


@pytest.mark.parametrize("fit", ["contain", "cover", "aspect-crop"])
def test_a_side_that_rounds_to_nothing_is_one_pixel(fit):
    """A 1000 x 1 strip asked 100 wide is 100 x 1 (and a 1 x 1000 one asked 100 high, 1 x 100)."""
    assert output_size(Rect(0, 0, 1000, 1), CropOptions(width=100, fit=fit)) == (100, 1)
    assert output_size(Rect(0, 0, 1, 1000), CropOptions(height=100, fit=fit)) == (1, 100)
    assert output_size(Rect(0, 0, 1000, 1), CropOptions(width=100, height=100, fit="contain")) == (100, 1)
    assert output_size(Rect(0, 0, 1, 1000), CropOptions(width=100, height=100, fit="contain")) == (1, 100)


def test_pad_takes_the_side_not_given_from_the_output_and_centres_it():
    assert plan_crop(np.zeros((0, 4)), (400, 200), CropOptions(fit="pad", height=100)).canvas == (200, 100)
    assert plan_crop(np.zeros((0, 4)), (400, 200), CropOptions(fit="pad", width=100)).canvas == (100, 50)
    padded = pad_to(np.zeros((2, 2, 3), np.uint8), (10, 8), (255, 255, 255))
    assert padded.shape == (8, 10, 3)
    rows, columns = np.nonzero(padded[:, :, 0] == 0)
    assert (sorted(set(rows.tolist())), sorted(set(columns.tolist()))) == ([3, 4], [4, 5])


def test_a_region_narrower_than_a_reduced_pixel_is_cut_as_that_one_pixel():
    """From a decode at 1/4, a 1-pixel region is the one reduced pixel it lies in, at the edge too."""
    columns = np.tile(np.arange(150, dtype=np.uint8) * 1.5, (100, 1)).astype(np.uint8)
    reduced = DecodedImage(np.dstack([columns] * 3), "JPEG", (600, 400))  # 600 x 400 decoded at 1/4
    for x, column in ((300, 75), (599, 149)):
        cut = render_crop(reduced, CropPlan(Rect(x, 0, 1, 400), (1, 100)))
        np.testing.assert_array_equal(cut[:, 0, 0], np.full(100, columns[0, column]))
    rows = reduced.pixels.transpose(1, 0, 2).copy()  # 100 wide, 150 high
    tall = DecodedImage(rows, "JPEG", (400, 600))
    for y, row in ((300, 75), (599, 149)):
        cut = render_crop(tall, CropPlan(Rect(0, y, 400, 1), (100, 1)))
        np.testing.assert_array_equal(cut[0, :, 0], np.full(100, columns[0, row]))


def area_weights(source: int, output: int) -> np.ndarray:
    """[output, source]: the share of each source pixel in each output pixel's span, by the spans'
    overlap (what shrinking by area means, written from its definition)."""
    edges = np.arange(output + 1) * source / output
    starts, ends = np.arange(source), np.arange(1, source + 1)
    overlap = np.minimum(edges[1:, None], ends) - np.maximum(edges[:-1, None], starts)
    return np.clip(overlap, 0, None) * output / source


def test_a_crop_is_shrunk_by_area_and_enlarged_smoothly():
    """Shrinking averages each output pixel's area (a one-pixel checkerboard halved is flat grey, where
    other filters alias), along either side or both; enlarging interpolates (a 2 x 2 checkerboard
    enlarged has more than its two levels)."""
    fine = (np.indices((16, 16)).sum(axis=0) % 2 * 255).astype(np.uint8)
    image = DecodedImage(np.dstack([fine] * 3), "PNG", (16, 16))
    for region, output in [((16, 16), (8, 8)), ((16, 16), (8, 4)), ((16, 16), (2, 16)), ((8, 16), (8, 12))]:
        cut = render_crop(image, CropPlan(Rect(0, 0, *region), output))[:, :, 0]
        source = fine[: region[1], : region[0]].astype(float)
        expected = area_weights(region[1], output[1]) @ source @ area_weights(region[0], output[0]).T
        assert np.abs(cut - expected).max() <= 1, (region, output)
    coarse = DecodedImage(np.dstack([fine[:2, :2]] * 3), "PNG", (2, 2))
    assert len(np.unique(render_crop(coarse, CropPlan(Rect(0, 0, 2, 2), (16, 16))))) > 2
    assert len(np.unique(render_crop(coarse, CropPlan(Rect(0, 0, 2, 2), (16, 4))))) > 2


def test_a_crop_comes_out_at_the_planned_size_wherever_its_region_lies():
    image = DecodedImage(np.zeros((80, 100, 3), np.uint8), "PNG", (100, 80))
    for region, output in [
        (Rect(5, 0, 10, 10), (20, 10)),
        (Rect(0, 5, 10, 10), (10, 20)),
        (Rect(30, 20, 10, 10), (40, 30)),
    ]:
        assert render_crop(image, CropPlan(region, output)).shape[:2] == output[::-1], region


def test_a_decode_reduced_unequally_cuts_each_axis_at_its_own_scale():
    """x at 1/2, y at 1/4 (a reduced JPEG's two scales differ, if only slightly)."""
    pixels = np.indices((20, 50)).sum(axis=0).astype(np.uint8)  # 50 x 20: a 100 x 80 picture
    image = DecodedImage(np.dstack([pixels] * 3), "PNG", (100, 80))
    cut = render_crop(image, CropPlan(Rect(20, 40, 40, 20), (20, 5)))
    np.testing.assert_array_equal(cut[:, :, 0], pixels[10:15, 10:30])
