"""The answer's pixels, frame by frame: one list of steps (FRAME_STEPS) that a still runs once and an
animation runs on every frame, in Cloudflare's order: the pixels the output needs, trim, flip and
rotate, the window cut and resized, its faces hidden, sRGB, the filters, the padding.

The colour work is done on straight colour, the transparency (where kept) put back before the padding.
Pixels go out as sRGB (gateway/imaging/colour.py), the frame saying what was done where the source
had a profile: `converted`, `srgb` (it was sRGB's), or `ignored` (unreadable: taken as sRGB).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from facecrop_hiding import hide_faces
from gateway.framing.crop import pad_to, render_crop
from gateway.imaging.colour import to_srgb
from gateway.imaging.decode import DecodedImage, decode_image, serves
from gateway.imaging.filters import apply_filters
from gateway.imaging.geometry import turn_pixels, turned_size
from gateway.imaging.normalise import WHITE, unpremultiplied, with_alpha
from gateway.processing.work import NO_BOXES, Work


@dataclass(frozen=True)
class Frame:
    """One frame on its way: what it is cut from, the faces hidden in it, and its pixels so far."""

    # its source pixels and what they stand for (scale, colour profile); None: not decoded yet, or
    # let go once cut (the source's profile and colour kept below)
    image: DecodedImage | None
    hidden: np.ndarray  # corner boxes of the faces hidden in it, in the turned picture's pixels
    pixels: np.ndarray | None = None  # straight BGR once cut
    alpha: np.ndarray | None = None  # the transparency kept, put back by `pad`
    icc: bytes | None = None  # once cut: the ICC profile its pixels are in (None: sRGB)
    colour: str | None = None  # X-Color-Profile: what was done to its colour

    @property
    def finished(self) -> np.ndarray:
        """Its pixels, once every step ran."""
        assert self.pixels is not None
        return self.pixels


def frames_of(work: Work) -> list[Frame]:
    """The frames the answer is made of: an animation's every frame, or the still (decoded so far)."""
    hidden = work.hidden
    if work.animation is None:
        image = work.image
        assert work.plan is not None
        if image is not None and not serves(image, work.plan.source_scale, work.underlay):
            image = None  # decoded again by `decode`, once `rendered` has let the detection's decode go
        return [Frame(image, NO_BOXES if hidden is None else hidden[0].boxes)]
    header, width_height = work.header, work.upright_size
    return [
        Frame(
            DecodedImage(stored=pixels, format=header.format, size=width_height, icc=header.icc, colour=header.colour),
            NO_BOXES if hidden is None else hidden[index].boxes,
        )
        for index, pixels in enumerate(work.animation.hand_over())
    ]


def decode(frame: Frame, work: Work) -> Frame:
    """The pixels the output needs: the frame's own (an animation's, or a still's decode so far that
    `serves`, as `frames_of` chose), else the source decoded again at that resolution."""
    if frame.image is not None:
        return frame
    assert work.plan is not None
    image = decode_image(work.data, work.header, work.plan.source_scale, work.timer, work.underlay)
    return replace(frame, image=image)


def turn(frame: Frame, work: Work) -> Frame:
    """Trimmed, flipped and rotated, at the resolution decoded: the picture the crop's plan is in."""
    geometry = work.request.geometry
    if not geometry.changes:
        return frame
    image = frame.image
    assert image is not None
    with work.timer.stage("crop"):
        pixels = turn_pixels(image.pixels, work.rect, float(image.scale[0]), geometry)
    turned = replace(image, stored=pixels, size=turned_size(work.rect, geometry.rotate), orientation=1)
    return replace(frame, image=turned)


def cut(frame: Frame, work: Work) -> Frame:
    """The window cut out and resized to the output; straight colour, the transparency aside. The
    source's pixels are let go (a 98 MP transparent PNG's: 374 MiB held until the answer was encoded)."""
    image = frame.image
    assert image is not None and work.plan is not None
    with work.timer.stage("crop"):
        pixels, alpha = unpremultiplied(render_crop(image, work.plan))
    return replace(frame, image=None, pixels=pixels, alpha=alpha, icc=image.icc, colour=image.colour)


def hide(frame: Frame, work: Work) -> Frame:
    """The frame's hidden faces hidden, their boxes moved into the output's pixels."""
    hiding, plan = work.request.hiding, work.plan
    if hiding is None or not len(frame.hidden):
        return frame
    assert plan is not None and frame.pixels is not None
    r = plan.region
    scale = np.array([plan.output[0] / r.width, plan.output[1] / r.height] * 2)
    with work.timer.stage("anonymize"):
        pixels = hide_faces(frame.pixels, (frame.hidden - [r.x, r.y, r.x, r.y]) * scale, hiding)
    return replace(frame, pixels=pixels)


def colour(frame: Frame, work: Work) -> Frame:
    """sRGB, from the profile the source's pixels are in; what was done for X-Color-Profile."""
    assert frame.pixels is not None
    with work.timer.stage("colour"):
        pixels, done = to_srgb(frame.pixels, frame.icc)
    return replace(frame, pixels=pixels, colour=done or frame.colour)


def filters(frame: Frame, work: Work) -> Frame:
    """Cloudflare's filters (gateway/imaging/filters.py), on the resized picture."""
    wanted = work.request.filters
    if not wanted.changes:
        return frame
    assert frame.pixels is not None
    with work.timer.stage("filters"):
        return replace(frame, pixels=apply_filters(frame.pixels, wanted))


def pad(frame: Frame, work: Work) -> Frame:
    """The transparency put back, and the output centred on fit=pad's canvas."""
    assert frame.pixels is not None and work.plan is not None
    pixels = with_alpha(frame.pixels, frame.alpha)
    if work.plan.canvas is not None:
        pixels = pad_to(pixels, work.plan.canvas, work.underlay or WHITE)
    return replace(frame, pixels=pixels, alpha=None)


FRAME_STEPS = (decode, turn, cut, hide, colour, filters, pad)


def rendered(work: Work) -> list[Frame]:
    """Every frame of the answer through FRAME_STEPS, the deadline checked before each step."""
    done: list[Frame] = []
    pending = frames_of(work)[::-1]  # each taken off as it is rendered: its source pixels go with it
    work.image = None  # the still's decode is its frame's alone (or nobody's): let go with the frame
    total = len(pending)
    while pending:
        frame = pending.pop()
        for step in FRAME_STEPS:
            work.deadline.check(f"{step.__name__} of frame {len(done) + 1} of {total}")
            frame = step(frame, work)
        done.append(frame)
    return done
