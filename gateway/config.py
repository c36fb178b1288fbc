"""All gateway settings, read once from environment variables (documented defaults below)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping


DEFAULT_MODELS = {"uint8": "retinaface_uint8", "float32": "retinaface"}


@dataclass(frozen=True)
class Settings:
    """Gateway configuration; `from_env` documents each variable and its default."""

    triton_url: str = "127.0.0.1:8001"
    wire_format: str = "uint8"
    model_name: str = "retinaface_uint8"
    target_size: int = 1024
    pad_multiple: int = 256
    max_upload_bytes: int = 20 * 1024 * 1024
    max_pixels: int = 50_000_000
    infer_timeout_s: float = 10.0
    ready_timeout_s: float = 1.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> "Settings":
        """Read `FACECROP_*` variables, falling back to the defaults above.

        FACECROP_TRITON_URL        Triton gRPC address, host:port (127.0.0.1:8001)
        FACECROP_WIRE_FORMAT       tensor sent to Triton: uint8 (NHWC pixels; the model
                                   centres them) or float32 (NCHW, centred here) (uint8)
        FACECROP_MODEL_NAME        model in Triton's repository (retinaface_uint8 for uint8,
                                   retinaface for float32)
        FACECROP_TARGET_SIZE       long side, in pixels, images are scaled to (1024)
        FACECROP_PAD_MULTIPLE      short side padded up to a multiple of this (256)
        FACECROP_MAX_UPLOAD_BYTES  largest accepted request body (20 MiB)
        FACECROP_MAX_PIXELS        largest accepted width x height, from the header (50,000,000)
        FACECROP_INFER_TIMEOUT_S   deadline of one Triton inference call (10)
        FACECROP_READY_TIMEOUT_S   deadline of Triton's readiness check behind /readyz (1)
        """
        wire_format = environ.get("FACECROP_WIRE_FORMAT", cls.wire_format)
        settings = cls(
            triton_url=environ.get("FACECROP_TRITON_URL", cls.triton_url),
            wire_format=wire_format,
            model_name=environ.get("FACECROP_MODEL_NAME", DEFAULT_MODELS.get(wire_format, "")),
            target_size=int(environ.get("FACECROP_TARGET_SIZE", cls.target_size)),
            pad_multiple=int(environ.get("FACECROP_PAD_MULTIPLE", cls.pad_multiple)),
            max_upload_bytes=int(environ.get("FACECROP_MAX_UPLOAD_BYTES", cls.max_upload_bytes)),
            max_pixels=int(environ.get("FACECROP_MAX_PIXELS", cls.max_pixels)),
            infer_timeout_s=float(environ.get("FACECROP_INFER_TIMEOUT_S", cls.infer_timeout_s)),
            ready_timeout_s=float(environ.get("FACECROP_READY_TIMEOUT_S", cls.ready_timeout_s)),
        )
        settings.validate()
        return settings

    def validate(self) -> None:
        """Refuse settings the model cannot run with (its strides need multiples of 32)."""
        if self.wire_format not in DEFAULT_MODELS:
            raise ValueError(f"FACECROP_WIRE_FORMAT must be one of {', '.join(DEFAULT_MODELS)}")
        if self.target_size <= 0 or self.target_size % 32:
            raise ValueError("FACECROP_TARGET_SIZE must be a positive multiple of 32")
        if self.pad_multiple <= 0 or self.pad_multiple % 32:
            raise ValueError("FACECROP_PAD_MULTIPLE must be a positive multiple of 32")
