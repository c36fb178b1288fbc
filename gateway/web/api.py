"""The API blueprint: POST /v1/detect, /v1/crop and /v1/anonymize, each its parameters parsed into
the one typed request (gateway/request.py) that gateway/processing answers."""

from __future__ import annotations

from flask import Blueprint, request
from flask.typing import ResponseReturnValue

from gateway.params import ANONYMIZE_PARAMETERS, CROP_PARAMETERS, DETECT_PARAMETERS
from gateway.request import ImageRequest, anonymize_request, crop_request, detect_request
from gateway.web.responses import served
from gateway.web.uploads import read_image_bytes, read_parameters

bp = Blueprint("api", __name__)


@bp.post("/v1/detect")
def detect_faces() -> ResponseReturnValue:
    return answer(detect_request(read_parameters(request, DETECT_PARAMETERS)))


@bp.post("/v1/crop")
def crop() -> ResponseReturnValue:
    return answer(crop_request(read_parameters(request, DETECT_PARAMETERS | CROP_PARAMETERS)))


@bp.post("/v1/anonymize")
def anonymize_faces() -> ResponseReturnValue:
    return answer(anonymize_request(read_parameters(request, ANONYMIZE_PARAMETERS)))


def answer(image_request: ImageRequest) -> ResponseReturnValue:
    """The uploaded image's answer."""
    return served(read_image_bytes(request), image_request)
