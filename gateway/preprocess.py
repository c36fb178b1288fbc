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

BGR_MEAN = np.array([104, 117, 123], dtype=np.uint8)


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


def resize_for_model(pixels: np.ndarray, target_size: int) -> tuple[np.ndarray, float]:
    """`pixels` (H x W x 3 BGR uint8) with the longer side at `target_size`, and the scale used."""
    height, width = pixels.shape[:2]
    scale = scale_for(height, width, target_size)
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return cv2.resize(pixels, size, interpolation=cv2.INTER_LINEAR), scale


def to_model_input(pixels: np.ndarray, target_size: int, pad_multiple: int, wire_format: str) -> ModelInput:
    """The model input for `pixels` in `wire_format` (`uint8` or `float32`)."""
    resized, scale = resize_for_model(pixels, target_size)
    height, width = resized.shape[:2]
    padded_height, padded_width = canonical_shape(height, width, target_size, pad_multiple)
    if wire_format == "uint8":
        tensor = np.empty((1, padded_height, padded_width, 3), dtype=np.uint8)
        tensor[0, :height, :width] = resized
        tensor[0, height:, :] = BGR_MEAN
        tensor[0, :height, width:] = BGR_MEAN
    else:
        tensor = np.zeros((1, 3, padded_height, padded_width), dtype=np.float32)
        np.subtract(resized.transpose(2, 0, 1), BGR_MEAN.reshape(3, 1, 1), out=tensor[0, :, :height, :width], dtype=np.float32)
    return ModelInput(tensor=tensor, size=(padded_height, padded_width), scale=scale)
