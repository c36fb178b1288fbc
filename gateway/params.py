"""Parse and validate request parameters (query string or form fields) into typed options."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from gateway.errors import InvalidParameter

TRUE_WORDS = {"true", "1", "yes", "on"}
FALSE_WORDS = {"false", "0", "no", "off"}


@dataclass(frozen=True)
class DetectOptions:
    """What /v1/detect (and /v1/crop) report; see the README for each parameter."""

    min_confidence: float = 50.0
    max_faces: int = 100
    min_face_size: float = 0.0
    landmarks: bool = True


DETECT_PARAMETERS = frozenset(DetectOptions.__dataclass_fields__)


def _parse_bounded(values: Mapping[str, str], name: str, default, low, high, convert, kind: str):
    raw = values.get(name)
    if raw is None:
        return default
    try:
        number = convert(raw.strip())
    except (ValueError, OverflowError):
        raise InvalidParameter(name, f"must be {kind}, got {raw[:40]!r}") from None
    if not math.isfinite(number) or not low <= number <= high:
        raise InvalidParameter(name, f"must be between {low:g} and {high:g}, got {raw[:40]!r}")
    return number


def parse_number(values: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    """A finite number within [low, high], or `default` when the parameter is absent."""
    return _parse_bounded(values, name, default, low, high, float, "a number")


def parse_integer(values: Mapping[str, str], name: str, default: int | None, low: int, high: int) -> int | None:
    """A whole number within [low, high], or `default` when the parameter is absent."""
    return _parse_bounded(values, name, default, low, high, int, "a whole number")


def parse_boolean(values: Mapping[str, str], name: str, default: bool) -> bool:
    raw = values.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS | FALSE_WORDS:
        return word in TRUE_WORDS
    raise InvalidParameter(name, f"must be true or false, got {raw[:40]!r}")


def parse_detect_options(values: Mapping[str, str]) -> DetectOptions:
    return DetectOptions(
        min_confidence=parse_number(values, "min_confidence", DetectOptions.min_confidence, 0, 100),
        max_faces=parse_integer(values, "max_faces", DetectOptions.max_faces, 1, 1000),
        min_face_size=parse_number(values, "min_face_size", DetectOptions.min_face_size, 0, 1_000_000),
        landmarks=parse_boolean(values, "landmarks", DetectOptions.landmarks),
    )


FOCAL_WORDS = frozenset({"face", "center"})


@dataclass(frozen=True)
class CropOptions:
    """How /v1/crop frames and encodes; see the README for each parameter."""

    width: int | None = None
    height: int | None = None
    gravity: str | tuple[float, float] = "face"  # "face", "center" or a focal point (x, y) in 0-1
    zoom: float = 0.5
    faces: str = "all"
    fit: str = "cover"
    format: str | None = None  # None: the input's format when it is jpeg, png or webp, else jpeg
    quality: int = 85


CROP_PARAMETERS = frozenset(CropOptions.__dataclass_fields__)
MAX_OUTPUT_SIDE = 4096


def parse_choice(values: Mapping[str, str], name: str, default: str | None, choices: tuple[str, ...]) -> str | None:
    raw = values.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word not in choices:
        raise InvalidParameter(name, f"must be one of {', '.join(choices)}, got {raw[:40]!r}")
    return word


def parse_gravity(values: Mapping[str, str]) -> str | tuple[float, float]:
    """`face`, `center`, or a focal point `XxY` with X and Y in 0-1 (e.g. 0.5x0.33)."""
    raw = values.get("gravity")
    if raw is None:
        return CropOptions.gravity
    word = raw.strip().lower()
    if word in FOCAL_WORDS:
        return word
    parts = word.split("x")
    if len(parts) == 2:
        point = {"x": parts[0], "y": parts[1]}
        try:
            return parse_number(point, "x", 0, 0, 1), parse_number(point, "y", 0, 0, 1)
        except InvalidParameter:
            pass
    raise InvalidParameter("gravity", f"must be face, center or XxY with X and Y in 0-1, got {raw[:40]!r}")


def parse_crop_options(values: Mapping[str, str]) -> CropOptions:
    return CropOptions(
        width=parse_integer(values, "width", None, 1, MAX_OUTPUT_SIDE),
        height=parse_integer(values, "height", None, 1, MAX_OUTPUT_SIDE),
        gravity=parse_gravity(values),
        zoom=parse_number(values, "zoom", CropOptions.zoom, 0, 1),
        faces=parse_choice(values, "faces", CropOptions.faces, ("all", "largest")),
        fit=parse_choice(values, "fit", CropOptions.fit, ("cover", "crop")),
        format=parse_choice(values, "format", CropOptions.format, ("jpeg", "png", "webp", "json")),
        quality=parse_integer(values, "quality", CropOptions.quality, 1, 100),
    )
