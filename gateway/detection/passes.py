"""The detection's one door: faces from an upload's bytes (`run_detection`) or an animation's frames
(`detect_frames`): decode -> preprocess -> infer (each pass's models, detectors.py's policy, in flight
at once) -> postprocess -> fusion, in the upright picture's pixels."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import numpy as np

from gateway.config import Settings
from gateway.decode import (
    DecodedImage,
    ImageHeader,
    decode_image,
    read_header,
    with_resolution,
)
from gateway.detection.detections import Detections
from gateway.detection.detectors import Call, Detector, Detectors
from gateway.detection.fusion import fuse
from gateway.detection.postprocess import finish, tiled_candidates
from gateway.detection.preprocess import (
    TILE_MIN_OVERLAP,
    InputPlan,
    Tiling,
    batch_shape,
    fill_input,
    fill_tiles,
    plan_input,
    plan_tiles,
    rescale,
    scale_for,
    tiled_scale,
)
from gateway.imaging.normalise import BGR, WHITE, flattened
from gateway.imaging.orientation import apply_orientation
from gateway.params import DetectOptions
from gateway.timing import NEVER, Deadline, StageTimer
from gateway.triton.wire import Batch, ModelOutputs, WireFormat

# detail=auto runs the tiled pass only where the standard pass saw a face (scoring at least
# AUTO_MIN_SCORE) whose shorter side in the model's input is below AUTO_SMALL_FACE pixels:
# there, faces smaller still are likely and only the tiled pass finds them (docs/architecture.md, "Detail").
AUTO_SMALL_FACE = 24
AUTO_MIN_SCORE = 0.5
# detail=fast: the standard pass's long side (at most FACECROP_TARGET_SIZE). The faces that decide
# where a crop goes are the large ones; measured on every labeled set, crops frame the same share
# of faces as at 1024 (docs/api/url.md, "Why detail=fast frames crops"), for less than half the
# model's work.
FAST_SIZE = 640
MAX_BATCH = 16  # images in one call: the model's max_batch_size (model_repository/*/config.pbtxt)


@dataclass(frozen=True)
class DetectionResult:
    image: DecodedImage  # possibly reduced: detection needs no more pixels than the model sees
    detections: Detections  # every face found, in original pixels, best first (max_faces limits only the listing)
    tiles: int  # tiles of the tiled pass (detail=high or auto); 0 when only the standard pass ran
    models: tuple[str, ...]  # the models that ran, as the X-Detectors header says
    first_pass: str = "standard"  # its name: `fast` at detail=fast (640, YuNet alone), else `standard`

    @property
    def passes(self) -> str:
        """The passes that ran, as the X-Passes header says them."""
        return passes_named(self.first_pass, self.tiles)


@dataclass(frozen=True)
class FramesResult:
    detections: list[Detections]  # each frame's faces, in its pixels, best first
    tiles: int  # tiles of the tiled passes, every frame's together; 0 when only the standard pass ran
    models: tuple[str, ...]  # the models that ran, as the X-Detectors header says
    first_pass: str = "standard"

    @property
    def passes(self) -> str:
        """The passes that ran, as the X-Passes header says them."""
        return passes_named(self.first_pass, self.tiles)


def passes_named(first_pass: str, tiles: int) -> str:
    """X-Passes: the first pass's name, and `tiled` where tiles ran."""
    return f"{first_pass}, tiled" if tiles else first_pass


def first_pass(options: DetectOptions) -> str:
    """The first pass's name in X-Passes: `fast` (FAST_SIZE, its models) or `standard`."""
    return "fast" if options.detail == "fast" else "standard"


def run_detection(
    data: bytes,
    detectors: Detectors,
    settings: Settings,
    options: DetectOptions,
    timer: StageTimer | None = None,
    header: ImageHeader | None = None,
    background: BGR = WHITE,
) -> DetectionResult:
    """Detect faces in encoded image bytes: the standard pass (at FAST_SIZE with detail=fast), and
    the tiled pass with detail=high (both in flight at once) or with detail=auto where the
    standard pass saw small faces (`needs_tiles`). Each pass runs its models' calls at once;
    each model's faces are suppressed on their own, then fused. Faces come back in the original
    image's pixels.

    A JPEG is decoded no larger than the passes need: the standard pass's long side, or the
    tiled pass's (detail=auto decodes again, larger, only where it tiles). Transparency is
    flattened onto `background`.
    """
    timer = timer or StageTimer()
    if header is None:
        with timer.stage("decode"):
            header = read_header(data, settings.max_pixels, settings.max_side)
    width, height = header.upright_size
    target = standard_size(options, settings)
    standard = scale_for(height, width, target)
    tiled = tiled_scale(height, width, target) if options.detail in ("auto", "high") else None
    both_at_once = options.detail == "high"  # where there is a tiled pass
    image = decode_image(data, header, max(standard, tiled or 0) if both_at_once else standard, timer, background)
    plan = plan_input(*image.shape, target, settings.pad_multiple)
    min_score = options.min_score
    models = detectors.first_pass(options.detail)
    tiled_models = detectors.tiled_pass() if tiled is not None else ()
    tiled_faces: dict[str, Detections] = {}
    tiles = 0
    fill = fill_frames([image.stored], plan, timer, image.orientation)
    tiled_now = tiled if both_at_once else None  # its tiles prepared and sent while the standard pass runs
    with submitted(detectors, models, 1, plan.size, fill, timer, overlapped=tiled_now is not None) as wait:
        if tiled_now is not None:
            tiled_faces, tiles = _tiled_pass(image, tiled_now, detectors, tiled_models, settings, min_score, timer)
        outputs = wait()
    with timer.stage("postprocess"):
        found = {d.name: d.kind.candidates(outputs[d.name][0], plan.size, candidate_floor(options)) for d in models}
    if tiled is not None and options.detail == "auto" and any(needs_tiles(f) for f in found.values()):
        larger = with_resolution(image, tiled, data, header, image.background, timer)
        tiled_faces, tiles = _tiled_pass(larger, tiled, detectors, tiled_models, settings, min_score, timer)
    with timer.stage("postprocess"):
        in_picture = {
            name: faces.scaled((0, 0), plan.scale).scaled((0, 0), image.scale) for name, faces in found.items()
        }
        detections = fused(in_picture, tiled_faces, (height, width), options)
    return DetectionResult(image, detections, tiles, ran(detectors, models, tiled_models, tiles), first_pass(options))


def candidate_floor(options: DetectOptions) -> float:
    """The standard pass's lowest score kept: min_score, or AUTO_MIN_SCORE where lower (`needs_tiles`
    judges the candidates from there)."""
    return min(options.min_score, AUTO_MIN_SCORE)


def fused(
    standard: dict[str, Detections], tiled: dict[str, Detections], size: tuple[int, int], options: DetectOptions
) -> Detections:
    """One picture's faces: each model's standard-pass candidates from min_score up and its tiled
    pass's (both in the picture's pixels, of `size` (H, W)), suppressed on their own, then fused
    (the standard pass's models first)."""
    per_model = {}
    for name in [*standard, *(name for name in tiled if name not in standard)]:
        parts = [standard[name][standard[name].scores >= options.min_score]] if name in standard else []
        parts += [tiled[name]] if name in tiled else []
        per_model[name] = finish(Detections.concatenate(parts), size, options)
    return fuse(per_model)


def ran(
    detectors: Detectors, models: tuple[Detector, ...], tiled_models: tuple[Detector, ...], tiles: int
) -> tuple[str, ...]:
    """The models that ran, in the served order: the first pass's, and the tiled pass's where tiles ran."""
    return tuple(d.name for d in detectors.served if d in models or (tiles and d in tiled_models))


def standard_size(options: DetectOptions, settings: Settings) -> int:
    """The standard pass's long side: FACECROP_TARGET_SIZE, or FAST_SIZE with detail=fast."""
    return min(FAST_SIZE, settings.target_size) if options.detail == "fast" else settings.target_size


@contextmanager
def submitted(
    detectors: Detectors,
    models: tuple[Detector, ...],
    count: int,
    size: tuple[int, int],
    fill: Callable[[np.ndarray, WireFormat], None],
    timer: StageTimer,
    overlapped: bool = False,
) -> Iterator[Callable[[], dict[str, list[ModelOutputs]]]]:
    """The calls that run `models` (`Detectors.calls`: one request for a joint model's parts) on a
    batch of `count` inputs of `size`, filled by `fill` (`fill_each`); yields the wait for each
    model's outputs per image, by name, while the batches are held. Several calls, or one the
    caller overlaps with more work (`overlapped`), are sent at once; a lone call is made by the
    wait, on this thread (no other thread woken to hand its answer over)."""
    calls = detectors.calls(models)
    with ExitStack() as held:
        batches = [held.enter_context(call.model.batch(batch_shape(count, size, call.wire))) for call in calls]
        fill_each(batches, calls, fill)
        del fill  # the pixels it fills from (a tiled pass's enlarged picture) are not kept while waiting
        if len(batches) > 1 or overlapped:
            with timer.stage("infer"):
                pending = [batch.submit() for batch in batches]
            results = [call.result for call in pending]
        else:
            results = [batch.run for batch in batches]

        def wait() -> dict[str, list[ModelOutputs]]:
            with timer.stage("infer"):
                answered = [result() for result in results]
            return {
                detector.name: [answer[i] for answer in answers]
                for call, answers in zip(calls, answered)
                for i, detector in enumerate(call.detectors)
            }

        yield wait


def fill_each(batches: list[Batch], calls: tuple[Call, ...], fill: Callable[[np.ndarray, WireFormat], None]) -> None:
    """Fill each call's batch with `fill(tensor, wire)`, once per layout: a batch whose wire
    format lays its input out as an earlier one's (both models' uint8 formats do) gets a copy."""
    filled: dict[tuple, np.ndarray] = {}
    for batch, call in zip(batches, calls):
        wire = call.wire
        layout = (wire.dtype, wire.channels_last, wire.mean)
        if layout in filled:
            batch.tensor[...] = filled[layout]
        else:
            fill(batch.tensor, wire)
            filled[layout] = batch.tensor


def fill_frames(
    images: list[np.ndarray], plan: InputPlan, timer: StageTimer, orientation: int = 1, background: BGR = WHITE
) -> Callable[[np.ndarray, WireFormat], None]:
    """`fill_each`'s fill for the standard pass: one image per slot, scaled by the plan's scale
    (premultiplied BGRA flattened onto `background` one at a time)."""

    def fill(tensor: np.ndarray, wire: WireFormat) -> None:
        for slot, pixels in zip(tensor, images):
            fill_input(slot, flattened(pixels, background), plan.scale, wire, timer, orientation)

    return fill


def tiles_of(scaled: np.ndarray, tiling: Tiling, timer: StageTimer) -> Callable[[np.ndarray, WireFormat], None]:
    """`fill_each`'s fill for the tiled pass: each tile of the scaled image in its slot."""

    def fill(tensor: np.ndarray, wire: WireFormat) -> None:
        with timer.stage("preprocess"):
            fill_tiles(tensor, scaled, tiling, wire)

    return fill


def detect_frames(
    frames: list[np.ndarray],
    detectors: Detectors,
    settings: Settings,
    options: DetectOptions,
    timer: StageTimer,
    deadline: Deadline = NEVER,
    background: BGR = WHITE,
) -> FramesResult:
    """Every face in each of `frames` (upright pixels of one size: an animation's; premultiplied
    BGRA ones flattened onto `background` as they are sent), by the passes the detail asks for, as
    a still's: the standard pass, MAX_BATCH frames to a call of each model; then the tiled pass on
    every frame with detail=high, or with detail=auto where the standard pass saw small faces in
    any frame (one scene: a face hidden in one frame is hidden in the next). The `deadline` is
    checked before each call."""
    height, width = frames[0].shape[:2]
    target = standard_size(options, settings)
    plan = plan_input(height, width, target, settings.pad_multiple)
    tiled = tiled_scale(height, width, target) if options.detail in ("auto", "high") else None
    models = detectors.first_pass(options.detail)
    found: list[dict[str, Detections]] = []
    for start in range(0, len(frames), MAX_BATCH):
        chunk = frames[start : start + MAX_BATCH]
        deadline.check(f"the standard pass of frames {start + 1} to {start + len(chunk)} of {len(frames)}")
        fill = fill_frames(chunk, plan, timer, background=background)
        with submitted(detectors, models, len(chunk), plan.size, fill, timer) as wait:
            outputs = wait()
        with timer.stage("postprocess"):
            found += [
                {d.name: d.kind.candidates(outputs[d.name][i], plan.size, candidate_floor(options)) for d in models}
                for i in range(len(chunk))
            ]
    small = any(needs_tiles(faces) for frame in found for faces in frame.values())
    if options.detail == "auto" and not small:
        tiled = None
    tiled_models = detectors.tiled_pass() if tiled is not None else ()
    detections, tiles = [], 0
    for index, (pixels, standard) in enumerate(zip(frames, found), 1):
        tiled_faces: dict[str, Detections] = {}
        if tiled is not None:
            deadline.check(f"the tiled pass of frame {index} of {len(frames)}")
            whole = DecodedImage(flattened(pixels, background), "frame", (width, height))  # a frame, as decoded
            tiled_faces, count = _tiled_pass(whole, tiled, detectors, tiled_models, settings, options.min_score, timer)
            tiles += count
        with timer.stage("postprocess"):
            in_frame = {name: faces.scaled((0, 0), plan.scale) for name, faces in standard.items()}
            detections.append(fused(in_frame, tiled_faces, (height, width), options))
    return FramesResult(detections, tiles, ran(detectors, models, tiled_models, tiles), first_pass(options))


def needs_tiles(standard: Detections) -> bool:
    """Whether the standard pass's candidates (model-input pixels) include a face scoring at least
    AUTO_MIN_SCORE whose shorter side is below AUTO_SMALL_FACE: small faces, and likely smaller ones."""
    boxes = standard.boxes[standard.scores >= AUTO_MIN_SCORE]
    sides = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    return bool((sides < AUTO_SMALL_FACE).any())


def _tiled_pass(
    image: DecodedImage,
    scale: float,
    detectors: Detectors,
    models: tuple[Detector, ...],
    settings: Settings,
    min_score: float,
    timer: StageTimer,
) -> tuple[dict[str, Detections], int]:
    """The faces the tiled pass answers for, per model, in original pixels, and its number of
    tiles: the image at `scale` (of the original) cut into overlapping tiles, sent as one batch
    to each model."""
    relative = scale / image.scale[0]
    with timer.stage("resize"):
        scaled = apply_orientation(rescale(image.stored, relative, image.orientation), image.orientation)
    scaled_size = (scaled.shape[0], scaled.shape[1])
    tiling = plan_tiles(scaled_size, settings.target_size, TILE_MIN_OVERLAP, settings.pad_multiple, relative)
    with submitted(
        detectors, models, len(tiling.origins), tiling.tile_shape, tiles_of(scaled, tiling, timer), timer
    ) as wait:
        del scaled  # the tiles are filled: not kept while waiting
        outputs = wait()
    with timer.stage("postprocess"):
        found = {
            d.name: Detections.concatenate(
                tiled_candidates(d.kind.candidates, outputs[d.name], tiling, min_score)
            ).scaled((0, 0), image.scale)
            for d in models
        }
    return found, len(tiling.origins)
