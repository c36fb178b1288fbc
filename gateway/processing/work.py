"""One request's state as the steps fill it in (imgproxy's pipeline context): the source, read once,
and what each step decided for the steps after it; then what they settled of the answer's picture
(`Planned`), which the frames and the answer take."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from gateway.config import Settings
from gateway.detection import Detections, Detectors, Found
from gateway.framing.crop import CropPlan
from gateway.imaging.animation import Animation
from gateway.imaging.decode import DecodedImage, ImageHeader
from gateway.imaging.encode import everyone_plays, keeps_alpha, keeps_animation
from gateway.imaging.normalise import BGR, WHITE
from gateway.params import Gravity
from gateway.request import ImageRequest, Output
from gateway.timing import NEVER, Deadline, StageTimer

NO_BOXES = np.zeros((0, 4), np.float32)


def unlogged(**facts: object) -> None:
    """Where no log line keeps a request's facts (a batch job, a test)."""


@dataclass(frozen=True)
class Focus:
    """What the crop window follows, in the turned picture: the faces it frames (none: `gravity`'s
    point), with the gravity resolved (face, or a point: auto without faces is the salient window's
    centre), and its name in format=json (faces, saliency, center or point)."""

    boxes: np.ndarray
    gravity: Gravity
    name: str


@dataclass(frozen=True)
class Planned:
    """The answer's picture as the steps settled it, for the frames and the answer: where the window
    goes and the output's size (`crop`: the picture whole where there is no window), and what the
    window follows (None: there is no window)."""

    crop: CropPlan
    focus: Focus | None


@dataclass
class Work:
    """A request on its way through the steps."""

    request: ImageRequest
    data: bytes
    header: ImageHeader  # read once, before the steps
    settings: Settings
    detectors: Detectors
    timer: StageTimer
    deadline: Deadline = NEVER
    note: Callable[..., None] = unlogged  # tells the request's log line facts (image size, faces)
    image: DecodedImage | None = None  # a still's pixels decoded so far (for the detection: reduced)
    animation: Animation | None = None  # its every frame, upright
    detected: Found | None = None  # the detection's answer, in the upright source's pixels (None: not looked)
    rect: tuple[int, int, int, int] = (0, 0, 0, 0)  # what the trim keeps, in the upright source's pixels
    size: tuple[int, int] = (0, 0)  # (W, H) of the turned picture: trimmed, flipped and rotated
    faces: Detections = field(default_factory=Detections.empty)  # the faces, in the turned picture's pixels
    # the faces each frame of the answer hides (Detections.to_hide; a still's one), in the turned
    # picture's pixels; None: it hides none
    hidden: list[Detections] | None = None

    @property
    def upright_size(self) -> tuple[int, int]:
        """(W, H) of the source as shown: an animation's frames' (a GIF's frames may grow its canvas)."""
        if self.animation is not None:
            return self.animation.size
        return self.header.upright_size

    @property
    def flatten_onto(self) -> BGR:
        """What the pictures seen before the plan (the detection's decode or an animation's frames as
        sent to it, trim=border's, gravity=auto's) flatten transparency onto."""
        return self.request.output.background or WHITE

    @cached_property
    def animated_as(self) -> str | None:
        """The format an animation that stays one goes out in (json, webp or gif); None: a still."""
        return animation_format(self.header, self.request.output)

    @cached_property
    def underlay(self) -> BGR | None:
        """What the answer's transparency goes onto: the background given, else nothing where the
        output's format (an animation's where it stays one) has an alpha channel (None: kept), else
        white."""
        given = self.request.output.background
        if given is not None:
            return given
        fmt = self.animated_as or self.request.output.format
        return None if keeps_alpha(fmt, self.header.format, self.request.output.negotiated) else WHITE

    @property
    def listed(self) -> Detections:
        """The faces the answer is about (format=json lists, X-Face-Count counts): those hidden (each
        face once, across an animation's frames), else all."""
        return self.faces if self.hidden is None else self.faces.to_hide()


def animation_format(header: ImageHeader, output: Output) -> str | None:
    """How an animation goes out where it stays one (anim=true): as JSON, or an animated WebP or GIF
    (the one asked for; format=auto's WebP where the client takes it, else the source's own where
    every client plays it, a GIF or an APNG, else GIF), or the source's own (an APNG's or AVIF
    sequence's too); None for a still (a still source, anim=false, or another format: a GIF asked
    for as PNG is its first frame, as Cloudflare answers)."""
    if not (header.animated and output.animated):
        return None
    own = header.format.lower()
    if output.negotiated:  # WebP where the client takes AVIF or WebP (not every AVIF reader plays sequences)
        return "webp" if output.format else own if everyone_plays(own) else "gif"
    asked = "png" if output.format == "png8" else output.format  # an APNG asked for as PNG8: in full colour
    if asked in (None, "json"):
        return asked or own
    return asked if keeps_animation(asked, own) else None
