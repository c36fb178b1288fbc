"""The request's steps, in order (STEPS), each reading what the steps before it decided: an animation
that stays one decoded, the faces found (a still decoded as small as the detection allows), the trim
and turn (faces mapped into the turned picture); then what the window follows (`frame`) and the
crop's plan (`plan`), which settle the answer's picture as one value (`Planned`). The pixels are
then made frame by frame from it (gateway/processing/frames.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from facecrop_hiding import CONFIDENT
from gateway.config import Settings
from gateway.detection import Detections, Found, decode_scale, find
from gateway.errors import OutputTooLarge
from gateway.framing.crop import CropPlan, Rect, plan_crop
from gateway.framing.saliency import salient_focus
from gateway.imaging.animation import check_cost, read_animation
from gateway.imaging.decode import DecodedImage, decode_image, with_resolution
from gateway.imaging.geometry import border_rect, trim_rect, turn_pixels, turned_size
from gateway.imaging.normalise import flattened
from gateway.params import GRAVITIES, CropOptions, Gravity
from gateway.processing.work import NO_BOXES, Focus, Planned, Work

SAMPLED_FRAMES = 4  # an animation's frames whose faces decide its crop window (anonymize: every frame)
BORDER_SIDE = 640  # trim=border's decode, where no face was looked for: its long side at least this
CENTRE = GRAVITIES["center"]


def load(work: Work) -> None:
    """An animation that stays one: its frames decoded, once their cost is bounded for the window
    without faces (faces move it, and change its size only with zoom: checked again by `plan`). A
    still is decoded by the steps that need its pixels, as small as they allow."""
    if work.animated_as is None:
        return
    settings = work.settings
    with work.timer.stage("decode"):
        work.animation = read_animation(
            work.data, work.underlay, frame_bound(work), settings.max_animation_frames, work.header.orientation
        )
    width, height = work.upright_size
    work.note(image={"width": width, "height": height, "format": work.header.format, "frames": work.animation.count})


def frame_bound(work: Work) -> tuple[int, int]:
    """The size of the answer's frames before any is decoded: the window, centred, without faces
    (refused as `plan` refuses it where it is over the pixel or side limit)."""
    geometry, window = work.request.geometry, work.request.window
    turned = turned_size(trim_rect(geometry.trim, work.header.upright_size, geometry.dpr), geometry.rotate)
    if window is None:
        return turned
    return within_limits(centred(window, turned), window, work.settings).size


def pixels_held(work: Work) -> int:
    """What the request's pixels weigh in the worker's budget, before any is decoded: the larger of
    the upright source's and its output frame's (without faces), times an animation's frames where
    it stays one."""
    width, height = work.header.upright_size
    out_width, out_height = frame_bound(work)
    frames = work.header.frames if work.animated_as else 1
    return max(width * height, out_width * out_height) * frames


def centred(window: CropOptions, size: tuple[int, int]) -> CropPlan:
    """The window without faces, centred in a picture of `size`."""
    return plan_crop(NO_BOXES, size, replace(window, gravity=CENTRE))


def within_limits(plan: CropPlan, window: CropOptions, settings: Settings) -> CropPlan:
    """`plan`, unless its output is over the pixel limit, or enlarged to a side over the window's
    longest (or FACECROP_MAX_SIDE): 400 output_too_large. The side that follows the region's aspect
    ratio counts too: a thin region enlarged is refused, never made wider than an encoder can
    write. The region at its own size, or shrunk, is never over the picture's sides."""
    width, height = plan.size
    if width * height > settings.max_pixels:
        raise OutputTooLarge(f"a {width}x{height} output is more than the limit of {settings.max_pixels} pixels")
    max_side = min(window.max_side, settings.max_side)
    enlarged = width > plan.region.width or height > plan.region.height
    if enlarged and max(width, height) > max_side:
        raise OutputTooLarge(f"a {width}x{height} output has a side over the limit of {max_side} pixels")
    return plan


def detect(work: Work) -> None:
    """Every face, on the upright source, by the passes its detail asks for (gateway/detection's
    `find`): an animation's in SAMPLED_FRAMES frames spread over it (every frame where faces are
    hidden, each its own), a still's one frame decoded as small as the detection allows (larger
    again only where detail=auto tiles)."""
    if not work.request.find_faces:
        return
    work.detected = search(work)
    work.note(tiles=work.detected.tiles, faces=len(work.detected.faces))


def search(work: Work) -> Found:
    """The detection's answer for the request's frames (`searched_frames`)."""
    frames, larger = searched_frames(work)
    limits, timer = work.settings.limits, work.timer
    return find(frames, work.request.detect, work.detectors, limits, timer, work.deadline, work.flatten_onto, larger)


def searched_frames(work: Work) -> tuple[list[DecodedImage], Callable[[float], DecodedImage] | None]:
    """The frames the detection searches (an animation's sampled frames, or the still decoded as
    `decode_scale` allows: kept for the steps after), and how a still is decoded larger."""
    if work.animation is not None:
        frames = work.animation.frames if work.request.hiding else spread(work.animation.frames, SAMPLED_FRAMES)
        return [DecodedImage(frame, "frame", work.animation.size) for frame in frames], None
    scale = decode_scale(work.header.upright_size, work.request.detect, work.settings.limits)
    image = work.image = decode_image(work.data, work.header, scale, work.timer, work.flatten_onto)
    width, height = image.size
    work.note(image={"width": width, "height": height, "format": image.format})
    return [image], lambda at: with_resolution(image, at, work.data, work.header, image.background, work.timer)


def spread(frames: list[np.ndarray], count: int) -> list[np.ndarray]:
    """`count` of `frames`, evenly spread from the first to the last (all of them where there are fewer)."""
    if len(frames) <= count:
        return frames
    return [frames[round(i * (len(frames) - 1) / (count - 1))] for i in range(count)]


def trim(work: Work) -> None:
    """What the trim keeps (trim=border: around the border's colour, found on the still's pixels or
    the animation's first frame), the turned picture's size, the faces moved into it, and those
    the answer hides."""
    geometry = work.request.geometry
    if geometry.trim is not None and geometry.trim.border:
        if work.animation is not None:
            pixels, scale = flattened(work.animation.frames[0], work.flatten_onto), 1.0
        else:
            if work.image is None:
                at = min(1.0, BORDER_SIDE / max(work.upright_size))
                work.image = decode_image(work.data, work.header, at, work.timer, work.flatten_onto)
            pixels, scale = work.image.pixels, float(work.image.scale[0])
        work.rect = border_rect(pixels, geometry.trim, scale)
    else:
        work.rect = trim_rect(geometry.trim, work.upright_size, geometry.dpr)
    work.size = turned_size(work.rect, geometry.rotate)
    turn = (lambda found: found.turned(work.rect, geometry)) if geometry.changes else (lambda found: found)
    detected = work.detected
    work.faces = turn(detected.faces) if detected is not None else Detections.empty()
    if work.request.hiding is not None and detected is not None:  # each frame hides its own faces
        work.hidden = [turn(found).to_hide() for found in detected.per_frame]


def frame(work: Work) -> Focus | None:
    """What the window follows (None: there is no window): the faces (gravity face, or auto where
    there are faces to frame; where faces are hidden, the confident ones), the most salient window
    (auto without faces), or the gravity's point."""
    window = work.request.window
    if window is None:
        return None
    faces = work.faces
    framed = faces[faces.scores >= CONFIDENT] if work.request.hiding else faces
    if window.follows_faces and len(framed):
        return Focus(framed.boxes, GRAVITIES["face"], "faces")
    if window.gravity.follows == "auto" and window.crops:  # faces were looked for: the pixels are decoded
        region = centred(window, work.size).region
        point = salient_focus(turned_picture(work), (region.width, region.height), work.size)
        return Focus(NO_BOXES, Gravity("point", point), "saliency")
    gravity = window.gravity if window.gravity.follows == "point" else CENTRE
    return Focus(NO_BOXES, gravity, gravity.name)


def turned_picture(work: Work) -> np.ndarray:
    """The turned picture's pixels at the resolution decoded so far (an animation's first frame)."""
    geometry = work.request.geometry
    if work.animation is not None:
        return turn_pixels(flattened(work.animation.frames[0], work.flatten_onto), work.rect, 1.0, geometry)
    assert work.image is not None  # `detect` decoded it: a window that follows no point looked for faces
    return turn_pixels(work.image.pixels, work.rect, float(work.image.scale[0]), geometry)


def plan(work: Work, focus: Focus | None) -> Planned:
    """Where the window goes onto its `focus` and the output's size (the picture whole where there
    is no window), refusing an output over the pixel or side limit (400), and an animation whose
    frames of that size cost too much (413)."""
    window, settings = work.request.window, work.settings
    if window is None or focus is None:
        crop = CropPlan(Rect(0, 0, *work.size), work.size)
    else:
        options = replace(window, gravity=focus.gravity)
        crop = within_limits(plan_crop(focus.boxes, work.size, options, settings.placement_power), window, settings)
    if work.animation is not None:
        check_cost(work.animation.count, work.size, crop.size, settings.max_animation_frames)
    return Planned(crop, focus)


STEPS = (load, detect, trim)  # each fills in the Work; then frame and plan settle the Planned
