"""Pixels out: one table of the output formats (FORMATS), which the parameter tables of both doors,
format=auto's negotiation, the animation rules and the OpenAPI document read, and each format's
encoders. A new output format is one row here and its encoder.

Stills are BGR pixels (BGRA, transparency kept, for the formats with alpha); no metadata goes out
but a JPEG's EXIF block where one is given (gateway/imaging/metadata.py: its orientation is always
1). Animations are written by gateway/imaging/animation.py's writers.

AVIF comes from Pillow's own libavif (its wheels, pinned in gateway/requirements.lock, carry it);
where a Pillow lacks it, AVIF_AVAILABLE is false and format negotiation falls back to WebP.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np
from PIL import Image, features

from gateway.imaging.animation import animated_gif, animated_png, animated_webp, avif_sequence
from gateway.imaging.formats import AVIF_SPEED

AVIF_AVAILABLE = features.check("avif")
# Cloudflare's bound on AVIF's cost: at most 1,600 pixels on the longer side where AVIF was asked
# for, 1,200 where format=auto chose it; larger outputs are WebP (4096x4096 AVIF took 4.8 s of CPU).
AVIF_MAX_SIDE = 1600
AVIF_AUTO_MAX_SIDE = 1200
# OpenCV's WebP quality that means lossless, for quality=100 (Cloudflare's "use quality=100 to return the WebP
# lossless format")
WEBP_LOSSLESS = 101

Still = Callable[[np.ndarray, int, bool, bytes], bytes]  # pixels, quality, progressive, EXIF
Animated = Callable[[list[np.ndarray], list[int], int, int], bytes]  # frames, durations (ms), plays, quality


@dataclass(frozen=True)
class OutputFormat:
    """An output format: what it is asked for as, sent as and able to carry, and its encoders."""

    name: str  # its `format` value (both doors; png8 is the URL form's png with a quality)
    content_type: str
    still: Still
    animated: Animated | None = None  # an animation kept as one in this format; None: its first frame
    alpha: bool = False  # keeps transparency (a GIF's: one transparent colour, pixels under half opaque)
    source: str | None = None  # the source format (Pillow's name) answered in this one where none is asked
    everyone_reads: bool = False  # every client reads it: format=auto's answer for a source in it
    auto_rank: int | None = None  # format=auto's choice where Accept names `content_type`, lowest first
    url_names: tuple[str, ...] = ()  # the URL form's other spellings of it (Cloudflare's baseline-jpeg)
    asked: bool = True  # a `format` value the doors take (png8 is chosen, not asked)
    any_animation: bool = False  # an animation of any source stays one in it (else only its own sequences)


def jpeg(pixels: np.ndarray, quality: int, progressive: bool, exif: bytes) -> bytes:
    """A JPEG (interlaced where `progressive`), `exif` (an EXIF block) in its APP1."""
    flags = [cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_PROGRESSIVE, int(progressive)]
    encoded = opencv(".jpeg", pixels, flags)
    return with_app1(encoded, exif) if exif else encoded


def png(pixels: np.ndarray, quality: int, progressive: bool, exif: bytes) -> bytes:
    return opencv(".png", pixels, [cv2.IMWRITE_PNG_COMPRESSION, 3])


def png8(pixels: np.ndarray, quality: int, progressive: bool, exif: bytes) -> bytes:
    """A palette of 256 colours (Cloudflare's PNG8, for png with a quality)."""
    buffer = io.BytesIO()
    as_pillow(pixels).quantize(256, method=Image.Quantize.FASTOCTREE).save(buffer, "PNG", compress_level=3)
    return buffer.getvalue()


def webp(pixels: np.ndarray, quality: int, progressive: bool, exif: bytes) -> bytes:
    """A WebP, lossless at quality 100 (as Cloudflare's)."""
    return opencv(".webp", pixels, [cv2.IMWRITE_WEBP_QUALITY, WEBP_LOSSLESS if quality >= 100 else quality])


def avif(pixels: np.ndarray, quality: int, progressive: bool, exif: bytes) -> bytes:
    buffer = io.BytesIO()
    as_pillow(pixels).save(buffer, "AVIF", quality=quality, speed=AVIF_SPEED)
    return buffer.getvalue()


def gif(pixels: np.ndarray, quality: int, progressive: bool, exif: bytes) -> bytes:
    """A still GIF: an animation of one frame."""
    return animated_gif([pixels], [0], 1, quality)


# In the order the upload API lists them; format=auto tries them by auto_rank.
FORMATS: list[OutputFormat] = [
    OutputFormat("jpeg", "image/jpeg", jpeg, source="JPEG", everyone_reads=True, url_names=("jpeg", "baseline-jpeg")),
    OutputFormat("png", "image/png", png, animated_png, alpha=True, source="PNG", everyone_reads=True),
    OutputFormat("webp", "image/webp", webp, animated_webp, alpha=True, source="WEBP", auto_rank=2, any_animation=True),
    OutputFormat("avif", "image/avif", avif, avif_sequence, alpha=True, source="AVIF", auto_rank=1),
    OutputFormat("gif", "image/gif", gif, animated_gif, alpha=True, everyone_reads=True, any_animation=True),
    OutputFormat("png8", "image/png", png8, alpha=True, asked=False),
]


def format_named(name: str) -> OutputFormat:
    return next(fmt for fmt in FORMATS if fmt.name == name)


def asked_formats() -> tuple[str, ...]:
    """The `format` values of the upload API, in FORMATS' order (besides json)."""
    return tuple(fmt.name for fmt in FORMATS if fmt.asked)


def url_formats() -> tuple[str, ...]:
    """The URL form's `format` values (besides auto and json): format=auto's choices first, by rank,
    each with its other spellings."""
    ranked = sorted((fmt for fmt in FORMATS if fmt.asked), key=lambda fmt: fmt.auto_rank or len(FORMATS))
    return tuple(name for fmt in ranked for name in (fmt.url_names or (fmt.name,)))


def content_types() -> tuple[str, ...]:
    """Every picture's content type, in FORMATS' order."""
    return tuple(dict.fromkeys(fmt.content_type for fmt in FORMATS))


def negotiable() -> list[OutputFormat]:
    """format=auto's choices where the client names them (Accept), best first; AVIF where its encoder is here."""
    offered = [fmt for fmt in FORMATS if fmt.auto_rank is not None and (fmt.name != "avif" or AVIF_AVAILABLE)]
    return sorted(offered, key=lambda fmt: fmt.auto_rank or 0)


def keeps_animation(name: str, source: str) -> bool:
    """Whether an animation of format `source` (Pillow's name, lowercase) stays one asked for as
    `name`: in a format that takes any animation (GIF, WebP), or in its own (an APNG's PNG, an AVIF
    sequence's AVIF); else it goes out as its first frame (a GIF asked for as PNG, as Cloudflare)."""
    fmt = format_named(name)
    return fmt.animated is not None and (fmt.any_animation or name == source)


def everyone_plays(source: str) -> bool:
    """Whether every client plays an animation kept in its own format `source` (GIF, APNG)."""
    return any(fmt.name == source and fmt.everyone_reads and fmt.animated is not None for fmt in FORMATS)


def output_format(
    requested: str | None,
    input_format: str,
    size: tuple[int, int],
    avif_max_side: int = AVIF_MAX_SIDE,
    negotiated: bool = False,
) -> str:
    """The requested format, else the source's where a format is its `source` (`negotiated`, where
    format=auto found none the client names: only where every client reads it), else jpeg; AVIF
    (however it was chosen) as WebP where no encoder is here or the output's (W, H) `size` has a
    side over `avif_max_side`."""
    own = next((fmt for fmt in FORMATS if fmt.source == input_format), None)
    kept = own is not None and (own.everyone_reads or not negotiated)
    chosen = requested or (own.name if own is not None and kept else "jpeg")
    if chosen == "avif" and (not AVIF_AVAILABLE or max(size) > avif_max_side):
        return "webp"
    return chosen


def keeps_alpha(requested: str | None, input_format: str, negotiated: bool = False) -> bool:
    """Whether the output `output_format` settles on has an alpha channel (AVIF's bound makes it
    WebP, which has one too; JSON has no pixels)."""
    chosen = output_format(requested, input_format, (1, 1), negotiated=negotiated)
    return any(fmt.name == chosen and fmt.alpha for fmt in FORMATS)


def encode_image(pixels: np.ndarray, fmt: str, quality: int, progressive: bool = False, exif: bytes = b"") -> bytes:
    """Encode upright BGR pixels (BGRA for the formats with alpha) in format `fmt`; `quality`
    (1-100) applies to jpeg, webp (100: lossless) and avif; `progressive` makes an interlaced JPEG,
    `exif` (an EXIF block) goes into a JPEG's APP1."""
    return format_named(fmt).still(pixels, quality, progressive, exif)


def encode_animation(frames: list[np.ndarray], durations: list[int], plays: int, fmt: str, quality: int) -> bytes:
    """`frames` (BGR, or straight BGRA: transparency kept) as an animation in format `fmt` that plays
    `plays` times (0: forever)."""
    animated = format_named(fmt).animated
    if animated is None:
        raise ValueError(f"{fmt} holds no animation")
    return animated(frames, durations, plays, quality)


def opencv(suffix: str, pixels: np.ndarray, flags: list[int]) -> bytes:
    ok, encoded = cv2.imencode(suffix, pixels, flags)
    if not ok:
        raise ValueError(f"OpenCV could not encode {pixels.shape} pixels as {suffix}")
    return encoded.tobytes()


def as_pillow(pixels: np.ndarray) -> Image.Image:
    """BGR or BGRA pixels as a Pillow RGB or RGBA picture."""
    code = cv2.COLOR_BGRA2RGBA if pixels.shape[2] == 4 else cv2.COLOR_BGR2RGB
    return Image.fromarray(cv2.cvtColor(pixels, code))


def with_app1(jpeg: bytes, exif: bytes) -> bytes:
    """`jpeg` with an APP1 segment holding `exif`, after its JFIF APP0 (or its start of image); as
    it is where `exif` is larger than a segment can hold."""
    if len(exif) + 2 > 0xFFFF:
        return jpeg
    at = 4 + int.from_bytes(jpeg[4:6], "big") if jpeg[2:4] == b"\xff\xe0" else 2
    return jpeg[:at] + b"\xff\xe1" + (len(exif) + 2).to_bytes(2, "big") + exif + jpeg[at:]
