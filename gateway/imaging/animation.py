"""Animations kept as animations (GIF, WebP, APNG and AVIF sequences in; animated WebP or GIF out,
or the source's own APNG or AVIF), as Cloudflare's `anim=true`: every frame a viewer plays, as it
composites it, with its duration, and the loop count.

Transparency is kept as a still's is (premultiplied BGRA frames, where the output has alpha: an
animated WebP's, a GIF's one transparent colour for pixels under half opaque), else flattened
onto the background colour (gateway/imaging/normalise.py). Frames that grow the picture (a GIF
frame beyond the logical screen) are placed on the final canvas, as a browser shows them. The
cost is bounded before any frame is decoded (`check_cost`): at most FACECROP_MAX_ANIMATION_FRAMES
frames, 50 MP of source frames (Cloudflare's limit) and 50 MP of output frames (frames x the
output's size: the work and memory of cropping, resizing and encoding grow with it). GIF outputs
are quantised per frame with Pillow's fast octree (its default median cut is ten times slower per
frame).
"""

from __future__ import annotations

import io
import itertools
import warnings
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image, ImageSequence

from gateway.errors import ImageTooLarge, UnsupportedImage
from gateway.imaging.formats import AVIF_SPEED, first_played, webp_said_transparent
from gateway.imaging.normalise import BGR, WHITE, pillow_to_bgr
from gateway.imaging.orientation import apply_orientation

MAX_ANIMATION_PIXELS = 50_000_000  # source frames x their area (Cloudflare's), and output frames x theirs


GIF_TRANSPARENT = 255  # a GIF frame's transparent palette index; the colours get the other 255
GIF_OPAQUE_FROM = 128  # alpha from which a pixel shows in a GIF (which has no partial transparency)
GIF_MIN_DELAY = 20  # ms: browsers play a GIF frame of 10 ms or less for 100 ms


@dataclass(frozen=True)
class Animation:
    """Frames (upright BGR, or premultiplied BGRA where transparency is kept; one size), each one's
    duration (ms), and how many times it plays (0: forever)."""

    frames: list[np.ndarray]
    durations: list[int]
    plays: int
    size: tuple[int, int]  # (W, H) of its frames

    @property
    def count(self) -> int:
        """How many frames it has (once handed over too)."""
        return len(self.durations)

    def hand_over(self) -> list[np.ndarray]:
        """Its frames, no longer held here: each is let go once whoever took them lets it go."""
        frames = list(self.frames)
        self.frames.clear()
        return frames


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
    data: bytes, background: BGR | None, output: tuple[int, int], max_frames: int, orientation: int = 1
) -> Animation:
    """Every frame a viewer plays of a GIF, WebP, APNG or AVIF sequence, composited and flattened
    onto `background` (BGR; None: its transparency kept, every frame premultiplied BGRA where any
    pixel of any is transparent) and turned upright from its EXIF `orientation` (an AVIF's irot and
    imir come as one), once `check_cost` passed it for answers of `output` (W, H) frames."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(webp_said_transparent(data))) as image:  # its canvas as browsers show it
                skipped = first_played(image)  # an APNG's default image is not one
                check_cost(getattr(image, "n_frames", 1) - skipped, image.size, output, max_frames)
                plays = _plays(image)
                frames, durations = [], []
                for frame in itertools.islice(ImageSequence.Iterator(image), skipped, None):
                    frame.load()  # WebP and AVIF set a frame's duration once it is loaded
                    durations.append(round(frame.info.get("duration", 0)))  # an APNG's: a fraction
                    frames.append(pillow_to_bgr(frame, background)[0])
    except ImageTooLarge:
        raise
    except Image.DecompressionBombError:
        raise ImageTooLarge("a frame of the animation declares more pixels than Pillow's limit") from None
    except Exception:
        raise UnsupportedImage("the animation is corrupt or truncated; anim=false answers its first frame") from None
    frames = on_one_canvas(frames, background)
    for index, pixels in enumerate(frames):
        frames[index] = apply_orientation(pixels, orientation)
    height, width = frames[0].shape[:2]
    return Animation(frames, durations, plays, (width, height))


def on_one_canvas(frames: list[np.ndarray], background: BGR | None) -> list[np.ndarray]:
    """Frames of one size: a GIF's frames only ever grow the canvas (right and down), so earlier,
    smaller ones are placed at its top left on the background (None: on transparency); where
    transparency is kept, every frame BGRA if any pixel of any is transparent, else every one BGR."""
    height = max(frame.shape[0] for frame in frames)
    width = max(frame.shape[1] for frame in frames)
    grown = any(f.shape[:2] != (height, width) for f in frames)
    if background is None and (grown or any(f.shape[2] == 4 for f in frames)):
        frames = [f if f.shape[2] == 4 else cv2.cvtColor(f, cv2.COLOR_BGR2BGRA) for f in frames]
    fill = (0, 0, 0, 0) if frames[0].shape[2] == 4 else (background or WHITE)
    for index, f in enumerate(frames):
        if f.shape[:2] != (height, width):
            frames[index] = cv2.copyMakeBorder(
                f, 0, height - f.shape[0], 0, width - f.shape[1], cv2.BORDER_CONSTANT, value=fill
            )
    if frames[0].shape[2] == 4 and all(f[..., 3].min() == 255 for f in frames):
        return [np.ascontiguousarray(f[..., :3]) for f in frames]
    return frames


def _plays(image: Image.Image) -> int:
    """How many times the animation plays: GIF's loop count says how many times more (none: once),
    WebP's and APNG's how many in all; 0 is forever in all three, and for an AVIF sequence (Pillow
    reads no count from it)."""
    loop = image.info.get("loop")
    if image.format == "GIF":
        return 1 if loop is None else (0 if loop == 0 else int(loop) + 1)
    return int(loop or 0)


def pictures_of(frames: list[np.ndarray]) -> list[Image.Image]:
    """BGR (or straight BGRA) frames as Pillow RGB (RGBA) pictures."""
    code = cv2.COLOR_BGRA2RGBA if frames[0].shape[2] == 4 else cv2.COLOR_BGR2RGB
    return [Image.fromarray(cv2.cvtColor(frame, code)) for frame in frames]


def animated_webp(frames: list[np.ndarray], durations: list[int], plays: int, quality: int) -> bytes:
    """`frames` as an animated WebP that plays `plays` times (0: forever), lossless at `quality` 100
    (as Cloudflare's)."""
    pictures, buffer = pictures_of(frames), io.BytesIO()
    pictures[0].save(
        buffer,
        "WEBP",
        save_all=True,
        append_images=pictures[1:],
        duration=durations,
        loop=plays,
        quality=quality,
        lossless=quality >= 100,
    )
    return webp_said_transparent(buffer.getvalue()) if frames[0].shape[2] == 4 else buffer.getvalue()


def animated_png(frames: list[np.ndarray], durations: list[int], plays: int, quality: int) -> bytes:
    """`frames` as an APNG, each frame replacing the last where they differ (APNG's blend "source")."""
    pictures, buffer = pictures_of(frames), io.BytesIO()
    pictures[0].save(
        buffer, "PNG", save_all=True, append_images=pictures[1:], duration=durations, loop=plays, compress_level=3
    )
    return buffer.getvalue()


def avif_sequence(frames: list[np.ndarray], durations: list[int], plays: int, quality: int) -> bytes:
    """`frames` as an AVIF sequence (which Pillow writes to play forever)."""
    pictures, buffer = pictures_of(frames), io.BytesIO()
    pictures[0].save(
        buffer, "AVIF", save_all=True, append_images=pictures[1:], duration=durations, quality=quality, speed=AVIF_SPEED
    )
    return buffer.getvalue()


def animated_gif(frames: list[np.ndarray], durations: list[int], plays: int, quality: int) -> bytes:
    """`frames` as a GIF that plays `plays` times (0: forever): 256 colours a frame, straight BGRA
    frames with their pixels under half opaque transparent."""
    pictures, buffer = pictures_of(frames), io.BytesIO()
    loop = {} if plays == 1 else {"loop": 0 if plays == 0 else plays - 1}  # GIF counts the plays after the first
    if frames[0].shape[2] == 4:
        paletted = transparent_gif_frames(pictures)
        # each frame replaces the last (disposal 2), which would show through its transparency; the
        # palettes as made (not optimised): the transparent entry is GIF_TRANSPARENT in every frame
        # (each frame's own info says so: transparent_gif_frames)
        clear = {"disposal": 2, "optimize": False}
    else:
        paletted, clear = [picture.quantize(256, method=Image.Quantize.FASTOCTREE) for picture in pictures], {}
    delays = gif_delays(durations)
    paletted[0].save(buffer, "GIF", save_all=True, append_images=paletted[1:], duration=delays, **loop, **clear)
    return buffer.getvalue()


def gif_delays(durations: list[int]) -> list[int]:
    """Durations (ms) as a GIF holds them, in whole hundredths of a second: one over 10 ms at least
    GIF_MIN_DELAY (Pillow's writer cut a 60 fps APNG's 16 ms to 10, which browsers play for 100: six
    times slower), one of 10 ms or less as it is (browsers play it as they played the source's)."""
    return [duration if duration <= 10 else max(GIF_MIN_DELAY, round(duration / 10) * 10) for duration in durations]


def transparent_gif_frames(pictures: list[Image.Image]) -> list[Image.Image]:
    """RGBA pictures as GIF frames: 255 colours each (Pillow's fast octree), the pixels under
    GIF_OPAQUE_FROM alpha at GIF_TRANSPARENT, whose colour is in no frame's palette (Pillow's writer
    leaves out of a frame the pixels that match the transparent entry's colour: they would show
    through)."""
    quantized = [
        picture.convert("RGB").quantize(GIF_TRANSPARENT, method=Image.Quantize.FASTOCTREE) for picture in pictures
    ]
    palettes = [(colours.getpalette() or [])[: 3 * GIF_TRANSPARENT] for colours in quantized]
    used = {tuple(palette[i : i + 3]) for palette in palettes for i in range(0, len(palette), 3)}
    clear = next(colour for colour in itertools.product(range(256), repeat=3) if colour not in used)
    frames = []
    for picture, colours, palette in zip(pictures, quantized, palettes, strict=True):
        indices = np.asarray(colours).copy()
        indices[np.asarray(picture.getchannel("A")) < GIF_OPAQUE_FROM] = GIF_TRANSPARENT
        frame = Image.fromarray(indices, "P")
        frame.putpalette(palette + [0] * (3 * GIF_TRANSPARENT - len(palette)) + list(clear))
        frame.info["transparency"] = GIF_TRANSPARENT
        frames.append(frame)
    return frames
