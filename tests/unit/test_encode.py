"""gateway/imaging/encode.py's outputs, read back with Pillow (an independent decoder)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageSequence

from evaluation.images import astronaut
from gateway.imaging.encode import as_pillow, encode_animation, encode_image, keeps_alpha, with_app1

RNG = np.random.default_rng(11)


def bgr_photo(width: int = 96, height: int = 64) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(astronaut().resize((width, height)))[:, :, ::-1])


def read_back(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


def test_a_gif_is_one_frame_of_the_pixels_shown_once():
    pixels = bgr_photo()
    gif = read_back(encode_image(pixels, "gif", 85))
    assert (gif.format, gif.size, getattr(gif, "n_frames", 1)) == ("GIF", (96, 64), 1)
    assert "loop" not in gif.info  # shown once: no loop extension
    assert np.abs(np.asarray(gif.convert("RGB"), dtype=int) - pixels[:, :, ::-1]).mean() < 12


def test_a_webp_at_quality_100_is_lossless_as_cloudflare_s_still_or_animated():
    """Cloudflare: "use quality=100 to return the WebP lossless format" (it was lossy, the VP8 kind)."""
    pixels = bgr_photo()
    still = encode_image(pixels, "webp", 100)
    assert still[12:16] == b"VP8L" and np.array_equal(np.asarray(read_back(still).convert("RGB"))[..., ::-1], pixels)
    assert encode_image(pixels, "webp", 99)[12:16] == b"VP8 "
    frames = [pixels, np.ascontiguousarray(pixels[::-1])]
    animated = Image.open(io.BytesIO(encode_animation(frames, [50, 50], 0, "webp", 100)))
    for index, frame in enumerate(ImageSequence.Iterator(animated)):
        assert np.array_equal(np.asarray(frame.convert("RGB"))[..., ::-1], frames[index]), index


def test_png8_is_a_palette_png_close_to_the_pixels():
    pixels = bgr_photo()
    png8 = read_back(encode_image(pixels, "png8", 85))
    assert (png8.format, png8.mode) == ("PNG", "P") and len(png8.getcolors(256) or []) <= 256
    assert np.abs(np.asarray(png8.convert("RGB"), dtype=int) - pixels[:, :, ::-1]).mean() < 6


def test_avif_follows_the_quality_asked():
    pixels = bgr_photo(128, 96)
    low, high = encode_image(pixels, "avif", 20), encode_image(pixels, "avif", 90)
    assert read_back(high).format == "AVIF" and len(low) < len(high) / 2
    assert np.abs(np.asarray(read_back(high).convert("RGB"), dtype=int) - pixels[:, :, ::-1]).mean() < 4


def test_bgra_becomes_rgba_in_that_order():
    bgra = np.zeros((2, 3, 4), np.uint8)
    bgra[..., 0], bgra[..., 1], bgra[..., 2], bgra[..., 3] = 10, 20, 30, 40
    picture = as_pillow(bgra)
    assert picture.mode == "RGBA" and picture.getpixel((0, 0)) == (30, 20, 10, 40)
    assert as_pillow(bgra[..., :3].copy()).getpixel((0, 0)) == (30, 20, 10)


@pytest.mark.parametrize(
    ("requested", "source", "kept"), [(None, "PNG", True), ("jpeg", "PNG", False), (None, "GIF", False)]
)
def test_transparency_is_kept_only_by_the_formats_that_hold_it(requested, source, kept):
    assert keeps_alpha(requested, source) is kept


def exif_of(orientation: int, padding: int = 0) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    if padding:
        exif[0x010E] = "x" * padding  # ImageDescription: grows the block
    return b"Exif\0\0" + exif.tobytes()


def test_exif_goes_after_the_jfif_segment_and_reads_back():
    jpeg = encode_image(bgr_photo(), "jpeg", 85)
    assert jpeg[2:4] == b"\xff\xe0"  # OpenCV writes JFIF's APP0
    tagged = encode_image(bgr_photo(), "jpeg", 85, exif=exif_of(1, padding=300))
    app0_end = 4 + int.from_bytes(jpeg[4:6], "big")
    assert tagged[:app0_end] == jpeg[:app0_end] and tagged[app0_end : app0_end + 2] == b"\xff\xe1"
    assert read_back(tagged).getexif()[0x010E] == "x" * 300
    assert read_back(tagged).info.get("jfif") is not None


def test_exif_goes_after_the_start_of_image_where_there_is_no_jfif_segment():
    jpeg = encode_image(bgr_photo(), "jpeg", 85)
    bare = jpeg[:2] + jpeg[4 + int.from_bytes(jpeg[4:6], "big") :]  # APP0 dropped
    tagged = with_app1(bare, exif_of(1, padding=10))
    assert tagged[2:4] == b"\xff\xe1" and read_back(tagged).getexif()[0x010E] == "x" * 10


def test_exif_up_to_a_segments_size_is_written_and_larger_left_out():
    jpeg = encode_image(bgr_photo(), "jpeg", 85)
    most = exif_of(1, padding=1)
    most += b"\0" * (0xFFFF - 2 - len(most))  # a segment's length counts its own 2 bytes
    assert len(with_app1(jpeg, most)) == len(jpeg) + 2 + 0xFFFF
    assert with_app1(jpeg, most + b"\0") == jpeg


def test_exif_is_for_jpeg_only():
    pixels = bgr_photo()
    assert encode_image(pixels, "png", 85, exif=exif_of(1)) == encode_image(pixels, "png", 85)
