"""The request vocabulary: each door's parameter table (also the source of the OpenAPI document),
each row naming what it sets in the typed request (`into`, one name per meaning in every grammar),
each door's defaults a preset of that vocabulary, parsed and validated into typed options."""

from __future__ import annotations

import math
import re
from collections import defaultdict
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


BY_DOOR = "by door"  # a row's default that is its door's (DOOR_DEFAULTS)


@dataclass(frozen=True)
class Parameter:
    """One query/form parameter: its type, default, bounds or choices, what it means, and what it
    sets in the typed request."""

    name: str
    kind: str  # number | integer | boolean | choice | gravity (the URL form adds its own)
    default: object
    description: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = field(default_factory=tuple)
    # the field of the typed request (gateway/request.py's ImageRequest) it sets, `part.field`: one
    # name per meaning in every grammar (/v1's min_confidence and the URL's min-confidence are both
    # detect.min_confidence); "" where it sets none alone (the URL form's dpr, trim, format, ...)
    into: str = ""


# Where the doors' defaults differ, each door's, by what the option sets (Parameter.into): one
# vocabulary, a preset of it per door. A row whose default is BY_DOOR takes its door's here; the URL
# form's anonymize= takes /v1/anonymize's, and anonymize's preset=fast goes over either (PRESETS).
DOOR_DEFAULTS: dict[str, dict[str, Any]] = {
    "detect": {"detect.min_confidence": 50.0, "detect.detail": "standard"},
    "crop": {"window.gravity": "face", "window.zoom": 0.5, "window.fit": "cover"},
    "anonymize": {"detect.min_confidence": 8.0, "detect.detail": "auto"},
    "url": {"window.gravity": "center", "window.zoom": 0.0, "window.fit": "scale-down", "detect.detail": "fast"},
}
# Anonymize's presets over its door's defaults: privacy (them) or fast (`facecrop video --fast`'s
# setting, docs/defaults.md, "Anonymize"); each parameter given still applies over them.
PRESETS: dict[str, dict[str, Any]] = {
    "privacy": {},
    "fast": {"detect.min_confidence": 12.0, "detect.detail": "standard", "hiding.margin": 1.3},
}
FAST_PRESET = PRESETS["fast"]


def at_door(door: str, table: tuple[Parameter, ...]) -> tuple[Parameter, ...]:
    """`table` with each BY_DOOR default its door's."""
    return tuple(replace(p, default=DOOR_DEFAULTS[door][p.into]) if p.default == BY_DOOR else p for p in table)


# Candidates under this confidence (percent) are never kept, whatever min_confidence says: they are
# noise, and only cost. A 1 MP crowd photo at detail=high: 13,550 of them at min_confidence=0 (8 s
# of suppression), 1,420 at 0.5 (25 ms); the evaluations' lowest threshold is 2.
MIN_CANDIDATE_CONFIDENCE = 0.5

DETECT = at_door(
    "detect",
    (
        Parameter(
            "min_confidence",
            "number",
            BY_DOOR,
            f"Lowest confidence reported, in percent (under {MIN_CANDIDATE_CONFIDENCE:g}: "
            f"{MIN_CANDIDATE_CONFIDENCE:g}).",
            0,
            100,
            into="detect.min_confidence",
        ),
        Parameter(
            "max_faces",
            "integer",
            100,
            "Most faces reported (highest confidence first).",
            1,
            MOST_FACES,
            into="detect.max_faces",
        ),
        Parameter(
            "min_face_size",
            "number",
            0.0,
            "Shortest side of a reported face, in original pixels.",
            0,
            1_000_000,
            into="detect.min_face_size",
        ),
        Parameter("landmarks", "boolean", True, "Include the five facial landmarks.", into="detect.landmarks"),
        Parameter(
            "detail",
            "choice",
            BY_DOOR,
            "`high` adds a tiled pass at twice the scale for small faces in crowds (slower; skipped for small "
            "photos); `auto` adds it only where the standard pass sees small faces; `fast` runs the standard pass "
            "at 640 pixels with YuNet alone (enough to frame a crop, 2x cheaper). `X-Passes` and `X-Detectors` say "
            "which passes and models ran.",
            choices=("standard", "auto", "high", "fast"),
            into="detect.detail",
        ),
    ),
)
# An animation stays one (the upload API's /v1/crop and /v1/anonymize, and the URL form: Cloudflare's `anim`).
ANIM = Parameter(
    "anim",
    "boolean",
    True,
    "`false`: an animation's first frame (GIF, WebP, APNG, AVIF), as a still.",
    into="output.animated",
)
CROP = at_door(
    "crop",
    (
        Parameter(
            "width",
            "integer",
            None,
            "Output width; alone, the height follows the region's aspect ratio.",
            1,
            MAX_CROP_SIDE,
            into="window.width",
        ),
        Parameter(
            "height",
            "integer",
            None,
            "Output height; alone, the width follows the region's aspect ratio.",
            1,
            MAX_CROP_SIDE,
            into="window.height",
        ),
        Parameter(
            "gravity",
            "gravity",
            BY_DOOR,
            "`face`, `center`, or a focal point `XxY` with X and Y in 0-1 (e.g. 0.5x0.33).",
            choices=("face", "center"),
            into="window.gravity",
        ),
        Parameter(
            "zoom",
            "number",
            BY_DOOR,
            "1 crops as tightly as possible to the faces, 0 keeps as much of the image as possible.",
            0,
            1,
            into="window.zoom",
        ),
        Parameter(
            "faces",
            "choice",
            "all",
            "Which faces the crop must frame.",
            choices=("all", "largest"),
            into="window.faces",
        ),
        Parameter(
            "fit",
            "choice",
            BY_DOOR,
            "`cover`: exactly width x height; `crop`: never enlarge (the output's aspect ratio kept).",
            choices=("cover", "crop"),
            into="window.fit",
        ),
        Parameter(
            "format",
            "choice",
            None,
            "Output format (default: the input's if jpeg, png, webp or avif, else jpeg; an animation its "
            "own); png, webp and avif keep transparency, gif its pixels under half opaque, jpeg has it on white. "
            "An animation goes out animated as gif, webp or its own format (an APNG's png, an AVIF sequence's "
            "avif), as its first frame in the others.",
            choices=(*asked_formats(), "json"),
            into="output.format",
        ),
        Parameter("quality", "integer", 85, "JPEG, WebP and AVIF quality.", 1, 100, into="output.quality"),
        ANIM,
    ),
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
ANONYMIZE = at_door(
    "anonymize",
    (
        replace(
            _DETECT["min_confidence"],
            default=BY_DOOR,
            description="Lowest confidence of a face hidden, in percent (below 50 %, only faces at most twice "
            "the size of the photo's confident ones).",
        ),
        replace(_DETECT["min_face_size"], description="Shortest side of a face hidden, in original pixels."),
        replace(_DETECT["detail"], default=BY_DOOR),
        Parameter(
            "method",
            "choice",
            Hiding.method,
            "How faces are hidden.",
            choices=("blur", "pixelate", "fill"),
            into="hiding.method",
        ),
        Parameter(
            "strength",
            "number",
            Hiding.strength,
            "Blur radius or pixel block size, relative to each face (times half its shorter side).",
            0.05,
            1,
            into="hiding.strength",
        ),
        Parameter(
            "margin",
            "number",
            Hiding.margin,
            "Each region is the face box grown this many times about its centre.",
            1,
            3,
            into="hiding.margin",
        ),
        Parameter(
            "shape",
            "choice",
            Hiding.shape,
            "The shape of each hidden region.",
            choices=("ellipse", "rect"),
            into="hiding.shape",
        ),
        Parameter(
            "preset",
            "choice",
            "privacy",
            f"`privacy`: the defaults above, recall first; `fast`: the {FAST_PRESET['detect.detail']} pass at "
            f"{FAST_PRESET['detect.min_confidence']:g} % and a margin of {FAST_PRESET['hiding.margin']:g} "
            "(faster, fewer faces hidden; the parameters given still apply).",
            choices=tuple(PRESETS),
        ),
        _CROP["format"],
        _CROP["quality"],
        ANIM,
    ),
)


def under_preset(
    parsed: Mapping[str, Any], given: Mapping[str, str], table: tuple[Parameter, ...], preset: Mapping[str, Any]
) -> dict[str, Any]:
    """`parsed` with the `preset`'s value for each of `table`'s parameters not `given` (both doors'
    anonymize: /v1/anonymize and the URL form's anonymize=, merged here once)."""
    return {
        **parsed,
        **{
            p.name: typed_default(replace(p, default=preset[p.into]))
            for p in table
            if p.into in preset and p.name not in given and p.name in parsed
        },
    }


def by_part(parsed: Mapping[str, Any], table: tuple[Parameter, ...]) -> dict[str, dict[str, Any]]:
    """The values of `table`'s parameters grouped by the part of the typed request each sets
    (Parameter.into): {"detect": {"min_confidence": 50.0, ...}, "window": {...}, ...}."""
    grouped: dict[str, dict[str, Any]] = defaultdict(dict)
    for p in table:
        if p.into and p.name in parsed:
            part, _, name = p.into.partition(".")
            grouped[part][name] = parsed[p.name]
    return grouped


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
    return DetectOptions(**by_part(parse(values, DETECT), DETECT)["detect"])


# /v1/crop's `fit=crop` never enlarges and keeps the output's aspect ratio: Cloudflare's aspect-crop.
V1_CROP_FITS_AS_CLOUDFLARES = {"cover": "cover", "crop": "aspect-crop"}


def crop_window(window: Mapping[str, Any]) -> CropOptions:
    """/v1/crop's geometry from its parsed `window` part, its fit in Cloudflare's words."""
    return CropOptions(**{**window, "fit": V1_CROP_FITS_AS_CLOUDFLARES[window["fit"]]})
