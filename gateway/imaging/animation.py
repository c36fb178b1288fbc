"""Animations kept as animations (GIF and WebP in; animated WebP or GIF out), as Cloudflare's
`anim=true`: every frame, as a viewer composites it, with its duration, and the loop count.

Outputs have no transparency: frames are flattened onto the background colour. A source whose
frames times area exceed MAX_ANIMATION_PIXELS (Cloudflare's limit) is refused before any frame is
decoded. GIF outputs are quantised per frame with Pillow's fast octree (its default median cut is
ten times slower per frame).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image, ImageSequence

from gateway.errors import ImageTooLarge, UnsupportedImage

MAX_ANIMATION_PIXELS = 50_000_000
ANIMATION_FORMATS = frozenset({"gif", "webp"})


@dataclass(frozen=True)
class Animation:
    """Frames (upright BGR, one size), each one's duration (ms), and how many times it plays (0: forever)."""

    frames: list[np.ndarray]
    durations: list[int]
    plays: int


def read_animation(data: bytes, background: tuple[int, int, int]) -> Animation:
    """Every frame of a GIF or WebP, composited and flattened onto `background` (BGR)."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            count = getattr(image, "n_frames", 1)
            if count * image.width * image.height > MAX_ANIMATION_PIXELS:
                raise ImageTooLarge(
                    f"{count} frames of {image.width}x{image.height} are more than {MAX_ANIMATION_PIXELS} pixels"
                )
            plays = _plays(image)
            fill = Image.new("RGBA", image.size, (*background[::-1], 255))
            frames, durations = [], []
            for frame in ImageSequence.Iterator(image):
                frame.load()  # WebP sets a frame's duration once it is loaded
                durations.append(int(frame.info.get("duration", 0)))
                rgb = Image.alpha_composite(fill, frame.convert("RGBA")).convert("RGB")
                frames.append(cv2.cvtColor(np.asarray(rgb), cv2.COLOR_RGB2BGR))
    except ImageTooLarge:
        raise
    except Exception:
        raise UnsupportedImage("the animation is corrupt or truncated") from None
    return Animation(frames, durations, plays)


def _plays(image: Image.Image) -> int:
    """How many times the animation plays: GIF's loop count says how many times more (none: once),
    WebP's how many in all; 0 is forever in both."""
    loop = image.info.get("loop")
    if image.format == "GIF":
        return 1 if loop is None else (0 if loop == 0 else int(loop) + 1)
    return int(loop or 0)


def encode_animation(frames: list[np.ndarray], durations: list[int], plays: int, fmt: str, quality: int) -> bytes:
    """`frames` (BGR) as an animated WebP or GIF that plays `plays` times (0: forever)."""
    pictures = [Image.fromarray(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)) for frame in frames]
    buffer = io.BytesIO()
    if fmt == "webp":
        pictures[0].save(
            buffer, "WEBP", save_all=True, append_images=pictures[1:], duration=durations, loop=plays, quality=quality
        )
    else:
        paletted = [picture.quantize(256, method=Image.Quantize.FASTOCTREE) for picture in pictures]
        loop = {} if plays == 1 else {"loop": 0 if plays == 0 else plays - 1}
        paletted[0].save(buffer, "GIF", save_all=True, append_images=paletted[1:], duration=durations, **loop)
    return buffer.getvalue()
