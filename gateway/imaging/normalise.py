"""Any decoded picture as upright-ready 8-bit BGR: the one normalisation every still source goes
through, whatever decoded it, so that every endpoint and output format sees the same pixels.

- Samples deeper than 8 bits keep their top byte: 16-bit colour (PNG, APNG, TIFF) as libpng and
  Pillow read it, 12/16/32-bit grey scaled (x / 257, rounded) as libvips does.
- Transparency (an alpha channel, or a palette's or a colour's transparency) is composited onto
  the background: white, or the URL form's `background` (Cloudflare: "added underneath the image");
  or, for outputs that keep it (no background given: PNG, WebP, AVIF), kept as a fourth channel,
  premultiplied so that resizing does not bleed the colour of transparent pixels (as libvips does),
  until `unpremultiplied` gives the straight colour back after the resize.
- CMYK follows its container's rule (gateway/imaging/colour.py), CIELab goes through LittleCMS.
- Grey and palettes are expanded to three channels.
"""

from __future__ import annotations

import cv2
import numpy as np
from PIL import Image, ImageCms

from gateway.imaging.colour import BAND_ROWS, CONVERTED, INTENT, SRGB, banded_bgr, cmyk_to_srgb

WHITE = (255, 255, 255)
BGR = tuple[int, int, int]
ALPHA_MODES = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})
DEEP_MODES = frozenset({"I;16", "I;16L", "I;16B", "I;16N", "I", "F"})
LAB_TO_SRGB = ImageCms.buildTransform(ImageCms.createProfile("LAB"), SRGB, "LAB", "RGB", INTENT)


def has_alpha(image: Image.Image) -> bool:
    """Whether some of the picture may be transparent: an alpha channel, or a transparent colour."""
    return image.mode in ALPHA_MODES or "transparency" in image.info


def pillow_to_bgr(image: Image.Image, background: BGR | None = WHITE) -> tuple[np.ndarray, str | None]:
    """A loaded Pillow picture as 8-bit BGR, flattened onto `background` (BGR; None: a transparent
    picture as premultiplied BGRA), BAND_ROWS rows at a time, and what was done to its colour
    already (CMYK and CIELab are converted to sRGB here; None: nothing yet)."""
    if image.mode == "CMYK":
        return cmyk_to_srgb(image)
    if image.mode == "LAB":
        converted = ImageCms.applyTransform(image, LAB_TO_SRGB)
        assert converted is not None
        return cv2.cvtColor(np.asarray(converted), cv2.COLOR_RGB2BGR), CONVERTED
    if image.mode in DEEP_MODES:
        image = deep_to_8bit(image)
    transparent = has_alpha(image)
    keep_alpha = transparent and background is None

    def rgb_rows(top: int, bottom: int) -> Image.Image:
        rows = image.crop((0, top, image.width, bottom))
        if keep_alpha:
            return rows.convert("RGBA").convert("RGBa")
        if transparent and background is not None:
            fill = Image.new("RGBA", rows.size, (*background[::-1], 255))
            rows = Image.alpha_composite(fill, rows.convert("RGBA"))
        return rows if rows.mode == "RGB" else rows.convert("RGB")

    return banded_bgr(image.height, image.width, rgb_rows, alpha=keep_alpha), None


def unpremultiplied(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Premultiplied BGRA as straight BGR and its alpha (BAND_ROWS rows at a time); BGR as it is,
    with no alpha."""
    if pixels.ndim < 3 or pixels.shape[2] != 4:
        return pixels, None
    alpha = np.ascontiguousarray(pixels[..., 3])
    colour = np.empty((*alpha.shape, 3), np.uint8)
    for top in range(0, len(alpha), BAND_ROWS):
        rows = slice(top, top + BAND_ROWS)
        straight = pixels[rows, :, :3] * (255 / np.maximum(alpha[rows], 1).astype(np.float32))[..., None]
        colour[rows] = np.clip(np.rint(straight, out=straight), 0, 255, out=straight)
    return colour, alpha


def flattened(pixels: np.ndarray, background: BGR) -> np.ndarray:
    """Premultiplied BGRA flattened onto `background` (BGR): what shows through each pixel added
    to its colour; BGR as it is."""
    if pixels.shape[2] != 4:
        return pixels
    clear = 255 - pixels[..., 3:].astype(np.uint16)
    under = (clear * np.array(background, np.uint16) + 127) // 255
    return (pixels[..., :3] + under).astype(np.uint8)


def with_alpha(pixels: np.ndarray, alpha: np.ndarray | None) -> np.ndarray:
    """Straight BGR and its alpha as BGRA (BGR as it is where there is no alpha)."""
    return pixels if alpha is None else np.dstack((pixels, alpha))


def deep_to_8bit(image: Image.Image) -> Image.Image:
    """A deep grey picture as 8-bit grey ("L"), its transparent value ("LA") kept as transparency."""
    samples = np.asarray(image)
    grey = Image.fromarray(to_8bit(samples))
    if "transparency" not in image.info:
        return grey
    alpha = np.where(samples == image.info["transparency"], np.uint8(0), np.uint8(255))
    return Image.merge("LA", (grey, Image.fromarray(alpha)))


def to_8bit(samples: np.ndarray) -> np.ndarray:
    """Grey samples of any depth as 8 bits: 16-bit ones scaled (x / 257, rounded), 8-bit ones kept;
    BAND_ROWS rows at a time (whole-picture float copies: +2.6 GiB for a 98 MP 16-bit grey PNG)."""
    scaled = samples.dtype.itemsize > 1 and samples.max(initial=0) > 255
    grey = np.empty(samples.shape, np.uint8)
    for top in range(0, len(samples), BAND_ROWS):
        values = samples[top : top + BAND_ROWS].astype(np.float64)
        if scaled:
            values /= 257
        grey[top : top + BAND_ROWS] = np.clip(np.rint(values, out=values), 0, 255, out=values)
    return grey


def as_bgr(pixels: np.ndarray) -> np.ndarray:
    """OpenCV's 8-bit decode as three-channel BGR."""
    if pixels.ndim == 2:
        return cv2.cvtColor(pixels, cv2.COLOR_GRAY2BGR)
    return pixels
