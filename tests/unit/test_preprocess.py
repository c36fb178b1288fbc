import numpy as np
import pytest
from PIL import Image

from gateway.config import Settings
from gateway.detection.preprocess import (
    batch_shape,
    canonical_shape,
    fill_input,
    plan_input,
    rescale,
    scale_for,
    stored_origin,
    to_model_input,
)
from gateway.detection.retinaface import BGR_MEAN, WIRE_FORMATS
from gateway.imaging.orientation import apply_orientation


def test_scale_enlarges_small_images_and_shrinks_large_ones():
    assert scale_for(416, 416, 1024) == pytest.approx(1024 / 416)
    assert scale_for(3000, 2000, 1024) == pytest.approx(1024 / 3000)


@pytest.mark.parametrize("side", [1, 64, 128, 341])
def test_a_small_image_is_enlarged_at_most_three_times(side):
    """An avatar or an animation's small frames: enlarged to 1024 they blurred (AP50 lower on every
    labeled set shrunk to 64-192 pixels) and cost a 1024-pixel photo's model work."""
    assert scale_for(side, side // 2 or 1, 1024) == 3.0
    assert plan_input(side, side, 1024, 32).size == (canonical_shape(3 * side, 3 * side, 1024, 32))
    assert scale_for(342, 100, 1024) == pytest.approx(1024 / 342)  # from here on, the long side at 1024


@pytest.mark.parametrize(
    "size,expected",
    [((1024, 683), (1024, 768)), ((683, 1024), (768, 1024)), ((1024, 1024), (1024, 1024)), ((51, 1024), (256, 1024))],
)
def test_canonical_shapes_pad_the_short_side(size, expected):
    assert canonical_shape(*size, target_size=1024, pad_multiple=256) == expected


@pytest.mark.parametrize(
    "frame,expected", [((720, 1280), (576, 1024)), ((1080, 1920), (576, 1024)), ((683, 1024), (704, 1024))]
)
def test_the_default_padding_spends_almost_no_model_time_on_padding(frame, expected):
    """Models on CPU (the default): a 16:9 frame goes as 1024x576, not padded to 768 (a quarter of
    the model's time)."""
    assert plan_input(*frame, 1024, Settings().pad_multiple).size == expected


PIXELS = np.full((400, 266, 3), (10, 20, 30), dtype=np.uint8)
CONTENT_WIDTH = round(266 * 1024 / 400)


def test_float32_input_is_mean_subtracted_nchw_and_zero_padded():
    tensor, plan = to_model_input(PIXELS, target_size=1024, pad_multiple=256, wire=WIRE_FORMATS["float32"])
    assert tensor.shape == (1, 3, 1024, 768) and tensor.dtype == np.float32
    assert plan.size == (1024, 768)
    assert plan.scale == pytest.approx(1024 / 400)
    np.testing.assert_allclose(tensor[0, :, 5, 5], [10 - 104, 20 - 117, 30 - 123])
    assert not tensor[0, :, :, CONTENT_WIDTH:].any()
    wide, _ = to_model_input(PIXELS.transpose(1, 0, 2), 1024, 256, WIRE_FORMATS["float32"])
    assert wide.shape == (1, 3, 768, 1024) and not wide[0, :, CONTENT_WIDTH:].any()  # padded below too


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
    stored = np.random.default_rng(orientation).integers(0, 255, (91, 131, 3), dtype=np.uint8)  # odd: part-blocks
    upright = apply_orientation(stored, orientation)
    fmt = WIRE_FORMATS[wire]
    shape = batch_shape(1, (224, 224), fmt)
    from_stored, from_upright = np.full(shape, 7, fmt.dtype), np.full(shape, 9, fmt.dtype)
    fill_input(from_stored[0], stored, scale, fmt, orientation=orientation)
    fill_input(from_upright[0], upright, scale, fmt)
    np.testing.assert_allclose(from_stored, from_upright, atol=1)


def test_both_wires_time_the_resize_and_the_rest_as_the_log_names_them():
    from gateway.detection.preprocess import batch_shape
    from gateway.timing import StageTimer

    for wire in WIRE_FORMATS.values():
        timer = StageTimer()
        fill_input(np.empty(batch_shape(1, (1024, 768), wire)[1:], wire.dtype), PIXELS, 1024 / 400, wire, timer)
        assert sorted(timer.seconds) == ["preprocess", "resize"], wire


@pytest.mark.parametrize("orientation", range(1, 9))
def test_the_blocks_start_at_the_stored_corner_that_turns_into_the_upright_top_left(orientation):
    """Pillow's own EXIF transposition (not the gateway's) says which stored corner a viewer shows
    top-left."""
    stored = Image.fromarray(np.arange(12, dtype=np.uint8).reshape(3, 4))
    method = {2: "FLIP_LEFT_RIGHT", 3: "ROTATE_180", 4: "FLIP_TOP_BOTTOM", 5: "TRANSPOSE", 6: "ROTATE_270",
              7: "TRANSVERSE", 8: "ROTATE_90"}.get(orientation)  # fmt: skip
    upright = stored.transpose(getattr(Image.Transpose, method)) if method else stored
    row, column = divmod(int(np.asarray(upright)[0, 0]), 4)
    assert stored_origin(orientation) == (row == 2, column == 3)


def test_a_one_pixel_strip_stays_one_pixel_wide():
    assert rescale(np.zeros((100, 1, 3), np.uint8), 0.5, 1).shape == (50, 1, 3)
    assert rescale(np.zeros((1, 100, 3), np.uint8), 0.5, 1).shape == (1, 50, 3)
    assert rescale(np.zeros((1000, 1, 3), np.uint8), 0.1, 1).shape == (100, 1, 3)  # blocks no wider than it
    assert rescale(np.zeros((1, 1000, 3), np.uint8), 0.1, 1).shape == (1, 100, 3)  # nor taller
    for wire in WIRE_FORMATS.values():  # resized straight into the slot: the same
        for strip, content, padding in (
            (np.full((100, 1, 3), 200, np.uint8), np.s_[:50, :1], np.s_[:50, 1:2]),
            (np.full((1, 100, 3), 200, np.uint8), np.s_[:1, :50], np.s_[1:2, :50]),
        ):
            slot = np.zeros(batch_shape(1, (64, 64), wire)[1:], wire.dtype)
            fill_input(slot, strip, 0.5, wire)
            image = slot if wire.channels_last else slot.transpose(1, 2, 0)
            assert (image[content] != image[padding]).all(), wire


def test_shrinking_below_half_averages_away_what_sampling_would_alias():
    """A one-pixel checkerboard shrunk by less than half is grey: each output pixel averages the
    pixels it covers (sampling them, as bilinear alone does, keeps black and white)."""
    board = np.dstack([(np.indices((300, 400)).sum(axis=0) % 2 * 255).astype(np.uint8)] * 3)
    for scale in (0.45, 1 / 3, 0.3, 0.2, 0.1, 0.05):
        shrunk = rescale(board, scale, 1)[..., 0].astype(float)
        assert shrunk.shape == (round(300 * scale), round(400 * scale)), scale
        assert np.abs(shrunk - 127.5).max() <= 16, scale


@pytest.mark.parametrize("scale", [1.5, 0.9, 0.75, 0.5, 0.4, 0.26, 0.13])
def test_resizing_keeps_where_things_are_and_their_brightness(scale):
    """A bright square lands where the scale puts it (its centroid within half an output pixel)
    and the picture's mean brightness is kept, enlarging, shrinking bilinearly and below half."""
    picture = np.full((600, 800, 3), 40, np.uint8)
    picture[200:300, 500:620] = 230
    out = rescale(picture, scale, 1)[..., 0].astype(float)
    weights = out - 40
    rows, cols = np.indices(out.shape)
    centroid = ((cols * weights).sum() / weights.sum(), (rows * weights).sum() / weights.sum())
    expected = (((500 + 620) / 2) * out.shape[1] / 800 - 0.5, ((200 + 300) / 2) * out.shape[0] / 600 - 0.5)
    np.testing.assert_allclose(centroid, expected, atol=0.5)
    assert abs(out.mean() - picture[..., 0].mean()) <= 1.5


def test_enlarging_interpolates():
    edge = np.dstack([np.array([[0, 0, 255, 255]], np.uint8)] * 3)
    for factor in (1.5, 4.0):
        row = rescale(edge, factor, 1)[0, :, 0]
        assert len(set(row.tolist()) - {0, 255}) >= 1, factor  # levels between black and white


def test_the_tiled_pass_sees_twice_the_standard_scale_up_to_its_limits():
    from gateway.detection.preprocess import MAX_TILED_UPSCALE, MIN_TILED_GAIN, tiled_scale

    assert tiled_scale(3000, 4000, 1024) == pytest.approx(2 * 1024 / 4000)
    assert tiled_scale(768, 500, 1024) == MAX_TILED_UPSCALE  # exactly MIN_TILED_GAIN x the standard: runs
    assert MAX_TILED_UPSCALE == MIN_TILED_GAIN * 1024 / 768
    assert tiled_scale(600, 400, 1024) is None  # capped at 2x the original: too little over 1.7x


def test_tiles_are_the_fewest_that_overlap_enough_and_cover_the_picture():
    from gateway.detection.preprocess import tile_starts

    assert tile_starts(500, 1024, 128) == [0] and tile_starts(1024, 1024, 128) == [0]
    assert tile_starts(1920, 1024, 128) == [0, 896]  # exactly two with the least overlap
    assert tile_starts(2000, 1024, 128) == [0, 488, 976]
    for length in (1025, 1500, 1921, 2817, 4000, 8192):
        starts = tile_starts(length, 1024, 128)
        assert starts[0] == 0 and starts[-1] + 1024 == length
        assert all(1024 - (b - a) >= 128 for a, b in zip(starts, starts[1:]))
        fewer = len(starts) - 1  # one tile fewer cannot cover with that overlap
        assert fewer * 1024 - (fewer - 1) * 128 < length


def test_tiles_are_fitted_to_the_picture_as_few_as_full_ones_overlapping_just_enough():
    """No model time on overlap or padding the tiled pass does not need: a 720p frame at 1.6x
    (2048x1152) goes as 3x2 tiles of 768x640, not 1024x1024; a side that fits one tile is one
    tile padded to the multiple; every pixel is covered and neighbours overlap by the minimum."""
    from gateway.detection.preprocess import fitted_tile, plan_tiles, tile_starts

    tiling = plan_tiles((1152, 2048), 1024, 128, 32, 1.6)
    assert tiling.tile_shape == (640, 768) and tiling.scale == 1.6 and tiling.scaled_size == (1152, 2048)
    assert tiling.origins == tuple((x, y) for y in (0, 512) for x in (0, 640, 1280))
    assert plan_tiles((1152, 2048), 1024, 128, 256, 1.0).tile_shape == (768, 768)  # the GPU's multiple
    assert plan_tiles((900, 700), 1024, 128, 32, 1.0).tile_shape == (928, 704)  # one tile, padded
    for length in (1, 500, 1024, 1025, 1500, 1920, 1921, 2000, 2817, 4000):
        for multiple in (1, 32, 256):
            side = fitted_tile(length, 1024, 128, multiple)
            starts = tile_starts(length, side, 128)
            assert side % multiple == 0 or side == 1024, (length, multiple)
            assert len(starts) == len(tile_starts(length, 1024, 128))  # as few tiles as full ones
            assert starts[0] == 0 and starts[-1] + side >= length  # every pixel covered
            assert all(side - (b - a) >= 128 for a, b in zip(starts, starts[1:]))
            if len(starts) > 1:  # a side shorter by the multiple would not cover with that overlap
                shorter = side - multiple
                assert len(starts) * shorter - (len(starts) - 1) * 128 < length, (length, multiple)


def test_each_tile_slot_holds_its_window_of_the_picture_and_pads_past_it():
    """Every slot of the tiled batch is the scaled picture's window at its origin, pixel for pixel,
    and where a tile reaches past the picture (one tile, padded to the multiple) the wire's colour."""
    from gateway.detection.preprocess import batch_shape, fill_tiles, plan_tiles

    scaled = np.random.default_rng(7).integers(0, 256, (1500, 2100, 3), dtype=np.uint8)
    wire = WIRE_FORMATS["uint8"]
    for size in ((1500, 2100), (1500, 900)):
        picture = scaled[: size[0], : size[1]]
        tiling = plan_tiles(size, 1024, 128, 32, 1.0)
        rows, cols = tiling.tile_shape
        tensor = np.zeros(batch_shape(len(tiling.origins), tiling.tile_shape, wire), np.uint8)
        fill_tiles(tensor, picture, tiling, wire)
        for slot, (x, y) in zip(tensor, tiling.origins):
            window = picture[y : y + rows, x : x + cols]
            np.testing.assert_array_equal(slot[: window.shape[0], : window.shape[1]], window)
            assert (slot[:, window.shape[1] :] == BGR_MEAN).all() and (slot[window.shape[0] :] == BGR_MEAN).all()
    assert tiling.tile_shape == (832, 928) and len(tiling.origins) == 2  # 900 wide: one tile, padded


def test_a_one_pixel_strip_plans_a_one_pixel_input_where_nothing_is_padded():
    from gateway.detection.preprocess import plan_input

    assert plan_input(1000, 1, 1024, 1).size == (1024, 1)
    assert plan_input(1, 1000, 1024, 1).size == (1, 1024)
