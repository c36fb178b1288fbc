"""Uploaded bytes to upright BGR pixels, refusing oversized images before they are decoded.

JPEGs are decoded only at the resolution the work needs: libjpeg scales by 1/2, 1/4 or 1/8
inside the DCT (a proper low-pass, and far fewer pixels to produce), so a 12-megapixel phone
photo for a 1024-pixel detection is decoded at 2016x1512, never at full size. Opaque 8-bit JPEG,
PNG and WebP go through OpenCV (the fast path); everything else through Pillow (GIF, BMP, TIFF,
AVIF and HEIF, CMYK, CIELab, deep or transparent samples), then one normalisation
(gateway/imaging/normalise.py): 8-bit BGR, transparency flattened onto the background (or kept, as
premultiplied BGRA, where the output keeps it). EXIF orientation is applied by exactly one layer:
this one, except for the formats whose decoder turns the pixels itself (UPRIGHT_AS_DECODED); and
only when upright pixels are asked for: the model's input is resized from the stored pixels and
only the small result turned upright. An MPO (a
camera's multi-picture JPEG) is read as its first picture, a JPEG.

The pixels keep the source's colour (its ICC profile rides along, for what goes out: the model
sees them as they are), except CMYK and CIELab, converted to sRGB as they are decoded
(gateway/imaging/colour.py).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from functools import cached_property

import cv2
import numpy as np
from PIL import Image

from gateway.errors import ImageTooLarge, MissingImage, UnsupportedImage
from gateway.imaging.colour import IGNORED, fits
from gateway.imaging.formats import (
    ANIMATED_FORMATS,
    PREVIEW_ONLY,
    SUPPORTED_FORMATS,
    colour_profile,
    first_played,
    png_exif_chunk,
    preview_only,
    webp_said_transparent,
)
from gateway.imaging.normalise import BGR, WHITE, as_bgr, has_alpha, pillow_to_bgr
from gateway.imaging.orientation import apply_orientation
from gateway.timing import StageTimer

EXIF_ORIENTATION_TAG = 0x0112
EMPTY_IMAGE = "the image is empty (0 bytes)"
MAX_SIDE = 12_000  # Cloudflare's limit on each side of a source (FACECROP_MAX_SIDE)
FORMAT_ALIASES = {"MPO": "JPEG"}  # read as the format of the picture it is read as
OPENCV_FORMATS = frozenset({"JPEG", "PNG", "WEBP"})  # opaque 8-bit ones: OpenCV, else Pillow (TIFF too:
# OpenCV's TIFF reader turns some orientations and not others, inverts CMYK and misreads CIELab)
OPENCV_MODES = frozenset({"RGB", "L", "P"})
UPRIGHT_AS_DECODED = frozenset({"TIFF", "HEIF"})  # Pillow's TIFF and libheif turn the pixels as they decode


@dataclass(frozen=True)
class ImageHeader:
    format: str
    width: int
    height: int
    orientation: int
    icc: bytes | None = None  # the ICC profile the pixels are in (None: sRGB)
    colour: str | None = None  # IGNORED: the source's profile does not fit its samples (icc None, taken as sRGB)
    exif: bytes = b""  # the source's EXIF block, for outputs that keep some of it (gateway/imaging/metadata.py)
    mode: str = "RGB"  # Pillow's name for the samples: RGB, L, P, RGBA, CMYK, LAB, I;16, ...
    transparent: bool = False  # an alpha channel or a transparent colour: flattened, or kept (decode_pixels)
    animated: bool = False  # a GIF, WebP, APNG or AVIF sequence of more than one frame
    frames: int = 1  # the frames the file holds (an APNG's, a GIF's, a WebP's)

    @property
    def upright_size(self) -> tuple[int, int]:
        """(W, H) of the image as shown: orientations 5-8 swap the stored sides."""
        return (self.height, self.width) if self.orientation >= 5 else (self.width, self.height)

    @property
    def opencv_decodes(self) -> bool:
        """Whether OpenCV's decoder reads it as it is: opaque 8-bit JPEG, PNG or WebP of one frame
        (OpenCV's APNG reader swaps the bytes of 16-bit samples and crashes the process on some
        malformed files: Pillow reads every APNG)."""
        return self.format in OPENCV_FORMATS and self.mode in OPENCV_MODES and not self.transparent and self.frames == 1


JPEG_REDUCTIONS = {
    1: cv2.IMREAD_COLOR,
    2: cv2.IMREAD_REDUCED_COLOR_2,
    4: cv2.IMREAD_REDUCED_COLOR_4,
    8: cv2.IMREAD_REDUCED_COLOR_8,
}


@dataclass(frozen=True)
class DecodedImage:
    """Decoded pixels, possibly reduced, and the upright size of the original they stand for."""

    stored: np.ndarray  # h x w x 3, uint8, BGR (x 4, premultiplied BGRA, where transparency is kept), as stored
    format: str  # the container format, as Pillow names it: JPEG, PNG, WEBP, ...
    size: tuple[int, int]  # (W, H) of the upright original: the coordinates the API answers in
    orientation: int = 1  # EXIF orientation (1-8) of `stored`
    icc: bytes | None = None  # the ICC profile `stored` is in (None: sRGB), converted on the way out
    colour: str | None = None  # done to the colour already: converted (CMYK, CIELab), ignored (an unfit profile)
    background: BGR | None = WHITE  # what transparency was flattened onto (None: kept)
    transparent: bool = False  # the source has transparency

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
        raise MissingImage(EMPTY_IMAGE)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Pillow warns of bombs (refused below) and of malformed MPOs
            with Image.open(io.BytesIO(webp_said_transparent(data))) as image:
                orientation = _orientation(image, data)  # first: it puts a PNG's late eXIf in `image.info`
                icc = colour_profile(image, data)
                unfit = icc is not None and not fits(icc, image.mode)
                header = ImageHeader(
                    FORMAT_ALIASES.get(image.format or "", image.format or ""),
                    image.width,
                    image.height,
                    orientation,
                    icc=None if unfit else icc,
                    colour=IGNORED if unfit else None,
                    exif=bytes(image.info.get("exif") or b""),
                    mode=image.mode,
                    transparent=has_alpha(image),
                    animated=image.format in ANIMATED_FORMATS and bool(getattr(image, "is_animated", False)),
                    frames=getattr(image, "n_frames", 1),
                )
                preview = preview_only(image)
    except Image.DecompressionBombError:
        raise ImageTooLarge(f"the image declares more than {max_pixels} pixels") from None
    except ValueError as error:
        if "decompressed data too large" in str(error).lower():  # Pillow's bound on a PNG's text chunks
            raise ImageTooLarge("a text chunk (zTXt, iTXt) of the image is over Pillow's limit") from None
        raise _unreadable() from None
    except Exception:  # Pillow raises many types for bytes that are not an image
        raise _unreadable() from None
    if header.format not in SUPPORTED_FORMATS:
        raise UnsupportedImage(f"image format {header.format or 'unknown'} is not supported")
    if preview:
        raise UnsupportedImage(PREVIEW_ONLY)
    if header.width < 1 or header.height < 1:
        raise UnsupportedImage("the image has no pixels")
    if header.width * header.height > max_pixels or max(header.width, header.height) > max_side:
        raise ImageTooLarge(
            f"{header.width}x{header.height} is more than the limits of {max_pixels} pixels and {max_side} a side"
        )
    return header


def _unreadable() -> UnsupportedImage:
    return UnsupportedImage(f"the image is not readable as {', '.join(sorted(SUPPORTED_FORMATS))}")


def _orientation(image: Image.Image, data: bytes) -> int:
    """The EXIF orientation this module applies: 1 for formats whose decoder turns the pixels
    itself and reports the upright size (Pillow's TIFF; HEIF's irot and imir, applied by libheif)."""
    if image.format in UPRIGHT_AS_DECODED:
        return 1
    try:
        value = exif_of(image, data).get(EXIF_ORIENTATION_TAG, 1)
    except Exception:  # a corrupt EXIF block does not make the pixels unusable
        return 1
    return value if value in range(1, 9) else 1


def exif_of(image: Image.Image, data: bytes) -> Image.Exif:
    """The picture's EXIF as Pillow reads it, a PNG's without decoding its pixels: Pillow's PNG
    reader decodes the whole picture to look for an eXIf chunk after them (16 ms of every 1 MP
    PNG's request, 212 ms at 12 MP, 374 MiB at 98 MP); the chunk is walked to instead."""
    if image.format != "PNG" or "exif" in image.info:
        return image.getexif()
    chunk = png_exif_chunk(data)
    if chunk is not None:
        image.info["exif"] = b"Exif\x00\x00" + chunk  # as Pillow keeps it
    return Image.Image.getexif(image)  # Pillow's own reading (raw profiles, XMP), without the PNG's decode


def jpeg_reduction(header: ImageHeader, min_scale: float) -> int:
    """The largest DCT reduction (1, 2, 4 or 8) that keeps at least `min_scale` of each side;
    1 for formats other than JPEG."""
    if header.format != "JPEG":
        return 1
    return max(r for r in JPEG_REDUCTIONS if r == 1 or 1 / r >= min_scale)


def decode_pixels(
    data: bytes, header: ImageHeader, reduction: int, background: BGR | None
) -> tuple[np.ndarray, str | None]:
    """Decode to 8-bit BGR as stored (no orientation), a JPEG at 1/`reduction` of each side,
    transparency flattened onto `background` (None: kept, premultiplied BGRA); with what was done to
    its colour already. OpenCV where it reads the file as it is (`ImageHeader.opencv_decodes`), else
    Pillow."""
    if header.opencv_decodes:
        flags = JPEG_REDUCTIONS[reduction] | cv2.IMREAD_IGNORE_ORIENTATION
        pixels = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
        if pixels is not None:
            return as_bgr(pixels), None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(webp_said_transparent(data))) as image:
                if header.format == "JPEG" and reduction > 1:  # as libjpeg scales it (a CMYK JPEG)
                    image.draft(image.mode, (image.width // reduction, image.height // reduction))
                if first := first_played(image):
                    image.seek(first)  # an APNG's first frame played, not its default image
                image.load()
                return pillow_to_bgr(image, background)
    except Exception:
        raise UnsupportedImage("the image data is corrupt or truncated") from None


def decode_image(
    data: bytes,
    header: ImageHeader,
    min_scale: float = 1.0,
    timer: StageTimer | None = None,
    background: BGR | None = WHITE,
) -> DecodedImage:
    """Decode the image `read_header` checked, a JPEG reduced as far as `min_scale` (the fraction
    of each side the work needs) allows, transparency flattened onto `background` (None: kept); the
    pixels are turned upright on first use."""
    reduction = jpeg_reduction(header, min_scale)
    with (timer or StageTimer()).stage("decode"):
        stored, colour = decode_pixels(data, header, reduction, background)
    return DecodedImage(
        stored=stored,
        format=header.format,
        size=header.upright_size,
        orientation=header.orientation,
        icc=None if colour else header.icc,
        colour=colour or header.colour,
        background=background,
        transparent=header.transparent,
    )


def with_resolution(
    image: DecodedImage,
    min_scale: float,
    data: bytes,
    header: ImageHeader,
    background: BGR | None,
    timer: StageTimer | None = None,
) -> DecodedImage:
    """`image` where it `serves`, else `data` (its `header` read already) decoded again, a JPEG
    reduced no further than `min_scale`: a crop pays for a full decode only when its output needs
    more pixels, or transparency the detection's decode flattened."""
    if serves(image, min_scale, background):
        return image
    return decode_image(data, header, min_scale, timer, background)


def serves(image: DecodedImage, min_scale: float, background: BGR | None) -> bool:
    """Whether `image` has at least `min_scale` of each original side and its transparency as
    `background` asks (flattened onto it; None: kept)."""
    as_asked = not image.transparent or image.background == background
    return as_asked and (image.is_full_size or image.scale.min() >= min_scale)
