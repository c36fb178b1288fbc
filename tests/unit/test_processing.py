"""gateway/processing without HTTP: `process` answers a typed Answer that a batch job or a test can
use as it is, and holds a request to its deadline between steps and between frames (a fake clock)."""

from __future__ import annotations

import io
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from evaluation.images import astronaut, encoded
from gateway.config import Settings
from gateway.detection.detectors import serve
from gateway.errors import ClientGone, ImageTooLarge, ProcessingTimeout
from gateway.imaging import animation as animation_module
from gateway.imaging.decode import ImageHeader
from gateway.memory import PixelBudget
from gateway.processing.answer import CHEAPER_ANIMATION, process
from gateway.processing.steps import SAMPLED_FRAMES, spread
from gateway.processing.work import animation_format
from gateway.request import Output, anonymize_request, crop_request, detect_request
from gateway.timing import Deadline
from gateway.web.app import create_app
from gateway.web.url.options import parse_url_options
from tests.support import NoFacesModel, TickingClock

SETTINGS = Settings()
DETECTORS = serve(SETTINGS.detectors, SETTINGS.wire_format, NoFacesModel)
FRAMES = 12


def animation(frames: int = FRAMES) -> bytes:
    pictures = [astronaut().resize((64, 64)).rotate(10 * i) for i in range(frames)]
    buffer = io.BytesIO()
    pictures[0].save(buffer, "GIF", save_all=True, append_images=pictures[1:], duration=50, loop=0)
    return buffer.getvalue()


def test_processing_imports_no_web_framework():
    """The core runs without Flask: importing it loads neither Flask nor Werkzeug."""
    script = "import sys, gateway.processing.answer; print(sorted({'flask', 'werkzeug'} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_process_answers_a_picture_and_json_without_a_request_context():
    data = encoded(astronaut(), "PNG")
    answer = process(data, crop_request({"width": "64", "height": "48", "format": "webp"}), SETTINGS, DETECTORS)
    assert answer.media_type == "image/webp" and answer.document is None
    assert Image.open(io.BytesIO(answer.body)).size == (64, 48)
    assert answer.headers["X-Crop-Rect"] == "0,64,512,384"  # no face: the centred 4:3 window
    facts: dict = {}
    found = process(data, detect_request({}), SETTINGS, DETECTORS, note=lambda **more: facts.update(more))
    assert found.media_type == "application/json"
    assert found.body == b'{"image": {"width": 512, "height": 512}, "faces": []}\n'
    assert found.document == {"image": {"width": 512, "height": 512}, "faces": []}
    assert found.headers["X-Face-Count"] == "0"
    assert facts["faces"] == 0 and facts["image"]["width"] == 512  # what the log line keeps


class RecordingBudget(PixelBudget):
    """No bound; the pixels each request asked to hold."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[int] = []

    @contextmanager
    def held(self, pixels: int, deadline: Deadline) -> Iterator[None]:
        self.asked.append(pixels)
        yield


def test_a_request_holds_its_sources_or_its_outputs_pixels_whichever_is_more_for_each_frame_it_keeps():
    still, gif, budget = encoded(astronaut(), "PNG"), animation(), RecordingBudget()
    for data, request in [
        (still, detect_request({})),
        (still, crop_request({"width": "64", "height": "64"})),
        (still, crop_request({"width": "4096", "height": "2048"})),  # enlarged: the output is more
        (gif, anonymize_request({})),
        (gif, anonymize_request({"anim": "false"})),  # its first frame
        (gif, crop_request({"width": "128", "height": "96"})),
    ]:
        process(data, request, SETTINGS, DETECTORS, budget=budget)
    assert budget.asked == [512 * 512, 512 * 512, 4096 * 2048, FRAMES * 64 * 64, 64 * 64, FRAMES * 128 * 96]


def test_a_deadline_that_passed_stops_before_the_next_step():
    clock = TickingClock()
    with pytest.raises(ProcessingTimeout) as stopped:
        process(
            encoded(astronaut(), "JPEG"),
            crop_request({"width": "64"}),
            SETTINGS,
            DETECTORS,
            deadline=Deadline(4.0, clock),
        )
    assert clock.reads == 4  # load, detect, its standard pass, then trim found it passed
    assert str(stopped.value).endswith("before trim")
    assert stopped.value.status == 504 and stopped.value.code == "processing_timeout"


def test_a_client_that_hangs_up_stops_the_request_at_the_next_step():
    """The deadline also asks whether the client is still there: gone after the detection, the
    request stops before its next step (trim), nothing more done for nobody."""
    checks = iter([False, False, False, True])
    with pytest.raises(ClientGone) as stopped:
        process(
            encoded(astronaut(), "JPEG"),
            crop_request({"width": "64"}),
            SETTINGS,
            DETECTORS,
            deadline=Deadline(float("inf"), gone=lambda: next(checks)),
        )
    assert str(stopped.value) == "the client closed its connection before trim" and stopped.value.status == 499


def test_a_deadline_passed_after_the_last_frame_stops_before_encoding():
    """A still: five steps (the detection's standard pass checks once more), seven frame steps, then
    the check before encoding (the 14th)."""
    with pytest.raises(ProcessingTimeout, match=r"before encoding$"):
        process(
            encoded(astronaut(), "PNG"),
            crop_request({"width": "64"}),
            SETTINGS,
            DETECTORS,
            deadline=Deadline(14.0, TickingClock()),
        )


def test_an_animation_past_its_deadline_stops_at_the_next_frame_not_after_the_last():
    """The five steps, then seven per frame: a deadline passed at the 28th check stops the GIF's
    fourth frame at its second step (turn), eight frames before the last."""
    request = parse_url_options("width=32,height=32,fit=cover,format=gif").request("gif", 85)
    clock = TickingClock()
    with pytest.raises(ProcessingTimeout) as stopped:
        process(animation(), request, SETTINGS, DETECTORS, deadline=Deadline(28.0, clock))
    assert clock.reads == 28
    assert str(stopped.value).endswith(
        f"before turn of frame 4 of {FRAMES}; {CHEAPER_ANIMATION}"
    )  # and what costs less
    # with time enough, every frame: 5 + 7 x 12 checks and one before encoding
    clock = TickingClock()
    answer = process(animation(), request, SETTINGS, DETECTORS, deadline=Deadline(1000.0, clock))
    assert answer.headers["X-Frames"] == str(FRAMES) and clock.reads == 5 + 7 * FRAMES + 1


def test_a_request_past_its_deadline_is_answered_504_processing_timeout():
    client = create_app(Settings(request_timeout_s=0), NoFacesModel).test_client()
    response = client.post("/v1/crop", data={"image": (io.BytesIO(encoded(astronaut(), "JPEG")), "a.jpg")})
    assert response.status_code == 504, response.get_data(as_text=True)
    assert response.get_json()["error"]["code"] == "processing_timeout"


def test_an_animations_faces_are_looked_for_in_frames_spread_from_the_first_to_the_last():
    frames = [np.full((1, 1, 3), i, np.uint8) for i in range(10)]
    assert [int(frame[0, 0, 0]) for frame in spread(frames, SAMPLED_FRAMES)] == [0, 3, 6, 9]
    assert spread(frames[:3], SAMPLED_FRAMES) == frames[:3]  # fewer: every one


@pytest.mark.parametrize(
    "output,expected",
    [
        (Output(animated=True), "gif"),  # the source's own
        (Output(format="json", animated=True), "json"),
        (Output(format="webp", animated=True), "webp"),
        (Output(format="avif", animated=True, negotiated=True), "webp"),  # format=auto, the browser takes AVIF
        (Output(animated=True, negotiated=True), "gif"),  # format=auto, neither AVIF nor WebP: the source's own
        (Output(format="jpeg", animated=True), None),  # asked for a JPEG: its first frame
        (Output(format="webp", animated=False), None),  # anim=false
    ],
)
def test_how_an_animation_goes_out(output, expected):
    gif = ImageHeader("GIF", 64, 64, 1, animated=True, frames=3)
    assert animation_format(gif, output) == expected
    assert animation_format(replace(gif, animated=False, frames=1), output) is None  # a still


@pytest.mark.parametrize(
    ("source", "output", "expected"),
    [
        ("PNG", Output(animated=True), "png"),  # an APNG, as itself
        ("PNG", Output(format="png", animated=True), "png"),
        ("PNG", Output(format="png8", animated=True), "png"),  # format=png with a quality: kept, in full colour
        ("GIF", Output(format="png8", animated=True), None),
        ("AVIF", Output(format="avif", animated=True), "avif"),
        ("AVIF", Output(format="gif", animated=True), "gif"),
        (
            "AVIF",
            Output(format="avif", animated=True, negotiated=True),
            "webp",
        ),  # format=auto: not every reader plays AVIF sequences
        ("PNG", Output(animated=True, negotiated=True), "png"),  # format=auto, neither AVIF nor WebP: an APNG
        ("AVIF", Output(animated=True, negotiated=True), "gif"),  # ... and not every client plays AVIF: GIF
        ("WEBP", Output(animated=True, negotiated=True), "gif"),
        ("GIF", Output(format="png", animated=True), None),  # a GIF asked for as a PNG: its first frame
        ("WEBP", Output(format="avif", animated=True), None),
    ],
)
def test_an_apng_or_avif_sequence_stays_one_in_its_own_format(source, output, expected):
    assert animation_format(ImageHeader(source, 64, 64, 1, animated=True, frames=3), output) == expected


def test_an_animation_whose_output_frames_cost_too_much_is_refused_before_any_frame_is_decoded(monkeypatch):
    """12 frames of 64x64 asked for at 2200x2200 (58 MP of output frames, over 50): 413 before a
    single frame is decoded, not after every one."""
    decoded: list[int] = []
    real = animation_module.pillow_to_bgr
    monkeypatch.setattr(animation_module, "pillow_to_bgr", lambda *args: decoded.append(1) or real(*args))
    request = parse_url_options("width=2200,height=2200,fit=scale-up,format=gif").request("gif", 85)
    with pytest.raises(ImageTooLarge) as refused:
        process(animation(), request, SETTINGS, DETECTORS)
    assert "2200x2200 out" in str(refused.value) and not decoded, (str(refused.value), len(decoded))
    small = parse_url_options("width=220,height=220,fit=scale-up,format=gif").request("gif", 85)
    assert process(animation(), small, SETTINGS, DETECTORS).headers["X-Frames"] == str(FRAMES)
    assert len(decoded) == FRAMES  # the counter sees the frames when they are decoded


def test_a_still_decoded_again_for_its_output_holds_neither_decode_past_its_use():
    """A transparent PNG whose faces are hidden, its transparency kept: the detection's flattened
    decode was held beside the frame's own (decoded again, transparency kept) until the answer was
    encoded, and the frame's own past the cut (0.75 and 1 times the picture's RGBA size: 280 and 374
    MiB at 98 MP). What Python allocates (numpy, the answer) now peaks under 3.5 times the RGBA
    (4.75 before; 3.2: the cut's colour and alpha, the BGRA put back, the PNG); for a small crop,
    under 1.6 (2.1 before: both decodes at once)."""
    pixels = np.random.default_rng(1).integers(0, 256, (1500, 2000, 4), dtype=np.uint8)
    data = encoded(Image.fromarray(pixels, "RGBA"), "PNG", compress_level=1)
    for request, bound in ((anonymize_request({}), 3.5), (crop_request({"width": "256", "format": "png"}), 1.6)):
        process(data, request, SETTINGS, DETECTORS)  # imports and caches first
        tracemalloc.start()
        try:
            answer = process(data, request, SETTINGS, DETECTORS)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert answer.media_type == "image/png"
        assert Image.open(io.BytesIO(answer.body)).mode == "RGBA"  # decoded again: its transparency kept
        assert peak < bound * pixels.nbytes, f"peak {peak / pixels.nbytes:.2f} times the RGBA pixels"
