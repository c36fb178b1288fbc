"""The API blueprint: POST /v1/detect."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request

from gateway.params import DETECT_PARAMETERS, parse_detect_options
from gateway.pipeline import run_detection
from gateway.postprocess import face_objects
from gateway.uploads import read_image_bytes, read_parameters

bp = Blueprint("api", __name__)


@bp.post("/v1/detect")
def detect():
    services = current_app.extensions["facecrop"]
    options = parse_detect_options(read_parameters(request, DETECT_PARAMETERS))
    result = run_detection(read_image_bytes(request), services.model, services.settings, options)
    height, width = result.image.pixels.shape[:2]
    return jsonify(
        image={"width": width, "height": height},
        faces=face_objects(result.detections, options.landmarks),
    )
