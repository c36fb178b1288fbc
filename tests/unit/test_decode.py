import io

import numpy as np
import pytest
from PIL import Image, ImageOps

from gateway.decode import apply_orientation, decode_image, read_header
from gateway.errors import ImageTooLarge, UnsupportedImage
from tests.support import encoded, png_declaring


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


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "BMP", "GIF", "TIFF"])
def test_formats_decode_to_bgr(fmt):
    image = Image.new("RGB", (40, 30), (200, 100, 50))
    decoded = decode_image(encoded(image, fmt), max_pixels=10_000)
    assert decoded.format == fmt
    assert decoded.pixels.shape == (30, 40, 3)
    np.testing.assert_allclose(decoded.pixels[15, 20], (50, 100, 200), atol=8)


def test_exif_rotation_is_applied():
    image = Image.new("RGB", (40, 30))
    exif = image.getexif()
    exif[0x0112] = 6
    assert decode_image(encoded(image, "JPEG", exif=exif), 10_000).pixels.shape == (40, 30, 3)


def test_bomb_is_refused_from_its_header():
    with pytest.raises(ImageTooLarge):
        read_header(png_declaring(100_000, 100_000), max_pixels=50_000_000)
    with pytest.raises(ImageTooLarge):
        read_header(png_declaring(8000, 8000), max_pixels=50_000_000)
    assert read_header(png_declaring(7000, 7000), max_pixels=50_000_000).width == 7000


@pytest.mark.parametrize(
    "data", [b"", b"hello world", b"\x89PNG\r\n\x1a\n", encoded(Image.new("RGB", (9, 9)), "PNG")[:40]]
)
def test_non_images_and_broken_files_are_unsupported(data):
    with pytest.raises(UnsupportedImage):
        decode_image(data, max_pixels=10_000)
