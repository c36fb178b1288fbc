"""What a request answers, in one place for every front door: its headers, its JSON, its encoded
picture; and `process`, which runs the steps that decide them. It speaks no HTTP: the views turn
its `Answer` into a response (gateway/web/responses.py), and a batch job or a test can call it as it is."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass

import numpy as np

from facecrop_hiding import regions
from gateway.config import Settings
from gateway.detection import LANDMARK_NAMES, Detections, Detectors, Found
from gateway.errors import ProcessingTimeout
from gateway.imaging.decode import read_header
from gateway.imaging.encode import encode_animation, encode_image, format_named, output_format
from gateway.imaging.metadata import output_exif
from gateway.memory import PixelBudget
from gateway.params import DetectOptions
from gateway.processing.frames import Frame, rendered
from gateway.processing.steps import STEPS, frame, pixels_held, plan, search
from gateway.processing.work import Planned, Work, unlogged
from gateway.request import ImageRequest
from gateway.timing import NEVER, Deadline, StageTimer

JSON = "application/json"
UNBOUNDED = PixelBudget()  # a batch job's or a test's: no bound on the pixels held at once


@dataclass(frozen=True)
class Answer:
    """A request's answer: the encoded picture, or (format=json) the JSON document, and its media
    type; and the facts its headers say (X-Crop-Rect, X-Face-Count, X-Frames, ...)."""

    media_type: str
    headers: dict[str, str]
    body: bytes

    @property
    def document(self) -> dict | None:
        """format=json's answer as objects (None for a picture)."""
        return json.loads(self.body) if self.media_type == JSON else None


# A face object's JSON, as json.dumps writes it: %s writes ints and floats as it does (str, repr).
FACE_JSON = '{"confidence": %s, "face_rectangle": {"x": %s, "y": %s, "width": %s, "height": %s}'
LANDMARKS_JSON = ', "landmarks": {' + ", ".join(f'"{name}": [%s, %s]' for name in LANDMARK_NAMES) + "}"


def faces_json(detections: Detections, with_landmarks: bool) -> str:
    """The API's face objects as a JSON array, the text json.dumps makes of them (written directly:
    a crowd's hundreds of objects cost a quarter as much): percent confidence to three decimals,
    integer rectangle and landmark points."""
    corners = np.rint(detections.boxes).astype(int)
    columns = [corners[:, :2], corners[:, 2:] - corners[:, :2]]
    template = FACE_JSON
    if with_landmarks:
        columns.append(np.rint(detections.landmarks).astype(int).reshape(-1, 10))
        template += LANDMARKS_JSON
    template += "}"
    percents = (detections.scores.astype(np.float64) * 100).tolist()
    rows = np.hstack(columns).tolist()
    return "[" + ", ".join(template % (round(percent, 3), *row) for percent, row in zip(percents, rows)) + "]"


# What a 504 on an animation adds: where its cost goes (every frame's passes, at anonymize's defaults
# the tiled pass too), and what costs less.
CHEAPER_ANIMATION = "an animation costs less as its first frame (anim=false) or, hiding faces, with preset=fast"


def faces_in(
    data: bytes, detectors: Detectors, settings: Settings, options: DetectOptions, timer: StageTimer | None = None
) -> Found:
    """A picture's faces (an animation's first frame), as the detect step finds them: for benchmarks,
    evaluations and tests that want the faces alone."""
    timer = timer or StageTimer()
    header = read_header(data, settings.max_pixels, settings.max_side)
    return search(Work(ImageRequest(options, None), data, header, settings, detectors, timer))


def process(
    data: bytes,
    request: ImageRequest,
    settings: Settings,
    detectors: Detectors,
    timer: StageTimer | None = None,
    deadline: Deadline = NEVER,
    note: Callable[..., None] = unlogged,
    budget: PixelBudget = UNBOUNDED,
) -> Answer:
    """The answer to `request` for the source's bytes: its header read (once), its pixels held in
    the worker's `budget` (waiting, as the stage `queue`, until they fit), the steps run in order,
    then the JSON or every frame's pixels, encoded; the `deadline` checked before each step and each
    frame's steps, and while it waits (ProcessingTimeout, 504); `note` told the facts a log line keeps."""
    timer = timer or StageTimer()
    with timer.stage("decode"):
        header = read_header(data, settings.max_pixels, settings.max_side)
    work = Work(request, data, header, settings, detectors, timer, deadline, note)
    try:
        with ExitStack() as held:
            with timer.stage("queue"):
                held.enter_context(budget.held(pixels_held(work), deadline))
            return answered(work)
    except ProcessingTimeout as late:
        if work.animation is None:
            raise
        raise ProcessingTimeout(f"{late}; {CHEAPER_ANIMATION}") from None


def answered(work: Work) -> Answer:
    """The steps, what the window follows and the plan, then the JSON or the frames rendered and
    encoded; the deadline checked between."""
    for step in STEPS:
        work.deadline.check(step.__name__)
        step(work)
    work.deadline.check("frame")
    focus = frame(work)
    work.deadline.check("plan")
    planned = plan(work, focus)
    if work.request.output.format == "json":
        return Answer(JSON, answer_headers(work, planned), json_answer(work, planned))
    frames = rendered(work, planned)
    work.deadline.check("encoding")
    body, content_type = encoded(frames, work)
    return Answer(content_type, answer_headers(work, planned, frames[-1]), body)


def answer_headers(work: Work, planned: Planned, last: Frame | None = None) -> dict[str, str]:
    """X-Crop-Rect where the request has a crop window (/v1/crop, the URL form); X-Passes,
    X-Detectors and X-Face-Count (the faces the answer is about: those hidden where it hides them)
    where faces were looked for; X-Frames for an animation; X-Color-Profile where the `last` frame
    rendered had a profile."""
    headers = {}
    if planned.focus is not None:
        r = planned.crop.region
        headers["X-Crop-Rect"] = f"{r.x},{r.y},{r.width},{r.height}"
    if work.detected is not None:
        headers |= {
            "X-Passes": work.detected.passes,
            "X-Detectors": ", ".join(work.detected.models),
            "X-Face-Count": str(len(work.listed)),
        }
    if work.animation is not None:
        headers["X-Frames"] = str(work.animation.count)
    if last is not None and last.colour:
        headers["X-Color-Profile"] = last.colour
    return headers


def image_size(size: tuple[int, int]) -> dict[str, int]:
    return {"width": size[0], "height": size[1]}


def json_answer(work: Work, planned: Planned) -> bytes:
    """format=json: the picture's size and its faces (the first max_faces; every face hidden where
    the answer hides them); where there is a crop window, the window, the output's size and what the
    window followed; where it hides faces, the regions hidden. Encoded as json.dumps writes it, the
    faces last (`faces_json`)."""
    request, listed = work.request, work.listed
    answer: dict = {"image": image_size(work.size)}
    if planned.focus is not None:  # a crop window
        crop = planned.crop
        answer |= {"crop": asdict(crop.region), "output": image_size(crop.size), "focus": planned.focus.name}
    if request.hiding is not None:
        shown = regions(listed.boxes, request.hiding.margin, work.size)
        answer["regions"] = [
            {"x": x1, "y": y1, "width": x2 - x1, "height": y2 - y1} for x1, y1, x2, y2 in shown.tolist()
        ]
    shown_faces = listed if request.hiding is not None else listed[: request.detect.max_faces]
    others = json.dumps(answer)  # "{...}": the faces go before its closing brace
    return f'{others[:-1]}, "faces": {faces_json(shown_faces, request.detect.landmarks)}}}\n'.encode()


def encoded(frames: list[Frame], work: Work) -> tuple[bytes, str]:
    """The frames as the answer's body and its content type: an animation's in its animated format,
    a still in the output's format (encode.output_format settles either: AVIF past its bound is
    WebP), with no metadata but the EXIF a JPEG keeps."""
    output, header = work.request.output, work.header
    pixels = [rendered_frame.pixels for rendered_frame in frames]
    with work.timer.stage("encode"):
        height, width = pixels[0].shape[:2]
        requested = work.animated_as or output.format
        fmt = output_format(requested, header.format, (width, height), output.avif_max_side, output.negotiated)
        if work.animation is not None:
            animation = work.animation
            body = encode_animation(pixels, animation.durations, animation.plays, fmt, output.quality)
            return body, format_named(fmt).content_type
        exif = output_exif(header.exif, output.metadata, hidden_faces=work.request.hiding is not None)
        return encode_image(pixels[0], fmt, output.quality, output.progressive, exif), format_named(fmt).content_type
