"""gateway/imaging/normalise.py: every decoded still as 8-bit BGR, judged pixel by pixel against
Pillow's own conversions and the arithmetic of compositing, not against the module's output."""

from __future__ import annotations

import io
import tracemalloc

import cv2
import numpy as np
import pytest
from PIL import Image, ImageCms

from gateway.imaging.colour import CONVERTED, INTENT, SRGB, cmyk_to_srgb
from gateway.imaging.normalise import (
    BAND_ROWS,
    as_bgr,
    deep_to_8bit,
    has_alpha,
    pillow_to_bgr,
    to_8bit,
    unpremultiplied,
    with_alpha,
)

RNG = np.random.default_rng(5)


def rgb_pixels(height: int = 6, width: int = 5, channels: int = 3) -> np.ndarray:
    return RNG.integers(0, 256, (height, width, channels), dtype=np.uint8)


def test_rgb_and_grey_come_out_as_their_pixels_in_bgr_with_nothing_done_to_colour():
    pixels = rgb_pixels()
    bgr, done = pillow_to_bgr(Image.fromarray(pixels, "RGB"))
    assert done is None and bgr.dtype == np.uint8
    np.testing.assert_array_equal(bgr, pixels[..., ::-1])
    grey = pixels[..., 0]
    bgr, done = pillow_to_bgr(Image.fromarray(grey, "L"))
    assert done is None
    np.testing.assert_array_equal(bgr, np.dstack([grey] * 3))


@pytest.mark.parametrize("background", [(255, 255, 255), (255, 0, 0), (10, 200, 30)])
def test_transparency_is_composited_onto_the_background_given_in_bgr(background):
    """Each pixel: alpha * colour + (1 - alpha) * background, within Pillow's rounding (1 level)."""
    rgba = rgb_pixels(channels=4)
    rgba[0, 0, 3], rgba[0, 1, 3] = 0, 255  # one wholly transparent pixel, one opaque
    bgr, done = pillow_to_bgr(Image.fromarray(rgba, "RGBA"), background)
    assert done is None and bgr.shape == (6, 5, 3)
    alpha = rgba[..., 3:].astype(float) / 255
    expected = alpha * rgba[..., 2::-1] + (1 - alpha) * np.array(background, float)
    assert np.abs(bgr.astype(float) - expected).max() <= 1
    assert bgr[0, 0].tolist() == list(background) and bgr[0, 1].tolist() == rgba[0, 1, 2::-1].tolist()


def test_the_default_background_is_white():
    clear = np.zeros((2, 2, 4), np.uint8)
    assert pillow_to_bgr(Image.fromarray(clear, "RGBA"))[0].tolist() == [[[255, 255, 255]] * 2] * 2


def test_without_a_background_transparency_is_kept_premultiplied_and_given_back_straight():
    rgba = np.array([[[200, 100, 50, 128], [200, 100, 50, 255], [9, 9, 9, 0]]], np.uint8)
    bgra, done = pillow_to_bgr(Image.fromarray(rgba, "RGBA"), None)
    assert done is None and bgra.shape == (1, 3, 4)
    expected = np.rint(rgba[..., 2::-1].astype(float) * rgba[..., 3:] / 255)
    assert np.abs(bgra[..., :3].astype(float) - expected).max() <= 1
    assert bgra[..., 3].tolist() == [[128, 255, 0]]
    straight, alpha = unpremultiplied(bgra)
    assert alpha is not None and alpha.tolist() == [[128, 255, 0]] and alpha.flags.c_contiguous
    assert np.abs(straight[0, :2].astype(int) - rgba[0, :2, 2::-1]).max() <= 2
    assert straight[0, 2].tolist() == [0, 0, 0]  # nothing left of a wholly transparent pixel's colour


def test_unpremultiplied_divides_by_alpha_rounds_and_clips():
    bgra = np.array([[[64, 32, 0, 128], [200, 10, 255, 100], [0, 0, 0, 0], [1, 2, 3, 1]]], np.uint8)
    straight, alpha = unpremultiplied(bgra)
    assert straight.dtype == np.uint8
    # 64 * 255 / 128 = 127.5 -> 128 (NumPy rounds half to even: 128); 200 * 2.55 = 510 -> 255 (clipped)
    assert straight.tolist() == [[[128, 64, 0], [255, 26, 255], [0, 0, 0], [255, 255, 255]]]
    assert alpha is not None and alpha.tolist() == [[128, 100, 0, 1]]
    bgr = rgb_pixels()
    assert unpremultiplied(bgr)[0] is bgr and unpremultiplied(bgr)[1] is None
    grey = bgr[..., 0]
    assert unpremultiplied(grey)[0] is grey and unpremultiplied(grey)[1] is None
    back = with_alpha(straight, alpha)
    assert back.shape == (1, 4, 4) and back[..., 3].tolist() == [[128, 100, 0, 1]]
    assert with_alpha(bgr, None) is bgr


@pytest.mark.parametrize("mode", ["RGBa", "LA", "La", "PA"])
def test_every_mode_with_an_alpha_channel_is_transparent(mode):
    assert has_alpha(Image.new(mode, (2, 2)))


def test_a_transparent_colour_counts_as_transparency_and_is_composited():
    palette = Image.new("P", (2, 1))
    palette.putpalette([255, 0, 0, 0, 0, 255])
    palette.putdata([0, 1])
    assert not has_alpha(palette) and not has_alpha(Image.new("RGB", (1, 1))) and not has_alpha(Image.new("L", (1, 1)))
    palette.info["transparency"] = 1  # the blue entry
    assert has_alpha(palette)
    assert pillow_to_bgr(palette, (0, 255, 0))[0].tolist() == [[[0, 0, 255], [0, 255, 0]]]
    rgb = Image.fromarray(np.array([[[10, 20, 30], [40, 50, 60]]], np.uint8), "RGB")
    rgb.info["transparency"] = (40, 50, 60)
    assert pillow_to_bgr(rgb)[0].tolist() == [[[30, 20, 10], [255, 255, 255]]]


def test_cmyk_is_converted_as_the_colour_module_converts_it():
    cmyk = Image.fromarray(RNG.integers(0, 256, (4, 4, 4), dtype=np.uint8), "CMYK")
    bgr, done = pillow_to_bgr(cmyk)
    expected, expected_done = cmyk_to_srgb(cmyk)
    np.testing.assert_array_equal(bgr, expected)
    assert done == expected_done


def test_cielab_goes_through_littlecms_to_srgb():
    # Pillow's LAB: L 0-255, a and b as signed bytes (0: neutral)
    lab = Image.fromarray(np.array([[[255, 0, 0], [0, 0, 0], [136, 80, 67]]], np.uint8), "LAB")
    bgr, done = pillow_to_bgr(lab)
    assert done == CONVERTED
    reference = ImageCms.applyTransform(
        lab,
        ImageCms.buildTransform(
            ImageCms.createProfile("LAB"), ImageCms.createProfile("sRGB"), "LAB", "RGB", ImageCms.Intent.PERCEPTUAL
        ),
    )
    assert reference is not None
    np.testing.assert_array_equal(bgr, np.asarray(reference)[..., ::-1])
    assert bgr[0, 0].min() >= 250 and bgr[0, 1].max() <= 5  # white and black
    assert bgr[0, 2, 2] > 150 > bgr[0, 2, 0]  # a red: more red than blue


@pytest.mark.parametrize("mode", ["I;16", "I"])
def test_deep_grey_keeps_its_top_byte_as_libvips_scales_it(mode):
    samples = np.array([[0, 257, 33024, 65535, 128 * 257 + 129]], np.uint16 if mode == "I;16" else np.int32)
    image = Image.frombytes(mode, (5, 1), samples.tobytes()) if mode == "I;16" else Image.fromarray(samples, "I")
    bgr, done = pillow_to_bgr(image)
    assert done is None
    assert bgr[..., 0].tolist() == bgr[..., 2].tolist() == [[0, 1, 128, 255, 129]]  # x / 257, rounded


def test_deep_samples_that_fit_in_a_byte_are_kept_and_floats_rounded():
    assert to_8bit(np.array([[0, 17, 255]], np.int32)).tolist() == [[0, 17, 255]]
    assert to_8bit(np.array([[0.4, 0.6, 254.5]], np.float32)).tolist() == [[0, 1, 254]]
    # one sample over 255: the whole picture is deep, every sample scaled
    assert to_8bit(np.array([[0.4, 254.5, 300.0, 65535]], np.float32)).tolist() == [[0, 1, 1, 255]]
    assert to_8bit(np.array([[3, 250]], np.uint8)).tolist() == [[3, 250]]
    assert to_8bit(np.zeros((0, 0), np.uint16)).shape == (0, 0)
    assert to_8bit(np.array([[-5, 256 * 257]], np.int32)).tolist() == [[0, 255]]


def test_a_deep_grey_transparent_value_becomes_alpha():
    samples = np.array([[1000, 5000, 65535]], np.uint16)
    image = Image.frombytes("I;16", (3, 1), samples.tobytes())
    assert deep_to_8bit(image).mode == "L"
    image.info["transparency"] = 5000
    grey = deep_to_8bit(image)
    assert grey.mode == "LA"
    assert np.asarray(grey).tolist() == [[[4, 255], [19, 0], [255, 255]]]
    assert pillow_to_bgr(image, (0, 0, 0))[0][..., 0].tolist() == [[4, 0, 255]]


def test_opencv_grey_becomes_three_equal_channels():
    grey = RNG.integers(0, 256, (3, 4), dtype=np.uint8)
    bgr = as_bgr(grey)
    assert bgr.shape == (3, 4, 3) and all((bgr[..., c] == grey).all() for c in range(3))
    colour = rgb_pixels()
    assert as_bgr(colour) is colour


def test_grey_with_alpha_kept_comes_out_premultiplied_bgra():
    la = Image.fromarray(np.array([[[200, 128], [90, 255]]], np.uint8), "LA")
    bgra, _ = pillow_to_bgr(la, None)
    assert bgra.shape == (1, 2, 4) and bgra[..., 3].tolist() == [[128, 255]]
    assert abs(int(bgra[0, 0, 0]) - 100) <= 1 and bgra[0, 1, :3].tolist() == [90, 90, 90]


def test_bilevel_and_ycbcr_pictures_come_out_as_pillow_makes_them_rgb():
    bilevel = Image.fromarray(np.array([[0, 255, 255]], np.uint8), "L").convert("1")
    assert pillow_to_bgr(bilevel)[0].tolist() == [[[0, 0, 0], [255, 255, 255], [255, 255, 255]]]
    ycbcr = Image.fromarray(rgb_pixels(), "RGB").convert("YCbCr")
    np.testing.assert_array_equal(pillow_to_bgr(ycbcr)[0], np.asarray(ycbcr.convert("RGB"))[..., ::-1])


def test_deep_samples_from_256_up_are_scaled_and_negative_ones_are_black():
    assert to_8bit(np.array([[10, 256]], np.uint16)).tolist() == [[0, 1]]
    assert to_8bit(np.array([[-300, 65535]], np.int32)).tolist() == [[0, 255]]


def tall(mode: str) -> Image.Image:
    """A picture in `mode` of two and a half bands' rows, random samples (some wholly transparent)."""
    height = 2 * BAND_ROWS + BAND_ROWS // 2
    if mode == "P":
        picture = Image.fromarray(RNG.integers(0, 256, (height, 40), dtype=np.uint8), "L").convert("P")
        picture.info["transparency"] = 7
        return picture
    return Image.fromarray(rgb_pixels(height, 40, len(mode)), mode)


@pytest.mark.parametrize("mode", ["RGBA", "LA", "P", "RGB"])
def test_band_by_band_is_pillows_whole_picture_conversion_exactly(mode):
    """Flattened, kept premultiplied or plain: every row, across the bands' edges and the last short
    band, as Pillow converts the whole picture at once."""
    picture = tall(mode)
    background = (10, 200, 30)
    fill = Image.new("RGBA", picture.size, (*background[::-1], 255))
    flat = Image.alpha_composite(fill, picture.convert("RGBA")).convert("RGB") if has_alpha(picture) else picture
    np.testing.assert_array_equal(pillow_to_bgr(picture, background)[0], np.asarray(flat.convert("RGB"))[..., ::-1])
    if has_alpha(picture):
        kept = cv2.cvtColor(np.asarray(picture.convert("RGBA").convert("RGBa")), cv2.COLOR_RGBA2BGRA)
        np.testing.assert_array_equal(pillow_to_bgr(picture, None)[0], kept)
        straight, alpha = unpremultiplied(kept)
        expected = kept[..., :3] * (255 / np.maximum(kept[..., 3], 1).astype(np.float32))[..., None]
        np.testing.assert_array_equal(straight, np.clip(np.rint(expected), 0, 255).astype(np.uint8))
        np.testing.assert_array_equal(alpha, kept[..., 3])


def traced_peak(convert, *args) -> int:
    tracemalloc.start()
    try:
        convert(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("background", [(255, 255, 255), None])
def test_a_transparent_picture_costs_its_pixels_once_not_several_copies(background):
    """A transparent PNG goes through Pillow: its whole-picture converts and array copies held 5.5
    times its pixels at once (+2 GiB for a 98 MP RGBA PNG); band by band, the answer's array and a
    band's temporaries. Straightening the kept colour held float copies (+4.3 GiB in all to hide
    that PNG's faces); now the answer's arrays."""
    picture = Image.fromarray(rgb_pixels(3000, 1000, 4), "RGBA")  # twelve bands
    band = BAND_ROWS * 1000 * 4
    answer = 3000 * 1000 * (3 if background else 4)
    assert traced_peak(pillow_to_bgr, picture, background) < answer + 3 * band
    if background is None:
        kept = pillow_to_bgr(picture, None)[0]
        float_band = BAND_ROWS * 1000 * 3 * 4
        assert traced_peak(unpremultiplied, kept) < 3000 * 1000 * 4 + 3 * float_band  # straight BGR, its alpha


def test_deep_grey_is_scaled_band_by_band_as_the_whole_picture_would_be_without_float_copies():
    """16-bit grey (a 216 KB PNG of 98 MP took +2.6 GiB in float copies): x / 257 rounded, across the
    bands' edges, holding the answer and a band's floats."""
    samples = RNG.integers(0, 65536, (3000, 1000), dtype=np.uint16)  # twelve bands
    expected = np.clip(np.rint(samples / 257), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(to_8bit(samples), expected)
    assert traced_peak(to_8bit, samples) < samples.size + 4 * BAND_ROWS * 1000 * 8


def test_profile_and_cmyk_conversions_band_by_band_as_at_once_without_whole_copies():
    """A Display P3 picture to sRGB and a CMYK one to RGB (a 100 MP Adobe RGB JPEG's faces hidden took
    +1.6 GiB, a CMYK one's +1.3): LittleCMS's and Pillow's pixels of the whole picture, across the
    bands' edges, holding the answer and a band's copies."""
    from gateway.imaging.colour import to_srgb
    from gateway.imaging.profiles import DISPLAY_P3

    bgr = rgb_pixels(3000, 1000)  # twelve bands
    whole = ImageCms.applyTransform(
        Image.fromarray(bgr[..., ::-1].copy()),
        ImageCms.buildTransform(ImageCms.ImageCmsProfile(io.BytesIO(DISPLAY_P3)), SRGB, "RGB", "RGB", INTENT),
    )
    converted, done = to_srgb(bgr, DISPLAY_P3)
    assert done == CONVERTED
    np.testing.assert_array_equal(converted, np.asarray(whole)[..., ::-1])
    band = BAND_ROWS * 1000 * 3
    assert traced_peak(to_srgb, bgr, DISPLAY_P3) < bgr.nbytes + 4 * band
    cmyk = Image.fromarray(rgb_pixels(3000, 1000, 4), "CMYK")
    np.testing.assert_array_equal(cmyk_to_srgb(cmyk)[0], np.asarray(cmyk.convert("RGB"))[..., ::-1])
    assert traced_peak(cmyk_to_srgb, cmyk) < bgr.nbytes + 4 * band
