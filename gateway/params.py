"""Request parameters: one declarative table (also the source of the OpenAPI document),
parsed and validated into typed options."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from facecrop_hiding import Hiding
from gateway.errors import InvalidParameter
from gateway.imaging.encode import asked_formats

BOOLEANS = {"true": True, "false": False}
# Plain decimal notation only (no whitespace, underscores, hex, nan or inf), as documented.
NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")
INTEGER = re.compile(r"-?[0-9]+")
MAX_NUMBER_LENGTH = 40  # longer is never a sensible value, and huge integers are slow to convert
MOST_FACES = 1000  # the most faces an answer lists (max_faces' bound; the URL form's JSON lists this many)
MAX_CROP_SIDE = 4096  # /v1/crop's largest output side (the URL form's is Cloudflare's 12,000: decode.MAX_SIDE)


@dataclass(frozen=True)
class Gravity:
    """Where a crop window goes, parsed once: onto the faces (`face`), onto the faces where there
    are any else the most salient window (`auto`), or centred on `point` (x, y in 0-1 of each side)."""

    follows: str  # face, auto or point
    point: tuple[float, float] = (0.5, 0.5)

    @property
    def name(self) -> str:
        """What format=json says the window followed where it followed no faces: center or point."""
        return "center" if self.point == (0.5, 0.5) else "point"


# Every gravity word of both grammars; each table's `choices` says which of them it takes.
GRAVITIES = {
    "face": Gravity("face"),
    "auto": Gravity("auto"),
    "center": Gravity("point"),
    "left": Gravity("point", (0.0, 0.5)),
    "right": Gravity("point", (1.0, 0.5)),
    "top": Gravity("point", (0.5, 0.0)),
    "bottom": Gravity("point", (0.5, 1.0)),
}


@dataclass(frozen=True)
class Parameter:
    """One query/form parameter: its type, default, bounds or choices, and what it means."""

    name: str
    kind: str  # number | integer | boolean | choice | gravity
    default: object
    description: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = field(default_factory=tuple)


# Candidates under this confidence (percent) are never kept, whatever min_confidence says: they are
# noise, and only cost. A 1 MP crowd photo at detail=high: 13,550 of them at min_confidence=0 (8 s
# of suppression), 1,420 at 0.5 (25 ms); the evaluations' lowest threshold is 2.
MIN_CANDIDATE_CONFIDENCE = 0.5

DETECT = (
    Parameter(
        "min_confidence",
        "number",
        50.0,
        f"Lowest confidence reported, in percent (under {MIN_CANDIDATE_CONFIDENCE:g}: {MIN_CANDIDATE_CONFIDENCE:g}).",
        0,
        100,
    ),
    Parameter("max_faces", "integer", 100, "Most faces reported (highest confidence first).", 1, MOST_FACES),
    Parameter("min_face_size", "number", 0.0, "Shortest side of a reported face, in original pixels.", 0, 1_000_000),
    Parameter("landmarks", "boolean", True, "Include the five facial landmarks."),
    Parameter(
        "detail",
        "choice",
        "standard",
        "`high` adds a tiled pass at twice the scale for small faces in crowds (slower; skipped for small "
        "photos); `auto` adds it only where the standard pass sees small faces; `fast` runs the standard pass "
        "at 640 pixels with YuNet alone (enough to frame a crop, 2x cheaper). `X-Passes` and `X-Detectors` say "
        "which passes and models ran.",
        choices=("standard", "auto", "high", "fast"),
    ),
)
# An animation stays one (the upload API's /v1/crop and /v1/anonymize, and the URL form: Cloudflare's `anim`).
ANIM = Parameter("anim", "boolean", True, "`false`: an animation's first frame (GIF, WebP, APNG, AVIF), as a still.")
CROP = (
    Parameter(
        "width", "integer", None, "Output width; alone, the height follows the region's aspect ratio.", 1, MAX_CROP_SIDE
    ),
    Parameter(
        "height",
        "integer",
        None,
        "Output height; alone, the width follows the region's aspect ratio.",
        1,
        MAX_CROP_SIDE,
    ),
    Parameter(
        "gravity",
        "gravity",
        "face",
        "`face`, `center`, or a focal point `XxY` with X and Y in 0-1 (e.g. 0.5x0.33).",
        choices=("face", "center"),
    ),
    Parameter(
        "zoom",
        "number",
        0.5,
        "1 crops as tightly as possible to the faces, 0 keeps as much of the image as possible.",
        0,
        1,
    ),
    Parameter("faces", "choice", "all", "Which faces the crop must frame.", choices=("all", "largest")),
    Parameter(
        "fit",
        "choice",
        "cover",
        "`cover`: exactly width x height; `crop`: never enlarge (the output's aspect ratio kept).",
        choices=("cover", "crop"),
    ),
    Parameter(
        "format",
        "choice",
        None,
        "Output format (default: the input's if jpeg, png, webp or avif, else jpeg; an animation its "
        "own); png, webp and avif keep transparency, gif its pixels under half opaque, jpeg has it on white. "
        "An animation goes out animated as gif, webp or its own format (an APNG's png, an AVIF sequence's avif), "
        "as its first frame in the others.",
        choices=(*asked_formats(), "json"),
    ),
    Parameter("quality", "integer", 85, "JPEG, WebP and AVIF quality.", 1, 100),
    ANIM,
)
_DETECT = {p.name: p for p in DETECT}
_CROP = {p.name: p for p in CROP}


def default(table: tuple[Parameter, ...], name: str) -> Any:
    """A parameter's default, as its table declares it, typed as its parser makes values (the
    options' dataclasses take theirs from here)."""
    return typed_default(next(p for p in table if p.name == name))


def typed_default(parameter: Parameter) -> Any:
    """The default as a value of the parameter's type: a gravity word as its Gravity."""
    return GRAVITIES[str(parameter.default)] if parameter.kind == "gravity" else parameter.default


# /v1/anonymize favours recall (a face missed is a face shown): a lower threshold and the tiled
# pass by default, chosen by measurement (docs/defaults.md, "Anonymize"); every face found is hidden.
ANONYMIZE = (
    replace(
        _DETECT["min_confidence"],
        default=8.0,
        description="Lowest confidence of a face hidden, in percent (below 50 %, only faces at most twice "
        "the size of the photo's confident ones).",
    ),
    replace(_DETECT["min_face_size"], description="Shortest side of a face hidden, in original pixels."),
    replace(_DETECT["detail"], default="auto"),
    Parameter("method", "choice", Hiding.method, "How faces are hidden.", choices=("blur", "pixelate", "fill")),
    Parameter(
        "strength",
        "number",
        Hiding.strength,
        "Blur radius or pixel block size, relative to each face (times half its shorter side).",
        0.05,
        1,
    ),
    Parameter(
        "margin", "number", Hiding.margin, "Each region is the face box grown this many times about its centre.", 1, 3
    ),
    Parameter("shape", "choice", Hiding.shape, "The shape of each hidden region.", choices=("ellipse", "rect")),
    Parameter(
        "preset",
        "choice",
        "privacy",
        "`privacy`: the defaults above, recall first; `fast`: the standard pass at 12 % and a margin of 1.3 "
        "(faster, fewer faces hidden; the parameters given still apply).",
        choices=("privacy", "fast"),
    ),
    _CROP["format"],
    _CROP["quality"],
    ANIM,
)
# preset=fast: what it changes of the defaults (`facecrop video --fast`'s setting, docs/defaults.md, "Anonymize").
FAST_ANONYMIZE = {"min_confidence": 12.0, "detail": "standard", "margin": 1.3}
ANONYMIZE_PRESETS = {
    "privacy": {p.name: typed_default(p) for p in ANONYMIZE if p.name != "preset"},
    "fast": {**{p.name: typed_default(p) for p in ANONYMIZE if p.name != "preset"}, **FAST_ANONYMIZE},
}


def anonymize_defaults(preset: str) -> dict[str, Any]:
    """Hiding's defaults under `preset` (privacy, fast): both doors' (/v1/anonymize and the URL form's
    anonymize), merged here once; each option given still applies over them."""
    return ANONYMIZE_PRESETS[preset]


DETECT_PARAMETERS = frozenset(p.name for p in DETECT)
CROP_PARAMETERS = frozenset(p.name for p in CROP)
ANONYMIZE_PARAMETERS = frozenset(p.name for p in ANONYMIZE)


@dataclass(frozen=True)
class DetectOptions:
    """What /v1/detect (and /v1/crop) report; defaults from DETECT."""

    min_confidence: float = default(DETECT, "min_confidence")
    max_faces: int = default(DETECT, "max_faces")
    min_face_size: float = default(DETECT, "min_face_size")
    landmarks: bool = default(DETECT, "landmarks")
    detail: str = default(DETECT, "detail")

    @property
    def min_score(self) -> float:
        """The lowest score (0-1) a candidate keeps: min_confidence, never under MIN_CANDIDATE_CONFIDENCE."""
        return max(self.min_confidence, MIN_CANDIDATE_CONFIDENCE) / 100


# Cloudflare's fits: those that crop follow gravity and zoom; the others keep the whole image.
CROPPING_FITS = frozenset({"cover", "crop", "aspect-crop"})


@dataclass(frozen=True)
class CropOptions:
    """The crop's geometry: its size, where it goes and how it fits; defaults from CROP (the URL form
    gives its own)."""

    width: int | None = default(CROP, "width")
    height: int | None = default(CROP, "height")
    gravity: Gravity = field(default_factory=lambda: default(CROP, "gravity"))
    zoom: float = default(CROP, "zoom")
    faces: str = default(CROP, "faces")
    # one of Cloudflare's: cover, crop, aspect-crop, scale-down, contain, pad, squeeze (gateway/framing/crop.py)
    fit: str = default(CROP, "fit")
    # the longest side an output is enlarged to, the one that follows the region's aspect ratio
    # included (the URL form's: Cloudflare's 12,000); FACECROP_MAX_SIDE bounds it too
    max_side: int = MAX_CROP_SIDE

    @property
    def crops(self) -> bool:
        """Whether the fit crops (and so follows gravity and zoom) rather than keeping the whole image."""
        return self.fit in CROPPING_FITS

    @property
    def follows_faces(self) -> bool:
        """Whether the window goes where the faces are (gravity face, or auto where there are faces)."""
        return self.crops and self.gravity.follows != "point"


# Each coordinate of a focal point XxY: a number in 0-1 (its own refusal is the gravity's, below).
FOCAL_COORDINATE = Parameter("gravity", "number", None, "A focal point's coordinate.", 0, 1)


def _bounded(parameter: Parameter, raw: str, convert, kind: str):
    pattern = INTEGER if convert is int else NUMBER
    if len(raw) > MAX_NUMBER_LENGTH or not pattern.fullmatch(raw):
        raise InvalidParameter(parameter.name, f"must be {kind}, got {raw[:40]!r}")
    number = convert(raw)
    if (isinstance(number, float) and not math.isfinite(number)) or not parameter.low <= number <= parameter.high:
        raise InvalidParameter(
            parameter.name, f"must be between {parameter.low:g} and {parameter.high:g}, got {raw[:40]!r}"
        )
    return number


def _gravity(parameter: Parameter, raw: str) -> Gravity:
    """One of the table's gravity words, or a focal point XxY."""
    if raw in parameter.choices:
        return GRAVITIES[raw]
    parts = raw.split("x")
    if len(parts) == 2:
        try:
            x, y = (PARSERS["number"](FOCAL_COORDINATE, part) for part in parts)
            return Gravity("point", (x, y))
        except InvalidParameter:
            pass
    words = ", ".join(parameter.choices)
    raise InvalidParameter(parameter.name, f"must be {words} or XxY with X and Y in 0-1, got {raw[:40]!r}")


def _choice(parameter: Parameter, raw: str) -> str:
    if raw not in parameter.choices:
        raise InvalidParameter(parameter.name, f"must be one of {', '.join(parameter.choices)}, got {raw[:40]!r}")
    return raw


def _boolean(parameter: Parameter, raw: str) -> bool:
    if raw not in BOOLEANS:
        raise InvalidParameter(parameter.name, f"must be true or false, got {raw[:40]!r}")
    return BOOLEANS[raw]


PARSERS = {
    "number": lambda p, raw: _bounded(p, raw, float, "a number"),
    "integer": lambda p, raw: _bounded(p, raw, int, "a whole number"),
    "boolean": _boolean,
    "choice": _choice,
    "gravity": _gravity,
}


def parse(
    values: Mapping[str, str], parameters: tuple[Parameter, ...], parsers: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Each parameter's value from `values`, or its default when absent; `parsers` adds or replaces kinds."""
    kinds = {**PARSERS, **(parsers or {})}
    return {p.name: typed_default(p) if p.name not in values else kinds[p.kind](p, values[p.name]) for p in parameters}


def parse_detect_options(values: Mapping[str, str]) -> DetectOptions:
    return DetectOptions(**parse(values, DETECT))


# /v1/crop's `fit=crop` never enlarges and keeps the output's aspect ratio: Cloudflare's aspect-crop.
V1_CROP_FITS_AS_CLOUDFLARES = {"cover": "cover", "crop": "aspect-crop"}


def parse_crop_options(values: Mapping[str, str]) -> CropOptions:
    """/v1/crop's geometry (its format and quality are the output's: gateway/request.py)."""
    parsed = parse(values, tuple(p for p in CROP if p.name in CropOptions.__dataclass_fields__))
    return CropOptions(**{**parsed, "fit": V1_CROP_FITS_AS_CLOUDFLARES[parsed["fit"]]})
