"""The detection pipeline as one function: decode -> preprocess -> infer -> postprocess."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from gateway.config import Settings
from gateway.decode import DecodedImage, decode_image
from gateway.params import DetectOptions
from gateway.postprocess import Detections, ModelOutputs, detect_faces
from gateway.preprocess import to_model_input
from gateway.timing import StageTimer

Model = Callable[[np.ndarray], ModelOutputs]


@dataclass(frozen=True)
class DetectionResult:
    image: DecodedImage
    detections: Detections


def run_detection(
    data: bytes, model: Model, settings: Settings, options: DetectOptions, timer: StageTimer | None = None
) -> DetectionResult:
    """Detect faces in encoded image bytes with `model` (Triton, or onnxruntime in-process)."""
    timer = timer or StageTimer()
    with timer.stage("decode"):
        image = decode_image(data, settings.max_pixels)
    with timer.stage("preprocess"):
        model_input = to_model_input(image.pixels, settings.target_size, settings.pad_multiple, settings.wire_format)
    with timer.stage("infer"):
        outputs = model(model_input.tensor)
    with timer.stage("postprocess"):
        detections = detect_faces(outputs, model_input.size, model_input.scale, image.pixels.shape[:2], options)
    return DetectionResult(image=image, detections=detections)
