"""What gateway/processing's answer carries besides its faces, in process, judged against Pillow,
LittleCMS and the source's own bytes: every stage timed under its name, a still decoded again where
the output needs more pixels than the detection's decode, colour profiles converted and said,
transparency kept or put onto the background, EXIF kept as asked, the output's format and quality,
an animation's frames, and the facts a log line keeps."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from PIL import Image, ImageSequence

from evaluation.images import astronaut, encoded
from evaluation.sources import GHOSTSCRIPT, cmyk_jpeg, encoded_as, srgb_reference
from gateway.config import Settings
from gateway.detection.detectors import serve
from gateway.errors import ImageTooLarge, OutputTooLarge
from gateway.imaging.encode import AVIF_AUTO_MAX_SIDE, AVIF_AVAILABLE, AVIF_MAX_SIDE
from gateway.imaging.metadata import COPYRIGHT, GPS_IFD
from gateway.imaging.profiles import DISPLAY_P3
from gateway.processing.answer import Answer, process
from gateway.request import ImageRequest, anonymize_request, crop_request, detect_request
from gateway.timing import StageTimer
from gateway.web.url.options import parse_url_options
from tests.support import NoFacesModel, square_finder, squares_picture, stored_with_orientation

SETTINGS = Settings()
NO_FACES = serve(SETTINGS.detectors, SETTINGS.wire_format, NoFacesModel)


class CountingTimer(StageTimer):
    """A StageTimer that also counts how often each stage is entered."""

    def __init__(self) -> None:
        super().__init__()
        self.entered: Counter[str] = Counter()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.entered[name] += 1
        with super().stage(name):
            yield


def url(options: str, fmt: str = "png") -> ImageRequest:
    return parse_url_options(options).request(fmt, 85)


def opened(answer: Answer) -> Image.Image:
    image = Image.open(io.BytesIO(answer.body))
    image.load()
    return image


def detailed(size: tuple[int, int]) -> Image.Image:
    """The astronaut at `size`: fine detail everywhere, so a picture enlarged from fewer pixels shows."""
    return astronaut().resize(size, Image.Resampling.LANCZOS)


def test_every_stage_is_timed_under_its_own_name():
    timer = CountingTimer()
    data = encoded_as(detailed((800, 600)), "JPEG", DISPLAY_P3)
    with square_finder() as (detectors, _):
        process(
            data, url("anonymize=blur,brightness=1.2,width=300,height=300,gravity=face"), SETTINGS, detectors, timer
        )
    expected = {
        "decode",
        "queue",
        "resize",
        "preprocess",
        "infer",
        "postprocess",
        "crop",
        "colour",
        "filters",
        "encode",
    }
    assert expected <= set(timer.seconds) and set(timer.seconds) <= expected | {"anonymize"}
    squares = squares_picture([(100, 100, 80)], (800, 600))
    hidden = CountingTimer()
    with square_finder() as (detectors, _):
        process(encoded(Image.fromarray(squares), "PNG"), url("anonymize=fill"), SETTINGS, detectors, hidden)
    assert hidden.entered["anonymize"] == 1 and hidden.entered["crop"] == 1  # cut, not turned: one crop stage
    turned = CountingTimer()
    process(animation(), url("rotate=90,format=gif", "gif"), SETTINGS, NO_FACES, turned)
    assert turned.entered["decode"] == 2 and turned.entered["crop"] == 2 * 4  # header, frames; turn and cut each
    still_decoded = CountingTimer()
    process(encoded(detailed((300, 200)), "PNG"), url("width=100"), SETTINGS, NO_FACES, still_decoded)
    assert still_decoded.entered["decode"] == 2  # no faces looked for: the header, then the output's decode
    reused = CountingTimer()
    process(encoded(detailed((300, 200)), "PNG"), crop_request({"width": "100"}), SETTINGS, NO_FACES, reused)
    assert reused.entered["decode"] == 2  # the detection's decode serves the output as it is
    bordered = CountingTimer()
    process(encoded(detailed((300, 200)), "PNG"), url("trim=border"), SETTINGS, NO_FACES, bordered)
    assert bordered.entered["decode"] == 2  # the header, trim=border's decode (whole: it serves the output)


def test_a_still_is_decoded_again_where_the_output_needs_more_pixels_than_the_detection_did():
    """A 3000x2000 JPEG: the detection decodes it reduced (shrink-on-load); a 1200-pixel window of it
    needs more, so it is decoded again: the output is Pillow's crop of the original, not an
    enlargement of the reduced decode."""
    original = detailed((3000, 2000))
    data = encoded(original, "JPEG", quality=95)
    original = Image.open(io.BytesIO(data)).convert("RGB")
    timer = CountingTimer()
    answer = process(
        data, crop_request({"width": "1200", "height": "1200", "format": "png"}), SETTINGS, NO_FACES, timer
    )
    assert timer.entered["decode"] == 3  # the header, the detection's decode, the output's
    x, y, width, height = (int(v) for v in answer.headers["X-Crop-Rect"].split(","))
    expected = np.asarray(
        original.crop((x, y, x + width, y + height)).resize((1200, 1200), Image.Resampling.BOX), float
    )
    assert np.abs(np.asarray(opened(answer).convert("RGB"), float) - expected).mean() < 2
    rotated = process(data, url("rotate=90,width=1200,height=1200,fit=crop"), SETTINGS, NO_FACES)
    x, y, width, height = (int(v) for v in rotated.headers["X-Crop-Rect"].split(","))
    turned = original.rotate(-90, expand=True).crop((x, y, x + width, y + height))
    expected = np.asarray(turned.resize((1200, 1200), Image.Resampling.BOX), float)
    assert np.abs(np.asarray(opened(rotated).convert("RGB"), float) - expected).mean() < 2


def saturated() -> Image.Image:
    """Bands of strong colours inside sRGB's gamut, where Display P3's numbers and sRGB's differ
    (by 10-30 levels), over the astronaut."""
    pixels = np.asarray(detailed((240, 160))).copy()
    for index, colour in enumerate([(200, 90, 60), (70, 170, 80), (70, 80, 200), (210, 200, 60)]):
        pixels[index * 40 : index * 40 + 30] = colour
    return Image.fromarray(pixels)


def test_a_wide_gamut_photo_goes_out_as_srgb_and_says_so():
    icc = DISPLAY_P3
    data = encoded_as(saturated(), "PNG", icc)
    answer = process(data, crop_request({"width": "240", "height": "160", "format": "png"}), SETTINGS, NO_FACES)
    assert answer.headers["X-Color-Profile"] == "converted"
    error = np.abs(np.asarray(opened(answer).convert("RGB"), float) - srgb_reference(data, icc, (240, 160)))
    assert error.mean() < 1 and np.percentile(error, 99) <= 2
    untagged = process(encoded(saturated(), "PNG"), crop_request({"format": "png"}), SETTINGS, NO_FACES)
    assert "X-Color-Profile" not in untagged.headers  # no profile: nothing done, nothing said


def test_a_cmyk_jpeg_converted_as_it_is_decoded_says_so():
    answer = process(cmyk_jpeg(saturated(), adobe=True), crop_request({"format": "png"}), SETTINGS, NO_FACES)
    assert answer.headers["X-Color-Profile"] == "converted"


def test_an_animation_s_frames_go_out_as_srgb_and_say_so():
    icc = DISPLAY_P3
    frames = [saturated().rotate(180 * i) for i in range(3)]
    buffer = io.BytesIO()
    frames[0].save(buffer, "WEBP", save_all=True, append_images=frames[1:], lossless=True, icc_profile=icc, duration=90)
    answer = process(buffer.getvalue(), url("width=240,format=webp", "webp"), SETTINGS, NO_FACES)
    assert answer.headers["X-Color-Profile"] == "converted" and answer.headers["X-Frames"] == "3"
    with Image.open(io.BytesIO(answer.body)) as image:
        shown = [np.asarray(frame.convert("RGB"), float) for frame in ImageSequence.Iterator(image)]
    for frame, picture in zip(shown, frames):
        reference = srgb_reference(encoded_as(picture, "PNG", icc), icc, (240, 160))
        unconverted = np.abs(reference - np.asarray(picture, float)).mean()
        assert np.abs(frame - reference).mean() < unconverted / 2, unconverted


@pytest.mark.parametrize("frames", [1, 3], ids=["still", "animation"])
def test_a_grey_profile_on_colour_pixels_is_ignored_and_said(frames):
    """A colour picture whose header carries a grey profile goes out as the same picture untagged
    (as Chrome and libvips show it), and says `ignored`: a still and every frame of an animation."""
    pictures = [saturated().rotate(180 * i) for i in range(frames)]

    def webp(icc: bytes | None) -> bytes:
        buffer = io.BytesIO()
        profile = {"icc_profile": icc} if icc else {}
        pictures[0].save(buffer, "WEBP", save_all=True, append_images=pictures[1:], lossless=True, **profile)
        return buffer.getvalue()

    request = url("width=240,format=webp", "webp")
    tagged = process(webp((GHOSTSCRIPT / "sgray.icc").read_bytes()), request, SETTINGS, NO_FACES)
    plain = process(webp(None), request, SETTINGS, NO_FACES)
    assert tagged.headers["X-Color-Profile"] == "ignored" and "X-Color-Profile" not in plain.headers
    assert tagged.headers.get("X-Frames") == plain.headers.get("X-Frames") and tagged.body == plain.body


def transparent() -> Image.Image:
    """RGBA: the astronaut, its left third transparent, its middle third half transparent."""
    rgba = detailed((300, 200)).convert("RGBA")
    alpha = np.full((200, 300), 255, np.uint8)
    alpha[:, :100], alpha[:, 100:200] = 0, 128
    rgba.putalpha(Image.fromarray(alpha))
    return rgba


def test_transparency_is_kept_where_the_output_has_an_alpha_channel():
    answer = process(encoded(transparent(), "PNG"), crop_request({"width": "300", "height": "200"}), SETTINGS, NO_FACES)
    shown = opened(answer)
    assert shown.mode == "RGBA"
    np.testing.assert_array_equal(np.asarray(shown)[:, :, 3], np.asarray(transparent())[:, :, 3])
    opaque = np.asarray(transparent())[:, 200:, :3]
    assert np.abs(np.asarray(shown)[:, 200:, :3].astype(int) - opaque).max() <= 1


def test_a_gif_keeps_what_is_at_least_half_opaque_and_hides_the_rest():
    """A GIF has one transparent colour: the transparent third is transparent, the half transparent
    third (alpha 128) and the opaque one are opaque, in their straight colours (a half transparent
    pixel shows its colour whole; it went onto white before)."""
    answer = process(encoded(transparent(), "PNG"), url("format=gif", "gif"), SETTINGS, NO_FACES)
    shown = np.asarray(opened(answer).convert("RGBA")).astype(int)
    source = np.asarray(transparent()).astype(int)
    assert (shown[:, :100, 3] == 0).all() and (shown[:, 100:, 3] == 255).all()
    assert np.abs(shown[:, 100:, :3] - source[:, 100:, :3]).mean() < 4


@pytest.mark.parametrize(
    ("options", "under"),
    [
        ("format=jpeg", (255, 255, 255)),
        ("gravity=face,width=300,height=200,fit=crop,format=jpeg", (255, 255, 255)),  # the detection's decode reused
        ("background=red,format=png", (255, 0, 0)),
    ],
)
def test_transparency_goes_onto_white_or_the_background_given(options, under):
    answer = process(encoded(transparent(), "PNG"), url(options, options.rsplit("=", 1)[1]), SETTINGS, NO_FACES)
    shown = np.asarray(opened(answer).convert("RGB"), float)
    expected = Image.new("RGBA", (300, 200), (*under, 255))
    expected.alpha_composite(transparent())
    tolerance = 6 if "jpeg" in options else 1
    assert np.abs(shown - np.asarray(expected.convert("RGB"), float)).mean() < tolerance
    assert np.abs(shown[:, 5:95] - under).max() <= tolerance * 2  # the transparent third: the colour beneath


def test_fit_pad_s_canvas_is_the_background_colour():
    answer = process(
        encoded(detailed((300, 100)), "PNG"), url("width=200,height=200,fit=pad,background=blue"), SETTINGS, NO_FACES
    )
    shown = np.asarray(opened(answer).convert("RGB"))
    assert shown.shape == (200, 200, 3) and (shown[:40] == (0, 0, 255)).all() and (shown[-40:] == (0, 0, 255)).all()


def with_exif(hidden_face: bool = False) -> tuple[bytes, ImageRequest]:
    exif = Image.Exif()
    exif[COPYRIGHT] = "Jane Doe"
    exif[0x010F] = "Camera maker"
    exif.get_ifd(GPS_IFD)[2] = (51.0, 30.0, 0.0)  # GPSLatitude
    marks = [(100, 100, 80)] if hidden_face else []
    data = encoded(
        Image.fromarray(squares_picture(marks, (320, 240), np.full((240, 320, 3), 60, np.uint8))), "JPEG", exif=exif
    )
    return data, url("metadata=keep,format=jpeg" + (",anonymize=fill" if hidden_face else ""), "jpeg")


def test_a_jpeg_keeps_the_exif_asked_for_and_no_location_where_faces_are_hidden():
    data, keep = with_exif()
    kept = opened(process(data, keep, SETTINGS, NO_FACES)).getexif()
    assert kept[COPYRIGHT] == "Jane Doe" and kept[0x010F] == "Camera maker" and kept.get_ifd(GPS_IFD)
    copyright_only = opened(process(data, url("format=jpeg", "jpeg"), SETTINGS, NO_FACES)).getexif()
    assert dict(copyright_only) == {COPYRIGHT: "Jane Doe"}  # Cloudflare's default, metadata=copyright
    assert not opened(process(data, url("metadata=none,format=jpeg", "jpeg"), SETTINGS, NO_FACES)).getexif()
    data, hiding = with_exif(hidden_face=True)
    with square_finder() as (detectors, _):
        hidden = process(data, hiding, SETTINGS, detectors)
    assert hidden.headers["X-Face-Count"] == "1"
    exif = opened(hidden).getexif()
    assert exif[COPYRIGHT] == "Jane Doe" and not exif.get_ifd(GPS_IFD)  # where a hidden face was: not said


def test_the_output_format_is_the_inputs_unless_asked_and_avif_bounded_by_size():
    png = encoded(detailed((200, 100)), "PNG")
    assert process(png, crop_request({}), SETTINGS, NO_FACES).media_type == "image/png"
    assert (
        process(encoded(detailed((200, 100)), "GIF"), crop_request({}), SETTINGS, NO_FACES).media_type == "image/jpeg"
    )
    if not AVIF_AVAILABLE:
        pytest.skip("no AVIF encoder here")
    side = (AVIF_AUTO_MAX_SIDE + AVIF_MAX_SIDE) // 2  # over format=auto's bound, under an asked AVIF's
    large = encoded(detailed((side, 100)), "PNG")
    assert process(large, url("format=avif", "avif"), SETTINGS, NO_FACES).media_type == "image/avif"
    assert process(large, url("format=auto", "avif"), SETTINGS, NO_FACES).media_type == "image/webp"


def animation(transparent_corner: bool = False, container: str = "GIF", size: tuple[int, int] = (120, 80)) -> bytes:
    frames = []
    for index in range(4):
        frame = detailed(size).rotate(90 * index).convert("RGBA")
        if transparent_corner:
            frame.paste((0, 0, 0, 0), (0, 0, 40, 40))
        frames.append(frame)
    buffer = io.BytesIO()
    disposal = {"disposal": 2} if container == "GIF" else {}
    frames[0].save(buffer, container, save_all=True, append_images=frames[1:], duration=70, loop=0, **disposal)
    return buffer.getvalue()


def test_an_animation_goes_out_in_the_format_and_quality_asked():
    webp = process(animation(), parse_url_options("format=webp").request("webp", 90), SETTINGS, NO_FACES)
    assert webp.media_type == "image/webp" and opened(webp).format == "WEBP" and opened(webp).n_frames == 4
    rough = process(animation(), parse_url_options("format=webp").request("webp", 20), SETTINGS, NO_FACES)
    assert len(rough.body) < len(webp.body) * 0.8


@pytest.mark.parametrize(("container", "fmt"), [("GIF", "gif"), ("GIF", "webp"), ("GIF", "input"), ("PNG", "input")])
def test_an_animation_s_transparency_is_kept_where_no_background_is_given(container, fmt):
    """A GIF (or APNG) whose frames have a transparent corner, out as a GIF (asked for, or as its
    source's format), an animated WebP or an APNG: each frame's corner stays transparent and the
    rest is Pillow's frame (they were flattened onto white); an opaque animation gets no
    transparency."""
    data = animation(transparent_corner=True, container=container)
    options = "quality=100" if fmt == "input" else f"format={fmt},quality=100"
    answer = process(data, url(options, fmt), SETTINGS, NO_FACES)
    assert answer.media_type == {"webp": "image/webp", "input": f"image/{container.lower()}"}.get(fmt, "image/gif")
    with Image.open(io.BytesIO(data)) as source, Image.open(io.BytesIO(answer.body)) as image:
        expected = [np.asarray(frame.convert("RGBA")).astype(int) for frame in ImageSequence.Iterator(source)]
        got = [np.asarray(frame.convert("RGBA")).astype(int) for frame in ImageSequence.Iterator(image)]
    assert len(got) == len(expected) == 4
    for have, want in zip(got, expected, strict=True):
        assert not have[:40, :40, 3].any() and (have[..., 3] == want[..., 3]).all()
        assert np.abs(have[..., :3] - want[..., :3])[want[..., 3] == 255].mean() < 6  # WebP's own loss: 3-4.5
    opaque = process(animation(), url("format=gif", "gif"), SETTINGS, NO_FACES)
    assert "transparency" not in opened(opaque).info


@pytest.mark.parametrize("container", ["PNG", "WEBP"])
def test_an_animation_is_turned_upright_as_its_first_frame_as_a_still_is(container):
    """An APNG or animated WebP stored sideways with an EXIF orientation: every frame turned
    upright, the first one as anim=false's still is (they went out as stored)."""
    frames = [detailed((120, 80)).rotate(180 * index) for index in range(2)]
    exif = Image.Exif()
    exif[0x0112] = 6
    lossless = {"lossless": True} if container == "WEBP" else {}
    data = encoded_as(frames[0], container, save_all=True, append_images=frames[1:], exif=exif, duration=50, **lossless)
    fmt = container.lower()
    options = "format=png" if fmt == "png" else "format=webp,quality=100"  # png with a quality is PNG8
    animated = opened(process(data, url(options, fmt), SETTINGS, NO_FACES))
    as_still = url(f"{options},anim=false", fmt)
    still = np.asarray(opened(process(data, as_still, SETTINGS, NO_FACES)).convert("RGB"))
    assert animated.n_frames == 2 and animated.size == (80, 120) and still.shape == (120, 80, 3)
    assert np.abs(np.asarray(animated.convert("RGB")).astype(int) - still).mean() < 3  # WebP's loss; unturned: 40


@pytest.mark.skipif(not AVIF_AVAILABLE, reason="no AVIF encoder here")
def test_an_avif_sequence_stays_one_and_goes_out_as_webp_past_avif_s_bound():
    """An AVIF sequence stays an AVIF sequence; past AVIF's bound on the output's side (its encoding
    cost), an animated WebP, as a still AVIF is a still WebP."""
    small = process(animation(container="AVIF"), url("format=avif", "avif"), SETTINGS, NO_FACES)
    assert small.media_type == "image/avif" and opened(small).n_frames == 4
    large = animation(container="AVIF", size=(AVIF_MAX_SIDE + 8, 40))
    answer = process(large, url("format=avif", "avif"), SETTINGS, NO_FACES)
    assert answer.media_type == "image/webp" and opened(answer).format == "WEBP" and opened(answer).n_frames == 4


def test_the_first_frame_of_an_animated_webp_libwebp_wrote_without_its_alpha_flag_is_transparent():
    """Opaque squares moving on transparency: libwebp leaves the alpha flag unset, and Pillow showed
    the canvas black; anim=false's first frame as a PNG is transparent off its square, as Chromium
    shows it."""
    frames = []
    for shift in (0, 24, 48):
        frame = Image.new("RGBA", (120, 64), (0, 0, 0, 0))
        frame.paste((200, 40, 40, 255), (shift, 16, shift + 32, 48))
        frames.append(frame)
    data = encoded(frames[0], "WEBP", save_all=True, append_images=frames[1:], duration=100)
    first = np.asarray(opened(process(data, url("anim=false,format=png"), SETTINGS, NO_FACES)).convert("RGBA"))
    np.testing.assert_array_equal(first[..., 3], np.asarray(frames[0])[..., 3])


def test_an_animation_s_transparency_goes_onto_the_background_given():
    answer = process(animation(transparent_corner=True), url("background=red,format=gif", "gif"), SETTINGS, NO_FACES)
    with Image.open(io.BytesIO(answer.body)) as image:
        for frame in ImageSequence.Iterator(image):
            corner = np.asarray(frame.convert("RGB"))[5:35, 5:35]
            assert (np.abs(corner.astype(int) - (255, 0, 0)).max(axis=2) <= 8).all()


def test_the_log_line_s_facts():
    facts: dict = {}
    process(animation(), url("format=gif", "gif"), SETTINGS, NO_FACES, note=lambda **more: facts.update(more))
    assert facts == {"image": {"width": 120, "height": 80, "format": "GIF", "frames": 4}}
    facts.clear()
    data = encoded(Image.fromarray(squares_picture([(100, 100, 40)], (640, 480))), "PNG")
    with square_finder() as (detectors, _):
        process(data, detect_request({"detail": "high"}), SETTINGS, detectors, note=lambda **more: facts.update(more))
    assert facts["image"] == {"width": 640, "height": 480, "format": "PNG"} and facts["faces"] == 1
    assert facts["tiles"] == 0  # high tiles only a picture larger than the standard pass sees
    facts.clear()
    with square_finder() as (detectors, _):
        large = encoded(Image.fromarray(squares_picture([(100, 100, 40)], (2400, 1800))), "PNG")
        process(large, detect_request({"detail": "high"}), SETTINGS, detectors, note=lambda **more: facts.update(more))
    assert facts["tiles"] > 1


def test_anonymize_answers_the_whole_picture_every_face_hidden():
    marks = [(40, 40, 50), (700, 520, 60)]  # 1024 wide: the model sees every pixel as it is
    pixels = squares_picture(marks, (1024, 768), np.full((768, 1024, 3), 70, np.uint8))
    request = anonymize_request({"method": "fill", "margin": "1", "shape": "rect", "format": "png"})
    with square_finder() as (detectors, _):
        answer = process(encoded(Image.fromarray(pixels), "PNG"), request, SETTINGS, detectors)
    np.testing.assert_array_equal(
        np.asarray(opened(answer).convert("RGB")), squares_picture(marks, (1024, 768), pixels, 0)
    )
    assert "X-Crop-Rect" not in answer.headers and answer.headers["X-Face-Count"] == "2"


def test_trim_border_on_a_large_jpeg_decoded_small_finds_the_picture_inside_its_border():
    pixels = np.full((1500, 2000, 3), (30, 60, 200), np.uint8)
    pixels[200:1300, 300:1700] = np.asarray(detailed((1400, 1100)))
    answer = process(encoded(Image.fromarray(pixels), "JPEG", quality=95), url("trim=border"), SETTINGS, NO_FACES)
    assert opened(answer).size == pytest.approx((1400, 1100), abs=30)  # JPEG's ringing at the edge, a decode at 1/4


def test_a_source_over_the_longest_side_allowed_is_refused():
    with pytest.raises(ImageTooLarge):
        process(encoded(detailed((600, 100)), "PNG"), crop_request({}), Settings(max_side=500), NO_FACES)
    assert process(encoded(detailed((500, 100)), "PNG"), crop_request({}), Settings(max_side=500), NO_FACES).body


def test_detect_lists_landmarks_unless_asked_not_to_and_names_every_model():
    data = encoded(Image.fromarray(squares_picture([(100, 100, 40)], (640, 480))), "PNG")
    with square_finder() as (detectors, _):
        (face,) = process(data, detect_request({}), SETTINGS, detectors).document["faces"]
    assert face["landmarks"]["nose"] == [120, 120]  # the finder's landmarks: the square's centre
    both = process(data, detect_request({"detail": "standard"}), SETTINGS, NO_FACES)
    assert both.headers["X-Detectors"] == "retinaface, yunet"


def test_an_exif_rotated_photo_turned_again_is_pillows_turn_of_the_upright_picture():
    upright = detailed((320, 240))
    answer = process(stored_with_orientation(6, upright), url("flip=h,rotate=90,format=png"), SETTINGS, NO_FACES)
    shown = np.asarray(opened(answer).convert("RGB"), float)
    expected = np.asarray(upright.transpose(Image.Transpose.FLIP_LEFT_RIGHT).rotate(-90, expand=True), float)
    assert shown.shape == expected.shape and np.abs(shown - expected).mean() < 4


def test_an_output_of_exactly_the_pixel_limit_is_made_and_one_more_row_refused():
    data = encoded(detailed((64, 64)), "PNG")
    limited = Settings(max_pixels=100 * 100)
    assert opened(process(data, url("width=100,height=100,fit=cover"), limited, NO_FACES)).size == (100, 100)
    with pytest.raises(OutputTooLarge, match="a 100x101 output is more than the limit of 10000 pixels"):
        process(data, url("width=100,height=101,fit=cover"), limited, NO_FACES)


def test_a_window_without_faces_to_follow_is_centred_and_says_so():
    document = process(
        encoded(detailed((300, 200)), "PNG"),
        crop_request({"width": "100", "height": "100", "format": "json"}),
        SETTINGS,
        NO_FACES,
    ).document
    assert document is not None and document["focus"] == "center"
    assert document["crop"] == {"x": 50, "y": 0, "width": 200, "height": 200}


def test_placement_power_is_the_operators():
    """Faces too far apart for one window: how much the larger outweighs the smaller is the setting's
    (FACECROP_PLACEMENT_POWER): at 0 the two small faces win, at 8 the large one."""
    faces = [(20, 200, 30), (80, 260, 30), (560, 20, 70)]  # two small on the left, a large one on the right
    pixels = squares_picture(faces, (640, 480), np.full((480, 640, 3), 60, np.uint8))
    data = encoded(Image.fromarray(pixels), "PNG")
    placed = []
    for power in (0.0, 8.0):
        with square_finder() as (detectors, _):
            answer = process(
                data, url("width=150,height=150,fit=crop,gravity=face"), Settings(placement_power=power), detectors
            )
        placed.append(int(answer.headers["X-Crop-Rect"].split(",")[0]))
    assert placed[0] <= 20 and placed[1] + 480 >= 630
