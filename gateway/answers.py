"""What the endpoints answer, shared by the upload API (api.py) and the URL form (url/views.py): the
detection and its log fields, the crop's plan, pixels, headers and JSON, and encoded pictures."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
from facecrop_hiding import Hiding, hide_faces
from flask import Response, current_app, g

from gateway.crop import CropPlan, pad_to, plan_crop, render_crop, source_scale
from gateway.decode import DecodedImage, decode_image, read_header
from gateway.encode import AVIF_MAX_SIDE, CONTENT_TYPES, encode_image, output_format
from gateway.errors import OutputTooLarge
from gateway.observe import note
from gateway.params import CropOptions, DetectOptions
from gateway.pipeline import DetectionResult, run_detection, with_resolution
from gateway.postprocess import face_objects


def detect(data: bytes, options: DetectOptions) -> tuple[DetectionResult, list[dict]]:
    """Every face found in the image, and the face objects of the first `max_faces`."""
    services = current_app.extensions["facecrop"]
    result = run_detection(data, services.model, services.settings, options, g.timer)
    image = {**image_size(result.image.size), "format": result.image.format}
    note(image=image, faces=len(result.detections), tiles=result.tiles)
    return result, face_objects(result.detections[: options.max_faces], options.landmarks)


def image_size(size: tuple[int, int]) -> dict[str, int]:
    return {"width": size[0], "height": size[1]}


def crop_plan(boxes: np.ndarray, image: tuple[int, int], options: CropOptions) -> CropPlan:
    """plan_crop, refusing an output over the pixel limit (400)."""
    plan = plan_crop(boxes, image, options)
    width, height = plan.size
    if width * height > current_app.extensions["facecrop"].settings.max_pixels:
        limit = current_app.extensions["facecrop"].settings.max_pixels
        raise OutputTooLarge(f"a {width}x{height} output is more than the limit of {limit} pixels")
    return plan


def crop_headers(plan: CropPlan, result: DetectionResult | None) -> dict[str, str]:
    """X-Crop-Rect, and X-Face-Count and X-Passes where faces were looked for."""
    r = plan.region
    headers = {"X-Crop-Rect": f"{r.x},{r.y},{r.width},{r.height}"}
    if result is not None:
        headers |= {"X-Face-Count": str(len(result.detections)), "X-Passes": result.passes}
    return headers


def crop_json(image: tuple[int, int], plan: CropPlan, faces: list[dict]) -> dict:
    """/v1/crop's format=json answer."""
    return {"image": image_size(image), "crop": asdict(plan.region), "output": image_size(plan.size), "faces": faces}


def crop_pixels(
    data: bytes,
    image: DecodedImage | None,
    plan: CropPlan,
    background: tuple[int, int, int] = (255, 255, 255),
    hidden: tuple[np.ndarray, Hiding] | None = None,
) -> np.ndarray:
    """The answer's pixels: the region cut from a decode with the resolution it needs (`image`, the
    detection's, where it has enough; else `data` decoded again), resized, its `hidden` faces
    (corner boxes in original pixels) hidden, padded to the canvas."""
    settings, timer = current_app.extensions["facecrop"].settings, g.timer
    if image is None:
        with timer.stage("decode"):
            header = read_header(data, settings.max_pixels)
        image = decode_image(data, header, source_scale(plan), timer)
    else:
        image = with_resolution(image, source_scale(plan), data, settings, timer)
    with timer.stage("crop"):
        pixels = render_crop(image, plan)
    if hidden is not None and len(hidden[0]):
        boxes, hiding = hidden
        r = plan.region
        scale = np.array([plan.output[0] / r.width, plan.output[1] / r.height] * 2)
        with timer.stage("anonymize"):
            pixels = hide_faces(pixels.copy(), (boxes - [r.x, r.y, r.x, r.y]) * scale, hiding)
    if plan.canvas is not None:
        pixels = pad_to(pixels, plan.canvas, background)
    return pixels


def encoded(
    pixels: np.ndarray,
    requested: str | None,
    input_format: str,
    quality: int,
    headers: dict[str, str],
    progressive: bool = False,
    avif_max_side: int = AVIF_MAX_SIDE,
) -> Response:
    """The picture as the response body, in the `requested` format (encode.output_format settles
    it), encoded without metadata."""
    height, width = pixels.shape[:2]
    fmt = output_format(requested, input_format, (width, height), avif_max_side)
    with g.timer.stage("encode"):
        body = encode_image(pixels, fmt, quality, progressive)
    return Response(body, content_type=CONTENT_TYPES[fmt], headers=headers)
