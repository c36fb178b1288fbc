"""`facecrop video`'s job (facecrop_client/video.py) in process, judged by pixels: a stand-in for the
service answers /v1/detect with the white squares of the JPEG it is sent (OpenCV's connected
components), so each output frame's hidden squares, its timestamps, its audio, the faces a missed
frame still hides (the hold) and the JSON Lines of `--detect` are checked against the clip as it was
drawn; no model and no server involved."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from facecrop_client import video
from facecrop_client.models import Detection
from facecrop_client.video import (
    DETECT_SIDE,
    Stopped,
    VideoError,
    VideoJob,
    VideoSummary,
    no_real_time_threads,
    partials_of,
    run_video,
    run_video_interruptible,
)
from facecrop_hiding import Hiding

FPS = 10
SIDE = 60  # each square's side in the clip
STEP = 6  # how far it moves right each frame
EXACT = Hiding("fill", margin=1.0, shape="rect")  # a face's box filled black, nothing more
DARK, WHITE = 40, 255
BACKGROUND = (DARK + 30, DARK, DARK - 15)  # BGR, darker than any square: a frame's colours swapped would show
SAMPLE_RATE = 16000
LANDMARKS = ("left_eye", "right_eye", "nose", "mouth_left", "mouth_right")
DIM, DIM_LEVEL = (230, 20, 240), 110  # (x, y, side) and grey of the large dim square


def square_at(index: int, size: tuple[int, int]) -> tuple[int, int]:
    """(x, y) of frame `index`'s square: moving right and down, slowly enough that the hold takes it
    for one face three frames apart."""
    return 40 + STEP * index, 30 + 3 * index


def inside_square(frame: av.VideoFrame, index: int, inset: int) -> np.ndarray:
    """The BGR pixels of frame `index`'s square, `inset` pixels in from each of its edges."""
    x, y = square_at(index, CLIP)
    return frame.to_ndarray(format="bgr24")[y + inset : y + SIDE - inset, x + inset : x + SIDE - inset]


def assert_hidden_clip(target: Path, codec: str, frames: int, size: tuple[int, int], first: int = 0) -> None:
    """`target` holds `codec`, `frames` frames of `size` (the clip's from frame `first` on), every square black."""
    with av.open(str(target)) as container:
        assert container.streams.video[0].codec_context.name == codec
    written = decoded(target)
    assert len(written) == frames
    for index, frame in enumerate(written, start=first):
        assert (frame.width, frame.height) == size
        assert inside_square(frame, index, inset=5).max() < DARK, (target, index)


def assert_nothing_else_hidden(target: Path, frames: int) -> None:
    """Around each frame's square (8 to 16 pixels out, on every side) the frame is as it was: not black."""
    for index, frame in enumerate(decoded(target)[:frames]):
        x, y = square_at(index, CLIP)
        grey = cv2.cvtColor(frame.to_ndarray(format="bgr24"), cv2.COLOR_BGR2GRAY)
        bands = (
            grey[y : y + SIDE, x - 16 : x - 8],
            grey[y : y + SIDE, x + SIDE + 8 : x + SIDE + 16],
            grey[y - 16 : y - 8, x : x + SIDE],
            grey[y + SIDE + 8 : y + SIDE + 16, x : x + SIDE],
        )
        assert min(band.mean() for band in bands) > 25, (target, index)


def build(
    path: Path,
    frames: int,
    size: tuple[int, int],
    variable: bool = False,
    codec: str = "libx264",
    rotation: int = 0,
    textured: bool = False,
    keyframes_only: bool = False,
    pix_fmt: str = "yuv420p",
    described: dict | None = None,
) -> list[int]:
    """A clip of `frames` dark frames, each with one white square (square_at) and a large dim one
    (DIM: scored under 50 %, four times the white one's side: no face anonymizing hides), and a
    tone: the pts of each frame (with `variable`, every third frame lasts three ticks); its samples
    `pix_fmt`, its colour or pixels' shape `described` (codec context attributes: color_*, sample_aspect_ratio)."""
    pts, tick = [], 0
    with av.open(str(path), "w") as output:
        # x265 told to log errors only: its stats, printed whenever its encoder is freed, would land in a later capture
        options = {"libx264": {"crf": "12"}, "libx265": {"x265-params": "log-level=error"}}.get(codec, {})
        video = output.add_stream(codec, rate=FPS, options={**options, "g": "1"} if keyframes_only else options)
        video.width, video.height, video.pix_fmt = size[0], size[1], pix_fmt
        video.codec_context.time_base = Fraction(1, FPS)
        for attribute, value in (described or {}).items():
            setattr(video.codec_context, attribute, value)
        with no_real_time_threads():  # SVT-AV1 run as root makes the thread that opens it real-time
            video.codec_context.open()
        if rotation:
            video.set_display_rotation(rotation)
        if path.suffix == ".mp4":  # a tone (WebM takes no AAC)
            audio = output.add_stream("aac", rate=SAMPLE_RATE, layout="mono")
            samples = np.arange(frames * 3 * SAMPLE_RATE // FPS) / SAMPLE_RATE
            tone = av.AudioFrame.from_ndarray(
                (0.2 * np.sin(2 * np.pi * 440 * samples)).astype(np.float32)[None], format="fltp", layout="mono"
            )
            tone.sample_rate, tone.pts = SAMPLE_RATE, 0
            output.mux(audio.encode(tone))
            output.mux(audio.encode(None))
        for index in range(frames):
            pixels = np.full((size[1], size[0], 3), BACKGROUND, np.uint8)
            if textured:  # fine grain, darker than any square: what a higher CRF gives up
                pixels += np.random.default_rng(index).integers(0, 30, pixels.shape, dtype=np.uint8)
            left, top, side = DIM
            pixels[top : top + side, left : left + side] = DIM_LEVEL
            x, y = square_at(index, size)
            pixels[y : y + SIDE, x : x + SIDE] = WHITE
            frame = av.VideoFrame.from_ndarray(pixels, format="bgr24")
            frame.pts = tick
            pts.append(tick)
            tick += 3 if variable and index % 3 == 2 else 1
            output.mux(video.encode(frame))
        output.mux(video.encode(None))
    return pts


def corrupted(source: Path, target: Path, bad: int, seed: int = 0) -> None:
    """`source`'s video packets copied into `target`, the first `bad` of them turned to noise."""
    with av.open(str(source)) as original, av.open(str(target), "w") as output:
        stream = output.add_stream_from_template(original.streams.video[0])
        for index, packet in enumerate(p for p in original.demux(video=0) if p.size):
            if index < bad:
                noise_bytes = np.random.default_rng(seed * 100 + index).integers(0, 256, packet.size, np.uint8)
                noise = av.Packet(noise_bytes.tobytes())
                noise.pts, noise.dts, noise.time_base, noise.is_keyframe = (
                    packet.pts,
                    packet.dts,
                    packet.time_base,
                    True,
                )
                packet = noise
            packet.stream = stream
            output.mux(packet)


class SquaresService:
    """Answers detect() as /v1/detect would if faces were white squares: each square of the JPEG sent,
    score 99, in the JPEG's pixels; `missing` frames (by the square's place) answer none, as a model
    that misses a face now and then. Keeps the size and options of each picture sent, and how many
    calls are running (`running`, the most at once in `most_running`); `on_frame` is called with each
    frame's index before its answer (or failure) is returned."""

    def __init__(
        self,
        width: int,
        missing: frozenset[int] = frozenset(),
        fail_at: int | None = None,
        on_frame: Callable[[int], object] = lambda index: None,
    ):
        self.width, self.missing, self.fail_at, self.on_frame = width, missing, fail_at, on_frame
        self.sent: list[tuple[int, tuple[int, int], dict]] = []  # (frame, (W, H), params)
        self.lock = threading.Lock()
        self.running = self.most_running = 0

    def check(self) -> None:
        pass

    def detect(self, image: bytes, **params) -> Detection:
        with self.lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            return self._answer(image, params)
        finally:
            with self.lock:
                self.running -= 1

    def _answer(self, image: bytes, params: dict) -> Detection:
        pixels = cv2.imdecode(np.frombuffer(image, np.uint8), cv2.IMREAD_COLOR)
        height, width = pixels.shape[:2]
        darkest = pixels.min(axis=2)
        _, _, stats, _ = cv2.connectedComponentsWithStats((darkest > 80).astype(np.uint8))
        faces = [
            {
                "confidence": round(float(np.median(darkest[y : y + h, x : x + w])) / 2.56, 1),
                "face_rectangle": {"x": int(x), "y": int(y), "width": int(w), "height": int(h)},
                "landmarks": {name: [int(x + w // 2), int(y + h // 2)] for name in LANDMARKS},
            }
            for x, y, w, h, _ in stats[1:]
            if min(w, h) >= 10
        ]
        white = [face for face in faces if face["confidence"] > 90]
        index = round((white[0]["face_rectangle"]["x"] * self.width / width - 40) / STEP) if white else -1
        time.sleep(0.002 * max(0, 12 - index))  # the earlier frames answer later: the order is the job's to keep
        with self.lock:
            self.sent.append((index, (width, height), params))
        self.on_frame(index)
        if index == self.fail_at:
            raise ConnectionError("the service went away")
        if index in self.missing:
            faces = []
        return Detection.from_json({"image": {"width": width, "height": height}, "faces": faces})


CLIP = (480, 272)
FRAMES = 12


def decoded(path: Path) -> list[av.VideoFrame]:
    with av.open(str(path)) as container:
        return list(container.decode(video=0))


def audio_packets(path: Path) -> list[tuple[int | None, bytes]]:
    with av.open(str(path)) as container:
        return [(p.pts, bytes(p)) for p in container.demux(container.streams.audio[0]) if p.size]


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> tuple[Path, list[int]]:
    path = tmp_path_factory.mktemp("clip") / "squares.mp4"
    return path, build(path, FRAMES, CLIP, variable=True)


class Progress:
    """The progress bar the job is given: its total and updates, counted."""

    def __init__(self) -> None:
        self.total: int | None = None
        self.updates = 0

    def __call__(self, total: int | None) -> Progress:
        self.total = total
        return self

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def update(self, count: int) -> None:
        self.updates += count


class ThreadOfProgress(Progress):
    """Progress that also keeps the thread the job made it from (the one that runs the job)."""

    def __call__(self, total: int | None) -> Progress:
        self.thread = threading.current_thread()
        return super().__call__(total)


def hidden_job(source: Path, target: Path, **options) -> VideoJob:
    return VideoJob(source, target, hiding=EXACT, **{"tile_every": 0, "hold": 2, **options})


def test_every_square_is_hidden_where_it_is_and_the_rest_of_the_clip_is_kept(clip, tmp_path):
    source, pts = clip
    target = tmp_path / "hidden.mp4"
    service, progress = SquaresService(CLIP[0]), Progress()
    summary = run_video(service, hidden_job(source, target), progress)
    frames = decoded(target)
    originals = decoded(source)
    assert [frame.pts for frame in frames] == [frame.pts for frame in originals]
    assert frames[0].time_base == originals[0].time_base
    times = [float(frame.time) for frame in frames]
    assert times == pytest.approx([tick / FPS for tick in pts])  # every third frame three ticks long, kept
    assert audio_packets(target) == audio_packets(source)
    for index, (before, after) in enumerate(zip(originals, frames)):
        x, y = square_at(index, CLIP)
        shown = after.to_ndarray(format="bgr24").astype(int)
        assert shown[y + 3 : y + SIDE - 3, x + 3 : x + SIDE - 3].max() < 40, f"frame {index}: its square shows"
        outside = np.ones(shown.shape[:2], bool)
        outside[y - 4 : y + SIDE + 4, x - 4 : x + SIDE + 4] = False
        difference = np.abs(shown - before.to_ndarray(format="bgr24").astype(int))[outside]
        assert (difference.max(axis=-1) > 25).mean() < 0.001, f"frame {index}: changed outside its square"
    assert (summary.frames, summary.skipped, summary.faces) == (FRAMES, 0, FRAMES)
    assert summary.hidden == pytest.approx(FRAMES * SIDE * SIDE / (CLIP[0] * CLIP[1]), rel=0.05)
    assert progress.total == FRAMES and progress.updates == FRAMES
    assert not partials_of(target) and 0 < summary.seconds < 600
    assert {size for _, size, _ in service.sent} == {CLIP}  # smaller than DETECT_SIDE: sent as it is
    with av.open(str(target)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264" and stream.guessed_rate == FPS


def test_a_face_a_frame_misses_is_hidden_between_two_sightings(clip, tmp_path):
    """Frames 4 and 5 answer no face; the hold (2 frames) still hides their squares, placed between
    the sightings before and after; frame 9's miss with hold 0 shows."""
    source, _ = clip
    target = tmp_path / "held.mp4"
    summary = run_video(SquaresService(CLIP[0], missing=frozenset({4, 5, 9})), hidden_job(source, target), Progress())
    frames = [frame.to_ndarray(format="bgr24") for frame in decoded(target)]
    for index in (4, 5, 9):
        x, y = square_at(index, CLIP)
        assert frames[index][y + 3 : y + SIDE - 3, x + 3 : x + SIDE - 3].max() < 40, f"frame {index} not held"
    assert summary.faces == FRAMES
    unheld = tmp_path / "unheld.mp4"
    run_video(SquaresService(CLIP[0], missing=frozenset({9})), hidden_job(source, unheld, hold=0), Progress())
    assert inside_square(decoded(unheld)[9], 9, inset=10).min() > 200
    short = tmp_path / "short.mp4"  # hold 1: a gap of two frames is longer than it reaches
    run_video(SquaresService(CLIP[0], missing=frozenset({4, 5})), hidden_job(source, short, hold=1), Progress())
    for index, frame in ((4, decoded(short)[4]), (5, decoded(short)[5])):
        assert inside_square(frame, index, inset=10).min() > 200, index


def test_frames_are_sent_scaled_to_the_standard_pass_and_whole_where_a_tiled_pass_may_run(tmp_path):
    """A clip wider than DETECT_SIDE: sent at DETECT_SIDE with the standard pass, whole on every
    `tile_every`-th frame (detail=auto); faces come back in the frame's own pixels."""
    size = (1280, 720)
    source = tmp_path / "wide.mp4"
    build(source, 5, size)
    service = SquaresService(size[0])
    target = tmp_path / "faces.jsonl"
    job = VideoJob(source, target, mode="detect", params={"min_confidence": 50}, tile_every=2, in_flight=2)
    summary = run_video(service, job, Progress())
    sent = sorted(service.sent, key=lambda s: s[0])
    scaled = (DETECT_SIDE, round(720 * DETECT_SIDE / 1280))
    assert [(s[1], s[2]) for s in sent] == [
        (size if index % 2 == 0 else scaled, {"min_confidence": 50, **({"detail": "auto"} if index % 2 == 0 else {})})
        for index in range(5)
    ]
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert lines[-1] == {"summary": {"frames": 5, "skipped": 0, "faces": 10}} and summary.faces == 10  # both squares
    assert "10 faces listed," in summary.line() and "hidden" not in summary.line()  # listed, nothing hidden
    for index, line in enumerate(lines[:-1]):
        assert line["frame"] == index and line["time"] == pytest.approx(index / FPS)
        assert line["image"] == {"width": 1280, "height": 720}
        face, dim = sorted(line["faces"], key=lambda f: -f["confidence"])
        assert dim["confidence"] < 50 and dim["face_rectangle"]["width"] == pytest.approx(DIM[2], abs=2)
        rect = face["face_rectangle"]
        centre = [rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2]
        assert face["landmarks"]["nose"] == pytest.approx(centre, abs=2)  # in the frame's pixels too
        x, y = square_at(index, size)
        assert np.abs(np.subtract([rect["x"], rect["y"], rect["width"], rect["height"]], [x, y, SIDE, SIDE])).max() <= 2


@pytest.mark.parametrize(
    "detail, sent_side",
    [("standard", DETECT_SIDE), ("fast", 640), ("auto", 1920), ("high", 1920), (None, DETECT_SIDE)],
)
def test_each_detail_sends_frames_at_what_its_pass_sees(tmp_path, detail, sent_side):
    """A 1080p clip: `fast` sends what YuNet's 640-pixel pass sees (the cheapest; a whole frame was
    14x the pixels for nothing), `standard` (and no detail) the standard pass's 1024, `auto` and
    `high` the frame whole, for their tiles; the faces still come back in the frame's pixels."""
    size = (1920, 1080)
    source = tmp_path / "hd.mp4"
    build(source, 2, size)
    service = SquaresService(size[0])
    params = {"min_confidence": 50, **({"detail": detail} if detail else {})}
    job = VideoJob(source, tmp_path / "faces.jsonl", mode="detect", params=params, tile_every=0, in_flight=2)
    run_video(service, job, Progress())
    assert {sent for _, sent, _ in service.sent} == {(sent_side, round(1080 * sent_side / 1920))}
    line = json.loads((tmp_path / "faces.jsonl").read_text().splitlines()[1])
    rect = max(line["faces"], key=lambda f: f["confidence"])["face_rectangle"]
    x, y = square_at(1, size)
    assert np.abs(np.subtract([rect["x"], rect["y"], rect["width"], rect["height"]], [x, y, SIDE, SIDE])).max() <= 4


@pytest.mark.parametrize("rotation", [90, -90, 180])
def test_a_clip_shown_turned_is_looked_at_as_shown_and_hidden_where_it_is_stored(tmp_path, rotation):
    """A display rotation (a phone stores a portrait video sideways): each frame is sent as players
    show it, the squares found there are hidden in the stored pixels, and --mode detect lists them in
    the pixels as shown (the stored square's mask turned by OpenCV, as the display matrix turns it)."""
    source, hidden, listed = tmp_path / "turned.mp4", tmp_path / "hidden.mp4", tmp_path / "faces.jsonl"
    build(source, 4, CLIP, rotation=rotation)
    service = SquaresService(CLIP[0])
    run_video(service, hidden_job(source, hidden), Progress())
    shown = CLIP[::-1] if rotation % 180 else CLIP
    assert {size for _, size, _ in service.sent} == {shown}
    assert_hidden_clip(hidden, "h264", 4, CLIP)
    assert_nothing_else_hidden(hidden, 4)
    run_video(SquaresService(CLIP[0]), VideoJob(source, listed, mode="detect", tile_every=0), Progress())
    turn = {90: cv2.ROTATE_90_COUNTERCLOCKWISE, -90: cv2.ROTATE_90_CLOCKWISE, 180: cv2.ROTATE_180}[rotation]
    for index, line in enumerate(json.loads(text) for text in listed.read_text().splitlines()[:-1]):
        mask = np.zeros(CLIP[::-1], np.uint8)
        x, y = square_at(index, CLIP)
        mask[y : y + SIDE, x : x + SIDE] = 255
        rect = max(line["faces"], key=lambda face: face["confidence"])["face_rectangle"]
        found = [rect["x"], rect["y"], rect["width"], rect["height"]]
        assert line["image"] == {"width": shown[0], "height": shown[1]}
        assert np.abs(np.subtract(found, cv2.boundingRect(cv2.rotate(mask, turn)))).max() <= 2, (index, found)


@pytest.mark.parametrize(
    ("rotation", "turns"), [(0, 0), (90, 1), (-90, 3), (270, 3), (180, 2), (-180, 2), (89.7, 1), (45, 0), (-30, 0)]
)
def test_a_display_rotation_is_quarter_turns_counterclockwise_or_none(rotation, turns):
    assert video.quarter_turns(rotation) == turns


HLG = {"color_primaries": 9, "color_trc": 18, "colorspace": 9, "color_range": 1}  # BT.2020, HLG: a phone's HDR
BT709 = {"color_primaries": 1, "color_trc": 1, "colorspace": 1, "color_range": 1}
FULL_RANGE = {"colorspace": 1, "color_range": 2}  # some phones record 0-255 samples


@pytest.mark.parametrize(
    ("codec", "pix_fmt", "colour", "written", "within"),
    [
        ("libx265", "yuv420p10le", HLG, "yuv420p10le", 0.5),  # before: 3.2 levels off
        ("libsvtav1", "yuv420p10le", BT709, "yuv420p10le", 0.5),  # before: written as H.264, 3.0 off
        ("libx264", "yuv420p10le", BT709, "yuv420p", 5.0),  # rounded to 8 bits on the way
        ("libx265", "yuv420p", BT709, "yuv420p", 2.5),  # 8 bits stay 8 where 10 could be written
        ("libx264", "yuv420p", BT709, "yuv420p", 2.5),  # 8 bits: FFmpeg's default conversion rounds a flat
        ("libx264", "yuvj420p", FULL_RANGE, "yuvj420p", 2.5),  # colour by a few levels there and back
        ("libvpx-vp9", "yuv420p", {}, "yuv420p", 2.5),  # (before: full range 3.3 off)
    ],
    ids=["hdr-hevc", "10-bit-av1", "10-bit-h264", "8-bit-hevc", "bt709", "full-range", "untagged-vp9"],
)
def test_the_output_keeps_the_sources_colour_and_depth(tmp_path, codec, pix_fmt, colour, written, within):
    """The colour description carried over, the samples' depth too (10 bits, in HEVC and AV1: H.264's
    High 10 plays in few browsers), and the frames whose faces were hidden converted back by the
    source's own matrix: the background of a frame with a face decodes as the source's does (an HDR
    video came out 8-bit and untagged, played washed out; a BT.709 one's frames with faces came out
    converted back by BT.601's)."""
    source, target = tmp_path / f"source{'.webm' if codec == 'libvpx-vp9' else '.mp4'}", tmp_path / "hidden.mkv"
    build(source, 3, CLIP, codec=codec, pix_fmt=pix_fmt, described=colour)
    run_video(SquaresService(CLIP[0]), hidden_job(source, target, crf=1), Progress())  # nearly lossless
    described = {}
    for path in (source, target):
        with av.open(str(path)) as container:
            context = container.streams.video[0].codec_context
            described[path.name] = (context.codec.canonical_name, context.pix_fmt, *(getattr(context, n) for n in HLG))
    codec_name, _, *description = described[source.name]
    assert described["hidden.mkv"] == (codec_name, written, *description), described
    before, after = (decoded(path)[0].to_ndarray(format="bgr48le").astype(float) / 257 for path in (source, target))
    background = np.ones(CLIP[::-1], bool)
    background[: DIM[1] + DIM[2] + 8] = False  # every row the squares (white above the dim) reach
    assert inside_square(decoded(target)[0], 0, inset=5).max() < DARK  # its face hidden
    assert np.abs(after - before)[background].mean() < within, np.abs(after - before)[background].mean(axis=0)


@pytest.mark.parametrize("out", [".mp4", ".mkv", ".mov"])
def test_an_anamorphic_video_keeps_its_pixels_shape(tmp_path, out):
    """Pixels 4:3 wide (HDV's 1440x1080, shown 16:9): the output's are too (they came out square, the
    picture squeezed); a video of square pixels says nothing of them, as before."""
    anamorphic, square = tmp_path / "hdv.mp4", tmp_path / "square.mp4"
    build(anamorphic, 3, CLIP, described={"sample_aspect_ratio": Fraction(4, 3)})
    build(square, 3, CLIP)
    for source, shape in ((anamorphic, Fraction(4, 3)), (square, None)):
        target = tmp_path / f"hidden-{source.stem}{out}"
        run_video(SquaresService(CLIP[0]), hidden_job(source, target), Progress())
        with av.open(str(target)) as container:
            assert container.streams.video[0].sample_aspect_ratio == shape, (source, out)


def test_a_failing_service_leaves_neither_the_target_nor_a_partial_file(clip, tmp_path):
    source, _ = clip
    target = tmp_path / "never.mp4"
    with pytest.raises(ConnectionError):
        run_video(SquaresService(CLIP[0], fail_at=6), hidden_job(source, target), Progress())
    assert not target.exists() and not partials_of(target)


def test_a_job_told_to_stop_stops_before_its_next_frame_and_leaves_nothing(clip, tmp_path):
    source, _ = clip
    target, stop = tmp_path / "stopped.mp4", threading.Event()
    service = SquaresService(CLIP[0], on_frame=lambda index: index == 1 and stop.set())
    progress = Progress()
    with pytest.raises(Stopped):
        run_video(service, hidden_job(source, target), progress, stop)
    assert progress.updates == 0  # frame 0 waits for frame 2 (the hold), answered after the stop
    assert len(service.sent) < FRAMES and not target.exists() and not partials_of(target)


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in this process, as in a terminal, even where the test run
    ignores SIGINT (a shell's background job does, and what it starts inherits that)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("receiver", ["main thread", "a request's thread"])
@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_lands_in_the_main_thread_s_wait_and_the_job_stops_there(clip, tmp_path, capsys, monkeypatch, receiver):
    """The job runs beside the main thread, which only waits: a SIGINT during the job raises
    KeyboardInterrupt there (never inside PyAV or OpenCV), whichever thread the kernel handed it to;
    the job is told to stop (the frames after the third are answered only once it is) and cleans up
    before the KeyboardInterrupt goes on."""
    source, _ = clip
    target, stop = tmp_path / "interrupted.mp4", threading.Event()
    thread = {"main thread": threading.main_thread(), "a request's thread": None}[receiver]

    sliced, real_wait = threading.Event(), video.wait

    def wait_and_tell(futures, timeout=None):  # the signal comes after one of the main thread's slices
        done = real_wait(futures, timeout)
        if threading.current_thread() is threading.main_thread() and not done.done:
            sliced.set()
        return done

    monkeypatch.setattr(video, "SIGNAL_CHECK", 0.001)
    monkeypatch.setattr(video, "wait", wait_and_tell)

    def on_frame(index: int) -> None:
        if index == 2:
            sliced.wait(10)
            signal.pthread_kill((thread or threading.current_thread()).ident or 0, signal.SIGINT)
        elif index > 2:
            stop.wait(10)

    progress = ThreadOfProgress()
    with pytest.raises(KeyboardInterrupt):
        run_video_interruptible(SquaresService(CLIP[0], on_frame=on_frame), hidden_job(source, target), progress, stop)
    assert stop.is_set() and progress.thread is not threading.main_thread()
    assert not target.exists() and not partials_of(target)
    assert capsys.readouterr().err == "facecrop: stopping once the frames already sent are answered\n"


def test_what_is_no_video_is_told_in_one_line(clip, tmp_path):
    source, _ = clip
    service = SquaresService(CLIP[0])
    text = tmp_path / "notes.mp4"
    text.write_text("not a video")
    for job, message in [
        (hidden_job(tmp_path / "absent.mp4", tmp_path / "out.mp4"), "no such file"),
        (hidden_job(source, source), "would overwrite the input"),
        (hidden_job(source, tmp_path), "a folder; OUT is the file to write"),
        (hidden_job(source, tmp_path / "nowhere" / "out.mp4"), f"no such folder as {tmp_path / 'nowhere'}"),
        (hidden_job(source, tmp_path, mode="detect"), "a folder; OUT is the file to write"),
        (hidden_job(text, tmp_path / "out.mp4"), "not a video"),
        (hidden_job(source, tmp_path / "out.unknown-extension"), "out.unknown-extension"),
    ]:
        with pytest.raises(VideoError, match=message):
            run_video(service, job, Progress())
    assert not service.sent[1:]  # at most the frames in flight when the output could not be opened


def test_the_summary_line_says_what_was_done():
    summary = VideoSummary(frames=50, skipped=2, faces=120, seconds=2.0, hidden=5.0)
    assert summary.line() == "50 frames (2 skipped), 120 faces, 10.0% of the picture hidden, 2.0 s, 25.0 fps"
    assert VideoSummary().line() == "0 frames (0 skipped), 0 faces, 0.0% of the picture hidden, 0.0 s, 0.0 fps"
    listed = VideoSummary(frames=50, faces=120, seconds=2.0, listed=True)  # --mode detect hides nothing
    assert listed.line() == "50 frames (0 skipped), 120 faces listed, 2.0 s, 25.0 fps"


def test_the_output_keeps_the_codec_the_rotation_and_the_quality_asked(tmp_path):
    """A VP9 clip comes out as VP9 (x264 where the codec has no encoder here), a clip shown turned
    keeps its display rotation, and a higher CRF makes a smaller file."""
    webm, hidden = tmp_path / "clip.webm", tmp_path / "hidden.webm"
    build(webm, 4, CLIP, codec="libvpx-vp9")
    run_video(SquaresService(CLIP[0]), hidden_job(webm, hidden), Progress())
    with av.open(str(hidden)) as container:
        assert container.streams.video[0].codec_context.name == "vp9"
    turned, out = tmp_path / "turned.mp4", tmp_path / "turned-hidden.mp4"
    build(turned, 4, CLIP, rotation=90, textured=True)
    run_video(SquaresService(CLIP[0]), hidden_job(turned, out), Progress())
    assert decoded(out)[0].rotation == decoded(turned)[0].rotation != 0
    sizes = {}
    for crf in (10, 40):
        target = tmp_path / f"crf{crf}.mp4"
        run_video(SquaresService(CLIP[0]), hidden_job(turned, target, crf=crf), Progress())
        sizes[crf] = target.stat().st_size
    assert sizes[40] < sizes[10] * 0.7


def test_a_container_that_cannot_hold_the_sources_codec_gets_the_first_one_it_holds(clip, tmp_path):
    """HEVC into AVI (which holds no HEVC) comes out as H.264, every square hidden, and into MKV as
    HEVC still; H.264 into WebM as VP9 (a clip without sound: WebM holds no AAC)."""
    hevc, avi, mkv = tmp_path / "clip.mkv", tmp_path / "hidden.avi", tmp_path / "hidden.mkv"
    build(hevc, 4, CLIP, codec="libx265")
    run_video(SquaresService(CLIP[0]), hidden_job(hevc, avi), Progress())
    run_video(SquaresService(CLIP[0]), hidden_job(hevc, mkv), Progress())
    silent, webm = tmp_path / "silent.mkv", tmp_path / "hidden.webm"
    build(silent, 4, CLIP)
    run_video(SquaresService(CLIP[0]), hidden_job(silent, webm), Progress())
    for target, codec in ((avi, "h264"), (mkv, "hevc"), (webm, "vp9")):
        assert_hidden_clip(target, codec, 4, CLIP)


def test_a_clip_with_odd_sides_comes_out_a_pixel_smaller_in_h264_and_whole_in_vp8(tmp_path):
    """x264's 4:2:0 takes only even sides: a 481x273 VP8 clip into MP4 (which holds no VP8) comes out
    H.264 at 480x272, every square hidden; into WebM, VP8 at its own 481x273."""
    odd = (CLIP[0] + 1, CLIP[1] + 1)
    source, mp4, webm = tmp_path / "odd.webm", tmp_path / "hidden.mp4", tmp_path / "hidden.webm"
    build(source, 4, odd, codec="libvpx")
    for target, codec, size in ((mp4, "h264", CLIP), (webm, "vp8", odd)):
        run_video(SquaresService(odd[0]), hidden_job(source, target), Progress())
        assert_hidden_clip(target, codec, 4, size)


@pytest.mark.parametrize("encoder", sorted({*video.ENCODERS.values(), *video.FALLBACK_ENCODERS}))
def test_every_encoder_takes_an_odd_sided_frame_at_the_size_it_is_given(encoder):
    """The encoders themselves judge encoded_size: an 853x481 frame is encoded at it."""
    with av.open(io.BytesIO(), "w", format="matroska") as output:
        stream = output.add_stream(encoder, rate=FPS)
        stream.width, stream.height = video.encoded_size(encoder, 853, 481)
        stream.pix_fmt = "yuv420p"
        video.open_encoder(stream, 20, Path("out.mkv"))  # as run_video opens it (SVT-AV1 goes real-time else)
        frame = av.VideoFrame.from_ndarray(np.zeros((481, 853, 3), np.uint8), format="bgr24")
        assert [*stream.encode(frame), *stream.encode(None)]


def test_a_one_pixel_clip_comes_out_two_pixels_square_in_h264(tmp_path):
    source, target = tmp_path / "dot.webm", tmp_path / "dot.mp4"
    build(source, 2, (1, 1), codec="libvpx")
    run_video(SquaresService(1), hidden_job(source, target), Progress())
    assert [(frame.width, frame.height) for frame in decoded(target)] == [(2, 2), (2, 2)]


def test_an_encoder_that_refuses_the_video_is_told_before_any_frame(clip, tmp_path):
    source, _ = clip
    service, target = SquaresService(CLIP[0]), tmp_path / "out.mp4"
    said = f"^{re.escape(str(target))}: the libx264 encoder refuses a 480x272 video at CRF -5"
    with pytest.raises(VideoError, match=said):
        run_video(service, hidden_job(source, target, crf=-5), Progress())
    assert not service.sent and not target.exists() and not partials_of(target)


def test_the_hevc_encoder_says_nothing_but_its_errors(tmp_path, capfd):
    """x265 logs some 20 lines on stderr per clip unless told not to (phones record HEVC)."""
    hevc, out = tmp_path / "clip.mkv", tmp_path / "hidden.mkv"
    build(hevc, 2, CLIP, codec="libx265")
    capfd.readouterr()
    run_video(SquaresService(CLIP[0]), hidden_job(hevc, out), Progress())
    assert "x265 [" not in capfd.readouterr().err


def test_the_moving_picture_is_the_one_hidden_not_a_cover_before_it(clip, tmp_path):
    """An MKV whose first video track is a one-frame cover picture (as FFmpeg writes one): the clip is
    the video hidden and written, every frame, as a player picks it (it came out as the cover alone)."""
    source, _ = clip
    covered, target = tmp_path / "covered.mkv", tmp_path / "hidden.mkv"
    with av.open(str(source)) as original, av.open(str(covered), "w") as output:
        cover = output.add_stream("mjpeg", rate=1)
        cover.width, cover.height, cover.pix_fmt = 64, 48, "yuvj420p"
        moving = output.add_stream_from_template(original.streams.video[0])
        picture = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 128, np.uint8), format="bgr24")
        picture.pts, picture.time_base = 0, Fraction(1, 1)
        output.mux(cover.encode(picture))
        output.mux(cover.encode(None))
        for packet in original.demux(original.streams.video[0]):
            if packet.size:
                packet.stream = moving
                output.mux(packet)
    run_video(SquaresService(CLIP[0]), hidden_job(covered, target), Progress())
    assert_hidden_clip(target, "h264", FRAMES, CLIP)


def test_hevc_in_mp4_and_mov_is_tagged_as_apple_s_players_take_it(tmp_path):
    """An iPhone's video (HEVC, `hvc1`) came out `hev1`, FFmpeg's default, which QuickTime, Safari and
    the iPhone's Photos refuse: MP4 and MOV outputs are `hvc1`, every frame decodable; MKV has no tags."""
    source = tmp_path / "iphone.mov"
    build(source, 3, CLIP, codec="libx265")
    for out, tag in ((".mp4", "hvc1"), (".mov", "hvc1"), (".mkv", "\0\0\0\0")):
        target = tmp_path / f"hidden{out}"
        run_video(SquaresService(CLIP[0]), hidden_job(source, target), Progress())
        with av.open(str(target)) as container:
            stream = container.streams.video[0]
            assert (stream.codec_context.name, stream.codec_tag) == ("hevc", tag), out
        assert len(decoded(target)) == 3


OPENS_AV1 = """
import io, pathlib, av
from facecrop_client.video import open_encoder
with av.open(io.BytesIO(), "w", format="matroska") as output:
    stream = output.add_stream("libsvtav1", rate=10)
    stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
    open_encoder(stream, 20, pathlib.Path("out.mkv"))
"""


def test_the_av1_encoder_says_nothing_but_its_errors(monkeypatch):
    """SVT-AV1 reads how much to log (SVT_LOG) once per process: open_encoder sets it to errors only
    unless the user set it (seen here), and a fresh process opening the encoder logs no info line."""
    monkeypatch.delenv("SVT_LOG", raising=False)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}  # the modules this process runs
    done = subprocess.run([sys.executable, "-c", OPENS_AV1], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Svt[info]" not in done.stderr
    for given, kept in ((None, "1"), ("3", "3")):
        if given:
            monkeypatch.setenv("SVT_LOG", given)
        with av.open(io.BytesIO(), "w", format="matroska") as output:
            stream = output.add_stream("libvpx-vp9", rate=FPS)
            stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
            video.open_encoder(stream, 20, Path("out.mkv"))
        assert os.environ["SVT_LOG"] == kept


def threads_real_time() -> int:
    """How many of this process's threads run at a real-time policy (counted here, not by the module)."""
    policies = [os.sched_getscheduler(int(task)) for task in os.listdir("/proc/self/task")]
    return sum(policy in (os.SCHED_FIFO, os.SCHED_RR) for policy in policies)


ENCODES_AV1 = """
import io, os, pathlib, sys, av, numpy as np
from facecrop_client.video import open_encoder
def real_time_threads():
    policies = [os.sched_getscheduler(int(task)) for task in os.listdir("/proc/self/task")]
    return [policy for policy in policies if policy in (os.SCHED_FIFO, os.SCHED_RR)]
with av.open(io.BytesIO(), "w", format="matroska") as output:
    stream = output.add_stream("libsvtav1", rate=10)
    stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
    if sys.argv[1] == "open_encoder":
        open_encoder(stream, 20, pathlib.Path("out.mkv"))
    else:
        stream.codec_context.open()
    seen = len(real_time_threads())
    frame = av.VideoFrame.from_ndarray(np.zeros((64, 64, 3), np.uint8), format="rgb24")
    for _ in range(3):
        stream.encode(frame)
        seen = max(seen, len(real_time_threads()))
    stream.encode(None)
print(seen, os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
"""


def encodes_av1(opener: str, *run_as: str) -> tuple[int, int, int]:
    """(the most real-time threads seen, the main thread's policy and priority at the end) of a fresh
    process (`run_as`: a command it runs under) that encodes three AV1 frames."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [*run_as, sys.executable, "-c", ENCODES_AV1, opener]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    seen, policy, priority = map(int, done.stdout.split())
    return seen, policy, priority


def test_the_av1_encoder_leaves_no_thread_real_time():
    """SVT-AV1 opened by root puts its workers and the thread that opens it at SCHED_FIFO 99: an encode
    starves the machine, and every process started afterwards inherits FIFO 99. open_encoder puts
    them back at the opener's policy and priority (here: the ordinary one, and a real-time 1 chosen
    on purpose)."""
    seen, policy, priority = encodes_av1("raw")
    if (seen, policy) == (0, os.SCHED_OTHER):
        pytest.skip("SVT-AV1 cannot go real-time here (not root, no CAP_SYS_NICE): nothing to undo")
    assert seen > 10 and (policy, priority) == (os.SCHED_FIFO, 99)  # what the test guards against
    assert encodes_av1("open_encoder") == (0, os.SCHED_OTHER, 0)
    seen, policy, priority = encodes_av1("open_encoder", "chrt", "--fifo", "1")
    assert (policy, priority) == (os.SCHED_FIFO, 1)  # a real-time 1 chosen on purpose, not SVT-AV1's 99
    with av.open(io.BytesIO(), "w", format="matroska") as output:  # and in this process, while it is open
        stream = output.add_stream("libsvtav1", rate=FPS)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        video.open_encoder(stream, 20, Path("out.mkv"))
        assert threads_real_time() == 0 and len(os.listdir("/proc/self/task")) > 10  # SVT's workers run


def test_a_thread_that_ends_while_the_policies_are_read_is_passed_over(monkeypatch):
    """A thread listed in /proc/self/task may be gone when its policy is asked (ESRCH)."""
    asked = os.sched_getscheduler
    gone = threading.get_native_id()  # this thread stands for one that has just ended

    def policy_of(thread: int) -> int:
        if thread == gone:
            raise ProcessLookupError(3, "No such process")
        return asked(thread)

    monkeypatch.setattr(os, "sched_getscheduler", policy_of)
    assert video.real_time_threads() == set()  # not an error


@pytest.mark.parametrize(
    "encoder, size, encoded",
    [
        ("libx264", (482, 271), (482, 270)),
        ("libx265", (485, 1), (484, 2)),
        ("libx264", (853, 480), (852, 480)),
        ("libvpx-vp9", (485, 271), (485, 271)),
        ("libsvtav1", (853, 481), (853, 481)),
    ],
)
def test_only_odd_sides_lose_a_pixel_and_only_in_h264_and_hevc(encoder, size, encoded):
    assert video.encoded_size(encoder, *size) == encoded


def test_first_frames_that_cannot_be_decoded_are_skipped_and_the_rest_hidden(tmp_path):
    clean, source, target = tmp_path / "clean.webm", tmp_path / "torn.webm", tmp_path / "hidden.webm"
    build(clean, 6, CLIP, codec="libvpx-vp9", keyframes_only=True)
    corrupted(clean, source, bad=2)
    summary = run_video(SquaresService(CLIP[0]), hidden_job(source, target), Progress())
    assert (summary.frames, summary.skipped) == (4, 2)
    assert_hidden_clip(target, "vp9", 4, CLIP, first=2)


@pytest.mark.parametrize("mode", ["anonymize", "detect"])
def test_a_video_none_of_whose_frames_can_be_decoded_is_told_so(tmp_path, mode):
    """Every packet noise (VP9's decoder answers EAGAIN, not only invalid data, once fed enough of it):
    one line, nothing written."""
    clean, source, target = tmp_path / "clean.webm", tmp_path / "noise.webm", tmp_path / "out.webm"
    build(clean, 6, CLIP, codec="libvpx-vp9", keyframes_only=True)
    corrupted(clean, source, bad=6, seed=2)
    errors = set()
    with av.open(str(source)) as noise:
        for packet in noise.demux(video=0):
            try:
                packet.decode()
            except av.error.FFmpegError as error:
                errors.add(type(error))
    assert errors - {av.error.InvalidDataError}, "this noise no longer makes the decoder answer EAGAIN"
    with pytest.raises(VideoError, match=r"noise\.webm: no frame of its video could be decoded"):
        run_video(SquaresService(CLIP[0]), hidden_job(source, target, mode=mode), Progress())
    assert not target.exists() and not partials_of(target)


@pytest.mark.parametrize(
    ("name", "build_options", "out"),
    [
        ("cfr.mp4", {}, "hidden.mkv"),  # an encoder left at its own rate says 24 fps in MKV and WebM
        ("vfr.mp4", {"variable": True}, "hidden.mp4"),  # the average rate would make the last frame longer
        ("raw.ivf", {"codec": "libvpx-vp9"}, "hidden.webm"),  # IVF gives no average rate
    ],
)
def test_the_output_keeps_the_sources_frame_rate(tmp_path, name, build_options, out):
    source, target = tmp_path / name, tmp_path / out
    build(source, 8, CLIP, **build_options)
    run_video(SquaresService(CLIP[0]), hidden_job(source, target), Progress())
    with av.open(str(source)) as original, av.open(str(target)) as hidden:
        kept = original.streams.video[0].average_rate or FPS
        assert hidden.streams.video[0].average_rate == kept
    # relative times: MKV's muxer moves every stream later by the AAC's priming (negative timestamps)
    times = [[frame.time - frames[0].time for frame in frames] for frames in (decoded(target), decoded(source))]
    assert times[0] == pytest.approx(times[1])


def test_no_more_requests_are_in_flight_than_asked_and_the_hold_still_sees_ahead(clip, tmp_path):
    """One request at a time with a hold of 2: the frames after a missed one are still awaited."""
    source, _ = clip
    target, service = tmp_path / "held.mp4", SquaresService(CLIP[0], missing=frozenset({5}))
    run_video(service, hidden_job(source, target, in_flight=1), Progress())
    assert service.most_running == 1
    assert inside_square(decoded(target)[5], 5, inset=3).max() < 40


def test_a_failed_job_returns_only_once_its_requests_are_answered(clip, tmp_path):
    """Frame 0's request fails while frame 1's is still being answered (it takes a while): the job
    raises only after that answer, so no request still uses a frame once the video is closed."""
    source, _ = clip
    second = threading.Event()

    def on_frame(index: int) -> None:
        if index == 0:
            assert second.wait(10)  # fails only once frame 1's request is running
        elif index == 1:
            second.set()
            time.sleep(0.3)

    service = SquaresService(CLIP[0], fail_at=0, on_frame=on_frame)
    with pytest.raises(ConnectionError):
        run_video(service, hidden_job(source, tmp_path / "never.mp4", in_flight=2), Progress())
    assert service.running == 0


def test_a_codec_without_an_encoder_here_comes_out_h264_at_the_speed_and_quality_asked(tmp_path):
    """MPEG-4 Part 2 (old cameras' AVIs; ENCODERS has none of it) comes out H.264, every square
    hidden; x264 writes the options it ran with into the stream: veryfast's single reference and the CRF."""
    source, target = tmp_path / "camera.avi", tmp_path / "hidden.mp4"
    build(source, 4, CLIP, codec="mpeg4")
    run_video(SquaresService(CLIP[0]), hidden_job(source, target, crf=23), Progress())
    assert_hidden_clip(target, "h264", 4, CLIP)
    written = target.read_bytes()
    assert b"x264 - core" in written and b" ref=1 " in written and b" crf=23.0 " in written


def test_a_container_that_cannot_hold_the_video_or_the_sound_is_told_before_any_frame(clip, tmp_path):
    """An image format (GIF) holds no video this writes; WebM holds no AAC sound (copied as it is):
    one line saying so and what to use, no frame sent, nothing left behind."""
    source, _ = clip
    for name, message in [
        ("out.gif", "the gif container holds none of the videos this writes .*: use .mp4, .mkv, .mov or .webm"),
        ("out.webm", "the webm container cannot hold the source's aac audio .*: use .mp4, .mkv or .mov"),
    ]:
        service, target = SquaresService(CLIP[0]), tmp_path / name
        with pytest.raises(VideoError, match=f"^{re.escape(str(target))}: {message}"):
            run_video(service, hidden_job(source, target), Progress())
        assert not service.sent and not target.exists() and not partials_of(target)


def test_a_file_without_a_video_stream_is_told_so(tmp_path):
    sound = tmp_path / "sound.m4a"
    with av.open(str(sound), "w") as output:
        audio = output.add_stream("aac", rate=SAMPLE_RATE, layout="mono")
        tone = av.AudioFrame.from_ndarray(np.zeros((1, 4096), np.float32), format="fltp", layout="mono")
        tone.sample_rate, tone.pts = SAMPLE_RATE, 0
        output.mux(audio.encode(tone))
        output.mux(audio.encode(None))
    with pytest.raises(VideoError, match="no video stream"):
        run_video(SquaresService(CLIP[0]), hidden_job(sound, tmp_path / "out.mp4"), Progress())


def test_each_frame_travels_as_a_jpeg_of_the_jobs_quality():
    """The JPEG sent is encoded at JPEG_QUALITY (its quantization tables, read by Pillow, are those of
    a JPEG of that quality), not the encoder's default (95: a third more bytes for nothing)."""
    from PIL import Image

    sent = []

    class Recording:
        def detect(self, image: bytes, **params) -> Detection:
            sent.append(image)
            return Detection.from_json({"image": {"width": 320, "height": 240}, "faces": []})

    rng = np.random.default_rng(7)
    frame = av.VideoFrame.from_ndarray(rng.integers(0, 255, (240, 320, 3), np.uint8), format="bgr24")
    video.detect_frame(Recording(), frame, {})
    _, reference = cv2.imencode(".jpg", frame.to_ndarray(format="bgr24"), [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert video.JPEG_QUALITY == 90
    tables = [Image.open(io.BytesIO(jpeg)).quantization for jpeg in (sent[0], reference.tobytes())]
    assert tables[0] == tables[1]
