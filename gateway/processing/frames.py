"""The answer's pixels, frame by frame, as the steps planned it (`Planned`): what a still runs once
and an animation runs on every frame, in Cloudflare's order: the pixels the output needs, trim, flip
and rotate, the window cut and resized (a `Source` becomes a `Frame`), then FRAME_STEPS: its faces
hidden, sRGB, the filters, the padding.

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
from gateway.processing.work import NO_BOXES, Planned, Work


@dataclass(frozen=True)
class Source:
    """A frame before its window is cut: its pixels as decoded (with what they stand for: scale,
    orientation, colour profile), and the faces hidden in it."""

    image: DecodedImage
    hidden: np.ndarray  # corner boxes of the faces hidden in it, in the turned picture's pixels


@dataclass(frozen=True)
class Frame:
    """A frame once its window is cut: the output's pixels so far, the transparency kept aside (put
    back by `pad`), the ICC profile they are in (None: sRGB) and what was done to their colour."""

    pixels: np.ndarray  # straight BGR
    hidden: np.ndarray  # the source's `hidden`
    alpha: np.ndarray | None = None
    icc: bytes | None = None
    colour: str | None = None  # X-Color-Profile


def frames_of(work: Work, planned: Planned) -> list[tuple[DecodedImage | None, np.ndarray]]:
    """The frames the answer is made of, each its pixels decoded so far (None: to decode, as `decode`
    does) and the faces it hides: an animation's every frame, or the still (decoded so far)."""
    hidden = work.hidden
    if work.animation is None:
        image = work.image
        if image is not None and not serves(image, planned.crop.source_scale, work.underlay):
            image = None  # decoded again by `decode`, once `rendered` has let the detection's decode go
        return [(image, NO_BOXES if hidden is None else hidden[0].boxes)]
    header, width_height = work.header, work.upright_size
    return [
        (
            DecodedImage(stored=pixels, format=header.format, size=width_height, icc=header.icc, colour=header.colour),
            NO_BOXES if hidden is None else hidden[index].boxes,
        )
        for index, pixels in enumerate(work.animation.hand_over())
    ]


def decode(image: DecodedImage | None, work: Work, planned: Planned) -> DecodedImage:
    """The pixels the output needs: the frame's own (an animation's, or a still's decode so far that
    `serves`, as `frames_of` chose), else the source decoded again at that resolution."""
    if image is not None:
        return image
    return decode_image(work.data, work.header, planned.crop.source_scale, work.timer, work.underlay)


def turn(source: Source, work: Work) -> Source:
    """Trimmed, flipped and rotated, at the resolution decoded: the picture the crop's plan is in."""
    geometry = work.request.geometry
    if not geometry.changes:
        return source
    image = source.image
    with work.timer.stage("crop"):
        pixels = turn_pixels(image.pixels, work.rect, float(image.scale[0]), geometry)
    turned = replace(image, stored=pixels, size=turned_size(work.rect, geometry.rotate), orientation=1)
    return replace(source, image=turned)


def cut(source: Source, work: Work, planned: Planned) -> Frame:
    """The window cut out and resized to the output; straight colour, the transparency aside. The
    source's pixels are let go with the Source (a 98 MP transparent PNG's: 374 MiB held until the
    answer was encoded)."""
    image = source.image
    with work.timer.stage("crop"):
        pixels, alpha = unpremultiplied(render_crop(image, planned.crop))
    return Frame(pixels, source.hidden, alpha, image.icc, image.colour)


def hide(frame: Frame, work: Work, planned: Planned) -> Frame:
    """The frame's hidden faces hidden, their boxes moved into the output's pixels."""
    hiding, crop = work.request.hiding, planned.crop
    if hiding is None or not len(frame.hidden):
        return frame
    r = crop.region
    scale = np.array([crop.output[0] / r.width, crop.output[1] / r.height] * 2)
    with work.timer.stage("anonymize"):
        pixels = hide_faces(frame.pixels, (frame.hidden - [r.x, r.y, r.x, r.y]) * scale, hiding)
    return replace(frame, pixels=pixels)


def colour(frame: Frame, work: Work, planned: Planned) -> Frame:
    """sRGB, from the profile the source's pixels are in; what was done for X-Color-Profile."""
    with work.timer.stage("colour"):
        pixels, done = to_srgb(frame.pixels, frame.icc)
    return replace(frame, pixels=pixels, colour=done or frame.colour)


def filters(frame: Frame, work: Work, planned: Planned) -> Frame:
    """Cloudflare's filters (gateway/imaging/filters.py), on the resized picture."""
    wanted = work.request.filters
    if not wanted.changes:
        return frame
    with work.timer.stage("filters"):
        return replace(frame, pixels=apply_filters(frame.pixels, wanted))


def pad(frame: Frame, work: Work, planned: Planned) -> Frame:
    """The transparency put back, and the output centred on fit=pad's canvas."""
    pixels = with_alpha(frame.pixels, frame.alpha)
    if planned.crop.canvas is not None:
        pixels = pad_to(pixels, planned.crop.canvas, work.underlay or WHITE)
    return replace(frame, pixels=pixels, alpha=None)


FRAME_STEPS = (hide, colour, filters, pad)  # on the cut frame, after decode, turn and cut


def rendered(work: Work, planned: Planned) -> list[Frame]:
    """Every frame of the answer: decoded, turned, cut, then through FRAME_STEPS, the deadline
    checked before each step."""
    done: list[Frame] = []
    pending = frames_of(work, planned)[::-1]  # each taken off as it is rendered: its source pixels go with it
    work.image = None  # the still's decode is its frame's alone (or nobody's): let go with the frame
    total = len(pending)

    def check(step: str) -> None:
        work.deadline.check(f"{step} of frame {len(done) + 1} of {total}")

    while pending:
        image, hidden = pending.pop()
        check("decode")
        source = Source(decode(image, work, planned), hidden)
        check("turn")
        source = turn(source, work)
        check("cut")
        frame = cut(source, work, planned)
        del image, source  # the source's pixels go once cut
        for step in FRAME_STEPS:
            check(step.__name__)
            frame = step(frame, work, planned)
        done.append(frame)
    return done
