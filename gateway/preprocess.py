"""Upright BGR pixels to the model's input: scale, pad to a canonical shape, lay out for the wire.

Two wire formats: `uint8` NHWC pixels, padded with the mean colour (the served model
centres them), or `float32` NCHW pixels minus the mean, padded with zeros. Either way the
padding is zero once centred, and the image sits in the top-left corner.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

from gateway.timing import StageTimer
from gateway.wire import WireFormat

BGR_MEAN = np.array([104, 117, 123], dtype=np.uint8)
# detail=high: the tiled pass never enlarges the original more than this, and runs only where
# it sees the image at least this many times larger than the standard pass (see tiled_scale).
MAX_TILED_UPSCALE = 2.0
MIN_TILED_GAIN = 1.5
TILE_MIN_OVERLAP = 128  # tiled-pass pixels; postprocess keeps only faces that fit inside it


@dataclass(frozen=True)
class ModelInput:
    tensor: np.ndarray  # [1, H, W, 3] uint8 or [1, 3, H, W] float32
    size: tuple[int, int]  # the padded (H, W)
    scale: float  # model-input pixels per original pixel


def scale_for(height: int, width: int, target_size: int) -> float:
    """Scale that brings the longer side to `target_size`, enlarging small images too."""
    return target_size / max(height, width)


def canonical_shape(height: int, width: int, target_size: int, pad_multiple: int) -> tuple[int, int]:
    """Pad each side up to a multiple of `pad_multiple` (at most `target_size`).

    Images whose long side is `target_size` then fall into a handful of shapes, which lets
    Triton batch requests together and TensorRT keep one engine profile.
    """

    def pad(side: int) -> int:
        return min(math.ceil(side / pad_multiple) * pad_multiple, target_size)

    return pad(height), pad(width)


def rescale(pixels: np.ndarray, scale: float) -> np.ndarray:
    """`pixels` (H x W x 3 BGR uint8) resized by `scale`: area-averaged when shrinking (no
    aliasing), bilinear when enlarging."""
    height, width = pixels.shape[:2]
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    if size == (width, height):
        return pixels
    return cv2.resize(pixels, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)


def pack(pieces: list[np.ndarray], shape: tuple[int, int], wire: WireFormat) -> np.ndarray:
    """A batch of `shape` (H, W) inputs laid out for `wire`, each piece in its top-left corner, padded."""
    height, width = shape
    if wire.channels_last:
        mean = BGR_MEAN.tolist()
        padded = [
            cv2.copyMakeBorder(p, 0, height - p.shape[0], 0, width - p.shape[1], cv2.BORDER_CONSTANT, value=mean)
            for p in pieces
        ]
        return padded[0][None] if len(padded) == 1 else np.stack(padded)
    tensor = np.zeros((len(pieces), 3, height, width), dtype=wire.dtype)
    for slot, piece in zip(tensor, pieces):
        np.subtract(
            piece.transpose(2, 0, 1),
            BGR_MEAN.reshape(3, 1, 1),
            out=slot[:, : piece.shape[0], : piece.shape[1]],
            dtype=np.float32,
        )
    return tensor


def to_model_input(
    pixels: np.ndarray, target_size: int, pad_multiple: int, wire: WireFormat, timer: StageTimer | None = None
) -> ModelInput:
    """The model input for `pixels`: the longer side at `target_size`, padded, laid out for `wire`."""
    timer = timer or StageTimer()
    height, width = pixels.shape[:2]
    scale = scale_for(height, width, target_size)
    with timer.stage("resize"):
        resized = rescale(pixels, scale)
    with timer.stage("preprocess"):
        shape = canonical_shape(resized.shape[0], resized.shape[1], target_size, pad_multiple)
        return ModelInput(tensor=pack([resized], shape, wire), size=shape, scale=scale)


@dataclass(frozen=True)
class TiledInput:
    """The image enlarged for `detail=high`, cut into overlapping square tiles sent as one batch."""

    tensor: np.ndarray  # [N, T, T, 3] uint8 or [N, 3, T, T] float32
    origins: tuple[tuple[int, int], ...]  # each tile's top-left (x, y) in the scaled image
    tile_size: int  # T
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


def to_tiles(
    pixels: np.ndarray,
    scale: float,
    tile_size: int,
    min_overlap: int,
    wire: WireFormat,
    timer: StageTimer | None = None,
) -> TiledInput:
    """`pixels` scaled by `scale` and cut into `tile_size` squares (padded where the image is smaller)."""
    timer = timer or StageTimer()
    with timer.stage("resize"):
        scaled = rescale(pixels, scale)
    with timer.stage("preprocess"):
        height, width = scaled.shape[:2]
        origins = tuple(
            (x, y)
            for y in tile_starts(height, tile_size, min_overlap)
            for x in tile_starts(width, tile_size, min_overlap)
        )
        pieces = [scaled[y : y + tile_size, x : x + tile_size] for x, y in origins]
        tensor = pack(pieces, (tile_size, tile_size), wire)
    return TiledInput(tensor=tensor, origins=origins, tile_size=tile_size, scaled_size=(height, width), scale=scale)
