"""The detection pipeline as one function: decode -> preprocess -> infer -> postprocess."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

from gateway.config import Settings
from gateway.decode import DecodedImage, decode_image, read_header, upright_size
from gateway.model import Model
from gateway.params import DetectOptions
from gateway.postprocess import Detections, candidates, finish, tiled_candidates
from gateway.preprocess import (
    TILE_MIN_OVERLAP,
    batch_shape,
    fill_input,
    fill_tiles,
    plan_input,
    plan_tiles,
    rescale,
    scale_for,
    tiled_scale,
)
from gateway.timing import StageTimer


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
    wire, target_size = settings.wire, settings.target_size
    plan = plan_input(image.pixels.shape[0], image.pixels.shape[1], target_size, settings.pad_multiple)
    with ExitStack() as batches:
        batch = batches.enter_context(model.batch(batch_shape(1, plan.size, wire)))
        fill_input(batch.tensor[0], image.pixels, plan.scale, wire, timer)
        tiling, tile_outputs = None, []
        if tiled:  # prepared and sent while the standard pass runs
            with timer.stage("infer"):
                pending = batch.submit()
            with timer.stage("resize"):
                scaled = rescale(image.pixels, tiled / image.scale[0])
            tiling = plan_tiles(
                (scaled.shape[0], scaled.shape[1]), target_size, TILE_MIN_OVERLAP, tiled / image.scale[0]
            )
            tile_batch = batches.enter_context(model.batch(batch_shape(len(tiling.origins), (target_size,) * 2, wire)))
            with timer.stage("preprocess"):
                fill_tiles(tile_batch.tensor, scaled, tiling, wire)
            del scaled
            with timer.stage("infer"):
                tile_outputs = tile_batch.run()
                [outputs] = pending.result()
        else:
            with timer.stage("infer"):
                [outputs] = batch.run()
    with timer.stage("postprocess"):
        min_score = options.min_confidence / 100
        found = [candidates(outputs, plan.size, min_score).scaled((0, 0), plan.scale)]
        if tiling:
            found += tiled_candidates(tile_outputs, tiling, min_score)
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
