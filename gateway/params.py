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


def parse_number(values: Mapping[str, str], name: str, default: float, low: float, high: float) -> float:
    """A finite number within [low, high], or `default` when the parameter is absent."""
    raw = values.get(name)
    if raw is None:
        return default
    try:
        number = float(raw.strip())
    except ValueError:
        raise InvalidParameter(name, f"must be a number, got {raw[:40]!r}") from None
    if not math.isfinite(number) or not low <= number <= high:
        raise InvalidParameter(name, f"must be between {low:g} and {high:g}, got {raw[:40]!r}")
    return number


def parse_integer(values: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """A whole number within [low, high], or `default` when the parameter is absent."""
    raw = values.get(name)
    if raw is None:
        return default
    try:
        number = int(raw.strip())
    except ValueError:
        raise InvalidParameter(name, f"must be a whole number, got {raw[:40]!r}") from None
    if not low <= number <= high:
        raise InvalidParameter(name, f"must be between {low} and {high}, got {raw[:40]!r}")
    return number


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
