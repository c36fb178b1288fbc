import numpy as np
import pytest

from gateway.crop import (
    CropPlan,
    Rect,
    face_box,
    focal_point,
    framed_faces,
    place,
    plan_crop,
    region_size,
    render_crop,
    widen_to_aspect,
)
from gateway.decode import DecodedImage
from gateway.errors import InvalidParameter
from gateway.params import GRAVITIES, CropOptions, Gravity, parse_crop_options
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
    assert parse_crop_options({}) == CropOptions()
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
    assert (request.output.format, request.output.quality) == ("webp", 70)
    assert parse_crop_options({"gravity": "center"}).gravity == Gravity("point", (0.5, 0.5))


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
        ("format", "gif"),
        ("format", "JPEG"),
        ("quality", "0"),
        ("quality", "101"),
    ],
)
def test_bad_crop_parameters_are_named(name, value):
    with pytest.raises(InvalidParameter) as error:
        crop_request({name: value})
    assert error.value.parameter == name
