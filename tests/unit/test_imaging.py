"""gateway/imaging in process: the Display P3 profile written from its primaries, the conversion
cache's decisions, EXIF as Cloudflare keeps it, an animation's loop count both ways."""

import io

import cv2
import numpy as np
import pytest
from PIL import Image, ImageCms, ImageSequence

import gateway.imaging.animation as animation_module
from evaluation.corpus import long_gif
from evaluation.images import astronaut
from evaluation.sources import GHOSTSCRIPT, animation, encoded_as, nclx_p3, p3_colorants, profiles
from gateway.errors import ImageTooLarge, UnsupportedImage
from gateway.imaging.animation import gif_delays, on_one_canvas, read_animation
from gateway.imaging.colour import CONVERTED, IGNORED, SRGB_ALREADY, conversion, fits, to_srgb
from gateway.imaging.decode import decode_image, read_header
from gateway.imaging.encode import encode_animation, encode_image, keeps_alpha
from gateway.imaging.formats import webp_said_transparent
from gateway.imaging.metadata import output_exif
from gateway.imaging.normalise import WHITE, flattened, pillow_to_bgr, unpremultiplied, with_alpha
from gateway.imaging.orientation import apply_orientation
from gateway.imaging.profiles import DISPLAY_P3


@pytest.mark.parametrize(
    ("p3", "srgb"),
    [
        ((255, 0, 0), (255, 0, 0)),
        ((200, 100, 50), (215, 93, 31)),
        ((0, 0, 255), (0, 0, 255)),
        ((10, 20, 30), (7, 20, 31)),
    ],
)
def test_display_p3_from_its_primaries_converts_as_apple_s_does(p3, srgb):
    """Reference values: the same colours through libvips' own P3 profile (to within a level)."""
    transform = ImageCms.buildTransform(
        ImageCms.ImageCmsProfile(io.BytesIO(DISPLAY_P3)), ImageCms.createProfile("sRGB"), "RGB", "RGB"
    )
    got = ImageCms.applyTransform(Image.new("RGB", (1, 1), p3), transform).getpixel((0, 0))
    assert all(abs(a - b) <= 1 for a, b in zip(got, srgb)), got


# Apple's Display P3 profile's colorant tags (rXYZ, gXYZ, bXYZ, D50-adapted), as macOS ships it.
APPLE_P3_COLORANTS = np.array([[0.51512, 0.29198, 0.15710], [0.24120, 0.69225, 0.06657], [-0.00105, 0.04189, 0.78407]])


def test_the_tests_display_p3_is_apples():
    """The reference profile the colour tests use is written in evaluation/sources.py, not taken from
    the gateway: its colorants are Apple's, and it converts the reference colours above as theirs."""
    assert np.abs(p3_colorants() - APPLE_P3_COLORANTS).max() < 1e-4
    assert profiles()["display-p3"] != DISPLAY_P3
    transform = ImageCms.buildTransform(
        ImageCms.ImageCmsProfile(io.BytesIO(profiles()["display-p3"])), ImageCms.createProfile("sRGB"), "RGB", "RGB"
    )
    for p3, srgb in [((200, 100, 50), (215, 93, 31)), ((10, 20, 30), (7, 20, 31)), ((0, 255, 0), (0, 255, 0))]:
        got = ImageCms.applyTransform(Image.new("RGB", (1, 1), p3), transform).getpixel((0, 0))
        assert all(abs(a - b) <= 1 for a, b in zip(got, srgb)), (p3, got)


def littlecms_srgb(rgb: np.ndarray, icc: bytes) -> np.ndarray:
    """LittleCMS (ImageCms) straight: RGB pixels in `icc` to sRGB, perceptual."""
    transform = ImageCms.buildTransform(
        ImageCms.ImageCmsProfile(io.BytesIO(icc)), ImageCms.createProfile("sRGB"), "RGB", "RGB"
    )
    return np.asarray(ImageCms.applyTransform(Image.fromarray(rgb), transform))


@pytest.mark.parametrize("name", ["display-p3", "adobe-rgb", "prophoto", "swapped"])
def test_to_srgb_converts_as_littlecms_does(name):
    """gateway.imaging.colour.to_srgb (BGR in, BGR out) against ImageCms on the same RGB pixels."""
    rgb = np.random.default_rng(43).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    rgb[0, :8] = [
        (255, 0, 0),
        (0, 255, 0),
        (0, 0, 255),
        (255, 255, 255),
        (0, 0, 0),
        (255, 255, 0),
        (0, 255, 255),
        (128, 128, 128),
    ]
    converted, status = to_srgb(np.ascontiguousarray(rgb[:, :, ::-1]), profiles()[name])
    assert status == CONVERTED
    error = np.abs(converted[:, :, ::-1].astype(int) - littlecms_srgb(rgb, profiles()[name]))
    assert error.max() <= 1, error.max()
    assert np.abs(converted[:, :, ::-1].astype(int) - rgb).mean() > 3  # a conversion that shows


@pytest.mark.parametrize("container", ["AVIF", "HEIF"])
def test_nclx_display_p3_is_read_as_display_p3(container):
    """An AVIF or HEIC that says Display P3 by code points (nclx, no ICC profile): its header's
    profile converts its pixels as LittleCMS does through the tests' own Display P3 profile."""
    rgb = np.asarray(astronaut().resize((128, 128)))
    data = nclx_p3(Image.fromarray(rgb), container)
    decoded = decode_image(data, read_header(data, 1 << 24))
    assert decoded.icc
    converted, status = to_srgb(decoded.stored, decoded.icc)
    assert status == CONVERTED
    source = np.ascontiguousarray(decoded.stored[:, :, ::-1])
    error = np.abs(converted[:, :, ::-1].astype(int) - littlecms_srgb(source, profiles()["display-p3"]))
    assert error.mean() <= 0.5 and error.max() <= 2, (error.mean(), error.max())


def test_srgb_profiles_are_skipped_and_broken_ones_ignored():
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    assert conversion(srgb).status == SRGB_ALREADY and conversion(srgb).transform is None
    assert conversion(b"\0" * 300).status == IGNORED
    assert conversion(profiles()["adobe-rgb"]).status == CONVERTED
    pixels = np.full((4, 4, 3), 100, np.uint8)
    assert to_srgb(pixels, None) == (pixels, None)
    same, status = to_srgb(pixels, srgb)
    assert same is pixels and status == SRGB_ALREADY


GREY_PROFILE = (GHOSTSCRIPT / "sgray.icc").read_bytes()
CMYK_PROFILE = (GHOSTSCRIPT / "default_cmyk.icc").read_bytes()
MODES = ["1", "L", "LA", "I", "I;16", "F", "RGB", "RGBA", "RGBX", "P", "PA", "YCbCr", "CMYK"]


@pytest.mark.parametrize(
    ("icc", "fitting"),
    [
        (GREY_PROFILE, {"1", "L", "LA", "I", "I;16", "F"}),
        (profiles()["prophoto"], {"RGB", "RGBA", "RGBX", "P", "PA", "YCbCr"}),
        (CMYK_PROFILE, {"CMYK"}),
        (b"not a profile" * 20, set()),
    ],
    ids=["grey", "rgb", "cmyk", "garbage"],
)
def test_a_profile_fits_only_samples_of_its_own_colour_space(icc, fitting):
    assert {mode for mode in MODES if fits(icc, mode)} == fitting


@pytest.mark.parametrize(
    ("mode", "profile", "kept"),
    [("RGB", "grey", False), ("L", "prophoto", False), ("L", "grey", True), ("RGB", "prophoto", True)],
)
def test_a_profile_that_does_not_fit_the_samples_is_dropped_and_said_ignored(mode, profile, kept):
    """As Chrome and libvips: a colour JPEG carrying a grey profile is shown in colour (it came out
    as its blue channel in grey), a grey one carrying ProPhoto's keeps its greys (gamma 1.8 moved them)."""
    icc = GREY_PROFILE if profile == "grey" else profiles()[profile]
    data = encoded_as(astronaut().resize((64, 64)).convert(mode), "JPEG", icc)
    header = read_header(data, 1 << 24)
    image = decode_image(data, header)
    if kept:
        assert header.icc == image.icc == icc and header.colour is None and image.colour is None
    else:
        assert header.icc is None and image.icc is None and header.colour == image.colour == IGNORED


def exif_with(**tags) -> bytes:
    exif = Image.Exif()
    exif[0x0112], exif[0x8298], exif[0x010F] = 6, "(c) Someone", "Camera"
    exif.get_ifd(0x8825)[2] = (1.0, 2.0, 3.0)
    exif.get_ifd(0x8769)[0x927C] = b"maker notes"
    return exif.tobytes()


def read(block: bytes) -> Image.Exif:
    exif = Image.Exif()
    if block:
        exif.load(block)
    return exif


def test_exif_kept_as_cloudflare_keeps_it():
    source = exif_with()
    assert dict(read(output_exif(source, "copyright", hidden_faces=False))) == {0x8298: "(c) Someone"}
    kept = read(output_exif(source, "keep", hidden_faces=False))
    assert kept[0x0112] == 1 and kept[0x010F] == "Camera" and kept.get_ifd(0x8825) == {2: (1.0, 2.0, 3.0)}
    assert 0x927C not in kept.get_ifd(0x8769)
    assert dict(read(output_exif(source, "keep", hidden_faces=True)).get_ifd(0x8825)) == {}
    assert output_exif(source, "none", hidden_faces=False) == b""
    assert output_exif(b"Exif\0\0garbage", "keep", hidden_faces=False) == b""


@pytest.mark.parametrize(
    ("container", "loop", "plays"),
    [("GIF", None, 1), ("GIF", 0, 0), ("GIF", 2, 3), ("WEBP", 0, 0), ("WEBP", 3, 3), ("PNG", 0, 0), ("PNG", 3, 3)],
)
def test_an_animation_plays_as_often_in_any_container(container, loop, plays):
    frames = [Image.new("RGB", (8, 8), (i * 40, 0, 0)) for i in range(3)]
    read_back = read_animation(animation(frames, container, [10, 20, 30], loop), WHITE, (8, 8), 3)
    assert read_back.plays == plays and read_back.durations == [10, 20, 30] and len(read_back.frames) == 3
    assert [int(frame[0, 0, 2]) for frame in read_back.frames] == pytest.approx([0, 40, 80], abs=4)  # lossy WebP
    for target in ("GIF", "WEBP", "PNG"):
        again = read_animation(
            encode_animation(read_back.frames, read_back.durations, plays, target.lower(), 90), WHITE, (8, 8), 3
        )
        assert again.plays == plays and again.durations == [10, 20, 30]


def test_an_avif_sequence_is_read_and_written_frame_by_frame_playing_forever():
    """Pillow reads no loop count from an AVIF sequence, nor writes one: it plays forever."""
    frames = [Image.new("RGB", (16, 16), (i * 100, 50, 200 - i * 100)) for i in range(3)]
    read_back = read_animation(animation(frames, "AVIF", [10, 20, 30], None), WHITE, (16, 16), 3)
    again = read_animation(encode_animation(read_back.frames, [10, 20, 30], 0, "avif", 90), WHITE, (16, 16), 3)
    for sequence in (read_back, again):
        assert sequence.plays == 0 and sequence.durations == [10, 20, 30]
        reds = [int(frame[8, 8, 2]) for frame in sequence.frames]
        assert reds == pytest.approx([0, 100, 200], abs=6), reds


def test_a_gif_holds_each_duration_as_browsers_play_it():
    """Whole hundredths, one over 10 ms at least 20 ms: a 60 fps APNG's 16 ms went into a GIF as
    10, which browsers play for 100 (six times slower); 10 ms and less as they are."""
    assert gif_delays([16, 12, 33, 15, 10, 0, 100, 84]) == [20, 20, 30, 20, 10, 0, 100, 80]
    frames = [Image.new("RGB", (8, 8), (i * 60, 0, 0)) for i in range(3)]
    sixty = read_animation(animation(frames, "PNG", [1000 / 60] * 3, 0), WHITE, (8, 8), 3)
    assert sixty.durations == [17, 17, 17]  # an APNG's fraction rounded, not cut
    as_gif = read_animation(encode_animation(sixty.frames, [12, 17, 40], 0, "gif", 90), WHITE, (8, 8), 3)
    assert as_gif.durations == [20, 20, 40]


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_an_animation_s_frames_are_turned_upright_as_a_still_is(orientation):
    frames = [Image.new("RGB", (12, 8), (40 * i, 0, 0)) for i in range(2)]
    for frame in frames:
        frame.paste((0, 250, 0), (0, 0, 3, 2))  # a mark in the stored top-left corner
    read_back = read_animation(animation(frames, "PNG", [10, 10], 0), WHITE, (12, 8), 2, orientation)
    stored = read_animation(animation(frames, "PNG", [10, 10], 0), WHITE, (12, 8), 2)
    assert read_back.size == ((8, 12) if orientation >= 5 else (12, 8))
    for turned, as_stored in zip(read_back.frames, stored.frames, strict=True):
        assert np.array_equal(turned, apply_orientation(as_stored, orientation))


@pytest.mark.parametrize("container", ["GIF", "PNG"])
def test_an_animation_cut_short_is_refused_saying_that_its_first_frame_can_be_had(container):
    rng = np.random.default_rng(1)
    frames = [Image.fromarray(rng.integers(0, 255, (64, 64, 3), np.uint8)) for _ in range(3)]
    data = animation(frames, container, [40] * 3, 0)
    cut = data[: len(data) * 3 // 4]  # the last frame's data lost
    with pytest.raises(UnsupportedImage, match="; anim=false answers its first frame"):
        read_animation(cut, WHITE, (64, 64), 3)
    first = decode_image(cut, read_header(cut, 10_000)).pixels
    with Image.open(io.BytesIO(data)) as whole:
        assert np.array_equal(first, np.asarray(whole.convert("RGB"))[..., ::-1])  # as the whole file's first frame


def test_an_apng_s_default_image_is_not_one_of_its_frames():
    """An APNG whose default image is a still for viewers without APNG ("update your browser")
    plays the frames after it: the default image is neither shown nor counted."""
    still, *played = [Image.new("RGB", (8, 8), colour) for colour in ((255, 255, 255), (200, 0, 0), (0, 0, 200))]
    data = encoded_as(still, "PNG", save_all=True, append_images=played, default_image=True, duration=[40, 60])
    read_back = read_animation(data, WHITE, (8, 8), 2)  # two frames: within a limit of two
    assert read_back.durations == [40, 60]
    assert [frame[0, 0].tolist() for frame in read_back.frames] == [[0, 0, 200], [200, 0, 0]]


@pytest.mark.parametrize(
    ("output", "max_frames", "says"),
    [((4, 4), 1000, "5000 frames, more than the limit of 1000"), ((256, 256), 10_000, "256x256 out")],
)
def test_an_animation_over_its_budget_is_refused_before_any_frame_is_decoded(monkeypatch, output, max_frames, says):
    decoded: list[object] = []
    monkeypatch.setattr(animation_module, "pillow_to_bgr", lambda *args: decoded.append(args))
    with pytest.raises(ImageTooLarge, match=says):
        read_animation(long_gif(), WHITE, output, max_frames)
    assert decoded == []


def test_frames_that_grow_the_canvas_are_placed_on_it():
    small, large = np.zeros((2, 3, 3), np.uint8), np.full((4, 5, 3), 7, np.uint8)
    placed = on_one_canvas([small, large], (255, 255, 255))
    assert [frame.shape for frame in placed] == [(4, 5, 3), (4, 5, 3)]
    assert (placed[0][:2, :3] == 0).all() and (placed[0][2:] == 255).all() and (placed[0][:, 3:] == 255).all()


def test_where_transparency_is_kept_a_grown_canvas_is_transparent_and_opaque_frames_stay_bgr():
    small, large = np.zeros((2, 3, 3), np.uint8), np.full((4, 5, 3), 7, np.uint8)
    placed = on_one_canvas([small, large], None)
    assert [frame.shape for frame in placed] == [(4, 5, 4), (4, 5, 4)]
    assert (placed[0][:2, :3] == (0, 0, 0, 255)).all() and not placed[0][2:].any() and not placed[0][:, 3:].any()
    assert (placed[1] == (7, 7, 7, 255)).all()
    opaque = on_one_canvas([np.full((4, 5, 4), 255, np.uint8), large], None)
    assert [frame.shape for frame in opaque] == [(4, 5, 3), (4, 5, 3)]  # nothing to keep: no alpha written


def squares_on_transparency() -> list[Image.Image]:
    """Opaque squares moving on transparency: libwebp writes each frame as an opaque rectangle
    and leaves the file's alpha flag unset (Chromium shows the canvas transparent, Pillow black)."""
    frames = []
    for shift in (0, 24, 48):
        frame = Image.new("RGBA", (120, 64), (0, 0, 0, 0))
        frame.paste((200, 40, 40, 255), (shift, 16, shift + 32, 48))
        frames.append(frame)
    return frames


def test_an_animated_webp_s_transparent_canvas_is_read_and_written_as_browsers_show_it():
    frames = squares_on_transparency()
    data = animation(frames, "WEBP", [100] * 3, 0)
    assert not data[20] & 0x10  # libwebp's file: no alpha flag
    assert webp_said_transparent(data[:20]) == data[:20]  # cut short: as it is, for the decoder to refuse
    still = encoded_as(Image.new("RGB", (8, 8)), "WEBP", icc_profile=profiles()["display-p3"])
    assert still[12:16] == b"VP8X" and webp_said_transparent(still) == still  # a still: opaque, as it says
    kept = read_animation(data, None, (120, 64), 3)
    flat = read_animation(data, WHITE, (120, 64), 3)
    for index, (frame, shown, on_white) in enumerate(zip(frames, kept.frames, flat.frames, strict=True)):
        alpha = np.asarray(frame)[..., 3]
        assert shown.shape[2] == 4 and (shown[..., 3] == alpha).all(), index
        assert (on_white[alpha == 0] == WHITE).all(), index  # black before
    written = encode_animation([with_alpha(*unpremultiplied(f)) for f in kept.frames], [100] * 3, 0, "webp", 90)
    with Image.open(io.BytesIO(written)) as image:
        alphas = [np.asarray(frame.convert("RGBA"))[..., 3] for frame in ImageSequence.Iterator(image)]
    assert [(a == np.asarray(f)[..., 3]).all() for a, f in zip(alphas, frames, strict=True)] == [True] * 3


def alpha_ramp() -> np.ndarray:
    """RGBA, one row per colour, one column per alpha level."""
    alpha = np.tile(np.arange(256, dtype=np.uint8), (16, 1))
    colour = np.linspace(0, 255, 16 * 3).reshape(16, 1, 3).repeat(256, axis=1).astype(np.uint8)
    return np.dstack([colour, alpha])


def test_premultiplied_pixels_flattened_are_pillow_s_composite():
    rgba = alpha_ramp()
    kept, _ = pillow_to_bgr(Image.fromarray(rgba, "RGBA"), background=None)
    red = Image.new("RGBA", (256, 16), (255, 0, 0, 255))
    expected = np.asarray(Image.alpha_composite(red, Image.fromarray(rgba, "RGBA")).convert("RGB"))
    assert np.abs(flattened(kept, (0, 0, 255))[..., ::-1].astype(int) - expected).max() <= 1
    assert flattened(expected, WHITE) is expected  # BGR as it is


@pytest.mark.parametrize("fmt", ["gif", "webp"])
def test_an_animation_s_transparency_is_written_gif_s_where_under_half_opaque(fmt):
    """Every alpha level, two frames: an animated WebP keeps each; a GIF (one transparent colour)
    hides what is under 128 and shows the rest opaque; the colour where it shows as Pillow has it."""
    rgba = alpha_ramp()
    frames = [cv2.cvtColor(rgba, cv2.COLOR_RGBA2BGRA), cv2.cvtColor(rgba[:, ::-1].copy(), cv2.COLOR_RGBA2BGRA)]
    with Image.open(io.BytesIO(encode_animation(frames, [50, 50], 0, fmt, 100))) as image:
        got = [np.asarray(frame.convert("RGBA")).astype(int) for frame in ImageSequence.Iterator(image)]
    assert len(got) == 2
    for have, want in zip(got, [rgba, rgba[:, ::-1]], strict=True):
        alpha = want[..., 3].astype(int)
        if fmt == "gif":
            assert (have[..., 3] == np.where(alpha >= 128, 255, 0)).all()
        else:
            assert np.abs(have[..., 3] - alpha).max() <= 1
        shown = alpha >= 128
        assert np.abs(have[..., :3] - want[..., :3])[shown].mean() < 4


def test_transparency_kept_is_premultiplied_then_straight_again_as_pillow_has_it():
    """A picture with every alpha level: premultiplied BGRA as decoded (what a resize needs), and
    straight colour back within what 8-bit premultiplication keeps (a level where it matters to the
    eye: the colour times its alpha), encoded as PNG with its alpha."""
    alpha = np.tile(np.arange(256, dtype=np.uint8), (16, 1))
    rgba = np.dstack([np.full_like(alpha, 200), np.full_like(alpha, 100), np.full_like(alpha, 30), alpha])
    kept, colour = pillow_to_bgr(Image.fromarray(rgba, "RGBA"), background=None)
    assert kept.shape == (16, 256, 4) and colour is None
    assert np.abs(kept[..., 2].astype(int) - np.rint(200 * alpha.astype(float) / 255)).max() <= 1  # premultiplied red
    straight, got_alpha = unpremultiplied(kept)
    assert got_alpha is not None and (got_alpha == alpha).all()
    seen = straight[..., ::-1].astype(float) * alpha[..., None] / 255
    assert np.abs(seen - rgba[..., :3].astype(float) * alpha[..., None] / 255).max() <= 1
    with Image.open(io.BytesIO(encode_image(with_alpha(straight, got_alpha), "png", 90))) as png:
        assert png.mode == "RGBA" and (np.asarray(png)[..., 3] == alpha).all()
    flat, _ = pillow_to_bgr(Image.fromarray(rgba, "RGBA"))
    assert flat.shape == (16, 256, 3) and tuple(flat[0, 0]) == WHITE  # the default: flattened on white


@pytest.mark.parametrize(
    ("requested", "source", "kept"),
    [
        (None, "PNG", True),
        (None, "JPEG", False),
        (None, "GIF", False),
        ("webp", "GIF", True),
        ("avif", "PNG", True),
        ("png8", "PNG", True),
        ("jpeg", "PNG", False),
        ("gif", "PNG", True),
        (None, "HEIF", False),
    ],
)
def test_the_outputs_that_keep_transparency(requested, source, kept):
    assert keeps_alpha(requested, source) is kept


def test_an_animation_at_exactly_its_pixel_budget_is_read_one_pixel_more_is_refused_naming_the_side():
    limit = animation_module.MAX_ANIMATION_PIXELS
    animation_module.check_cost(50, (1000, limit // 50_000), (10, 10), 1000)  # exactly the budget
    with pytest.raises(ImageTooLarge) as refused:
        animation_module.check_cost(50, (1000, 1001), (10, 10), 1000)
    assert str(refused.value).endswith(
        f"50 frames of 1000x1001 in are more than {limit} pixels; anim=false answers its first frame"
    )
    with pytest.raises(ImageTooLarge, match=f"50 frames of 1001x1000 out are more than {limit} pixels; anim=false"):
        animation_module.check_cost(50, (10, 10), (1001, 1000), 1000)


def test_a_gif_frame_without_a_duration_is_read_as_0_ms():
    """A frame without a graphic control extension (Pillow writes none where nothing needs one)."""
    frames = [Image.new("RGB", (4, 4), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    data = encoded_as(frames[0], "GIF", save_all=True, append_images=frames[1:])
    with Image.open(io.BytesIO(data)) as image:
        assert "duration" not in image.info  # the first frame says none
    assert read_animation(data, WHITE, (4, 4), 2).durations == [0, 0]


def test_an_animation_of_one_frame_is_read():
    data = encoded_as(Image.new("RGB", (6, 4), (0, 0, 255)), "GIF", save_all=True, duration=[70])
    for background in (WHITE, None):
        one = read_animation(data, background, (6, 4), 1)
        assert (one.size, one.durations, one.frames[0][0, 0].tolist()) == ((6, 4), [70], [255, 0, 0])


def test_a_grown_canvas_is_filled_with_the_background_colour_asked_for():
    small, large = np.zeros((2, 3, 3), np.uint8), np.full((4, 5, 3), 7, np.uint8)
    placed = on_one_canvas([small, large], (0, 0, 255))
    assert (placed[0][2:] == (0, 0, 255)).all() and (placed[0][:, 3:] == (0, 0, 255)).all()


def test_a_transparent_frame_keeps_its_alpha_beside_opaque_ones():
    clear = np.full((4, 5, 4), 90, np.uint8)
    clear[..., 3] = 0
    placed = on_one_canvas([clear, np.full((4, 5, 3), 7, np.uint8)], None)
    assert (placed[0] == clear).all() and (placed[1] == (7, 7, 7, 255)).all()
    assert [frame.shape for frame in on_one_canvas([clear], None)] == [(4, 5, 4)]
