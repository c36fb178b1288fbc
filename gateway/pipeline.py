"""The detection pipeline as one function: decode -> preprocess -> infer -> postprocess."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gateway.config import Settings
from gateway.decode import DecodedImage, decode_image
from gateway.params import DetectOptions
from gateway.postprocess import Detections, candidates, finish, tiled_candidates
from gateway.preprocess import TILE_MIN_OVERLAP, tiled_scale, to_model_input, to_tiles
from gateway.timing import StageTimer
from gateway.wire import ModelOutputs


class Model(Protocol):
    """The served model: Triton over gRPC, or onnxruntime in-process."""

    def __call__(self, tensor: np.ndarray) -> list[ModelOutputs]:
        """Outputs for each image of a batch tensor, in order."""

    def is_ready(self) -> bool:
        """Whether the model can answer now."""


@dataclass(frozen=True)
class DetectionResult:
    image: DecodedImage
    detections: Detections  # every face found, best first (max_faces limits only what is listed)
    inferences: int  # images the model ran on: 1, or 1 + the tiles of detail=high


def run_detection(
    data: bytes, model: Model, settings: Settings, options: DetectOptions, timer: StageTimer | None = None
) -> DetectionResult:
    """Detect faces in encoded image bytes with `model`; with detail=high, add the tiled pass."""
    timer = timer or StageTimer()
    with timer.stage("decode"):
        image = decode_image(data, settings.max_pixels)
    height, width = image.pixels.shape[:2]
    with timer.stage("preprocess"):
        model_input = to_model_input(image.pixels, settings.target_size, settings.pad_multiple, settings.wire)
        scale = tiled_scale(height, width, settings.target_size) if options.detail == "high" else None
        tiles = (
            None
            if scale is None
            else to_tiles(image.pixels, scale, settings.target_size, TILE_MIN_OVERLAP, settings.wire)
        )
    with timer.stage("infer"):
        [outputs] = model(model_input.tensor)
        tile_outputs = model(tiles.tensor) if tiles else []
    with timer.stage("postprocess"):
        min_score = options.min_confidence / 100
        found = [candidates(outputs, model_input.size, min_score).scaled((0, 0), model_input.scale)]
        if tiles:
            found += tiled_candidates(tile_outputs, tiles, min_score)
        detections = finish(Detections.concatenate(found), (height, width), options)
    return DetectionResult(image=image, detections=detections, inferences=1 + len(tile_outputs))
