"""Animations as the gateway writes them (gateway/imaging/animation.py through encode_animation),
read back frame by frame with Pillow (an independent decoder): every frame, its pixels and
transparency, its duration, the play count, and what the quality asks for."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image, ImageSequence

from gateway.imaging.encode import encode_animation

SIZE = (48, 32)  # W, H
BLACK = (0, 0, 0)
BAR = np.s_[26:, :]  # the bottom rows, across the whole width


def colourful_frames(count: int, alpha: bool = False) -> list[np.ndarray]:
    """`count` BGR (BGRA) frames unlike one another: a different noisy gradient each (a GIF
    frame's whole palette of 255 colours in use), a black bar
    across the bottom (a letterbox: black is the first colour a GIF's transparent entry could
    take, and the GIF writer crops a frame's edges of that colour away), and (BGRA) a transparent
    block in a different place in each frame."""
    width, height = SIZE
    frames = []
    for index in range(count):
        y, x = np.mgrid[0:height, 0:width]
        pixels = np.stack([(x * 5 + 40 * index) % 256, (y * 7 + 90 * index) % 256, (x + y) * 3 % 256], -1)
        noise = np.random.default_rng(index).integers(0, 30, pixels.shape)  # the same frames whatever ran before
        pixels = np.clip(pixels + noise, 30, 255).astype(np.uint8)  # black only in the bar
        pixels[BAR] = BLACK
        if alpha:
            opacity = np.full((height, width, 1), 255, np.uint8)
            opacity[2:10, 4 + 12 * index : 14 + 12 * index] = 0
            pixels = np.concatenate([pixels, opacity], -1)
        frames.append(pixels)
    return frames


def read_frames(data: bytes) -> tuple[Image.Image, list[np.ndarray], list[int]]:
    """The animation, each frame as RGBA pixels, and each frame's duration."""
    image = Image.open(io.BytesIO(data))
    frames, durations = [], []
    for frame in ImageSequence.Iterator(image):
        frames.append(np.asarray(frame.convert("RGBA")).copy())
        durations.append(frame.info.get("duration"))
    return image, frames, durations


def as_rgba(bgr: np.ndarray) -> np.ndarray:
    rgb = bgr[..., [2, 1, 0]]
    alpha = bgr[..., 3:] if bgr.shape[2] == 4 else np.full((*bgr.shape[:2], 1), 255, np.uint8)
    return np.concatenate([rgb, alpha], -1).astype(int)


@pytest.mark.parametrize(("fmt", "mean_error"), [("webp", 0), ("png", 0), ("avif", 8), ("gif", 4)])
def test_every_frame_is_written_with_its_pixels_and_duration(fmt, mean_error):
    """WebP at quality 100 and APNG exactly; AVIF and GIF's 256 colours within a few levels on average."""
    frames = colourful_frames(3)
    image, read, durations = read_frames(encode_animation(frames, [100, 200, 300], 0, fmt, 100))
    assert getattr(image, "n_frames", 1) == 3 and image.size == SIZE
    assert fmt not in ("png", "avif") or image.mode == "RGB"  # no alpha written for opaque frames
    for written, source in zip(read, frames, strict=True):
        assert np.abs(written.astype(int) - as_rgba(source)).mean() <= mean_error
    assert durations == [100, 200, 300]


@pytest.mark.parametrize("fmt", ["webp", "gif"])
def test_transparent_pixels_stay_transparent_and_opaque_black_stays_black_in_every_frame(fmt):
    """A GIF's transparent colour is one no frame uses: black pixels, the first colour it would
    otherwise pick, must not turn transparent."""
    frames = colourful_frames(3, alpha=True)
    _, read, _ = read_frames(encode_animation(frames, [100, 100, 100], 0, fmt, 100))
    for written, source in zip(read, frames, strict=True):
        clear = source[..., 3] == 0
        assert (written[..., 3][clear] == 0).all()
        assert (written[..., 3][~clear] == 255).all()
        assert (written[BAR] == (*BLACK, 255)).all()


def test_an_animated_webp_says_it_has_alpha_only_where_a_frame_is_transparent():
    """The VP8X chunk's alpha flag (byte 20, 0x10), lossy: set for frames with transparent pixels,
    unset for opaque ones (readers that trust it would otherwise keep an alpha channel for nothing)."""
    opaque = encode_animation(colourful_frames(2), [100, 100], 0, "webp", 80)
    clear = encode_animation(colourful_frames(2, alpha=True), [100, 100], 0, "webp", 80)
    assert opaque[12:16] == clear[12:16] == b"VP8X"
    assert (opaque[20] & 0x10, clear[20] & 0x10) == (0, 0x10)


@pytest.mark.parametrize("fmt", ["webp", "png", "avif", "gif"])
def test_an_animation_of_one_frame_is_written(fmt):
    frame = colourful_frames(1)
    _, read, _ = read_frames(encode_animation(frame, [100], 0, fmt, 100))
    assert len(read) == 1


@pytest.mark.parametrize("fmt", ["webp", "avif"])
def test_a_lower_quality_is_a_smaller_file(fmt):
    frames = colourful_frames(3)
    sizes = [len(encode_animation(frames, [100] * 3, 0, fmt, quality)) for quality in (30, 90)]
    assert sizes[0] < sizes[1]


def test_a_gif_delay_just_over_10_ms_is_played_at_20():
    """Browsers play a GIF delay of 10 ms or less at 100 ms; 11 ms goes in as 20, the shortest they keep."""
    _, _, durations = read_frames(encode_animation(colourful_frames(2), [11, 10], 0, "gif", 90))
    assert durations == [20, 10]
