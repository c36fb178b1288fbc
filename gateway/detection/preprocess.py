"""Upright BGR pixels to the model's input: scale, pad to a canonical shape, lay out for the wire.

Two wire formats: `uint8` NHWC pixels, padded with the wire format's colour (RetinaFace's
graph centres it to zero; YuNet reads it as grey), or `float32` NCHW pixels minus the wire
format's mean, padded with zeros. The image sits in the top-left corner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from gateway.imaging.orientation import apply_orientation
from gateway.timing import StageTimer
from gateway.triton.wire import WireFormat

# A small image (an avatar, an animation's frames) is enlarged for the models at most this many
# times: more only blurs it, and costs the model work of a 1024-pixel photo. Chosen on every labeled
# set shrunk to 64-320 pixels, each set held out in turn (bench/results/2026-11-28-session-20.md).
MAX_ENLARGEMENT = 3.0
# detail=high: the tiled pass never enlarges the original more than this, and runs only where
# it sees the image at least this many times larger than the standard pass (see tiled_scale).
MAX_TILED_UPSCALE = 2.0
MIN_TILED_GAIN = 1.5
TILE_MIN_OVERLAP = 128  # tiled-pass pixels; postprocess keeps only faces that fit inside it


def stored_origin(orientation: int) -> tuple[bool, bool]:
    """Whether the stored pixel that EXIF `orientation` turns into the upright top-left is on the
    last row, and on the last column."""
    corners = np.arange(4, dtype=np.uint8).reshape(2, 2)
    row, column = divmod(int(apply_orientation(corners, orientation)[0, 0]), 2)
    return bool(row), bool(column)


@dataclass(frozen=True)
class InputPlan:
    """The standard pass's input: the image scaled by `scale` in the top-left of a padded `size`."""

    size: tuple[int, int]  # the padded (H, W)
    scale: float  # model-input pixels per original pixel


def scale_for(height: int, width: int, target_size: int) -> float:
    """Scale that brings the longer side to `target_size`, enlarging a small image at most
    MAX_ENLARGEMENT times."""
    return min(target_size / max(height, width), MAX_ENLARGEMENT)


def canonical_shape(height: int, width: int, target_size: int, pad_multiple: int) -> tuple[int, int]:
    """Pad each side up to a multiple of `pad_multiple` (at most `target_size`).

    Images then fall into a handful of shapes (most with a long side of `target_size`), which lets
    Triton batch requests together and TensorRT keep one engine profile.
    """

    def pad(side: int) -> int:
        return min(math.ceil(side / pad_multiple) * pad_multiple, target_size)

    return pad(height), pad(width)


def rescale(pixels: np.ndarray, scale: float, orientation: int) -> np.ndarray:
    """`pixels` (H x W x 3 BGR uint8, stored with EXIF `orientation`) resized by `scale` (`resized`)."""
    height, width = pixels.shape[:2]
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    if size == (width, height):
        return pixels
    return resized(pixels, size, scale, orientation)


def resized(
    pixels: np.ndarray, size: tuple[int, int], scale: float, orientation: int = 1, out: np.ndarray | None = None
) -> np.ndarray:
    """`pixels` (stored with EXIF `orientation`) resized by about `scale` to `size` (W, H), into
    `out` where given: bilinear, as the models were trained, after averaging whole blocks of pixels
    where `scale` is below half (OpenCV's fast area path), so that what is shrunk bilinearly is
    shrunk by less than half and little aliases. The blocks start at the corner that turns into the
    upright top-left (a part-block at the far edges is left out), so the same pixels stored turned
    give the same input. OpenCV's area averaging by factors that are not whole costs 5-15x more
    (a phone photo decoded at half size, to 1024: 15 ms, not 2)."""
    if scale < 0.5:
        height, width = pixels.shape[:2]
        block = min(int(1 / scale), height, width)
        rows, cols = height // block * block, width // block * block
        from_bottom, from_right = stored_origin(orientation)
        whole = pixels[height - rows :] if from_bottom else pixels[:rows]
        whole = whole[:, width - cols :] if from_right else whole[:, :cols]
        pixels = cv2.resize(whole, (cols // block, rows // block), interpolation=cv2.INTER_AREA)
    return cv2.resize(pixels, size, dst=out, interpolation=cv2.INTER_LINEAR)


def batch_shape(count: int, size: tuple[int, int], wire: WireFormat) -> tuple[int, int, int, int]:
    """The tensor shape of `count` inputs of `size` (H, W) in `wire`'s layout."""
    height, width = size
    return (count, height, width, 3) if wire.channels_last else (count, 3, height, width)


def fill_input(
    slot: np.ndarray,
    pixels: np.ndarray,
    scale: float,
    wire: WireFormat,
    timer: StageTimer | None = None,
    orientation: int = 1,
) -> None:
    """Write `pixels` (stored with EXIF `orientation`) scaled by `scale` and turned upright into the
    top-left of one input `slot` ([H, W, 3] or [3, H, W]) and pad the rest, in place: for uint8
    the resize writes straight into the slot (a shared-memory region, say) and the padding is the
    wire's colour; for float32 the pixels minus the wire's mean, zero padding. Turning the resized image
    rather than the decoded one costs a fraction of the work."""
    timer = timer or StageTimer()
    if wire.channels_last:
        with timer.stage("resize"):
            content = _resized_into(pixels, scale, orientation, slot)
        with timer.stage("preprocess"):
            # rows copied whole: far faster than broadcasting 3 bytes
            mean_row = np.tile(np.array(wire.mean, np.uint8), (slot.shape[1], 1))
            slot[: content[0], content[1] :] = mean_row[content[1] :]
            slot[content[0] :] = mean_row
        return
    with timer.stage("resize"):
        upright = apply_orientation(rescale(pixels, scale, orientation), orientation)
    with timer.stage("preprocess"):
        rows, cols = upright.shape[:2]
        mean = np.array(wire.mean, np.float32).reshape(3, 1, 1)
        np.subtract(upright.transpose(2, 0, 1), mean, out=slot[:, :rows, :cols], dtype=np.float32)
        slot[:, :rows, cols:] = 0
        slot[:, rows:] = 0


def _resized_into(pixels: np.ndarray, scale: float, orientation: int, slot: np.ndarray) -> tuple[int, int]:
    """`rescale(pixels, scale, orientation)` turned upright into the top-left of `slot`; its (H, W). Upright
    pixels are resized straight into the slot; others through one small intermediate image."""
    height, width = pixels.shape[:2]
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    rows, cols = (size[0], size[1]) if orientation >= 5 else (size[1], size[0])
    target = slot[:rows, :cols]
    if orientation == 1 and size != (width, height):
        resized(pixels, size, scale, out=target)
    else:
        apply_orientation(rescale(pixels, scale, orientation), orientation, out=target)
    return rows, cols


def plan_input(height: int, width: int, target_size: int, pad_multiple: int) -> InputPlan:
    """The standard pass's input for an (H, W) image: the longer side at `target_size` (a small
    image's at most MAX_ENLARGEMENT times its own), padded."""
    scale = scale_for(height, width, target_size)
    resized = (max(1, round(height * scale)), max(1, round(width * scale)))
    return InputPlan(size=canonical_shape(*resized, target_size, pad_multiple), scale=scale)


def to_model_input(
    pixels: np.ndarray, target_size: int, pad_multiple: int, wire: WireFormat
) -> tuple[np.ndarray, InputPlan]:
    """The standard pass's input for `pixels` in a tensor of its own (in-process models, benchmarks)."""
    plan = plan_input(pixels.shape[0], pixels.shape[1], target_size, pad_multiple)
    tensor = np.empty(batch_shape(1, plan.size, wire), wire.dtype)
    fill_input(tensor[0], pixels, plan.scale, wire)
    return tensor, plan


@dataclass(frozen=True)
class Tiling:
    """The image enlarged for `detail=high`, cut into overlapping tiles of one shape, sent as one batch."""

    origins: tuple[tuple[int, int], ...]  # each tile's top-left (x, y) in the scaled image
    tile_shape: tuple[int, int]  # (H, W), each at most the target size
    scaled_size: tuple[int, int]  # (H, W) of the scaled image the tiles cover
    scale: float  # scaled-image pixels per pixel of the image it was cut from


def tiled_scale(height: int, width: int, target_size: int) -> float | None:
    """Scale of the tiled pass: twice the standard one, but never enlarging the original more than
    MAX_TILED_UPSCALE; None where that gains less than MIN_TILED_GAIN over the standard pass
    (a small photo the standard pass already enlarged: more enlargement only blurs it)."""
    standard = scale_for(height, width, target_size)
    scale = min(2 * standard, MAX_TILED_UPSCALE)
    return scale if scale >= MIN_TILED_GAIN * standard else None


def tile_starts(length: int, tile: int, min_overlap: int) -> list[int]:
    """Evenly spread starts of the fewest `tile`-long windows covering `length`, overlapping
    each other by at least `min_overlap`."""
    if length <= tile:
        return [0]
    count = math.ceil((length - min_overlap) / (tile - min_overlap))
    return [round(i * (length - tile) / (count - 1)) for i in range(count)]


def fitted_tile(length: int, max_tile: int, min_overlap: int, multiple: int) -> int:
    """The shortest tile side, a multiple of `multiple` (at most `max_tile`), that covers `length`
    in as few tiles, overlapping by `min_overlap`, as `max_tile`-long ones would: no model time
    spent on overlap the tiled pass does not need, or on padding past the picture."""
    count = len(tile_starts(length, max_tile, min_overlap))
    side = math.ceil((length + (count - 1) * min_overlap) / count)
    return min(math.ceil(side / multiple) * multiple, max_tile)


def plan_tiles(scaled_size: tuple[int, int], max_tile: int, min_overlap: int, multiple: int, scale: float) -> Tiling:
    """The tiles covering an image scaled by `scale` to `scaled_size` (H, W): the fewest no longer
    than `max_tile` a side, each side fitted (`fitted_tile`, padded to a multiple of `multiple`)."""
    height, width = scaled_size
    rows, cols = (fitted_tile(side, max_tile, min_overlap, multiple) for side in scaled_size)
    origins = tuple(
        (x, y) for y in tile_starts(height, rows, min_overlap) for x in tile_starts(width, cols, min_overlap)
    )
    return Tiling(origins=origins, tile_shape=(rows, cols), scaled_size=scaled_size, scale=scale)


def fill_tiles(tensor: np.ndarray, scaled: np.ndarray, tiling: Tiling, wire: WireFormat) -> None:
    """Copy each tile of the scaled image into its slot of `tensor` (padded where the image is smaller)."""
    rows, cols = tiling.tile_shape
    for slot, (x, y) in zip(tensor, tiling.origins):
        fill_input(slot, scaled[y : y + rows, x : x + cols], 1.0, wire)
