"""Animations kept as animations (GIF and WebP in; animated WebP or GIF out), as Cloudflare's
`anim=true`: every frame, as a viewer composites it, with its duration, and the loop count.

Outputs have no transparency: frames are flattened onto the background colour, as stills are
(gateway/imaging/normalise.py). Frames that grow the picture (a GIF frame beyond the logical
screen) are placed on the final canvas, as a browser shows them. The cost is bounded before any
frame is decoded (`check_cost`): at most FACECROP_MAX_ANIMATION_FRAMES frames, 50 MP of source
frames (Cloudflare's limit) and 50 MP of output frames (frames x the output's size: the work and
memory of cropping, resizing and encoding grow with it). GIF outputs are quantised per frame with
Pillow's fast octree (its default median cut is ten times slower per frame).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image, ImageSequence

from gateway.errors import ImageTooLarge, UnsupportedImage
from gateway.imaging.normalise import pillow_to_bgr

MAX_ANIMATION_PIXELS = 50_000_000  # source frames x their area (Cloudflare's), and output frames x theirs
ANIMATION_FORMATS = frozenset({"gif", "webp"})


@dataclass(frozen=True)
class Animation:
    """Frames (upright BGR, one size), each one's duration (ms), and how many times it plays (0: forever)."""

    frames: list[np.ndarray]
    durations: list[int]
    plays: int


def check_cost(frames: int, source: tuple[int, int], output: tuple[int, int], max_frames: int) -> None:
    """Refuse (413) an animation of more than `max_frames` frames, or whose frames of `source`
    (W, H) or of `output` (the answer's frame size) add up to more than MAX_ANIMATION_PIXELS."""
    hint = "; anim=false answers its first frame"
    if frames > max_frames:
        raise ImageTooLarge(f"the animation has {frames} frames, more than the limit of {max_frames}{hint}")
    for side, (width, height) in (("in", source), ("out", output)):
        if frames * width * height > MAX_ANIMATION_PIXELS:
            raise ImageTooLarge(
                f"{frames} frames of {width}x{height} {side} are more than {MAX_ANIMATION_PIXELS} pixels{hint}"
            )


def read_animation(
    data: bytes, background: tuple[int, int, int], output: tuple[int, int], max_frames: int
) -> Animation:
    """Every frame of a GIF or WebP, composited and flattened onto `background` (BGR), once
    `check_cost` passed it for answers of `output` (W, H) frames."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                check_cost(getattr(image, "n_frames", 1), image.size, output, max_frames)
                plays = _plays(image)
                frames, durations = [], []
                for frame in ImageSequence.Iterator(image):
                    frame.load()  # WebP sets a frame's duration once it is loaded
                    durations.append(int(frame.info.get("duration", 0)))
                    frames.append(pillow_to_bgr(frame, background)[0])
    except ImageTooLarge:
        raise
    except Image.DecompressionBombError:
        raise ImageTooLarge("a frame of the animation declares more pixels than Pillow's limit") from None
    except Exception:
        raise UnsupportedImage("the animation is corrupt or truncated") from None
    return Animation(on_one_canvas(frames, background), durations, plays)


def on_one_canvas(frames: list[np.ndarray], background: tuple[int, int, int]) -> list[np.ndarray]:
    """Frames of one size: a GIF's frames only ever grow the canvas (right and down), so earlier,
    smaller ones are placed at its top left on the background."""
    height = max(frame.shape[0] for frame in frames)
    width = max(frame.shape[1] for frame in frames)
    return [
        cv2.copyMakeBorder(f, 0, height - f.shape[0], 0, width - f.shape[1], cv2.BORDER_CONSTANT, value=background)
        if f.shape[:2] != (height, width)
        else f
        for f in frames
    ]


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
