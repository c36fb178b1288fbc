"""The API blueprint: POST /v1/detect, /v1/crop and /v1/anonymize."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
from facecrop_hiding import hide_faces, plausible, regions
from flask import Blueprint, Response, current_app, g, jsonify, request

from gateway.crop import plan_crop, render_crop, source_scale
from gateway.encode import CONTENT_TYPES, encode_image, output_format
from gateway.errors import OutputTooLarge
from gateway.observe import note
from gateway.params import (
    ANONYMIZE_PARAMETERS,
    CROP_PARAMETERS,
    DETECT_PARAMETERS,
    DetectOptions,
    parse_anonymize_options,
    parse_crop_options,
    parse_detect_options,
)
from gateway.pipeline import DetectionResult, run_detection, with_resolution
from gateway.postprocess import face_objects
from gateway.uploads import read_image_bytes, read_parameters

bp = Blueprint("api", __name__)


def _detect(data: bytes, options: DetectOptions) -> tuple[DetectionResult, list[dict]]:
    """Every face found in the image, and the face objects of the first `max_faces`."""
    services = current_app.extensions["facecrop"]
    result = run_detection(data, services.model, services.settings, options, g.timer)
    note(image={**_image_size(result), "format": result.image.format}, faces=len(result.detections), tiles=result.tiles)
    return result, face_objects(result.detections[: options.max_faces], options.landmarks)


def _image_size(result: DetectionResult) -> dict[str, int]:
    width, height = result.image.size
    return {"width": width, "height": height}


@bp.post("/v1/detect")
def detect():
    options = parse_detect_options(read_parameters(request, DETECT_PARAMETERS))
    result, faces = _detect(read_image_bytes(request), options)
    return jsonify(image=_image_size(result), faces=faces), 200, {"X-Passes": result.passes}


@bp.post("/v1/crop")
def crop():
    values = read_parameters(request, DETECT_PARAMETERS | CROP_PARAMETERS)
    options = parse_crop_options(values)
    data = read_image_bytes(request)
    result, faces = _detect(data, parse_detect_options(values))
    size = _image_size(result)
    plan = plan_crop(result.detections.boxes, result.image.size, options)
    settings = current_app.extensions["facecrop"].settings
    if plan.output[0] * plan.output[1] > settings.max_pixels:
        raise OutputTooLarge(
            f"a {plan.output[0]}x{plan.output[1]} output is more than the limit of {settings.max_pixels} pixels"
        )
    region = plan.region
    headers = {
        "X-Crop-Rect": f"{region.x},{region.y},{region.width},{region.height}",
        "X-Face-Count": str(len(result.detections)),
        "X-Passes": result.passes,
    }
    if options.format == "json":
        output = {"width": plan.output[0], "height": plan.output[1]}
        return jsonify(image=size, crop=asdict(region), output=output, faces=faces), 200, headers
    source = with_resolution(result.image, source_scale(plan), data, settings, g.timer)
    with g.timer.stage("crop"):
        pixels = render_crop(source, plan)
    return _encoded(pixels, output_format(options.format, result.image.format), options.quality, headers)


@bp.post("/v1/anonymize")
def anonymize_faces():
    detect_options, options = parse_anonymize_options(read_parameters(request, ANONYMIZE_PARAMETERS))
    data = read_image_bytes(request)
    result, _ = _detect(data, detect_options)
    found = result.detections
    hidden = found[plausible(found.scores, found.boxes)]
    headers = {"X-Face-Count": str(len(hidden)), "X-Passes": result.passes}
    if options.format == "json":
        shown = regions(hidden.boxes, options.margin, result.image.size)
        listed = [{"x": x1, "y": y1, "width": x2 - x1, "height": y2 - y1} for x1, y1, x2, y2 in shown.tolist()]
        faces = face_objects(hidden, with_landmarks=False)
        return jsonify(image=_image_size(result), regions=listed, faces=faces), 200, headers
    settings = current_app.extensions["facecrop"].settings
    full = with_resolution(result.image, 1.0, data, settings, g.timer)
    with g.timer.stage("anonymize"):
        pixels = hide_faces(full.pixels, hidden.boxes, options)
    return _encoded(pixels, output_format(options.format, result.image.format), options.quality, headers)


def _encoded(pixels: np.ndarray, fmt: str, quality: int, headers: dict[str, str]) -> Response:
    """The picture as the response body: encoded without metadata."""
    with g.timer.stage("encode"):
        body = encode_image(pixels, fmt, quality)
    return Response(body, content_type=CONTENT_TYPES[fmt], headers=headers)
