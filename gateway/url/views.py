"""GET (and HEAD) /cdn-cgi/image/[<signature>/]<options>/<source>: the /v1/crop pipeline by URL.

In order: the URL form allowed at all (API keys need signed URLs or an explicit opt-in), the
signature, the options, the source; then, for an If-None-Match of ours, the source revalidated
(a conditional request to the origin, or a file's stat) and a 304 without a download; else the
source read (a fetch holds no model slot: gateway/url/admission.py), and, once it is here and its
client still waits, one of the worker's in-flight slots taken: the faces found where the answer
needs them, the crop planned, rendered, faces hidden (anonymize=...), padded (fit=pad) and encoded
in the negotiated format.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from facecrop_hiding import CONFIDENT, plausible
from flask import Blueprint, Response, current_app, g, jsonify, redirect, request
from flask.typing import ResponseReturnValue

from gateway.answers import crop_headers, crop_json, crop_pixels, crop_plan, detect, encoded, finished_crop
from gateway.crop import render_crop
from gateway.decode import DecodedImage, ImageHeader, read_header, upright_size
from gateway.encode import AVIF_AUTO_MAX_SIDE, AVIF_MAX_SIDE, CONTENT_TYPES
from gateway.errors import ApiError, ClientGone, InvalidParameter, InvalidSignature, SourceNotAllowed
from gateway.imaging.animation import encode_animation, read_animation
from gateway.imaging.metadata import output_exif
from gateway.observe import note
from gateway.pipeline import detect_frames
from gateway.postprocess import Detections, face_objects, finish
from gateway.url.caching import (
    DEFAULT_MAX_AGE,
    MIN_MAX_AGE,
    cache_control,
    conditions,
    describe,
    error_cache_control,
    etag_validator,
    negotiate,
)
from gateway.url.deadline import client_gone
from gateway.url.options import UrlOptions, parse_url_options
from gateway.url.signing import unsigned_path
from gateway.url.sources import Source, file_validator, read_file, resolve_source

PREFIX = "/cdn-cgi/image"
SAMPLED_FRAMES = 4  # an animation's frames whose faces decide its crop window (anonymize: every frame)
bp = Blueprint("url", __name__)


@dataclass(frozen=True)
class Loaded:
    """A source read (`data`), or found unchanged since `validator` (`data` None)."""

    data: bytes | None
    validator: str
    cache_control: str | None = None  # the origin's
    revalidated: bool = False  # the origin answered a conditional request with 304


def request_tail() -> tuple[str, str]:
    """What follows /cdn-cgi/image in the request as sent (not percent-decoded: it is what was
    signed, and what an origin is asked for), and the query string."""
    environ = request.environ
    path = (environ.get("RAW_URI") or environ.get("REQUEST_URI") or request.path).partition("?")[0]
    start = path.find(PREFIX)  # past a scheme and host in an absolute-form request target
    tail = path[start + len(PREFIX) :] if start >= 0 else ""  # none where the prefix came encoded
    return tail, environ.get("QUERY_STRING", "")


@bp.get(f"{PREFIX}/<path:_>", merge_slashes=False)
def image(_: str):
    try:
        return serve(*request_tail())
    except ApiError as error:
        source = g.pop("url_redirect", None)
        if source is None or isinstance(error, SourceNotAllowed):
            raise
        note(error=error.code, redirected=True)
        return redirect(source, 302)


@bp.after_request
def cache_errors(response: Response) -> Response:
    """Errors are cached briefly where a retry would not change them, else not at all."""
    if response.status_code >= 300 and response.status_code != 304:
        response.headers["Cache-Control"] = error_cache_control(response.status_code)
    return response


def serve(tail: str, query: str) -> ResponseReturnValue:
    services = current_app.extensions["facecrop"]
    settings = services.settings
    if settings.api_keys and not settings.url_key and not settings.allow_unsigned_urls:
        raise InvalidSignature(
            "API keys are set: the URL form needs signed URLs (FACECROP_URL_KEY) or FACECROP_ALLOW_UNSIGNED_URLS=true"
        )
    unsigned = unsigned_path(tail, query, settings.url_key, settings.url_salt)
    segment, _, raw_source = unsigned.lstrip("/").partition("/")
    if not raw_source:
        raise InvalidParameter("source", "is missing: /cdn-cgi/image/<options>/<source>")
    options = parse_url_options(segment)
    source = resolve_source(raw_source, query, settings.origin, settings.allowed_sources)
    if options.onerror == "redirect" and source.origin is None and source.url:
        g.url_redirect = source.url  # an absolute source the allowlist passed; an origin's stays private
    fmt = negotiate(options.format, request.headers.get("Accept"))
    public = describe(settings.model_name, f"{raw_source}?{query}", options.canonical, fmt)
    headers = {"Vary": "Accept"} if options.format == "auto" else {}

    offered = services.etags.offered(request.headers.get("If-None-Match"), public)
    loaded = load(source, offered[0]) if offered else load(source)
    default_age = MIN_MAX_AGE if loaded.revalidated else DEFAULT_MAX_AGE
    headers |= {
        "ETag": services.etags.seal(public, loaded.validator),
        "Cache-Control": cache_control(loaded.cache_control, default_age),
    }
    if loaded.data is None or request.if_none_match.contains_weak(headers["ETag"].strip('"')):
        note(not_modified=True)
        return Response(status=304, headers=headers)
    if client_gone(request.environ.get("gunicorn.socket")):
        raise ClientGone("the client closed its connection")
    services.limit.admit()
    return render(loaded.data, options, fmt, headers)


def load(source: Source, validator: str | None = None) -> Loaded:
    """The source's bytes; or, where `validator` is given and still current (the origin answered a
    conditional request with 304, the file's stat, or the same bytes), no bytes."""
    services = current_app.extensions["facecrop"]
    with g.timer.stage("fetch"):
        if source.path is not None:
            current = f"f:{file_validator(source.path)}"
            if current == validator:
                return Loaded(None, current)
            data, version = read_file(source.path, services.settings.max_upload_bytes)
            return Loaded(data, f"f:{version}")
        assert source.url is not None
        client = request.environ.get("gunicorn.socket")
        fetched = services.fetcher.get(source.url, source.origin, validator and conditions(validator), client)
    if not fetched.modified and validator is not None:
        return Loaded(None, validator, fetched.cache_control, revalidated=True)
    current = etag_validator(fetched.etag, fetched.last_modified, fetched.body)
    return Loaded(None if current == validator else fetched.body, current, fetched.cache_control)


def render(data: bytes, options: UrlOptions, fmt: str, headers: dict[str, str]) -> ResponseReturnValue:
    """The answer for the source's bytes: the crop's JSON or its picture (an animation's, where it
    stays one)."""
    settings = current_app.extensions["facecrop"].settings
    with g.timer.stage("decode"):
        header = read_header(data, settings.max_pixels, settings.max_side)
    moving = animated_format(header, options, fmt)
    if moving:
        return render_animation(data, header, options, moving, headers)
    result = None
    faces: list[dict] = []
    if options.needs_faces:
        result, faces = detect(data, options.detect, header)
        found = result.detections
        framing = found[found.scores >= CONFIDENT] if options.hiding else found
        boxes = framing.boxes
        hidden = (found[plausible(found.scores, found.boxes)].boxes, options.hiding) if options.hiding else None
    else:
        boxes, hidden = np.zeros((0, 4)), None
    size = upright_size(header)
    plan = crop_plan(boxes, size, options.crop)
    headers |= crop_headers(plan, result)
    if fmt == "json":
        return jsonify(crop_json(size, plan, faces)), 200, headers
    image = result.image if result else None
    pixels, colour = crop_pixels(data, image, plan, options.background, hidden, header)
    requested = None if fmt == "input" else {"baseline-jpeg": "jpeg"}.get(fmt, fmt)
    avif_max_side = AVIF_AUTO_MAX_SIDE if options.format == "auto" else AVIF_MAX_SIDE
    exif = output_exif(header.exif, options.metadata, hidden_faces=hidden is not None)
    quality = options.crop.quality
    return encoded(pixels, requested, header.format, quality, headers | colour, fmt == "jpeg", avif_max_side, exif)


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
    data: bytes, header: ImageHeader, options: UrlOptions, out: str, headers: dict[str, str]
) -> ResponseReturnValue:
    """Every frame cropped to one window, which holds the faces found in SAMPLED_FRAMES frames spread
    over the animation (with anonymize, the faces of every frame, each hidden in its own frame)."""
    services = current_app.extensions["facecrop"]
    with g.timer.stage("decode"):
        animation = read_animation(data, options.background)
    height, width = animation.frames[0].shape[:2]
    per_frame: list[np.ndarray] | None = None
    faces: list[dict] = []
    boxes = np.zeros((0, 4))
    if options.needs_faces:
        frames = animation.frames if options.hiding else spread(animation.frames, SAMPLED_FRAMES)
        found = detect_frames(frames, services.model, services.settings, options.detect, g.timer)
        merged = finish(Detections.concatenate(found), (height, width), options.detect)
        boxes = (merged[merged.scores >= CONFIDENT] if options.hiding else merged).boxes
        if options.hiding:
            per_frame = [f[plausible(f.scores, f.boxes)].boxes for f in found]
        faces = face_objects(merged[: options.detect.max_faces], options.detect.landmarks)
        headers |= {"X-Face-Count": str(len(merged)), "X-Passes": "standard"}
        note(faces=len(merged))
    note(image={"width": width, "height": height, "format": header.format, "frames": len(animation.frames)})
    plan = crop_plan(boxes, (width, height), options.crop)
    headers |= crop_headers(plan, None) | {"X-Frames": str(len(animation.frames))}
    if out == "json":
        return jsonify(crop_json((width, height), plan, faces)), 200, headers
    rendered: list[np.ndarray] = []
    colour: dict[str, str] = {}
    for index, frame in enumerate(animation.frames):
        image = DecodedImage(stored=frame, format=header.format, size=(width, height), icc=header.icc)
        with g.timer.stage("crop"):
            cut = render_crop(image, plan)
        hidden = (per_frame[index], options.hiding) if per_frame is not None and options.hiding else None
        pixels, colour = finished_crop(cut, image, plan, options.background, hidden)
        rendered.append(pixels)
    with g.timer.stage("encode"):
        body = encode_animation(rendered, animation.durations, animation.plays, out, options.crop.quality)
    return Response(body, content_type=CONTENT_TYPES[out], headers=headers | colour)


def spread(frames: list[np.ndarray], count: int) -> list[np.ndarray]:
    """`count` of `frames`, evenly spread from the first to the last (all of them where there are fewer)."""
    if len(frames) <= count:
        return frames
    return [frames[round(i * (len(frames) - 1) / (count - 1))] for i in range(count)]
