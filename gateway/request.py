"""The typed request: what every front door asks of the one processing pipeline (gateway/processing/).

/v1/detect, /v1/crop and /v1/anonymize build it from their parameters (gateway/params.py, below),
the URL form from Cloudflare's grammar (gateway/web/url/options.py): what to find, the crop's geometry
(gravity and fit parsed into typed values), what to hide, the trim, flip and rotate before the
crop and the filters after it, and how the answer goes out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from facecrop_hiding import Hiding
from gateway.imaging.encode import AVIF_MAX_SIDE
from gateway.imaging.filters import Filters
from gateway.imaging.geometry import Geometry
from gateway.imaging.normalise import BGR
from gateway.params import (
    ANONYMIZE,
    CROP,
    PRESETS,
    CropOptions,
    DetectOptions,
    by_part,
    crop_window,
    default,
    parse,
    parse_detect_options,
    under_preset,
)


@dataclass(frozen=True)
class Output:
    """How the answer goes out."""

    format: str | None = None  # json, or the encoder's (jpeg, png, png8, webp, avif, gif); None: the input's
    quality: int = default(CROP, "quality")
    progressive: bool = False  # an interlaced JPEG
    avif_max_side: int = AVIF_MAX_SIDE  # an AVIF with a longer side goes out as WebP (gateway/imaging/encode.py)
    metadata: str = "none"  # the EXIF a JPEG keeps: copyright, keep or none (gateway/imaging/metadata.py)
    background: BGR | None = None  # under transparency and fit=pad's canvas; None: transparency kept where the
    # format has it, else white
    animated: bool = False  # an animation stays one, in a format that has animations
    negotiated: bool = False  # format=auto chose `format` (an animation then goes out as WebP); None: the
    # client takes neither AVIF nor WebP, so the source's format where every client reads it, else JPEG


@dataclass(frozen=True)
class ImageRequest:
    """One request, as every front door asks it."""

    detect: DetectOptions
    window: CropOptions | None  # the crop; None: the picture whole, as it is (/v1/detect, /v1/anonymize)
    hiding: Hiding | None = None  # every face hidden this way
    find_faces: bool = True  # the answer depends on the faces (the URL form looks only where it does)
    geometry: Geometry = field(default_factory=Geometry)  # trim, flip, rotate: before the crop
    filters: Filters = field(default_factory=Filters)  # after the resize
    output: Output = field(default_factory=Output)


def detect_request(values: Mapping[str, str]) -> ImageRequest:
    """/v1/detect: the faces, as JSON."""
    return ImageRequest(detect=parse_detect_options(values), window=None, output=Output(format="json"))


def crop_request(values: Mapping[str, str]) -> ImageRequest:
    """/v1/crop: the faces found as /v1/detect finds them, framed by the crop's geometry (its
    parameters checked in the order of its table, then /v1/detect's)."""
    asked = by_part(parse(values, CROP), CROP)
    detect = parse_detect_options(values)
    return ImageRequest(detect=detect, window=crop_window(asked["window"]), output=Output(**asked["output"]))


def anonymize_request(values: Mapping[str, str]) -> ImageRequest:
    """/v1/anonymize: every face hidden (listed all with format=json); its preset's values where the
    parameter is not given."""
    parsed = parse(values, ANONYMIZE)
    asked = by_part(under_preset(parsed, values, ANONYMIZE, PRESETS[parsed["preset"]]), ANONYMIZE)
    detect = DetectOptions(landmarks=False, **asked["detect"])  # every face hidden is listed: max_faces does not apply
    return ImageRequest(detect=detect, window=None, hiding=Hiding(**asked["hiding"]), output=Output(**asked["output"]))
