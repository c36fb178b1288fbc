"""The detection pipeline as one function: decode -> preprocess -> infer -> postprocess."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from gateway.config import Settings
from gateway.decode import DecodedImage, decode_image, read_header, upright_size
from gateway.params import DetectOptions
from gateway.postprocess import Detections, candidates, finish, tiled_candidates
from gateway.preprocess import TILE_MIN_OVERLAP, scale_for, tiled_scale, to_model_input, to_tiles
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
    image: DecodedImage  # possibly reduced: detection needs no more pixels than the model sees
    detections: Detections  # every face found, in original pixels, best first (max_faces limits only the listing)
    inferences: int  # images the model ran on: 1, or 1 + the tiles of detail=high


def run_detection(
    data: bytes, model: Model, settings: Settings, options: DetectOptions, timer: StageTimer | None = None
) -> DetectionResult:
    """Detect faces in encoded image bytes with `model`; with detail=high, add the tiled pass.

    A JPEG is decoded no larger than the passes need (the standard pass's long side, or the
    tiled pass's); faces come back in the original image's pixels.
    """
    timer = timer or StageTimer()
    with timer.stage("decode"):
        header = read_header(data, settings.max_pixels)
    width, height = upright_size(header)
    standard = scale_for(height, width, settings.target_size)
    tiled = tiled_scale(height, width, settings.target_size) if options.detail == "high" else None
    image = decode_image(data, header, max(standard, tiled or 0), timer)
    model_input = to_model_input(image.pixels, settings.target_size, settings.pad_multiple, settings.wire, timer)
    tiles = None
    if tiled:
        tiles = to_tiles(
            image.pixels, tiled / image.scale[0], settings.target_size, TILE_MIN_OVERLAP, settings.wire, timer
        )
    with timer.stage("infer"):
        [outputs] = model(model_input.tensor)
        tile_outputs = model(tiles.tensor) if tiles else []
    with timer.stage("postprocess"):
        min_score = options.min_confidence / 100
        found = [candidates(outputs, model_input.size, min_score).scaled((0, 0), model_input.scale)]
        if tiles:
            found += tiled_candidates(tile_outputs, tiles, min_score)
        in_original = Detections.concatenate(found).scaled((0, 0), image.scale)
        detections = finish(in_original, (height, width), options)
    return DetectionResult(image=image, detections=detections, inferences=1 + len(tile_outputs))


def with_resolution(
    image: DecodedImage, min_scale: float, data: bytes, settings: Settings, timer: StageTimer | None = None
) -> DecodedImage:
    """`image` if it has at least `min_scale` of each original side, else the image decoded again
    (a JPEG reduced no further than that): a crop pays for a full decode only when its output
    needs more pixels than the detection's decode has."""
    if image.is_full_size or image.scale.min() >= min_scale:
        return image
    with (timer or StageTimer()).stage("decode"):
        header = read_header(data, settings.max_pixels)
    return decode_image(data, header, min_scale, timer)
