"""The detection pipeline as one function: decode -> preprocess -> infer -> postprocess."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gateway.config import Settings
from gateway.decode import DecodedImage, ImageHeader, apply_orientation, decode_image, read_header, upright_size
from gateway.detection.model import Model
from gateway.detection.postprocess import Detections, candidates, finish, tiled_candidates
from gateway.detection.preprocess import (
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
from gateway.imaging.normalise import BGR, WHITE
from gateway.params import DetectOptions
from gateway.timing import StageTimer

# detail=auto runs the tiled pass only where the standard pass saw a face (scoring at least
# AUTO_MIN_SCORE) whose shorter side in the model's input is below AUTO_SMALL_FACE pixels:
# there, faces smaller still are likely and only the tiled pass finds them (README, "Detail").
AUTO_SMALL_FACE = 24
AUTO_MIN_SCORE = 0.5
# detail=fast: the standard pass's long side (at most FACECROP_TARGET_SIZE). The faces that decide
# where a crop goes are the large ones; measured on every labeled set, crops frame the same share
# of faces as at 1024 (README, "Serve by URL"), for less than half the model's work.
FAST_SIZE = 640
MAX_BATCH = 16  # images in one call: the model's max_batch_size (model_repository/*/config.pbtxt)


@dataclass(frozen=True)
class DetectionResult:
    image: DecodedImage  # possibly reduced: detection needs no more pixels than the model sees
    detections: Detections  # every face found, in original pixels, best first (max_faces limits only the listing)
    tiles: int  # tiles of the tiled pass (detail=high or auto); 0 when only the standard pass ran

    @property
    def passes(self) -> str:
        """The passes that ran, as the X-Passes header says: `standard` or `standard, tiled`."""
        return "standard, tiled" if self.tiles else "standard"


def run_detection(
    data: bytes,
    model: Model,
    settings: Settings,
    options: DetectOptions,
    timer: StageTimer | None = None,
    header: ImageHeader | None = None,
    background: BGR = WHITE,
) -> DetectionResult:
    """Detect faces in encoded image bytes with `model`: the standard pass (at FAST_SIZE with
    detail=fast), and the tiled pass with detail=high (both in flight at once) or with detail=auto
    where the standard pass saw small faces (`needs_tiles`). Faces come back in the original
    image's pixels.

    A JPEG is decoded no larger than the passes need: the standard pass's long side, or the
    tiled pass's (detail=auto decodes again, larger, only where it tiles). Transparency is
    flattened onto `background`.
    """
    timer = timer or StageTimer()
    if header is None:
        with timer.stage("decode"):
            header = read_header(data, settings.max_pixels, settings.max_side)
    width, height = upright_size(header)
    target = standard_size(options, settings)
    standard = scale_for(height, width, target)
    tiled = tiled_scale(height, width, target) if options.detail in ("auto", "high") else None
    both_at_once = options.detail == "high"  # where there is a tiled pass
    image = decode_image(data, header, max(standard, tiled or 0) if both_at_once else standard, timer, background)
    plan = plan_input(*image.shape, target, settings.pad_multiple)
    min_score = options.min_confidence / 100
    tiled_faces: Detections | None = None
    tiles = 0
    with model.batch(batch_shape(1, plan.size, settings.wire)) as batch:
        fill_input(batch.tensor[0], image.stored, plan.scale, settings.wire, timer, image.orientation)
        if tiled is not None and both_at_once:  # the tiles are prepared and sent while the standard pass runs
            with timer.stage("infer"):
                pending = batch.submit()
            tiled_faces, tiles = _tiled_pass(image, tiled, model, settings, min_score, timer)
            with timer.stage("infer"):
                [outputs] = pending.result()
        else:
            with timer.stage("infer"):
                [outputs] = batch.run()
    with timer.stage("postprocess"):
        found = candidates(outputs, plan.size, min(min_score, AUTO_MIN_SCORE))
    if tiled is not None and options.detail == "auto" and needs_tiles(found):
        larger = with_resolution(image, tiled, data, settings, image.background, timer)
        tiled_faces, tiles = _tiled_pass(larger, tiled, model, settings, min_score, timer)
    with timer.stage("postprocess"):
        faces = found[found.scores >= min_score].scaled((0, 0), plan.scale).scaled((0, 0), image.scale)
        if tiled_faces is not None:
            faces = Detections.concatenate([faces, tiled_faces])
        detections = finish(faces, (height, width), options)
    return DetectionResult(image=image, detections=detections, tiles=tiles)


def standard_size(options: DetectOptions, settings: Settings) -> int:
    """The standard pass's long side: FACECROP_TARGET_SIZE, or FAST_SIZE with detail=fast."""
    return min(FAST_SIZE, settings.target_size) if options.detail == "fast" else settings.target_size


def detect_frames(
    frames: list[np.ndarray], model: Model, settings: Settings, options: DetectOptions, timer: StageTimer
) -> list[Detections]:
    """Every face in each of `frames` (upright BGR pixels of one size: an animation's), by the
    standard pass alone, MAX_BATCH frames to a call."""
    height, width = frames[0].shape[:2]
    plan = plan_input(height, width, standard_size(options, settings), settings.pad_multiple)
    found: list[Detections] = []
    for start in range(0, len(frames), MAX_BATCH):
        chunk = frames[start : start + MAX_BATCH]
        with model.batch(batch_shape(len(chunk), plan.size, settings.wire)) as batch:
            for slot, frame in zip(batch.tensor, chunk):
                fill_input(slot, frame, plan.scale, settings.wire, timer)
            with timer.stage("infer"):
                outputs = batch.run()
        with timer.stage("postprocess"):
            for output in outputs:
                faces = candidates(output, plan.size, options.min_confidence / 100).scaled((0, 0), plan.scale)
                found.append(finish(faces, (height, width), options))
    return found


def needs_tiles(standard: Detections) -> bool:
    """Whether the standard pass's candidates (model-input pixels) include a face scoring at least
    AUTO_MIN_SCORE whose shorter side is below AUTO_SMALL_FACE: small faces, and likely smaller ones."""
    boxes = standard.boxes[standard.scores >= AUTO_MIN_SCORE]
    sides = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    return bool((sides < AUTO_SMALL_FACE).any())


def _tiled_pass(
    image: DecodedImage, scale: float, model: Model, settings: Settings, min_score: float, timer: StageTimer
) -> tuple[Detections, int]:
    """The faces the tiled pass answers for, in original pixels, and its number of tiles: the
    image at `scale` (of the original) cut into overlapping tiles, sent as one batch."""
    relative = scale / image.scale[0]
    with timer.stage("resize"):
        scaled = apply_orientation(rescale(image.stored, relative), image.orientation)
    tiling = plan_tiles((scaled.shape[0], scaled.shape[1]), settings.target_size, TILE_MIN_OVERLAP, relative)
    shape = batch_shape(len(tiling.origins), (settings.target_size,) * 2, settings.wire)
    with model.batch(shape) as tile_batch:
        with timer.stage("preprocess"):
            fill_tiles(tile_batch.tensor, scaled, tiling, settings.wire)
        del scaled
        with timer.stage("infer"):
            outputs = tile_batch.run()
    with timer.stage("postprocess"):
        found = Detections.concatenate(tiled_candidates(outputs, tiling, min_score)).scaled((0, 0), image.scale)
    return found, len(outputs)


def with_resolution(
    image: DecodedImage,
    min_scale: float,
    data: bytes,
    settings: Settings,
    background: BGR | None,
    timer: StageTimer | None = None,
) -> DecodedImage:
    """`image` if it has at least `min_scale` of each original side and its transparency is as
    `background` asks (flattened onto it; None: kept), else the image decoded again (a JPEG reduced
    no further than that): a crop pays for a full decode only when its output needs more pixels, or
    transparency the detection's decode flattened."""
    as_asked = not image.transparent or image.background == background
    if as_asked and (image.is_full_size or image.scale.min() >= min_scale):
        return image
    with (timer or StageTimer()).stage("decode"):
        header = read_header(data, settings.max_pixels, settings.max_side)
    return decode_image(data, header, min_scale, timer, background)
