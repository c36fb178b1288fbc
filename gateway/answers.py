"""What the endpoints answer, shared by the upload API (api.py) and the URL form (url/views.py): the
detection and its log fields, the crop's plan, pixels, headers and JSON, and encoded pictures.
Pixels go out as sRGB (gateway/imaging/colour.py), with X-Color-Profile saying what was done where
the source had a profile: `converted`, `srgb` (it was sRGB's), or `ignored` (unreadable: taken as sRGB)."""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np
from flask import Response, current_app, g

from facecrop_hiding import Hiding, hide_faces
from gateway.crop import CropPlan, pad_to, plan_crop, render_crop, source_scale
from gateway.decode import DecodedImage, ImageHeader, decode_image, read_header
from gateway.detection.detections import face_objects
from gateway.encode import AVIF_MAX_SIDE, CONTENT_TYPES, encode_image, keeps_alpha, output_format
from gateway.errors import OutputTooLarge
from gateway.imaging.colour import to_srgb
from gateway.imaging.filters import Filters, apply_filters
from gateway.imaging.geometry import Geometry, turn_pixels, turned_size
from gateway.imaging.normalise import BGR, WHITE, unpremultiplied, with_alpha
from gateway.observe import note
from gateway.params import CropOptions, DetectOptions
from gateway.pipeline import DetectionResult, run_detection, with_resolution

NO_FILTERS = Filters()


def detect(
    data: bytes, options: DetectOptions, header: ImageHeader | None = None, background: BGR = WHITE
) -> tuple[DetectionResult, list[dict]]:
    """Every face found in the image (its `header` read already, where given; transparency
    flattened onto `background`), and the face objects of the first `max_faces`."""
    services = current_app.extensions["facecrop"]
    result = run_detection(data, services.detectors, services.settings, options, g.timer, header, background)
    image = {**image_size(result.image.size), "format": result.image.format}
    note(image=image, faces=len(result.detections), tiles=result.tiles)
    return result, face_objects(result.detections[: options.max_faces], options.landmarks)


def image_size(size: tuple[int, int]) -> dict[str, int]:
    return {"width": size[0], "height": size[1]}


def crop_plan(boxes: np.ndarray, image: tuple[int, int], options: CropOptions) -> CropPlan:
    """plan_crop, refusing an output over the pixel limit (400)."""
    settings = current_app.extensions["facecrop"].settings
    plan = plan_crop(boxes, image, options, settings.placement_power)
    width, height = plan.size
    if width * height > settings.max_pixels:
        raise OutputTooLarge(f"a {width}x{height} output is more than the limit of {settings.max_pixels} pixels")
    return plan


def crop_headers(plan: CropPlan, result: DetectionResult | None) -> dict[str, str]:
    """X-Crop-Rect, and X-Face-Count, X-Passes and X-Detectors where faces were looked for."""
    r = plan.region
    headers = {"X-Crop-Rect": f"{r.x},{r.y},{r.width},{r.height}"}
    if result is not None:
        headers |= result.headers(len(result.detections))
    return headers


def crop_json(image: tuple[int, int], plan: CropPlan, faces: list[dict], focus: str | None = None) -> dict:
    """/v1/crop's format=json answer; the URL form's says what the window followed (`focus`)."""
    answer = {"image": image_size(image), "crop": asdict(plan.region), "output": image_size(plan.size), "faces": faces}
    return answer | ({"focus": focus} if focus else {})


def crop_pixels(
    data: bytes,
    image: DecodedImage | None,
    plan: CropPlan,
    background: BGR | None = WHITE,
    hidden: tuple[np.ndarray, Hiding] | None = None,
    header: ImageHeader | None = None,
    turn: tuple[tuple[int, int, int, int], Geometry] | None = None,
    filters: Filters = NO_FILTERS,
) -> tuple[np.ndarray, dict[str, str]]:
    """The answer's pixels and their colour header: the region cut from a decode with the
    resolution it needs (`image`, the detection's, where it has enough; else `data` decoded again,
    its `header` read already where given), trimmed and turned as `turn` says (the plan is in the
    turned picture's pixels), resized, its `hidden` faces (corner boxes in the plan's pixels) hidden,
    made sRGB, filtered, padded to the canvas (transparency and the canvas on `background`; None:
    transparency kept, BGRA, the canvas transparent where the source is)."""
    settings, timer = current_app.extensions["facecrop"].settings, g.timer
    if image is None:
        if header is None:
            with timer.stage("decode"):
                header = read_header(data, settings.max_pixels, settings.max_side)
        image = decode_image(data, header, source_scale(plan), timer, background)
    else:
        image = with_resolution(image, source_scale(plan), data, settings, background, timer)
    if turn is not None and turn[1].changes:
        with timer.stage("crop"):
            image = turned_image(image, *turn)
    with timer.stage("crop"):
        cut = render_crop(image, plan)
    return finished_crop(cut, image, plan, background, hidden, filters)


def turned_image(image: DecodedImage, rect: tuple[int, int, int, int], geometry: Geometry) -> DecodedImage:
    """`image` trimmed to `rect` (original pixels), flipped and rotated: the picture the URL form's
    width and height refer to, at the resolution `image` has."""
    pixels = turn_pixels(image.pixels, rect, float(image.scale[0]), geometry)
    return replace(image, stored=pixels, size=turned_size(rect, geometry.rotate), orientation=1)


def finished_crop(
    cut: np.ndarray,
    image: DecodedImage,
    plan: CropPlan,
    background: BGR | None,
    hidden: tuple[np.ndarray, Hiding] | None,
    filters: Filters = NO_FILTERS,
) -> tuple[np.ndarray, dict[str, str]]:
    """A region of `image` resized as `plan` says (`cut`: premultiplied BGRA where transparency is
    kept), its `hidden` faces hidden, made sRGB, filtered and padded to the canvas; with its colour
    header. The colour work is done on straight colour, the alpha put back before the padding."""
    cut, alpha = unpremultiplied(cut)
    if hidden is not None and len(hidden[0]):
        boxes, hiding = hidden
        r = plan.region
        scale = np.array([plan.output[0] / r.width, plan.output[1] / r.height] * 2)
        with g.timer.stage("anonymize"):
            cut = hide_faces(cut.copy(), (boxes - [r.x, r.y, r.x, r.y]) * scale, hiding)
    pixels, colour = as_srgb(cut, image)
    if filters.changes:
        with g.timer.stage("filters"):
            pixels = apply_filters(pixels, filters)
    pixels = with_alpha(pixels, alpha)
    if plan.canvas is not None:
        pixels = pad_to(pixels, plan.canvas, background or WHITE)
    return pixels, colour


def underlay(requested: str | None, input_format: str, given: BGR | None = None) -> BGR | None:
    """What an answer's transparency goes onto: the background given, else nothing where the output
    format has an alpha channel (None: kept), else white."""
    if given is not None:
        return given
    return None if keeps_alpha(requested, input_format) else WHITE


def hidden_pixels(
    data: bytes, image: DecodedImage, boxes: np.ndarray, hiding: Hiding, background: BGR | None = WHITE
) -> tuple[np.ndarray, dict[str, str]]:
    """The whole picture at full resolution (`image`, or `data` decoded again) with the faces in
    `boxes` hidden, made sRGB, and its colour header; transparency kept (BGRA) where `background` is
    None."""
    settings, timer = current_app.extensions["facecrop"].settings, g.timer
    full = with_resolution(image, 1.0, data, settings, background, timer)
    pixels, alpha = unpremultiplied(full.pixels)
    with timer.stage("anonymize"):
        pixels = hide_faces(pixels, boxes, hiding)
    pixels, colour = as_srgb(pixels, full)
    return with_alpha(pixels, alpha), colour


def as_srgb(pixels: np.ndarray, image: DecodedImage) -> tuple[np.ndarray, dict[str, str]]:
    """`pixels` taken from `image`, in sRGB, and X-Color-Profile where the source had a profile."""
    with g.timer.stage("colour"):
        pixels, done = to_srgb(pixels, image.icc)
    done = done or image.colour
    return pixels, {"X-Color-Profile": done} if done else {}


def encoded(
    pixels: np.ndarray,
    requested: str | None,
    input_format: str,
    quality: int,
    headers: dict[str, str],
    progressive: bool = False,
    avif_max_side: int = AVIF_MAX_SIDE,
    exif: bytes = b"",
) -> Response:
    """The picture as the response body, in the `requested` format (encode.output_format settles
    it), encoded without metadata but `exif` in a JPEG."""
    height, width = pixels.shape[:2]
    fmt = output_format(requested, input_format, (width, height), avif_max_side)
    with g.timer.stage("encode"):
        body = encode_image(pixels, fmt, quality, progressive, exif)
    return Response(body, content_type=CONTENT_TYPES[fmt], headers=headers)
