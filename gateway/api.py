"""The API blueprint: POST /v1/detect, /v1/crop and /v1/anonymize."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from facecrop_hiding import regions
from gateway.answers import (
    crop_headers,
    crop_json,
    crop_pixels,
    crop_plan,
    detect,
    encoded,
    hidden_pixels,
    image_size,
    underlay,
)
from gateway.detection.detections import face_objects
from gateway.params import (
    ANONYMIZE_PARAMETERS,
    CROP_PARAMETERS,
    DETECT_PARAMETERS,
    parse_anonymize_options,
    parse_crop_options,
    parse_detect_options,
)
from gateway.uploads import read_image_bytes, read_parameters

bp = Blueprint("api", __name__)


@bp.post("/v1/detect")
def detect_faces():
    options = parse_detect_options(read_parameters(request, DETECT_PARAMETERS))
    result, faces = detect(read_image_bytes(request), options)
    return jsonify(image=image_size(result.image.size), faces=faces), 200, result.headers()


@bp.post("/v1/crop")
def crop():
    values = read_parameters(request, DETECT_PARAMETERS | CROP_PARAMETERS)
    options = parse_crop_options(values)
    data = read_image_bytes(request)
    result, faces = detect(data, parse_detect_options(values))
    plan = crop_plan(result.detections.boxes, result.image.size, options)
    headers = crop_headers(plan, result)
    if options.format == "json":
        return jsonify(crop_json(result.image.size, plan, faces)), 200, headers
    pixels, colour = crop_pixels(data, result.image, plan, underlay(options.format, result.image.format))
    return encoded(pixels, options.format, result.image.format, options.quality, headers | colour)


@bp.post("/v1/anonymize")
def anonymize_faces():
    detect_options, options = parse_anonymize_options(read_parameters(request, ANONYMIZE_PARAMETERS))
    data = read_image_bytes(request)
    result, _ = detect(data, detect_options)
    found = result.detections
    hidden = found.to_hide()
    headers = result.headers(len(hidden))
    if options.format == "json":
        shown = regions(hidden.boxes, options.margin, result.image.size)
        listed = [{"x": x1, "y": y1, "width": x2 - x1, "height": y2 - y1} for x1, y1, x2, y2 in shown.tolist()]
        faces = face_objects(hidden, with_landmarks=False)
        return jsonify(image=image_size(result.image.size), regions=listed, faces=faces), 200, headers
    background = underlay(options.format, result.image.format)
    pixels, colour = hidden_pixels(data, result.image, hidden.boxes, options, background)
    return encoded(pixels, options.format, result.image.format, options.quality, headers | colour)
