"""The detection's orchestrator (the room's door, gateway/detection/__init__.py, hands it out): faces
from decoded pixels, a still's or an animation's frames alike (`find`): preprocess -> infer (each
pass's models, detectors.py's policy, in flight at once) -> postprocess -> fusion, in the upright
picture's pixels."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial

import numpy as np

from gateway.detection.detections import Detections
from gateway.detection.detectors import Call, Detector, Detectors
from gateway.detection.fusion import fuse
from gateway.detection.postprocess import across_frames, finish, tiled_candidates
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
from gateway.imaging.decode import DecodedImage
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
class Limits:
    """What the detection takes of the service's settings: the standard pass's long side
    (FACECROP_TARGET_SIZE) and the multiple its inputs are padded to (FACECROP_PAD_MULTIPLE)."""

    target_size: int = 1024
    pad_multiple: int = 32


@dataclass(frozen=True)
class Found:
    """What `find` answers: each frame's faces and what ran to find them."""

    per_frame: list[Detections]  # each frame's faces, in the upright original's pixels, best first
    tiles: int  # tiles of the tiled passes, every frame's together; 0 when only the standard pass ran
    models: tuple[str, ...]  # the models that ran, as the X-Detectors header says
    first_pass: str = "standard"  # its name: `fast` at detail=fast (640, YuNet alone), else `standard`

    @property
    def faces(self) -> Detections:
        """The faces across the frames, each once, best first (a still's: its frame's)."""
        return self.per_frame[0] if len(self.per_frame) == 1 else across_frames(self.per_frame)

    @property
    def passes(self) -> str:
        """The passes that ran, as the X-Passes header says them: the first, and `tiled` where tiles ran."""
        return f"{self.first_pass}, tiled" if self.tiles else self.first_pass


def first_pass(options: DetectOptions) -> str:
    """The first pass's name in X-Passes: `fast` (FAST_SIZE, its models) or `standard`."""
    return "fast" if options.detail == "fast" else "standard"


def decode_scale(size: tuple[int, int], options: DetectOptions, limits: Limits) -> float:
    """The least share of each side of an upright picture of `size` (W, H) that `find` needs decoded:
    the standard pass's, or with detail=high the tiled pass's too (it runs at once; detail=auto asks
    for its larger picture only where it tiles)."""
    width, height = size
    target = standard_size(options, limits)
    standard = scale_for(height, width, target)
    tiled = tiled_scale(height, width, target) if options.detail == "high" else None
    return max(standard, tiled or 0.0)


def find(
    frames: Sequence[DecodedImage],
    options: DetectOptions,
    detectors: Detectors,
    limits: Limits,
    timer: StageTimer | None = None,
    deadline: Deadline = NEVER,
    background: BGR = WHITE,
    larger: Callable[[float], DecodedImage] | None = None,
) -> Found:
    """Every face in each of `frames` (a still's one, decoded as `decode_scale` allows; an animation's,
    upright, of one size), by the passes the detail asks for: the standard pass, MAX_BATCH frames to
    a call of each model; with detail=high the tiled pass too, each frame's tiles sent while its
    standard pass runs; with detail=auto the tiled pass on every frame where the standard pass saw
    small faces in any (`needs_tiles`; one scene: a face hidden in one frame is hidden in the next),
    each frame decoded larger first where `larger` can (a still decoded reduced). Each pass runs its
    models' calls at once; each model's faces are suppressed on their own, then fused, in the upright
    original's pixels. Transparency kept in a frame is flattened onto `background` as it is sent; the
    `deadline` is checked before each call."""
    timer = timer or StageTimer()
    width, height = frames[0].size
    target = standard_size(options, limits)
    plan = plan_input(*frames[0].shape, target, limits.pad_multiple)
    tiled = tiled_scale(height, width, target) if options.detail in ("auto", "high") else None
    models = detectors.first_pass(options.detail)
    tiled_models = detectors.tiled_pass() if tiled is not None else ()
    tiled_pass = partial(_tiled_pass, detectors=detectors, models=tiled_models, limits=limits, timer=timer)
    at_once = tiled if options.detail == "high" else None
    standard: list[dict[str, Detections]] = []
    tiled_faces: list[dict[str, Detections]] = [{} for _ in frames]
    tiles = 0
    for start in range(0, len(frames), MAX_BATCH):
        chunk = frames[start : start + MAX_BATCH]
        deadline.check(f"the standard pass{of_frames(start, len(chunk), len(frames))}")
        fill = fill_frames([frame.stored for frame in chunk], plan, timer, chunk[0].orientation, background)
        with submitted(detectors, models, len(chunk), plan.size, fill, timer, overlapped=at_once is not None) as wait:
            for index, frame in enumerate(chunk, start):
                if at_once is not None:
                    deadline.check(f"the tiled pass{of_frames(index, 1, len(frames))}")
                    tiled_faces[index], count = tiled_pass(frame, at_once, options.min_score, background)
                    tiles += count
            outputs = wait()
        with timer.stage("postprocess"):
            standard += [
                {d.name: d.kind.candidates(outputs[d.name][i], plan.size, candidate_floor(options)) for d in models}
                for i in range(len(chunk))
            ]
    if tiled is not None and at_once is None and any(needs_tiles(f) for frame in standard for f in frame.values()):
        for index, frame in enumerate(frames):
            deadline.check(f"the tiled pass{of_frames(index, 1, len(frames))}")
            source = larger(tiled) if larger is not None else frame
            tiled_faces[index], count = tiled_pass(source, tiled, options.min_score, background)
            tiles += count
    per_frame = []
    with timer.stage("postprocess"):
        for frame, found, tiled_found in zip(frames, standard, tiled_faces):
            in_picture = {name: f.scaled((0, 0), plan.scale).scaled((0, 0), frame.scale) for name, f in found.items()}
            per_frame.append(fused(in_picture, tiled_found, (height, width), options))
    return Found(per_frame, tiles, ran(detectors, models, tiled_models, tiles), first_pass(options))


def of_frames(start: int, count: int, total: int) -> str:
    """Which frames a pass is about, for the deadline's message: nothing for a still's one."""
    if total == 1:
        return ""
    return (
        f" of frame {start + 1} of {total}" if count == 1 else f" of frames {start + 1} to {start + count} of {total}"
    )


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


def standard_size(options: DetectOptions, limits: Limits) -> int:
    """The standard pass's long side: FACECROP_TARGET_SIZE, or FAST_SIZE with detail=fast."""
    return min(FAST_SIZE, limits.target_size) if options.detail == "fast" else limits.target_size


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


def needs_tiles(standard: Detections) -> bool:
    """Whether the standard pass's candidates (model-input pixels) include a face scoring at least
    AUTO_MIN_SCORE whose shorter side is below AUTO_SMALL_FACE: small faces, and likely smaller ones."""
    boxes = standard.boxes[standard.scores >= AUTO_MIN_SCORE]
    sides = np.minimum(boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1])
    return bool((sides < AUTO_SMALL_FACE).any())


def _tiled_pass(
    image: DecodedImage,
    scale: float,
    min_score: float,
    background: BGR,
    detectors: Detectors,
    models: tuple[Detector, ...],
    limits: Limits,
    timer: StageTimer,
) -> tuple[dict[str, Detections], int]:
    """The faces the tiled pass answers for, per model, in original pixels, and its number of
    tiles: the image at `scale` (of the original, its transparency flattened onto `background`) cut
    into overlapping tiles, sent as one batch to each model."""
    relative = scale / image.scale[0]
    with timer.stage("resize"):
        stored = flattened(image.stored, background)
        scaled = apply_orientation(rescale(stored, relative, image.orientation), image.orientation)
    scaled_size = (scaled.shape[0], scaled.shape[1])
    tiling = plan_tiles(scaled_size, limits.target_size, TILE_MIN_OVERLAP, limits.pad_multiple, relative)
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
