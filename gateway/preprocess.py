"""Upright BGR pixels to the model's input: scale, subtract the mean, pad to a canonical shape."""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np

BGR_MEAN = np.array([104.0, 117.0, 123.0], dtype=np.float32).reshape(3, 1, 1)


@dataclass(frozen=True)
class ModelInput:
    tensor: np.ndarray  # 1 x 3 x H x W float32, BGR minus BGR_MEAN, zero padding right and below
    scale: float  # model-input pixels per original pixel


def scale_for(height: int, width: int, target_size: int) -> float:
    """Scale that brings the longer side to `target_size`, enlarging small images too."""
    return target_size / max(height, width)


def resized_size(height: int, width: int, scale: float) -> tuple[int, int]:
    return max(1, round(height * scale)), max(1, round(width * scale))


def canonical_shape(height: int, width: int, target_size: int, pad_multiple: int) -> tuple[int, int]:
    """Pad each side up to a multiple of `pad_multiple` (at most `target_size`).

    Images whose long side is `target_size` then fall into a handful of shapes, which lets
    Triton batch requests together and TensorRT keep one engine profile.
    """

    def pad(side: int) -> int:
        return min(math.ceil(side / pad_multiple) * pad_multiple, target_size)

    return pad(height), pad(width)


def to_model_input(pixels: np.ndarray, target_size: int, pad_multiple: int) -> ModelInput:
    """Scale `pixels` (H x W x 3 BGR uint8) and lay them out as a padded NCHW tensor."""
    height, width = pixels.shape[:2]
    scale = scale_for(height, width, target_size)
    new_height, new_width = resized_size(height, width, scale)
    resized = cv2.resize(pixels, (new_width, new_height), interpolation=cv2.INTER_LINEAR)
    padded_height, padded_width = canonical_shape(new_height, new_width, target_size, pad_multiple)
    tensor = np.zeros((1, 3, padded_height, padded_width), dtype=np.float32)
    np.subtract(resized.transpose(2, 0, 1), BGR_MEAN, out=tensor[0, :, :new_height, :new_width])
    return ModelInput(tensor=tensor, scale=scale)
