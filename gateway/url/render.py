"""The URL form's pictures: a source's bytes and its options to the answer, in Cloudflare's order:
trim, flip and rotate (gateway/imaging/geometry.py), the crop window and the resize, faces hidden,
sRGB, filters (gateway/imaging/filters.py), padding, encoding.

Faces are found once, on the upright source, and mapped into the trimmed and turned picture. The
window frames them (gravity=face, or auto where there are faces); gravity=auto on a picture
without faces goes where its saliency is (gateway/imaging/saliency.py). An animation is cropped
frame by frame to one window (gateway/imaging/animation.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from flask import Response, current_app, g, jsonify
from flask.typing import ResponseReturnValue

from facecrop_hiding import CONFIDENT
from gateway.answers import (
    crop_headers,
    crop_json,
    crop_pixels,
    crop_plan,
    detect,
    encoded,
    finished_crop,
    turned_image,
    underlay,
)
from gateway.crop import render_crop
from gateway.decode import DecodedImage, ImageHeader, decode_image, read_header, upright_size
from gateway.detection.detections import Detections, face_objects
from gateway.detection.postprocess import finish
from gateway.encode import AVIF_AUTO_MAX_SIDE, AVIF_MAX_SIDE, CONTENT_TYPES
from gateway.imaging.animation import check_cost, encode_animation, read_animation
from gateway.imaging.geometry import Geometry, border_rect, trim_rect, turn_detections, turn_pixels, turned_size
from gateway.imaging.metadata import output_exif
from gateway.imaging.saliency import salient_focus
from gateway.observe import note
from gateway.pipeline import FAST_SIZE, detect_frames, detection_headers
from gateway.url.options import UrlOptions

SAMPLED_FRAMES = 4  # an animation's frames whose faces decide its crop window (anonymize: every frame)
NO_FACES = Detections(np.zeros(0, np.float32), np.zeros((0, 4), np.float32), np.zeros((0, 5, 2), np.float32))


@dataclass(frozen=True)
class Framing:
    """What the crop window follows, in the turned picture: the faces it frames, those hidden, the
    gravity plan_crop gets, and the focus format=json names (faces, saliency, center or point)."""

    boxes: np.ndarray
    hidden: np.ndarray | None
    gravity: str | tuple[float, float]
    focus: str


def render(data: bytes, options: UrlOptions, fmt: str, headers: dict[str, str], quality: int) -> ResponseReturnValue:
    """The answer for the source's bytes: the crop's JSON or its picture (an animation's, where it
    stays one), encoded at `quality`."""
    settings = current_app.extensions["facecrop"].settings
    with g.timer.stage("decode"):
        header = read_header(data, settings.max_pixels, settings.max_side)
    moving = animated_format(header, options, fmt)
    if moving:
        return render_animation(data, header, options, moving, headers, quality)
    result, image, found = None, None, NO_FACES
    if options.needs_faces:
        result, _ = detect(data, options.detect, header, options.background)
        image, found = result.image, result.detections
    size, geometry = upright_size(header), options.geometry
    if geometry.trim is not None and geometry.trim.border:
        image = image or decode_image(data, header, min(1.0, FAST_SIZE / max(size)), g.timer, options.background)
        rect = border_rect(image.pixels, geometry.trim, float(image.scale[0]))
    else:
        rect = trim_rect(geometry.trim, size, geometry.dpr)
    if geometry.changes:
        found = turn_detections(found, rect, geometry)
    turned = turned_size(rect, geometry.rotate)
    picture = (lambda: turned_image(image, rect, geometry).pixels) if image is not None else None
    framing = frame(found, options, turned, picture)
    plan = crop_plan(framing.boxes, turned, replace(options.crop, gravity=framing.gravity))
    headers |= crop_headers(plan, result)
    if fmt == "json":
        faces = face_objects(found[: options.detect.max_faces], options.detect.landmarks)
        return jsonify(crop_json(turned, plan, faces, framing.focus)), 200, headers
    hidden = (framing.hidden, options.hiding) if options.hiding and framing.hidden is not None else None
    requested, progressive, avif_max_side = output_of(fmt, options)
    background = underlay(requested, header.format, options.background if options.background_given else None)
    pixels, colour = crop_pixels(data, image, plan, background, hidden, header, (rect, geometry), options.filters)
    exif = output_exif(header.exif, options.metadata, hidden_faces=options.hiding is not None)
    return encoded(pixels, requested, header.format, quality, headers | colour, progressive, avif_max_side, exif)


def output_of(fmt: str, options: UrlOptions) -> tuple[str | None, bool, int]:
    """The encoder's format (None: the input's), whether a JPEG is progressive, and AVIF's bound."""
    requested = None if fmt == "input" else {"baseline-jpeg": "jpeg"}.get(fmt, fmt)
    if requested == "png" and options.palette:
        requested = "png8"
    progressive = fmt == "jpeg" and options.compression is None
    return requested, progressive, AVIF_AUTO_MAX_SIDE if options.format == "auto" else AVIF_MAX_SIDE


def frame(found: Detections, options: UrlOptions, size: tuple[int, int], picture) -> Framing:
    """What the window follows: the faces (gravity=face, or auto where there are faces to frame), the
    most salient window (auto without faces: `picture()` gives the turned pixels), or a point."""
    gravity = options.crop.gravity
    framed = found[found.scores >= CONFIDENT] if options.hiding else found
    hidden = found.to_hide().boxes if options.hiding else None
    if options.crop.follows_faces and len(framed):
        return Framing(framed.boxes, hidden, "face", "faces")
    if gravity == "auto" and options.crop.crops and picture is not None:
        window = crop_plan(NO_FACES.boxes, size, replace(options.crop, gravity="center")).region
        focus = salient_focus(picture(), (window.width, window.height), size)
        return Framing(NO_FACES.boxes, hidden, focus, "saliency")
    if isinstance(gravity, tuple):
        return Framing(NO_FACES.boxes, hidden, gravity, "point")
    return Framing(NO_FACES.boxes, hidden, "center", "center")


def animated_format(header: ImageHeader, options: UrlOptions, fmt: str) -> str | None:
    """How an animation goes out, where it stays one (anim=true): as JSON, or an animated WebP or GIF
    (the one asked for; format=auto's WebP where the client takes it, else GIF; the source's own);
    None for a still (a still source, anim=false, or a format without animations)."""
    if not (header.animated and options.anim):
        return None
    if fmt in ("json", "gif", "webp"):
        return fmt
    if fmt == "input":
        return header.format.lower()
    if options.format == "auto":
        return "webp" if fmt == "avif" else "gif"
    return None


def render_animation(
    data: bytes, header: ImageHeader, options: UrlOptions, out: str, headers: dict[str, str], quality: int
) -> ResponseReturnValue:
    """Every frame trimmed and turned, then cropped to one window, which holds the faces found in
    SAMPLED_FRAMES frames spread over the animation (with anonymize, the faces of every frame, each
    hidden in its own frame)."""
    services = current_app.extensions["facecrop"]
    max_frames = services.settings.max_animation_frames
    with g.timer.stage("decode"):
        animation = read_animation(data, options.background, frame_bound(header, options), max_frames)
    frames = turned_frames(animation.frames, options.geometry)
    height, width = frames[0].shape[:2]
    per_frame: list[Detections] | None = None
    merged = NO_FACES
    if options.needs_faces:
        sampled = frames if options.hiding else spread(frames, SAMPLED_FRAMES)
        found, models = detect_frames(sampled, services.detectors, services.settings, options.detect, g.timer)
        merged = finish(Detections.concatenate(found), (height, width), options.detect)
        per_frame = found if options.hiding else None
        headers |= detection_headers("standard", models, len(merged))
        note(faces=len(merged))
    note(image={"width": width, "height": height, "format": header.format, "frames": len(frames)})
    framing = frame(merged, options, (width, height), lambda: frames[0])
    plan = crop_plan(framing.boxes, (width, height), replace(options.crop, gravity=framing.gravity))
    check_cost(len(frames), (width, height), plan.size, max_frames)  # the window the faces chose
    headers |= crop_headers(plan, None) | {"X-Frames": str(len(frames))}
    if out == "json":
        faces = face_objects(merged[: options.detect.max_faces], options.detect.landmarks)
        return jsonify(crop_json((width, height), plan, faces, framing.focus)), 200, headers
    rendered: list[np.ndarray] = []
    colour: dict[str, str] = {}
    for index, pixels in enumerate(frames):
        image = DecodedImage(stored=pixels, format=header.format, size=(width, height), icc=header.icc)
        with g.timer.stage("crop"):
            cut = render_crop(image, plan)
        hidden = None
        if per_frame is not None and options.hiding is not None:
            here = per_frame[index]
            hidden = (here.to_hide().boxes, options.hiding)
        picture, colour = finished_crop(cut, image, plan, options.background, hidden, options.filters)
        rendered.append(picture)
    with g.timer.stage("encode"):
        body = encode_animation(rendered, animation.durations, animation.plays, out, quality)
    return Response(body, content_type=CONTENT_TYPES[out], headers=headers | colour)


def frame_bound(header: ImageHeader, options: UrlOptions) -> tuple[int, int]:
    """The size of the answer's frames before any is decoded: the window without faces (they move
    it, and change its size only with zoom and one of width and height: checked again once found)."""
    geometry = options.geometry
    turned = turned_size(trim_rect(geometry.trim, upright_size(header), geometry.dpr), geometry.rotate)
    return crop_plan(NO_FACES.boxes, turned, replace(options.crop, gravity="center")).size


def turned_frames(frames: list[np.ndarray], geometry: Geometry) -> list[np.ndarray]:
    """An animation's frames trimmed (trim=border: around the first frame's border), flipped and rotated."""
    if not geometry.changes:
        return frames
    height, width = frames[0].shape[:2]
    trim = geometry.trim
    rect = border_rect(frames[0], trim, 1.0) if trim and trim.border else trim_rect(trim, (width, height), geometry.dpr)
    return [turn_pixels(frame, rect, 1.0, geometry) for frame in frames]


def spread(frames: list[np.ndarray], count: int) -> list[np.ndarray]:
    """`count` of `frames`, evenly spread from the first to the last (all of them where there are fewer)."""
    if len(frames) <= count:
        return frames
    return [frames[round(i * (len(frames) - 1) / (count - 1))] for i in range(count)]
