"""Uploaded bytes to upright BGR pixels, refusing oversized images before they are decoded.

JPEGs are decoded only at the resolution the work needs: libjpeg scales by 1/2, 1/4 or 1/8
inside the DCT (a proper low-pass, and far fewer pixels to produce), so a 12-megapixel phone
photo for a 1024-pixel detection is decoded at 2016x1512, never at full size. Other formats
are decoded in full (gateway/imaging/formats.py: AVIF and HEIF by Pillow's plugins). EXIF
orientation is applied only when upright pixels are asked for: the model's input is resized from
the stored pixels and only the small result turned upright.

The pixels keep the source's colour (its ICC profile rides along, for what goes out: the model
sees them as they are), except CMYK JPEGs, converted to sRGB as they are decoded
(gateway/imaging/colour.py).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import cv2
import numpy as np
from PIL import Image

from gateway.errors import ImageTooLarge, UnsupportedImage
from gateway.imaging.colour import cmyk_to_srgb
from gateway.imaging.formats import ANIMATED_FORMATS, SUPPORTED_FORMATS, colour_profile
from gateway.timing import StageTimer

EXIF_ORIENTATION_TAG = 0x0112
MAX_SIDE = 12_000  # Cloudflare's limit on each side of a source (FACECROP_MAX_SIDE)


@dataclass(frozen=True)
class ImageHeader:
    format: str
    width: int
    height: int
    orientation: int
    icc: bytes | None = None  # the ICC profile the pixels are in (None: sRGB)
    exif: bytes = b""  # the source's EXIF block, for outputs that keep some of it (gateway/imaging/metadata.py)
    cmyk: bool = False  # a CMYK JPEG: converted to sRGB as it is decoded
    animated: bool = False  # a GIF or WebP of more than one frame


JPEG_REDUCTIONS = {
    1: cv2.IMREAD_COLOR,
    2: cv2.IMREAD_REDUCED_COLOR_2,
    4: cv2.IMREAD_REDUCED_COLOR_4,
    8: cv2.IMREAD_REDUCED_COLOR_8,
}


@dataclass(frozen=True)
class DecodedImage:
    """Decoded pixels, possibly reduced, and the upright size of the original they stand for."""

    stored: np.ndarray  # h x w x 3, uint8, BGR, as stored: EXIF orientation not yet applied
    format: str  # the container format, as Pillow names it: JPEG, PNG, WEBP, ...
    size: tuple[int, int]  # (W, H) of the upright original: the coordinates the API answers in
    orientation: int = 1  # EXIF orientation (1-8) of `stored`
    icc: bytes | None = None  # the ICC profile `stored` is in (None: sRGB), converted on the way out
    colour: str | None = None  # what was done to the colour already (CMYK: converted as decoded)

    @cached_property
    def pixels(self) -> np.ndarray:
        """The pixels upright, turned on first use."""
        return apply_orientation(self.stored, self.orientation)

    @property
    def shape(self) -> tuple[int, int]:
        """(H, W) of the upright pixels."""
        height, width = self.stored.shape[:2]
        return (width, height) if self.orientation >= 5 else (height, width)

    @property
    def scale(self) -> np.ndarray:
        """Decoded pixels per original pixel, (x, y): 1 for a full decode, about 1/2 to 1/8 reduced."""
        height, width = self.shape
        return np.array([width / self.size[0], height / self.size[1]])

    @property
    def is_full_size(self) -> bool:
        return self.shape[::-1] == self.size


def read_header(data: bytes, max_pixels: int, max_side: int = MAX_SIDE) -> ImageHeader:
    """Format, size, EXIF orientation and colour from the header alone; nothing is decoded yet."""
    if not data:
        raise UnsupportedImage("the upload is empty")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                header = ImageHeader(
                    image.format or "",
                    image.width,
                    image.height,
                    _orientation(image),
                    icc=colour_profile(image, data),
                    exif=bytes(image.info.get("exif") or b""),
                    cmyk=image.mode == "CMYK",
                    animated=image.format in ANIMATED_FORMATS and bool(getattr(image, "is_animated", False)),
                )
    except Image.DecompressionBombError:
        raise ImageTooLarge(f"the image declares more than {max_pixels} pixels") from None
    except Exception:  # Pillow raises many types for bytes that are not an image
        raise UnsupportedImage(f"the upload is not a readable image ({', '.join(sorted(SUPPORTED_FORMATS))})") from None
    if header.format not in SUPPORTED_FORMATS:
        raise UnsupportedImage(f"image format {header.format or 'unknown'} is not supported")
    if header.width < 1 or header.height < 1:
        raise UnsupportedImage("the image has no pixels")
    if header.width * header.height > max_pixels or max(header.width, header.height) > max_side:
        raise ImageTooLarge(
            f"{header.width}x{header.height} is more than the limits of {max_pixels} pixels and {max_side} a side"
        )
    return header


def _orientation(image: Image.Image) -> int:
    try:
        value = image.getexif().get(EXIF_ORIENTATION_TAG, 1)
    except Exception:  # a corrupt EXIF block does not make the pixels unusable
        return 1
    return value if value in range(1, 9) else 1


ORIENTATIONS: dict[int, Callable[[np.ndarray, np.ndarray | None], np.ndarray]] = {
    1: lambda p, out: p if out is None else _copied(p, out),
    2: lambda p, out: cv2.flip(p, 1, dst=out),
    3: lambda p, out: cv2.rotate(p, cv2.ROTATE_180, dst=out),
    4: lambda p, out: cv2.flip(p, 0, dst=out),
    5: lambda p, out: cv2.transpose(p, dst=out),
    6: lambda p, out: cv2.rotate(p, cv2.ROTATE_90_CLOCKWISE, dst=out),
    7: lambda p, out: cv2.transpose(cv2.flip(p, -1), dst=out),
    8: lambda p, out: cv2.rotate(p, cv2.ROTATE_90_COUNTERCLOCKWISE, dst=out),
}


def _copied(pixels: np.ndarray, out: np.ndarray) -> np.ndarray:
    out[...] = pixels
    return out


def apply_orientation(pixels: np.ndarray, orientation: int, out: np.ndarray | None = None) -> np.ndarray:
    """Turn pixels stored with EXIF `orientation` (1-8) upright, as a viewer would show them;
    into `out` (of the upright shape) where given."""
    return ORIENTATIONS[orientation](pixels, out)


def upright_size(header: ImageHeader) -> tuple[int, int]:
    """(W, H) of the image as shown: orientations 5-8 swap the stored sides."""
    return (header.height, header.width) if header.orientation >= 5 else (header.width, header.height)


def jpeg_reduction(header: ImageHeader, min_scale: float) -> int:
    """The largest DCT reduction (1, 2, 4 or 8) that keeps at least `min_scale` of each side;
    1 for formats other than JPEG."""
    if header.format != "JPEG":
        return 1
    return max(r for r in JPEG_REDUCTIONS if r == 1 or 1 / r >= min_scale)


def decode_pixels(data: bytes, reduction: int = 1) -> np.ndarray:
    """Decode to 8-bit BGR as stored (no orientation), a JPEG at 1/`reduction` of each side:
    OpenCV first, Pillow for the rest (GIF, AVIF, HEIF)."""
    flags = JPEG_REDUCTIONS[reduction] | cv2.IMREAD_IGNORE_ORIENTATION
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if pixels is not None:
        return pixels
    try:
        with Image.open(io.BytesIO(data)) as image:
            rgb = np.asarray(image.convert("RGB"))
    except Exception:
        raise UnsupportedImage("the image data is corrupt or truncated") from None
    return cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR)


def decode_cmyk(data: bytes, reduction: int = 1) -> tuple[np.ndarray, str]:
    """A CMYK JPEG decoded at 1/`reduction` of each side (as libjpeg scales it) and converted to
    BGR sRGB, with what was done to its colour."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.draft("CMYK", (image.width // reduction, image.height // reduction))
            image.load()
            return cmyk_to_srgb(image)
    except Exception:
        raise UnsupportedImage("the image data is corrupt or truncated") from None


def decode_image(
    data: bytes, header: ImageHeader, min_scale: float = 1.0, timer: StageTimer | None = None
) -> DecodedImage:
    """Decode the image `read_header` checked, a JPEG reduced as far as `min_scale` (the fraction
    of each side the work needs) allows; the pixels are turned upright on first use."""
    reduction = jpeg_reduction(header, min_scale)
    with (timer or StageTimer()).stage("decode"):
        stored, colour = decode_cmyk(data, reduction) if header.cmyk else (decode_pixels(data, reduction), None)
    return DecodedImage(
        stored=stored,
        format=header.format,
        size=upright_size(header),
        orientation=header.orientation,
        icc=None if header.cmyk else header.icc,
        colour=colour,
    )
