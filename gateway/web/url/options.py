"""Cloudflare's option grammar: `width=256,height=256,fit=cover,gravity=face`, with its aliases and
facecrop's own options in the same style, parsed and validated into the endpoints' typed options.

Every option is known: an unknown one, or one of Cloudflare's that is not offered here (with the
reason), is a 400 naming it, never ignored. Defaults are Cloudflare's where it has one.
"""

from __future__ import annotations

import colorsys
import functools
import json
import math
import re
from dataclasses import dataclass, replace
from urllib.parse import unquote

from PIL import ImageColor

from facecrop_hiding import Hiding
from gateway.errors import InvalidParameter
from gateway.imaging.decode import (
    MAX_SIDE,  # Cloudflare's 12,000 px a side, for outputs too (100 MP: Settings.max_pixels)
)
from gateway.imaging.encode import AVIF_AUTO_MAX_SIDE, AVIF_MAX_SIDE, url_formats
from gateway.imaging.filters import Filters
from gateway.imaging.geometry import Geometry, Trim
from gateway.imaging.metadata import METADATA_CHOICES
from gateway.imaging.normalise import WHITE
from gateway.params import (
    ANIM,
    BY_DOOR,
    DETECT,
    DOOR_DEFAULTS,
    INTEGER,
    MOST_FACES,
    PARSERS,
    PRESETS,
    CropOptions,
    DetectOptions,
    Parameter,
    at_door,
    by_part,
    parse,
    under_preset,
)
from gateway.request import ImageRequest, Output

ALIASES = {
    "w": "width",
    "h": "height",
    "g": "gravity",
    "f": "format",
    "q": "quality",
    "face-zoom": "zoom",
    "scq": "slow-connection-quality",
}
# Cloudflare's options that are not offered, and why (docs/api/url.md's table is generated from it).
UNSUPPORTED = {
    "border": "Cloudflare offers it in Workers only, not by URL: use fit=pad with background",
    "segment": "background removal needs a segmentation model (Cloudflare's BiRefNet) this service does not ship",
}
FITS = ("scale-down", "contain", "scale-up", "cover", "crop", "aspect-crop", "pad", "squeeze")
ROTATIONS = ("0", "90", "180", "270", "360")
TRIM_KEYS = ("trim.width", "trim.height", "trim.left", "trim.top")
BORDER_KEYS = ("trim.border.color", "trim.border.tolerance", "trim.border.keep")
FORMATS = ("auto", *url_formats(), "json")
QUALITY_WORDS = {"high": 90, "medium-high": 80, "medium-low": 70, "low": 60}
TRANSPARENT = "transparent"  # a background is opaque: the name means white, as Cloudflare flattens onto
# CSS's colour functions, as CSS Color 4 writes them: rgb()/rgba() of three numbers or percentages,
# hsl()/hsla() of a hue (an angle: deg, rad, grad, turn, or a plain number of degrees) and two
# percentages; commas or spaces between, an alpha after a comma or a slash (ignored)
CSS_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?"
COLOUR_FUNCTION = re.compile(
    rf"(rgba?|hsla?)\(\s*({CSS_NUMBER})(%|deg|rad|grad|turn)?(?:\s*,\s*|\s+)({CSS_NUMBER})(%?)"
    rf"(?:\s*,\s*|\s+)({CSS_NUMBER})(%?)(?:\s*[,/]\s*{CSS_NUMBER}%?)?\s*\)"
)
TURNS = {"": 1 / 360, "deg": 1 / 360, "rad": 1 / (2 * math.pi), "grad": 1 / 400, "turn": 1.0}
MAX_OPTIONS_LENGTH = 512  # every option at its longest fits; the parse cache stays small
OPTION_SEPARATOR = re.compile(r",(?![^()]*\))")  # commas, but not inside rgb(...)
_DETECT = {p.name: p for p in DETECT}
ANONYMIZE_DEFAULTS = DOOR_DEFAULTS["anonymize"]  # anonymize=: /v1/anonymize's
UNCHANGED_AT_ZERO = ("brightness", "contrast", "gamma")  # Cloudflare's 0 for these: no change

OPTIONS = at_door(
    "url",
    (
        Parameter("width", "integer", None, "Output width in pixels (times dpr).", 1, MAX_SIDE, into="window.width"),
        Parameter("height", "integer", None, "Output height in pixels (times dpr).", 1, MAX_SIDE, into="window.height"),
        Parameter("fit", "choice", BY_DOOR, "How the image fits width x height.", choices=FITS, into="window.fit"),
        Parameter(
            "gravity",
            "gravity",
            BY_DOOR,
            "face, auto (faces, else saliency), left, right, top, bottom or XxY.",
            choices=("face", "auto", "center", "left", "right", "top", "bottom"),
            into="window.gravity",
        ),
        Parameter(
            "zoom",
            "number",
            BY_DOOR,
            "How closely a crop frames the faces, with gravity=face.",
            0,
            1,
            into="window.zoom",
        ),
        Parameter("format", "choice", None, "Output format (default: the input's jpeg, png or webp).", choices=FORMATS),
        Parameter("quality", "quality", 85, "1-100, or high, medium-high, medium-low, low.", 1, 100),
        Parameter(
            "dpr",
            "number",
            1.0,
            "Device pixel ratio: width and height are multiplied by it.",
            0.1,
            3,
            into="geometry.dpr",
        ),
        Parameter(
            "background",
            "color",
            (255, 255, 255),
            "Under transparency (not given: kept in PNG, WebP, AVIF) and fit=pad: a CSS colour (#RGB, rgb(), hsl(), "
            "name).",
            into="output.background",
        ),
        Parameter(
            "onerror", "choice", None, "redirect: answer errors with a redirect to the source.", choices=("redirect",)
        ),
        Parameter(
            "metadata",
            "choice",
            "copyright",
            "EXIF in JPEG outputs: the copyright tag, all of it (orientation reset), or none.",
            choices=METADATA_CHOICES,
            into="output.metadata",
        ),
        ANIM,
        Parameter("trim", "trim", None, "top;right;bottom;left in pixels (fractions below 1), or border."),
        *(
            Parameter(key, "number", None, f"Trim: {key[5:]} in pixels (a fraction below 1).", 0, 100_000)
            for key in TRIM_KEYS
        ),
        Parameter("trim.border.color", "color", None, "trim=border: the border's colour (default: the corner's)."),
        Parameter("trim.border.tolerance", "integer", 10, "trim=border: how far a pixel may be from it.", 0, 255),
        Parameter("trim.border.keep", "number", 0, "trim=border: pixels of the border kept.", 0, 100_000),
        Parameter(
            "rotate", "choice", "0", "Degrees clockwise, before resizing.", choices=ROTATIONS, into="geometry.rotate"
        ),
        Parameter(
            "flip", "choice", None, "h, v or hv, before rotating.", choices=("h", "v", "hv"), into="geometry.flip"
        ),
        Parameter("blur", "number", 0, "Blur radius, 1-250 output pixels.", 0, 250, into="filters.blur"),
        Parameter(
            "sharpen",
            "number",
            0,
            "Sharpening after resizing, 0-10 (1 suits downscaled pictures).",
            0,
            10,
            into="filters.sharpen",
        ),
        Parameter(
            "brightness",
            "number",
            1,
            "A factor: 1 no change, 0.5 half as bright (0 ignored).",
            0,
            10,
            into="filters.brightness",
        ),
        Parameter("contrast", "number", 1, "A factor: 1 no change (0 ignored).", 0, 10, into="filters.contrast"),
        Parameter(
            "gamma",
            "number",
            1,
            "Exposure: 1 no change, 0.5 darker, 2 lighter (0 ignored).",
            0,
            10,
            into="filters.gamma",
        ),
        Parameter(
            "saturation", "number", 1, "A factor: 0 grey, 2 twice as saturated.", 0, 10, into="filters.saturation"
        ),
        Parameter("compression", "choice", None, "fast: JPEG, whatever format says.", choices=("fast",)),
        Parameter("slow-connection-quality", "quality", None, "Quality for clients on a slow connection.", 1, 100),
        Parameter("upscale", "upscale", "interpolate", "Enlarging: interpolate (bicubic).", choices=("interpolate",)),
        Parameter(
            "faces", "choice", "all", "Which faces a crop frames.", choices=("all", "largest"), into="window.faces"
        ),
        Parameter(
            "detail",
            "choice",
            BY_DOOR,
            f"standard, auto, high or fast (anonymize: {ANONYMIZE_DEFAULTS['detect.detail']}).",
            choices=_DETECT["detail"].choices,
            into="detect.detail",
        ),
        Parameter(
            "min-confidence",
            "number",
            None,
            f"Lowest confidence of a face, percent (anonymize: {ANONYMIZE_DEFAULTS['detect.min_confidence']:g}).",
            0,
            100,
            into="detect.min_confidence",
        ),
        Parameter(
            "anonymize",
            "choice",
            None,
            "Hide every face: blur, pixelate or fill.",
            choices=("blur", "pixelate", "fill"),
            into="hiding.method",
        ),
        Parameter(
            "preset", "choice", "privacy", "With anonymize: privacy (its defaults) or fast.", choices=tuple(PRESETS)
        ),
    ),
)
_OPTIONS = {p.name: p for p in OPTIONS}
# Options that change nothing of the answer (left out of its ETag).
NOT_IN_OUTPUT = frozenset({"onerror"})


@dataclass(frozen=True)
class UrlOptions:
    """A URL's options, parsed: the request they make (its output's format and quality settled by
    `request` once the client's Accept and hints are read); `canonical` names the picture they
    produce (for the ETag)."""

    image: ImageRequest
    format: str | None  # as given (auto, avif, ...; compression=fast makes it jpeg); None: the input's
    quality: int  # as given (slow-connection-quality may replace it)
    compression: str | None  # fast: JPEG
    slow_quality: int | None  # slow-connection-quality: the quality for slow connections
    palette: bool  # PNG8: format=png with a quality given
    canonical: str

    def request(self, fmt: str, quality: int) -> ImageRequest:
        """The request for the negotiated format `fmt` (caching.negotiate's: `input`, json or a
        format) at `quality`: a JPEG progressive unless compression=fast, AVIF's bound on size the
        lower one where format=auto chose it."""
        requested = None if fmt == "input" else {"baseline-jpeg": "jpeg"}.get(fmt, fmt)
        if requested == "png" and self.palette:
            requested = "png8"
        output = replace(
            self.image.output,
            format=requested,
            quality=quality,
            progressive=fmt == "jpeg" and self.compression is None,
            avif_max_side=AVIF_AUTO_MAX_SIDE if self.format == "auto" else AVIF_MAX_SIDE,
            negotiated=self.format == "auto",
        )
        return replace(self.image, output=output)


def split_options(segment: str) -> dict[str, str]:
    """`key=value` pairs (aliases resolved, values percent-decoded), each key known and given once.
    Commas separate options, except inside parentheses (background=rgb(1,2,3) may come unencoded)."""
    values: dict[str, str] = {}
    for item in OPTION_SEPARATOR.split(segment):
        key, equals, value = item.partition("=")
        key = ALIASES.get(key, key)
        if not equals or not key:
            raise InvalidParameter(item[:40], "is not an option: options are key=value, separated by commas")
        if key in UNSUPPORTED:
            raise InvalidParameter(key, f"is not supported ({UNSUPPORTED[key]})")
        if key not in _OPTIONS:
            raise InvalidParameter(key[:40], "is not an option of /cdn-cgi/image (docs/api/url.md)")
        if key in values:
            raise InvalidParameter(key, "was given more than once")
        if key == "width" and value == "auto":  # a number's "must be a whole number" said nothing of why
            raise InvalidParameter(key, "=auto (Cloudflare's width from client hints) is not supported: give pixels")
        values[key] = unquote(value)
    return values


def asks_redirect(segment: str) -> bool:
    """Whether the options say onerror=redirect: read on its own, before (and whatever) the rest
    parses, so that a page asking for the redirect gets it for a bad option too."""
    items = (item.partition("=") for item in OPTION_SEPARATOR.split(segment[:MAX_OPTIONS_LENGTH]))
    return any(key == "onerror" and unquote(value) == "redirect" for key, _, value in items)


def _quality(parameter: Parameter, raw: str) -> int:
    if raw in QUALITY_WORDS:
        return QUALITY_WORDS[raw]
    if INTEGER.fullmatch(raw) and len(raw) < 5 and 1 <= int(raw) <= 100:
        return int(raw)
    raise InvalidParameter(parameter.name, f"must be 1-100 or {', '.join(QUALITY_WORDS)}, got {raw[:40]!r}")


def _color(parameter: Parameter, raw: str) -> tuple[int, int, int]:
    """A CSS colour ("any CSS color", Cloudflare's background) as BGR: #RGB(A), #RRGGBB(AA), rgb()
    and hsl() with commas or spaces (percentages too), or any of CSS's 148 names (ten were taken:
    `orange` was a 400, a broken image); its alpha ignored (a background given is opaque; not
    given, transparency is kept)."""
    text = raw.strip().lower()
    if text == TRANSPARENT:
        return WHITE
    function = COLOUR_FUNCTION.fullmatch(text)
    try:
        red, green, blue = colour_function(*function.groups()) if function else ImageColor.getrgb(text)[:3]
    except ValueError:
        red = green = blue = -1
    if not all(0 <= channel <= 255 for channel in (red, green, blue)):  # Pillow takes rgb(256,0,0) as it is
        said = f"must be a CSS colour (#RGB, #RRGGBB, rgb(), hsl() or a name), got {raw[:40]!r}"
        raise InvalidParameter(parameter.name, said)
    return blue, green, red


def colour_function(name: str, first: str, unit: str | None, *rest: str) -> tuple[int, int, int]:
    """RGB of rgb(r g b) (numbers 0-255 or percentages, fractions rounded) or hsl(h s% l%); ValueError
    for a component out of its range (CSS would clamp it; a URL that says rgb(256,0,0) is a typo)."""
    second, second_unit, third, third_unit = rest
    if name.startswith("rgb"):
        if unit not in (None, "%"):
            raise ValueError("an rgb() component is a number or a percentage")
        channels = [
            float(v) * (2.55 if u == "%" else 1) for v, u in ((first, unit), (second, second_unit), (third, third_unit))
        ]
        if not all(0 <= channel <= 255 for channel in channels):
            raise ValueError("an rgb() component is out of range")
        red, green, blue = (math.floor(channel + 0.5) for channel in channels)  # halves up, as browsers round
        return red, green, blue
    saturation, lightness = float(second) / 100, float(third) / 100
    if unit == "%" or not (second_unit and third_unit) or not (0 <= saturation <= 1 and 0 <= lightness <= 1):
        raise ValueError("hsl() is an angle and two percentages")
    hue = (float(first) * TURNS[unit or ""]) % 1
    red, green, blue = (math.floor(channel * 255 + 0.5) for channel in colorsys.hls_to_rgb(hue, lightness, saturation))
    return red, green, blue


def _trim(parameter: Parameter, raw: str) -> tuple[float, ...] | str:
    """top;right;bottom;left, each pixels (1 and more) or a fraction of its side (below 1); or border."""
    if raw == "border":
        return raw
    sides = raw.split(";")
    number = Parameter(parameter.name, "number", None, "", 0, 100_000)
    if len(sides) == 4:
        try:
            return tuple(PARSERS["number"](number, side) for side in sides)
        except InvalidParameter:
            pass
    raise InvalidParameter(parameter.name, f"must be top;right;bottom;left (numbers) or border, got {raw[:40]!r}")


def _upscale(parameter: Parameter, raw: str) -> str:
    if raw == "generate":
        raise InvalidParameter(
            parameter.name,
            "generate is not supported (AI upscaling needs a model, Cloudflare's ESRGAN, this service does not ship)",
        )
    return PARSERS["choice"](parameter, raw)


URL_PARSERS = {"quality": _quality, "color": _color, "trim": _trim, "upscale": _upscale}


@functools.lru_cache(maxsize=4096)  # a CDN revalidates the same URLs over and over
def parse_url_options(segment: str) -> UrlOptions:
    """The options segment of a URL, parsed; 400 (invalid_parameter, naming the option) on any problem.
    Each option sets its part of the request (Parameter.into); where not given, the defaults are those
    of the door it serves: this one's over /v1/detect's, with anonymize /v1/anonymize's under its preset."""
    if len(segment) > MAX_OPTIONS_LENGTH:
        raise InvalidParameter("options", f"are longer than {MAX_OPTIONS_LENGTH} characters")
    values = split_options(segment)
    parsed = parse(values, OPTIONS, URL_PARSERS)
    hides = parsed["anonymize"] is not None
    defaults = DOOR_DEFAULTS["detect"] | DOOR_DEFAULTS["url"]
    if hides:
        defaults |= DOOR_DEFAULTS["anonymize"] | PRESETS[parsed["preset"]]
    parsed = under_preset(parsed, values, OPTIONS, defaults)
    parsed["background"] = parsed["background"] if "background" in values else None  # not given: transparency kept
    asked = by_part(parsed, OPTIONS)
    fmt = "jpeg" if parsed["compression"] == "fast" and parsed["format"] != "json" else parsed["format"]
    window = CropOptions(**asked["window"] | scaled_sides(parsed), max_side=MAX_SIDE)
    hiding_preset = {name.partition(".")[2]: value for name, value in defaults.items() if name.startswith("hiding.")}
    gravity = parsed["gravity"]  # a point however spelt (center, left, XxY), else face or auto
    shown = {name: value for name, value in parsed.items() if name not in NOT_IN_OUTPUT}
    canonical = json.dumps(
        {**shown, "gravity": gravity.point if gravity.follows == "point" else gravity.follows}, sort_keys=True
    )
    image = ImageRequest(
        detect=DetectOptions(**asked["detect"] | {"max_faces": MOST_FACES, "landmarks": True}),
        window=window,
        hiding=Hiding(**asked["hiding"] | hiding_preset) if hides else None,
        find_faces=hides or fmt == "json" or window.follows_faces,
        geometry=Geometry(
            **asked["geometry"]
            | {"trim": trim_of(parsed, values), "flip": parsed["flip"] or "", "rotate": int(parsed["rotate"]) % 360}
        ),
        filters=Filters(**asked["filters"] | {name: parsed[name] or 1.0 for name in UNCHANGED_AT_ZERO}),
        output=Output(**asked["output"]),
    )
    return UrlOptions(
        image=image,
        format=fmt,
        quality=parsed["quality"],
        compression=parsed["compression"],
        slow_quality=parsed["slow-connection-quality"],
        palette=fmt == "png" and "quality" in values,
        canonical=canonical,
    )


def scaled_sides(parsed: dict) -> dict[str, int]:
    """The width and height given, times dpr; 400 naming dpr where that is over MAX_SIDE."""
    sides = {}
    for side in ("width", "height"):
        if parsed[side] is not None:
            sides[side] = max(1, round(parsed[side] * parsed["dpr"]))
            if sides[side] > MAX_SIDE:
                raise InvalidParameter("dpr", f"makes the {side} {sides[side]}, over {MAX_SIDE}")
    return sides


def trim_of(parsed: dict, given: dict[str, str]) -> Trim | None:
    """What the trim options ask for (None: nothing)."""
    border = parsed["trim"] == "border" or any(key in given for key in BORDER_KEYS)
    if border:
        return Trim(
            border=True,
            color=parsed["trim.border.color"],
            tolerance=parsed["trim.border.tolerance"],
            keep=parsed["trim.border.keep"] * parsed["dpr"],
        )
    sides = parsed["trim"] or (0, 0, 0, 0)
    extents = {key[5:]: parsed[key] for key in TRIM_KEYS}
    if parsed["trim"] is None and all(value is None for value in extents.values()):
        return None
    top, right, bottom, left = sides
    return Trim(
        top=extents["top"] if extents["top"] is not None else top,
        right=right,
        bottom=bottom,
        left=extents["left"] if extents["left"] is not None else left,
        width=extents["width"],
        height=extents["height"],
    )
