import numpy as np
import pytest

from gateway.detection.preprocess import batch_shape, canonical_shape, fill_input, scale_for, to_model_input
from gateway.detection.retinaface import BGR_MEAN, WIRE_FORMATS
from gateway.imaging.orientation import apply_orientation


def test_scale_enlarges_small_images_and_shrinks_large_ones():
    assert scale_for(416, 416, 1024) == pytest.approx(1024 / 416)
    assert scale_for(3000, 2000, 1024) == pytest.approx(1024 / 3000)


@pytest.mark.parametrize(
    "size,expected",
    [((1024, 683), (1024, 768)), ((683, 1024), (768, 1024)), ((1024, 1024), (1024, 1024)), ((51, 1024), (256, 1024))],
)
def test_canonical_shapes_pad_the_short_side(size, expected):
    assert canonical_shape(*size, target_size=1024, pad_multiple=256) == expected


PIXELS = np.full((300, 200, 3), (10, 20, 30), dtype=np.uint8)
CONTENT_WIDTH = round(200 * 1024 / 300)


def test_float32_input_is_mean_subtracted_nchw_and_zero_padded():
    tensor, plan = to_model_input(PIXELS, target_size=1024, pad_multiple=256, wire=WIRE_FORMATS["float32"])
    assert tensor.shape == (1, 3, 1024, 768) and tensor.dtype == np.float32
    assert plan.size == (1024, 768)
    assert plan.scale == pytest.approx(1024 / 300)
    np.testing.assert_allclose(tensor[0, :, 5, 5], [10 - 104, 20 - 117, 30 - 123])
    assert not tensor[0, :, :, CONTENT_WIDTH:].any()


def test_uint8_input_is_nhwc_padded_with_the_mean_colour():
    tensor, plan = to_model_input(PIXELS, target_size=1024, pad_multiple=256, wire=WIRE_FORMATS["uint8"])
    assert tensor.shape == (1, 1024, 768, 3) and tensor.dtype == np.uint8
    assert plan.size == (1024, 768)
    assert tensor[0, 5, 5].tolist() == [10, 20, 30]
    assert (tensor[0, :, CONTENT_WIDTH:] == BGR_MEAN).all()
    centred = tensor.astype(np.float32) - BGR_MEAN
    reference = to_model_input(PIXELS, 1024, 256, WIRE_FORMATS["float32"])[0]
    np.testing.assert_array_equal(centred.transpose(0, 3, 1, 2), reference)


@pytest.mark.parametrize("wire", ["uint8", "float32"])
@pytest.mark.parametrize("orientation", range(1, 9))
@pytest.mark.parametrize("scale", [0.37, 1.0, 1.6])
def test_stored_pixels_resized_then_turned_equal_upright_pixels_resized(orientation, scale, wire):
    """Filling from the stored pixels with their EXIF orientation gives the input the upright
    pixels give: the slot is written in place, the padding untouched by the turn."""
    stored = np.random.default_rng(orientation).integers(0, 255, (90, 131, 3), dtype=np.uint8)
    upright = apply_orientation(stored, orientation)
    fmt = WIRE_FORMATS[wire]
    shape = batch_shape(1, (224, 224), fmt)
    from_stored, from_upright = np.full(shape, 7, fmt.dtype), np.full(shape, 9, fmt.dtype)
    fill_input(from_stored[0], stored, scale, fmt, orientation=orientation)
    fill_input(from_upright[0], upright, scale, fmt)
    np.testing.assert_allclose(from_stored, from_upright, atol=1)
