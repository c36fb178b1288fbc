"""`facecrop video`: hide (or list) every face of a video file, frame by frame, through the service.

Each frame is scaled to what the service's pass sees (its longer side at most SENT_SIDE's), sent to
/v1/detect as a JPEG with several frames in flight so that Triton batches them, and the faces are
hidden here, at full resolution, with the same code as /v1/anonymize (facecrop_hiding). Frames
keep their timestamps; audio packets are copied untouched; the container's metadata (GPS, ...)
is not carried over. Needs the `video` extra: `pip install ./hiding './client[video]'` (PyAV, OpenCV, the hiding rules).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import islice
from pathlib import Path
from typing import cast

import av
import cv2
import numpy as np
from av.video.stream import VideoStream

from facecrop_client.client import AnyClient
from facecrop_client.presets import DEFAULTS
from facecrop_hiding import Hiding, hidden_share, hide_faces, plausible

DETECT_SIDE = 1024  # the service's standard pass sees no more (FACECROP_TARGET_SIZE)
# the longer side a frame is sent at, per detail: what that detail's pass sees (fast: YuNet alone at
# 640); a detail not named here (auto, high) may tile, which needs the frame whole
SENT_SIDE = {"standard": DETECT_SIDE, "fast": 640}
JPEG_QUALITY = 90
TURNS_COUNTERCLOCKWISE = {1: cv2.ROTATE_90_COUNTERCLOCKWISE, 2: cv2.ROTATE_180, 3: cv2.ROTATE_90_CLOCKWISE}


# constant quality (x264, x265, VP9, AV1): the shared clip's own; 18 made files 1.6x larger (docs/video.md)
CRF = 20
ENCODERS = {"h264": "libx264", "hevc": "libx265", "vp9": "libvpx-vp9", "vp8": "libvpx", "av1": "libsvtav1"}
# where OUT's container cannot hold the source's codec (HEVC into WebM, say), or it has no encoder here:
# the first of these it holds
FALLBACK_ENCODERS = ("libx264", "libvpx-vp9", "libsvtav1")
ENCODER_OPTIONS = {  # speed presets; x265 (HEVC, what phones record) says only its errors on stderr
    "libx264": {"preset": "veryfast"},
    "libx265": {"preset": "veryfast", "x265-params": "log-level=error"},
    "libvpx-vp9": {"deadline": "realtime", "cpu-used": "8"},
}
DEEP_FORMAT = "yuv420p10le"  # what a video of more than 8 bits is written in, where its encoder takes it
# the encoders whose 10-bit output players decode (HEVC Main 10, AV1 Main): H.264's High 10 plays in few
# browsers or phones, so a 10-bit source written as H.264 (ProRes, say) stays 8-bit
DEEP_ENCODERS = ("libx265", "libsvtav1")
EVEN_SIDES = ("libx264", "libx265")  # their 4:2:0 needs even sides: an odd one is scaled a pixel smaller


SIGNAL_CHECK = 0.1  # seconds: how soon the main thread runs a signal handler another thread was woken for


class VideoError(Exception):
    """A video that cannot be processed, told in one line."""


class Stopped(Exception):
    """The job was told to stop (its stop event set) and stopped before its next frame."""


@dataclass(frozen=True)
class VideoJob:
    source: Path
    target: Path
    mode: str = "anonymize"  # or detect: JSON Lines, one line per frame, then a summary
    params: dict = field(default_factory=dict)  # /v1/detect's finding options (min_confidence, detail, ...)
    hiding: Hiding = field(default_factory=lambda: Hiding(margin=DEFAULTS.margin))
    hold: int = DEFAULTS.hold
    tile_every: int = DEFAULTS.tile_every  # every so many frames with detail=auto (params without a detail)
    crf: int = CRF
    in_flight: int = 4

    def params_for(self, index: int) -> dict:
        """The finding options of frame `index`: detail=auto on every `tile_every`-th."""
        if self.tile_every and index % self.tile_every == 0 and "detail" not in self.params:
            return {**self.params, "detail": "auto"}
        return self.params


@dataclass
class VideoSummary:
    frames: int = 0
    skipped: int = 0  # frames that could not be decoded
    faces: int = 0  # faces hidden (or listed), over all frames
    seconds: float = 0.0
    hidden: float = 0.0  # shares of the frames hidden, added up
    listed: bool = False  # the faces listed, none hidden (--mode detect)

    def line(self) -> str:
        fps = self.frames / self.seconds if self.seconds else 0.0
        if self.listed:
            faces = f"{self.faces} faces listed"
        else:
            faces = f"{self.faces} faces, {self.hidden / self.frames if self.frames else 0.0:.1%} of the picture hidden"
        return f"{self.frames} frames ({self.skipped} skipped), {faces}, {self.seconds:.1f} s, {fps:.1f} fps"


def check_paths(source: Path, target: Path) -> None:
    """A VideoError, before any work, where IN is no file or OUT is not a file that can be written."""
    if not source.is_file():
        raise VideoError(f"{source}: no such file")
    if not target.name or target.is_dir():
        raise VideoError(f"{target}: a folder; OUT is the file to write")
    if not target.parent.is_dir():
        raise VideoError(f"{target}: no such folder as {target.parent}")
    if target.resolve() == source.resolve():
        raise VideoError(f"{target}: would overwrite the input")


def open_video(source: Path) -> av.container.InputContainer:
    try:
        container = av.open(str(source))
    except av.error.InvalidDataError as error:
        raise VideoError(f"{source}: not a video") from error
    except OSError as error:
        raise VideoError(f"{source}: {error.strerror or error}") from error
    if not container.streams.video:
        container.close()
        raise VideoError(f"{source}: no video stream")
    return container


def picture_stream(container: av.container.InputContainer) -> VideoStream:
    """The video stream a player shows: FFmpeg's own choice (av_find_best_stream: the moving picture
    over a one-frame cover, whatever their order; an MKV whose first track was its cover came out as
    that one picture)."""
    return cast(VideoStream, container.streams.best("video") or container.streams.video[0])


def partial_path(target: Path) -> Path:
    """Where the output is written until complete: beside it, hidden, with its extension."""
    return target.with_name(f".{target.stem}.partial-{os.getpid()}{target.suffix}")


def partials_of(target: Path) -> list[Path]:
    """The partial files of `target` any process left (`partial_path` in each)."""
    return list(target.parent.glob(f".{target.stem}.partial-*{target.suffix}"))


def detect_frame(client: AnyClient, frame: av.VideoFrame, params: dict) -> tuple[dict, np.ndarray]:
    """/v1/detect's answer for `frame` in the pixels of the frame as shown, and its corner boxes in
    the frame's stored pixels: sent scaled to what its detail's pass sees (SENT_SIDE), or whole where
    a tiled pass may run (detail auto or high: it tiles the original), turned upright as players show it (a phone's
    portrait video is stored sideways: its faces, lying down, were mostly not found)."""
    side = SENT_SIDE.get(params.get("detail", "standard"))
    scale = 1.0 if side is None else min(1.0, side / max(frame.width, frame.height))
    small = frame.reformat(
        round(frame.width * scale), round(frame.height * scale), format="bgr24", interpolation="AREA"
    )
    turn = quarter_turns(frame.rotation)
    shown = small.to_ndarray() if turn == 0 else cv2.rotate(small.to_ndarray(), TURNS_COUNTERCLOCKWISE[turn])
    _, jpeg = cv2.imencode(".jpg", shown, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    width, height = (frame.height, frame.width) if turn % 2 else (frame.width, frame.height)
    answer = rescaled(client.detect(jpeg.tobytes(), **params).raw, 1 / scale, width, height)
    return answer, stored_boxes(corner_boxes(answer), turn, (width, height))


def quarter_turns(rotation: float) -> int:
    """A display rotation (degrees counterclockwise, PyAV's `frame.rotation`) as quarter turns
    counterclockwise, 0-3 (FFmpeg's own rounding; a matrix of another angle is taken as none)."""
    turns, rest = divmod(round(rotation), 90)
    return 0 if rest else turns % 4


def stored_boxes(boxes: np.ndarray, turn: int, shown: tuple[int, int]) -> np.ndarray:
    """Corner boxes (and their scores) in a frame shown `turn` quarter turns counterclockwise from
    how it is stored, of `shown` (W, H), moved back into the stored pixels."""
    width, height = shown
    for _ in range(turn):  # one quarter turn back (clockwise) at a time: (x, y) -> (H - y, x)
        x1, y1, x2, y2 = boxes[:, 0].copy(), boxes[:, 1].copy(), boxes[:, 2].copy(), boxes[:, 3].copy()
        boxes = np.column_stack([height - y2, x1, height - y1, x2, boxes[:, 4:]])
        width, height = height, width
    return boxes


def rescaled(answer: dict, factor: float, width: int, height: int) -> dict:
    """A /v1/detect answer for a scaled image, in the pixels of the (width x height) original."""
    faces = []
    for face in answer["faces"]:
        box = {k: round(v * factor) for k, v in face["face_rectangle"].items()}
        moved = {**face, "face_rectangle": box}
        if "landmarks" in face:
            moved["landmarks"] = {k: [round(c * factor) for c in p] for k, p in face["landmarks"].items()}
        faces.append(moved)
    return {"image": {"width": width, "height": height}, "faces": faces}


def corner_boxes(answer: dict) -> np.ndarray:
    """[K, 5]: x1, y1, x2, y2 and the score (0-1) of each face of a /v1/detect answer."""
    rows = [
        (r["x"], r["y"], r["x"] + r["width"], r["y"] + r["height"], f["confidence"] / 100)
        for f in answer["faces"]
        for r in (f["face_rectangle"],)
    ]
    return np.array(rows, dtype=float).reshape(-1, 5)


def same_faces(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """[len(a), len(b)]: True where two boxes are one face (centres within half the shorter side,
    sides within 1.5x of each other)."""
    centres_a, centres_b = (a[:, :2] + a[:, 2:4]) / 2, (b[:, :2] + b[:, 2:4]) / 2
    side_a = np.minimum(a[:, 2] - a[:, 0], a[:, 3] - a[:, 1])[:, None]
    side_b = np.minimum(b[:, 2] - b[:, 0], b[:, 3] - b[:, 1])[None, :]
    distance = np.linalg.norm(centres_a[:, None] - centres_b[None], axis=2)
    smaller, larger = np.minimum(side_a, side_b), np.maximum(side_a, side_b)
    return (distance < smaller / 2) & (larger < 1.5 * np.maximum(smaller, 1e-6))


def held(before: list[np.ndarray], own: np.ndarray, after: list[np.ndarray]) -> np.ndarray:
    """`own` boxes plus the faces missing from them but found both before and after (nearest
    first): interpolated between the two sightings."""
    boxes = own
    for k, earlier in enumerate(reversed(before), start=1):
        missing = earlier[~same_faces(earlier, boxes).any(1)]
        for j, later in enumerate(after, start=1):
            if not len(missing) or not len(later):
                continue
            matched = same_faces(missing, later)
            found = matched.any(1)
            start, end = missing[found], later[matched[found].argmax(1)]
            boxes = np.vstack([boxes, start + (end - start) * k / (k + j)])
            missing = missing[~found]
    return boxes


def first_frame_rotation(source: Path) -> int:
    """The display rotation in degrees the video's frames carry (its display matrix), 0 if none."""
    with av.open(str(source)) as container, closing(decoded_frames(container, None, {}, VideoSummary())) as frames:
        first = next(frames, None)
    return int(first.rotation) if first else 0


def video_stream(
    output: av.container.OutputContainer, codec: str, rate: Fraction | None, crf: int, target: Path
) -> VideoStream:
    """`output`'s video stream: the encoder of the source's `codec` where the container holds it, else
    the first of FALLBACK_ENCODERS it holds (HEVC into WebM: VP9); a VideoError where it holds none.
    HEVC in MP4 or MOV is tagged `hvc1`, as phones write it: Apple's players (QuickTime, Safari, the
    iPhone's Photos) refuse FFmpeg's default `hev1`, and an iPhone's video came out unplayable there."""
    for encoder in dict.fromkeys((ENCODERS.get(codec, FALLBACK_ENCODERS[0]), *FALLBACK_ENCODERS)):
        options = {"crf": str(crf), **ENCODER_OPTIONS.get(encoder, {})}
        try:
            stream = cast(VideoStream, output.add_stream(encoder, rate=rate, options=options))
        except ValueError:  # PyAV's word for a codec the container cannot hold
            continue
        if encoder == "libx265" and output.format.name in ("mp4", "mov"):
            stream.codec_context.codec_tag = "hvc1"
        return stream
    raise VideoError(
        f"{target}: the {output.format.name} container holds none of the videos this writes (H.264, HEVC, VP9, AV1): "
        "use .mp4, .mkv, .mov or .webm"
    )


def encoded_size(encoder: str, width: int, height: int) -> tuple[int, int]:
    """The output's size: the source's, each odd side one pixel smaller where `encoder` needs even sides
    (an 853x480 clip comes out 852x480 in H.264; VP9 and AV1 keep it)."""
    if encoder not in EVEN_SIDES:
        return width, height
    return max(2, width - width % 2), max(2, height - height % 2)


def encodable(frame: av.VideoFrame, video: VideoStream) -> av.VideoFrame:
    """`frame` (the source's, or one whose faces were hidden) in `video`'s size, samples, matrix and
    range (the source's, `described_like`): one conversion, both ways by the source's matrix (PyAV's
    default back was BT.601's whatever the source's: a BT.709 video's frames with faces came out a
    few levels off)."""
    context = video.codec_context
    return frame.reformat(
        video.width, video.height, video.pix_fmt, dst_colorspace=context.colorspace, dst_color_range=context.color_range
    )


def described_like(video: VideoStream, source: av.VideoCodecContext) -> str:
    """Give `video` the source's colour description (primaries, transfer, matrix, range) and depth:
    10-bit samples where the source has more than 8 bits and the encoder is one of DEEP_ENCODERS
    that takes them; the samples its faces are hidden in (bgr24, or bgr48le for deeper ones). A
    phone's HDR video (HEVC, 10 bits, BT.2020 primaries, HLG) came out in 8 bits, untagged: played as
    BT.709, washed out."""
    context = video.codec_context
    for attribute in ("color_primaries", "color_trc", "colorspace", "color_range"):
        setattr(context, attribute, getattr(source, attribute))
    bits = av.VideoFormat(source.pix_fmt).components[0].bits if source.pix_fmt else 8
    takes = {f.name for f in context.codec.video_formats or ()}
    deep = bits > 8 and context.name in DEEP_ENCODERS and DEEP_FORMAT in takes
    video.pix_fmt = DEEP_FORMAT if deep else "yuv420p"
    return "bgr48le" if deep else "bgr24"


def open_encoder(video: VideoStream, crf: int, target: Path) -> None:
    """Open `video`'s encoder now: one that refuses the video (SVT-AV1 under 4x4 pixels, a CRF
    out of its range) is told in one line before any frame is sent."""
    os.environ.setdefault("SVT_LOG", "1")  # SVT-AV1 says only its errors (read once, when first opened)
    try:
        with no_real_time_threads():
            video.codec_context.open()
    except av.error.FFmpegError as error:
        raise VideoError(
            f"{target}: the {video.name} encoder refuses a {video.width}x{video.height} video at CRF {crf} "
            f"({error.strerror})"
        ) from error


@contextmanager
def no_real_time_threads() -> Iterator[None]:
    """The calling thread, and every thread the block makes real-time, at the calling thread's
    policy and priority afterwards. SVT-AV1 opened by root (or with CAP_SYS_NICE) puts the thread
    that opens it and its ~40 workers at SCHED_FIFO 99: its encode then starves every other
    process of the machine, and all this process starts later inherits the policy (a Go CLI
    spinning at FIFO 99 never lets go of a core)."""
    if not hasattr(os, "sched_setscheduler"):  # Linux only; elsewhere there is nothing to undo
        yield
        return
    policy, param = os.sched_getscheduler(0), os.sched_getparam(0)
    before = real_time_threads()
    try:
        yield
    finally:
        for thread in {0} | (real_time_threads() - before):  # 0: the calling thread
            with suppress(OSError):  # a thread that has ended
                os.sched_setscheduler(thread, policy, param)


REAL_TIME_POLICIES = frozenset({getattr(os, "SCHED_FIFO", -1), getattr(os, "SCHED_RR", -1)})


def real_time_threads() -> set[int]:
    """This process's threads (ids) whose scheduling policy is real-time."""
    threads = set()
    for task in Path("/proc/self/task").iterdir():
        with suppress(OSError):  # a thread that has ended
            if os.sched_getscheduler(int(task.name)) in REAL_TIME_POLICIES:
                threads.add(int(task.name))
    return threads


def copied_audio(stream: av.audio.stream.AudioStream, output: av.container.OutputContainer, target: Path):
    """`output`'s stream for the source's audio `stream`, copied as it is; a VideoError where the
    container cannot hold its codec (AAC into WebM), before any frame is sent."""
    try:
        return output.add_stream_from_template(stream)
    except ValueError as error:
        raise VideoError(
            f"{target}: the {output.format.name} container cannot hold the source's {stream.codec_context.name} audio "
            "(copied as it is): use .mp4, .mkv or .mov"
        ) from error


def decoded_frames(
    container: av.container.InputContainer, output, audio_map: dict, summary: VideoSummary
) -> Generator[av.VideoFrame, None, None]:
    """The video frames in order; audio packets copied to `output` as they come; frames that fail
    to decode skipped and counted."""
    for packet in container.demux(picture_stream(container), *audio_map):  # ends with the decoder's flush
        if packet.stream.type == "audio":
            if packet.dts is not None:
                packet.stream = audio_map[packet.stream]
                output.mux(packet)
            continue
        try:
            yield from cast(list[av.VideoFrame], packet.decode())
        except av.error.FFmpegError:  # invalid data, mostly; a decoder fed much of it may also answer EAGAIN
            summary.skipped += 1


def run_video(client: AnyClient, job: VideoJob, progress, stop: threading.Event | None = None) -> VideoSummary:
    """Write `job.target` (via a partial file renamed when complete) and say what was done; Stopped,
    the partial file removed, once `stop` is set."""
    check_paths(job.source, job.target)
    client.check()  # an address nobody answers: told at once, not after the retries
    summary = VideoSummary()
    started = time.monotonic()
    partial = partial_path(job.target)
    container = open_video(job.source)
    stop = threading.Event() if stop is None else stop
    try:
        with container, progress(picture_stream(container).frames or None) as bar:
            if job.mode == "detect":
                _list_faces(client, job, container, partial, summary, bar, stop)
            else:
                _hide_faces(client, job, container, partial, summary, bar, stop)
        if not summary.frames:  # an animated WebP, say: FFmpeg reads its packets but decodes none
            raise VideoError(f"{job.source}: no frame of its video could be decoded")
        summary.seconds = time.monotonic() - started
        os.replace(partial, job.target)
    finally:
        partial.unlink(missing_ok=True)
    return summary


def run_video_interruptible(client: AnyClient, job: VideoJob, progress, stop: threading.Event) -> VideoSummary:
    """run_video on a thread of its own while this (the main) thread only waits: Ctrl-C or SIGTERM
    raise KeyboardInterrupt here, in a wait (woken every SIGNAL_CHECK seconds, as the kernel may hand
    the signal to any thread), never mid-call in PyAV or OpenCV (whose bindings can crash on an
    exception raised inside them). Then `stop` is set and said on stderr, the job stops before its
    next frame and removes its partial file, and the KeyboardInterrupt goes on."""
    with ThreadPoolExecutor(1) as runner:
        running = runner.submit(run_video, client, job, progress, stop)
        try:
            while not wait([running], SIGNAL_CHECK).done:
                pass  # the signal may have reached another thread: its handler runs here, between waits
        except KeyboardInterrupt:
            stop.set()
            print("facecrop: stopping once the frames already sent are answered", file=sys.stderr)
            wait([running])
            raise
        return running.result()


def _in_order(
    client: AnyClient, job: VideoJob, frames: Iterator[av.VideoFrame], bar, stop: threading.Event
) -> Generator[tuple, None, None]:
    """(frame, its answer, its boxes, the boxes of the `hold` frames before and after it), in order,
    with up to `in_flight` + `hold` frames at the service at once (Triton batches same-sized ones);
    Stopped, instead of the next frame, once `stop` is set."""
    queue: deque[tuple[av.VideoFrame, Future]] = deque()
    past: deque[np.ndarray] = deque(maxlen=job.hold)

    def oldest() -> tuple:
        frame, future = queue.popleft()
        answer, boxes = future.result()
        after = [later.result()[1] for _, later in islice(queue, job.hold)]
        if stop.is_set():
            raise Stopped
        item = (frame, answer, boxes, list(past), after)
        past.append(boxes)
        bar.update(1)
        return item

    pool = ThreadPoolExecutor(job.in_flight)
    try:
        for index, frame in enumerate(frames):
            queue.append((frame, pool.submit(detect_frame, client, frame, job.params_for(index))))
            if len(queue) > job.in_flight + job.hold:
                yield oldest()
        while queue:
            yield oldest()
    finally:  # also when the job is interrupted: no request still uses a frame once the video is closed
        pool.shutdown(wait=True, cancel_futures=True)


def _list_faces(
    client: AnyClient, job: VideoJob, container, partial: Path, summary: VideoSummary, bar, stop: threading.Event
) -> None:
    summary.listed = True
    frames = decoded_frames(container, None, {}, summary)
    with open(partial, "w", encoding="utf-8") as out, closing(_in_order(client, job, frames, bar, stop)) as ordered:
        for frame, answer, *_ in ordered:
            out.write(json.dumps({"frame": summary.frames, "time": frame.time, **answer}) + "\n")
            summary.frames += 1
            summary.faces += len(answer["faces"])
        out.write(
            json.dumps({"summary": {"frames": summary.frames, "skipped": summary.skipped, "faces": summary.faces}})
            + "\n"
        )


def _hide_faces(
    client: AnyClient, job: VideoJob, container, partial: Path, summary: VideoSummary, bar, stop: threading.Event
) -> None:
    source = picture_stream(container)
    try:
        output = av.open(str(partial), "w")
    except ValueError as error:  # no container for OUT's extension
        raise VideoError(f"{job.target}: {error}") from error
    with output:
        # FFmpeg's guess, as its own command line takes it: the last frame lasts as long as the ones before
        # it (the average rate of a variable-rate clip would stretch or cut it); PyAV says 24 where none
        codec = source.codec_context.codec.canonical_name  # the format's, not its decoder's (AV1's is libdav1d)
        video = video_stream(output, codec, source.guessed_rate, job.crf, job.target)
        size = source.codec_context.width, source.codec_context.height
        video.width, video.height = encoded_size(video.codec_context.name, *size)
        if sar := source.codec_context.sample_aspect_ratio:  # an anamorphic video (HDV's 1440x1080) came out squeezed
            video.codec_context.sample_aspect_ratio = video.sample_aspect_ratio = sar
        samples = described_like(video, source.codec_context)
        assert source.time_base is not None  # every stream FFmpeg demuxes has one
        video.time_base = video.codec_context.time_base = source.time_base  # every timestamp kept (variable rates too)
        open_encoder(video, job.crf, job.target)
        audio_map = {a: copied_audio(a, output, job.target) for a in container.streams.audio}
        rotation = first_frame_rotation(job.source)
        if rotation:  # before the header is written, which the first audio packet may do
            video.set_display_rotation(rotation)
        ordered = closing(_in_order(client, job, decoded_frames(container, output, audio_map, summary), bar, stop))
        with ordered as frames:  # closed (its requests done) before the containers are
            for frame, _, found, before, after in frames:
                boxes = held(before, found, after)
                boxes = boxes[plausible(boxes[:, 4], boxes[:, :4])]
                out = frame
                if len(boxes):
                    pixels = hide_faces(frame.to_ndarray(format=samples), boxes[:, :4], job.hiding)
                    out = av.VideoFrame.from_ndarray(pixels, format=samples)
                    summary.hidden += hidden_share(boxes[:, :4], job.hiding, (frame.width, frame.height))
                out = encodable(out, video)
                out.pts, out.time_base = frame.pts, frame.time_base
                out.pict_type = av.video.frame.PictureType.NONE
                output.mux(video.encode(out))
                summary.frames += 1
                summary.faces += len(boxes)
        output.mux(video.encode(None))
