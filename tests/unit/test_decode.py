import io
import struct
import tracemalloc
import zlib
from functools import cache

import cv2
import numpy as np
import pytest
from PIL import Image, ImageOps, PngImagePlugin, TiffImagePlugin

from evaluation.corpus import corpus, over, png_chunk, png_chunks, reference
from evaluation.images import STORED_AS, astronaut, encoded, png_declaring
from evaluation.sources import GHOSTSCRIPT, cmyk_jpeg
from gateway.errors import ImageTooLarge, MissingImage, UnsupportedImage
from gateway.imaging.decode import decode_image, jpeg_reduction, read_header, with_resolution
from gateway.imaging.encode import output_format
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
    with pytest.raises(ImageTooLarge) as refused:
        read_header(png[:33] + chunk + png[33:], 10_000)
    assert refused.value.message == "a text chunk (zTXt, iTXt) of the image is over Pillow's limit"


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


def test_an_apng_s_still_is_its_first_frame_played_not_its_default_image():
    """anim=false, /v1/detect and the other still answers: the first frame a viewer plays, not the
    default image that viewers without APNG show instead (often a notice that they cannot play it)."""
    notice, *played = [Image.new("RGB", (8, 6), colour) for colour in ((128, 128, 128), (250, 0, 0), (0, 0, 250))]
    data = encoded(notice, "PNG", save_all=True, append_images=played, default_image=True, duration=[40, 40])
    decoded = decode_image(data, read_header(data, 10_000))
    assert decoded.pixels[3, 4].tolist() == [0, 0, 250]  # red, as BGR


def test_a_header_says_mode_frames_animation_and_exif():
    frames = [Image.new("RGB", (8, 6), colour).convert("P") for colour in ((250, 0, 0), (0, 250, 0), (0, 0, 250))]
    gif = read_header(encoded(frames[0], "GIF", save_all=True, append_images=frames[1:]), 10_000)
    assert (gif.format, gif.mode, gif.frames, gif.animated) == ("GIF", "P", 3, True)
    apng = read_header(encoded(frames[0].convert("RGB"), "PNG", save_all=True, append_images=frames[1:]), 10_000)
    assert (apng.format, apng.frames, apng.animated) == ("PNG", 3, True)
    avif = read_header(encoded(frames[0].convert("RGB"), "AVIF", save_all=True, append_images=frames[1:]), 10_000)
    assert (avif.format, avif.frames, avif.animated) == ("AVIF", 3, True)
    pages = read_header(encoded(frames[0].convert("RGB"), "TIFF", save_all=True, append_images=frames[1:]), 10_000)
    assert (pages.frames, pages.animated) == (3, False)  # a multi-page TIFF is read as its first page
    exif = Image.Exif()
    exif[0x010F] = "PhoneMaker"
    jpeg = read_header(encoded(Image.new("RGB", (8, 6)), "JPEG", exif=exif), 10_000)
    assert (jpeg.mode, jpeg.frames, jpeg.animated) == ("RGB", 1, False)
    assert b"PhoneMaker" in jpeg.exif
    assert read_header(encoded(Image.new("RGBA", (8, 6)), "PNG"), 10_000).exif == b""


LIMITS = "the limits of 1000000 pixels and 12000 a side"


@pytest.mark.parametrize(
    ("data", "error", "says"),
    [
        (
            png_declaring(5000, 5000),
            ImageTooLarge,
            "5000x5000 is more than the limits of 1000000 pixels and 12000 a side",
        ),
        (
            png_declaring(12_001, 10),
            ImageTooLarge,
            "12001x10 is more than the limits of 1000000 pixels and 12000 a side",
        ),
        (encoded(Image.new("RGB", (8, 8)), "PPM"), UnsupportedImage, "image format PPM is not supported"),
        (b"not an image", UnsupportedImage, "the image is not readable as AVIF, BMP, GIF, HEIF, JPEG, PNG, TIFF, WEBP"),
    ],
)
def test_a_refused_header_says_why(data, error, says):
    with pytest.raises(error) as refused:
        read_header(data, 1_000_000)
    assert refused.value.message == says


def test_a_bomb_says_the_limit_it_is_over():
    with pytest.raises(ImageTooLarge) as refused:
        read_header(png_declaring(100_000, 100_000), max_pixels=50_000_000)
    assert refused.value.message == "the image declares more than 50000000 pixels"


def test_exactly_the_pixel_limit_is_taken():
    assert read_header(png_declaring(1000, 1000), 1_000_000).width == 1000
    with pytest.raises(ImageTooLarge):
        read_header(png_declaring(1000, 1001), 1_000_000)


@pytest.mark.parametrize(("value", "read"), [(0, 1), (1, 1), (8, 8), (9, 1), (65535, 1)])
def test_an_exif_orientation_outside_1_to_8_is_upright(value, read):
    exif = Image.Exif()
    exif[0x0112] = value
    assert read_header(encoded(Image.new("RGB", (8, 6)), "JPEG", exif=exif), 10_000).orientation == read


def test_a_corrupt_exif_block_is_upright():
    jpeg = encoded(Image.new("RGB", (8, 6)), "JPEG")
    body = b"Exif\0\0MM\0*\0\0\0\x08\xff\xff"  # an IFD that claims 65,535 entries and holds none
    app1 = b"\xff\xe1" + (len(body) + 2).to_bytes(2, "big") + body
    assert read_header(jpeg[:2] + app1 + jpeg[2:], 10_000).orientation == 1


def test_a_tiff_is_turned_by_its_decoder_so_its_orientation_is_1():
    exif = Image.Exif()
    exif[0x0112] = 6
    tiff = read_header(encoded(Image.new("RGB", (8, 6)), "TIFF", exif=exif), 10_000)
    assert (tiff.orientation, tiff.upright_size) == (1, (6, 8))


def tiff_tagged(tags: dict[int, tuple[int, object]]) -> bytes:
    """An 8x6 TIFF whose first directory has `tags` too (tag: (TIFF type, value))."""
    directory = TiffImagePlugin.ImageFileDirectory_v2()
    for tag, (kind, value) in tags.items():
        directory[tag] = value
        directory.tagtype[tag] = kind
    buffer = io.BytesIO()
    Image.new("RGB", (8, 6)).save(buffer, "TIFF", tiffinfo=directory)
    return buffer.getvalue()


DNG_VERSION, NEW_SUBFILE_TYPE = 50706, 254


@pytest.mark.parametrize(
    "tags",
    [
        {DNG_VERSION: (1, b"\x01\x04\x00\x00")},
        {NEW_SUBFILE_TYPE: (4, 1)},
        {NEW_SUBFILE_TYPE: (4, 1), DNG_VERSION: (1, b"\x01\x06\x00\x00")},
    ],
    ids=["a DNG", "a preview first (NEF, ARW)", "a DNG, a preview first (ProRAW)"],
)
def test_a_camera_raw_is_refused_not_read_as_its_preview(tags):
    with pytest.raises(UnsupportedImage) as refused:
        read_header(tiff_tagged(tags), 10_000)
    assert refused.value.message.startswith("a camera RAW file (DNG, NEF, ...)")


def test_a_tiff_page_that_is_no_preview_is_read():
    """A page of a multi-page document (NewSubFileType bit 1), not a reduced-resolution one (bit 0)."""
    header = read_header(tiff_tagged({NEW_SUBFILE_TYPE: (4, 2)}), 10_000)
    assert (header.format, header.width, header.height) == ("TIFF", 8, 6)


def test_a_cmyk_jpeg_is_reduced_in_its_decode_and_its_profile_is_spent():
    icc = (GHOSTSCRIPT / "default_cmyk.icc").read_bytes()
    data = cmyk_jpeg(astronaut().resize((512, 384)), adobe=True, icc=icc)
    header = read_header(data, 1_000_000)
    assert (header.mode, header.icc) == ("CMYK", icc)
    assert decode_image(data, header, min_scale=0.5).stored.shape == (192, 256, 3)
    reduced = decode_image(data, header, min_scale=0.25)
    assert reduced.stored.shape == (96, 128, 3) and reduced.colour == "converted"
    assert reduced.icc is None  # converted to sRGB as it was decoded: not converted again on the way out
    full = decode_image(data, header)
    expected = cv2.resize(full.pixels, (128, 96), interpolation=cv2.INTER_AREA)
    assert np.abs(reduced.pixels.astype(int) - expected).mean() < 4


def test_transparency_is_kept_or_flattened_as_asked_and_a_reduced_decode_is_reused():
    rgba = Image.new("RGBA", (40, 30), (255, 0, 0, 0))
    png = encoded(rgba, "PNG")
    header = read_header(png, 10_000)
    flattened = decode_image(png, header)
    kept = with_resolution(flattened, 1.0, png, header, None)
    assert (flattened.background, kept.background, kept.stored.shape) == ((255, 255, 255), None, (30, 40, 4))
    assert with_resolution(kept, 1.0, png, header, None) is kept
    on_black = with_resolution(kept, 1.0, png, header, (0, 0, 0))
    assert on_black.background == (0, 0, 0) and on_black.pixels[0, 0].tolist() == [0, 0, 0]
    jpeg = encoded(phone_photo(), "JPEG")
    jpeg_header = read_header(jpeg, 50_000_000)
    quarter = decode_image(jpeg, jpeg_header, min_scale=0.25)
    assert with_resolution(quarter, 0.25, jpeg, jpeg_header, (255, 255, 255)) is quarter  # exactly enough
    assert with_resolution(quarter, 0.2, jpeg, jpeg_header, (255, 255, 255)) is quarter
    assert with_resolution(quarter, 0.3, jpeg, jpeg_header, (255, 255, 255)).scale.min() == 0.5


def test_pixels_that_do_not_decode_say_so():
    """A CMYK JPEG (Pillow's path) cut after its header: the header reads, the pixels do not."""
    data = cmyk_jpeg(astronaut().resize((64, 48)), adobe=True)
    cut = data[: data.index(b"\xff\xda") + 40]  # 40 bytes into the scan
    header = read_header(cut, 10_000)
    with pytest.raises(UnsupportedImage) as refused:
        decode_image(cut, header)
    assert refused.value.message == "the image data is corrupt or truncated"


@pytest.mark.parametrize("size", [(1, 1), (1, 40), (40, 1)])
def test_a_picture_one_pixel_wide_or_high_is_read(size):
    header = read_header(encoded(Image.new("RGB", size, (200, 100, 50)), "PNG"), 10_000)
    assert (header.width, header.height) == size
    assert decode_image(encoded(Image.new("RGB", size), "PNG"), header).pixels.shape == (size[1], size[0], 3)


def png_with_orientation(where: str) -> bytes:
    """A PNG saying orientation 6: in an eXIf chunk before its pixels (as Pillow writes it) or after
    them (the PNG spec's extension allows either), in ImageMagick's raw profile, or in XMP."""
    exif = Image.Exif()
    exif[0x0112] = 6
    picture = astronaut().resize((64, 48))
    if where == "raw profile":
        info = PngImagePlugin.PngInfo()
        raw = exif.tobytes().hex()
        info.add_text("Raw profile type exif", f"\nexif\n{len(raw) // 2:8d}\n{raw}")
        return encoded(picture, "PNG", pnginfo=info)
    if where == "xmp":
        info = PngImagePlugin.PngInfo()
        info.add_itxt("XML:com.adobe.xmp", '<x:xmpmeta><rdf:Description tiff:Orientation="6"/></x:xmpmeta>')
        return encoded(picture, "PNG", pnginfo=info)
    data = encoded(picture, "PNG", exif=exif)
    if where == "before the pixels":
        return data
    chunks = png_chunks(data)
    rest = [png_chunk(kind, body) for kind, body in chunks if kind != b"eXIf"]
    exif_chunk = next(png_chunk(kind, body) for kind, body in chunks if kind == b"eXIf")
    return data[:8] + b"".join(rest[:-1]) + exif_chunk + rest[-1]


@pytest.mark.parametrize("where", ["before the pixels", "after the pixels", "raw profile", "xmp"])
def test_a_pngs_orientation_is_read_wherever_it_is_without_decoding_its_pixels(where, monkeypatch):
    """Pillow's PNG reader decodes the whole picture to look for an eXIf chunk past the pixels:
    every PNG's header cost a full decode (16 ms for 1 MP, 212 ms at 12 MP) before the decode the
    work does. The orientation and EXIF are Pillow's own reading of the file decoded."""
    data = png_with_orientation(where)
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        expected = (image.getexif()[0x0112], bytes(image.info.get("exif") or b""))
    loads = []
    original = PngImagePlugin.PngImageFile.load
    monkeypatch.setattr(PngImagePlugin.PngImageFile, "load", lambda self: loads.append(1) or original(self))
    header = read_header(data, 50_000_000)
    assert (header.orientation, header.exif) == expected == (6, expected[1])
    assert not loads, "the header decoded the pixels"
