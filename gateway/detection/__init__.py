"""Faces from pixels: the detection's one door. Everything the rest of the gateway needs of it is
named here; its modules (the orchestrator, preprocessing, the models' decoders, suppression,
fusion) are its inside.

- `find(frames, options, detectors, limits, ...)`: each frame's faces, a still's (one frame) or an
  animation's alike, as a `Found` (each frame's faces, the faces across frames, the passes, models
  and tiles that ran); `decode_scale` says how small a still may be decoded for it.
- `Detections`: faces as arrays; `Detectors` and `serve`: the models served; `Model`: what the
  detection needs of one (a Triton model, or one in process).
- The models the gateway knows, checked and named for Triton: `check_served`, `served_name`,
  `joint_models`, `every_wire_format`.
"""

from gateway.detection.detections import LANDMARK_NAMES, Detections
from gateway.detection.detectors import (
    Detectors,
    JointModel,
    check_served,
    every_wire_format,
    joint_models,
    serve,
    served_name,
)
from gateway.detection.model import Model
from gateway.detection.passes import Found, Limits, decode_scale, find

__all__ = [
    "LANDMARK_NAMES",
    "Detections",
    "Detectors",
    "Found",
    "JointModel",
    "Limits",
    "Model",
    "check_served",
    "decode_scale",
    "every_wire_format",
    "find",
    "joint_models",
    "serve",
    "served_name",
]
