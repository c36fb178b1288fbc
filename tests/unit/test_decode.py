import io
import struct
import tracemalloc
import zlib
from functools import cache

import cv2
import numpy as np
import pytest
from PIL import Image, ImageOps

from evaluation.corpus import corpus, over, reference
from evaluation.images import STORED_AS, astronaut, encoded, png_declaring
from gateway.decode import decode_image, jpeg_reduction, read_header
from gateway.encode import output_format
from gateway.errors import ImageTooLarge, MissingImage, UnsupportedImage
from gateway.imaging.orientation import apply_orientation
from tests.support import decode


@pytest.mark.parametrize("orientation", range(1, 9))
def test_orientation_matches_pillow(orientation):
    rgb = np.random.default_rng(orientation).integers(0, 255, (5, 7, 3), dtype=np.uint8)
    image = Image.fromarray(rgb)
    exif = image.getexif()
    exif[0x0112] = orientation
    jpeg = Image.open(io.BytesIO(encoded(image, "JPEG", exif=exif, quality=100)))
    expected = np.asarray(ImageOps.exif_transpose(jpeg))
    stored = np.asarray(jpeg.convert("RGB"))
    np.testing.assert_array_equal(apply_orientation(stored, orientation), expected)


@pytest.mark.parametrize("name", ["png-16bit", "png-16bit-alpha", "apng-16bit", "apng-16bit-alpha", "apng-8bit"])
def test_deep_pngs_and_apngs_decode_as_pillow_reads_them(name):
    """16-bit samples whose two bytes differ (a reader that swaps them is 80 levels off: OpenCV's
    APNG reader did, issue #51), opaque and with alpha, judged against Pillow's picture on white."""
    data = corpus()[name]
    pixels = decode(data, 10_000).pixels
    expected = over(reference(data), (255, 255, 255))
    assert np.abs(pixels[..., ::-1] - expected).mean() <= 0.5


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "BMP", "GIF", "TIFF"])
def test_formats_decode_to_bgr(fmt):
    image = Image.new("RGB", (40, 30), (200, 100, 50))
    decoded = decode(encoded(image, fmt), 10_000)
    assert decoded.format == fmt
    assert decoded.pixels.shape == (30, 40, 3)
    np.testing.assert_allclose(decoded.pixels[15, 20], (50, 100, 200), atol=8)


def test_exif_rotation_is_applied():
    image = Image.new("RGB", (40, 30))
    exif = image.getexif()
    exif[0x0112] = 6
    assert decode(encoded(image, "JPEG", exif=exif), 10_000).pixels.shape == (40, 30, 3)


def test_bomb_is_refused_from_its_header():
    with pytest.raises(ImageTooLarge):
        read_header(png_declaring(100_000, 100_000), max_pixels=50_000_000)
    with pytest.raises(ImageTooLarge):
        read_header(png_declaring(8000, 8000), max_pixels=50_000_000)
    assert read_header(png_declaring(7000, 7000), max_pixels=50_000_000).width == 7000


def test_an_empty_image_is_missing():
    with pytest.raises(MissingImage, match="empty"):
        decode(b"", 10_000)


@pytest.mark.parametrize("data", [b"hello world", b"\x89PNG\r\n\x1a\n", encoded(Image.new("RGB", (9, 9)), "PNG")[:40]])
def test_non_images_and_broken_files_are_unsupported(data):
    with pytest.raises(UnsupportedImage):
        decode(data, 10_000)


@cache
def phone_photo() -> Image.Image:
    """A 4032x3024 picture with detail (the astronaut, enlarged), upright."""
    return astronaut().resize((4032, 3024), Image.Resampling.BICUBIC)


@pytest.mark.parametrize("orientation", range(1, 9))
def test_reduced_decode_is_upright_and_matches_the_full_one(orientation):
    upright = phone_photo()
    stored = upright.transpose(STORED_AS[orientation]) if orientation in STORED_AS else upright
    exif = stored.getexif()
    exif[0x0112] = orientation
    data = encoded(stored, "JPEG", exif=exif, quality=92)
    header = read_header(data, 50_000_000)
    assert header.upright_size == (4032, 3024)
    reduced = decode_image(data, header, min_scale=0.25)
    assert reduced.pixels.shape == (756, 1008, 3) and reduced.size == (4032, 3024)
    np.testing.assert_allclose(reduced.scale, [0.25, 0.25])
    expected = cv2.resize(np.asarray(upright)[:, :, ::-1], (1008, 756), interpolation=cv2.INTER_AREA)
    assert np.abs(reduced.pixels.astype(int) - expected).mean() < 3


def test_the_reduction_keeps_the_pixels_the_work_needs():
    jpeg = read_header(encoded(Image.new("RGB", (4032, 3024)), "JPEG"), 50_000_000)
    assert [jpeg_reduction(jpeg, s) for s in (1024 / 4032, 2048 / 4032, 0.125, 0.1, 0.6, 1.0)] == [2, 1, 8, 8, 1, 1]
    png = read_header(encoded(Image.new("RGB", (4032, 3024)), "PNG"), 50_000_000)
    assert jpeg_reduction(png, 0.125) == 1


def test_a_50_megapixel_jpeg_is_never_held_at_full_size():
    gradient = np.linspace(0, 255, 8660, dtype=np.uint8)[None, :, None].repeat(5773, axis=0).repeat(3, axis=2)
    data = encoded(Image.fromarray(gradient), "JPEG", quality=80)
    del gradient
    header = read_header(data, 50_000_000)
    tracemalloc.start()
    try:
        image = decode_image(data, header, min_scale=1024 / 8660)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    full_size = 8660 * 5773 * 3
    assert image.pixels.shape == (722, 1083, 3)
    assert peak < full_size / 20, f"peak {peak / 2**20:.1f} MiB while decoding"


def test_a_text_chunk_over_pillows_bound_is_too_large_not_unreadable():
    from PIL import PngImagePlugin

    body = b"Comment\0\0" + zlib.compress(b"x" * (PngImagePlugin.MAX_TEXT_CHUNK + 1))
    chunk = struct.pack(">I", len(body)) + b"zTXt" + body + struct.pack(">I", zlib.crc32(b"zTXt" + body))
    png = encoded(Image.new("RGB", (8, 8)), "PNG")
    with pytest.raises(ImageTooLarge, match="text chunk"):
        read_header(png[:33] + chunk + png[33:], 10_000)


def test_an_mpo_is_read_as_its_first_picture():
    first, second = Image.new("RGB", (40, 30), (200, 0, 0)), Image.new("RGB", (40, 30), (0, 0, 200))
    buffer = io.BytesIO()
    first.save(buffer, "MPO", save_all=True, append_images=[second])
    image = decode(buffer.getvalue(), 10_000)
    assert image.format == "JPEG" and np.abs(image.pixels[15, 20].astype(int) - (0, 0, 200)).max() < 8


@pytest.mark.parametrize(("requested", "source"), [(None, "AVIF"), ("avif", "JPEG")])
def test_avifs_bound_applies_however_avif_was_chosen(requested, source):
    assert output_format(requested, source, (1600, 900)) == "avif"
    assert output_format(requested, source, (1601, 900)) == "webp"
