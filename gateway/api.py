"""The API blueprint: POST /v1/detect and POST /v1/crop."""

from __future__ import annotations

from dataclasses import asdict

from flask import Blueprint, Response, current_app, g, jsonify, request

from gateway.crop import plan_crop, render_crop, source_scale
from gateway.encode import CONTENT_TYPES, encode_image, output_format
from gateway.errors import OutputTooLarge
from gateway.observe import note
from gateway.params import CROP_PARAMETERS, DETECT_PARAMETERS, parse_crop_options, parse_detect_options
from gateway.pipeline import DetectionResult, run_detection, with_resolution
from gateway.postprocess import face_objects
from gateway.uploads import read_image_bytes, read_parameters

bp = Blueprint("api", __name__)


def _detect(data: bytes, values: dict[str, str]) -> tuple[DetectionResult, list[dict]]:
    """Every face found in the image, and the face objects of the first `max_faces`."""
    services = current_app.extensions["facecrop"]
    options = parse_detect_options(values)
    result = run_detection(data, services.model, services.settings, options, g.timer)
    note(image={**_image_size(result), "format": result.image.format}, faces=len(result.detections))
    return result, face_objects(result.detections[: options.max_faces], options.landmarks)


def _image_size(result: DetectionResult) -> dict[str, int]:
    width, height = result.image.size
    return {"width": width, "height": height}


@bp.post("/v1/detect")
def detect():
    result, faces = _detect(read_image_bytes(request), read_parameters(request, DETECT_PARAMETERS))
    return jsonify(image=_image_size(result), faces=faces)


@bp.post("/v1/crop")
def crop():
    values = read_parameters(request, DETECT_PARAMETERS | CROP_PARAMETERS)
    options = parse_crop_options(values)
    data = read_image_bytes(request)
    result, faces = _detect(data, values)
    size = _image_size(result)
    plan = plan_crop(result.detections.boxes, result.image.size, options)
    settings = current_app.extensions["facecrop"].settings
    max_pixels = settings.max_pixels
    if plan.output[0] * plan.output[1] > max_pixels:
        raise OutputTooLarge(
            f"a {plan.output[0]}x{plan.output[1]} output is more than the limit of {max_pixels} pixels"
        )
    region = plan.region
    headers = {
        "X-Crop-Rect": f"{region.x},{region.y},{region.width},{region.height}",
        "X-Face-Count": str(len(result.detections)),
    }
    if options.format == "json":
        output = {"width": plan.output[0], "height": plan.output[1]}
        return jsonify(image=size, crop=asdict(region), output=output, faces=faces), 200, headers
    fmt = output_format(options.format, result.image.format)
    source = with_resolution(result.image, source_scale(plan), data, settings, g.timer)
    with g.timer.stage("crop"):
        pixels = render_crop(source, plan)
    with g.timer.stage("encode"):
        body = encode_image(pixels, fmt, options.quality)
    return Response(body, content_type=CONTENT_TYPES[fmt], headers=headers)
