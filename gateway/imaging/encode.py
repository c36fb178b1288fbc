"""BGR pixels to JPEG, PNG, WebP, AVIF or GIF bytes, BGRA ones (transparency kept) to PNG, WebP,
AVIF or GIF; no metadata but a JPEG's EXIF block where one is given (gateway/imaging/metadata.py: its
orientation is always 1). Animations are gateway/imaging/animation.py's.

AVIF comes from Pillow's own libavif (its wheels, pinned in gateway/requirements.lock, carry it);
where a Pillow lacks it, AVIF_AVAILABLE is false and format negotiation falls back to WebP.
"""

from __future__ import annotations

import io

import cv2
import numpy as np
from PIL import Image, features

from gateway.imaging.animation import encode_animation
from gateway.imaging.formats import AVIF_SPEED

CONTENT_TYPES = {
    "jpeg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
    "avif": "image/avif",
    "gif": "image/gif",
    "png8": "image/png",  # a palette PNG
}
ENCODABLE_INPUTS = {"JPEG": "jpeg", "PNG": "png", "WEBP": "webp", "AVIF": "avif"}
# format=auto for a client that names neither AVIF nor WebP: the source's own format where every client
# reads it (Cloudflare's "the original format"; a PNG keeps its transparency), else JPEG
READABLE_INPUTS = {"JPEG": "jpeg", "PNG": "png"}
# the outputs that keep transparency (a GIF's: one transparent colour for the pixels under half opaque)
ALPHA_FORMATS = frozenset({"png", "png8", "webp", "avif", "gif"})
AVIF_AVAILABLE = features.check("avif")
# Cloudflare's bound on AVIF's cost: at most 1,600 pixels on the longer side where AVIF was asked
# for, 1,200 where format=auto chose it; larger outputs are WebP (4096x4096 AVIF took 4.8 s of CPU).
AVIF_MAX_SIDE = 1600
AVIF_AUTO_MAX_SIDE = 1200
# OpenCV's WebP quality that means lossless, for quality=100 (Cloudflare's "use quality=100 to return the WebP
# lossless format")
WEBP_LOSSLESS = 101


def output_format(
    requested: str | None,
    input_format: str,
    size: tuple[int, int],
    avif_max_side: int = AVIF_MAX_SIDE,
    negotiated: bool = False,
) -> str:
    """The requested format, else the input's when it is JPEG, PNG, WebP or AVIF (`negotiated`, where
    format=auto found neither AVIF nor WebP taken: JPEG or PNG, READABLE_INPUTS), else jpeg; AVIF
    (however it was chosen) as WebP where no encoder is here or the output's (W, H) `size` has a
    side over `avif_max_side`."""
    chosen = requested or (READABLE_INPUTS if negotiated else ENCODABLE_INPUTS).get(input_format, "jpeg")
    if chosen == "avif" and (not AVIF_AVAILABLE or max(size) > avif_max_side):
        return "webp"
    return chosen


def keeps_alpha(requested: str | None, input_format: str, negotiated: bool = False) -> bool:
    """Whether the output `output_format` settles on has an alpha channel (AVIF's bound makes it
    WebP, which has one too)."""
    return output_format(requested, input_format, (1, 1), negotiated=negotiated) in ALPHA_FORMATS


def encode_image(pixels: np.ndarray, fmt: str, quality: int, progressive: bool = False, exif: bytes = b"") -> bytes:
    """Encode upright BGR pixels (BGRA for the ALPHA_FORMATS); `quality` (1-100) applies to jpeg, webp
    (100: lossless, as Cloudflare's) and avif; `progressive` makes an interlaced JPEG, `exif` (an EXIF
    block) goes into a JPEG's APP1."""
    if fmt == "avif":
        buffer = io.BytesIO()
        as_pillow(pixels).save(buffer, "AVIF", quality=quality, speed=AVIF_SPEED)
        return buffer.getvalue()
    if fmt == "gif":
        return encode_animation([pixels], [0], 1, "gif", quality)
    if fmt == "png8":  # a palette of 256 colours (Cloudflare's PNG8, for png with a quality)
        buffer = io.BytesIO()
        as_pillow(pixels).quantize(256, method=Image.Quantize.FASTOCTREE).save(buffer, "PNG", compress_level=3)
        return buffer.getvalue()
    flags = {
        "jpeg": [cv2.IMWRITE_JPEG_QUALITY, quality, cv2.IMWRITE_JPEG_PROGRESSIVE, int(progressive)],
        "webp": [cv2.IMWRITE_WEBP_QUALITY, WEBP_LOSSLESS if quality >= 100 else quality],
        "png": [cv2.IMWRITE_PNG_COMPRESSION, 3],
    }[fmt]
    ok, encoded = cv2.imencode(f".{fmt}", pixels, flags)
    if not ok:
        raise ValueError(f"OpenCV could not encode {pixels.shape} pixels as {fmt}")
    if fmt == "jpeg" and exif:
        return with_app1(encoded.tobytes(), exif)
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
