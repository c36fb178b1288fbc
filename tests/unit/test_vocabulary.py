"""One request vocabulary: every parameter of both grammars names the field of the typed request it
sets, each door's defaults are a preset of it (DOOR_DEFAULTS), and a new option is one row."""

from __future__ import annotations

import dataclasses

import pytest

from facecrop_hiding import Hiding
from gateway.errors import InvalidParameter
from gateway.imaging.filters import Filters
from gateway.imaging.geometry import Geometry
from gateway.params import (
    ANONYMIZE,
    BY_DOOR,
    CROP,
    DETECT,
    DOOR_DEFAULTS,
    MOST_FACES,
    PRESETS,
    CropOptions,
    DetectOptions,
    Parameter,
    parse,
    typed_default,
)
from gateway.request import ImageRequest, Output, anonymize_request, crop_request, detect_request
from gateway.web.url import options
from gateway.web.url.options import OPTIONS, parse_url_options

PARTS = {
    "detect": DetectOptions,
    "window": CropOptions,
    "hiding": Hiding,
    "geometry": Geometry,
    "filters": Filters,
    "output": Output,
}
TABLES = {"detect": DETECT, "crop": CROP, "anonymize": ANONYMIZE, "url": OPTIONS}


@pytest.mark.parametrize("door", TABLES)
def test_every_parameter_sets_a_field_of_the_typed_request(door):
    for parameter in TABLES[door]:
        if parameter.into:
            part, _, name = parameter.into.partition(".")
            assert name in {f.name for f in dataclasses.fields(PARTS[part])}, parameter
    assert set(PARTS) <= {f.name for f in dataclasses.fields(ImageRequest)}


@pytest.mark.parametrize("door", TABLES)
def test_each_doors_defaults_are_its_preset(door):
    """A default that differs between doors is the door's DOOR_DEFAULTS value, and none is left
    unresolved."""
    table = TABLES[door]
    assert all(p.default != BY_DOOR for p in table)
    parsed = parse({}, table, options.URL_PARSERS)
    for parameter in table:
        if parameter.into in DOOR_DEFAULTS[door]:
            expected = typed_default(dataclasses.replace(parameter, default=DOOR_DEFAULTS[door][parameter.into]))
            assert parsed[parameter.name] == expected, parameter.name


def test_the_doors_defaults_reach_the_request():
    """Each door's request, asked nothing, carries its door's defaults (the URL form's, over
    /v1/detect's threshold; with anonymize=, /v1/anonymize's)."""
    url = parse_url_options("width=64").image
    assert url.window is not None
    assert (url.window.gravity.follows, url.window.zoom, url.window.fit) == ("point", 0.0, "scale-down")
    assert (url.detect.detail, url.detect.min_confidence) == ("fast", DOOR_DEFAULTS["detect"]["detect.min_confidence"])
    crop = crop_request({})
    assert crop.window is not None
    assert (crop.window.gravity.follows, crop.window.zoom, crop.window.fit) == ("face", 0.5, "cover")
    assert (crop.detect.detail, crop.detect.min_confidence) == ("standard", 50.0)
    assert (detect_request({}).detect.detail, detect_request({}).detect.min_confidence) == ("standard", 50.0)
    for hidden in (anonymize_request({}), parse_url_options("anonymize=blur").image):
        assert (hidden.detect.detail, hidden.detect.min_confidence) == ("auto", 8.0)
    # what no parameter says: /v1/anonymize lists the faces hidden without landmarks; the URL form
    # finds every face (its JSON lists the most an answer lists) with them
    assert not anonymize_request({}).detect.landmarks
    assert (url.detect.landmarks, url.detect.max_faces) == (True, MOST_FACES)


@pytest.mark.parametrize("preset", PRESETS)
def test_a_preset_goes_over_both_doors_and_what_is_given_over_it(preset):
    """preset=fast's values where the parameter is not given, at /v1/anonymize and the URL form alike."""
    expected = DOOR_DEFAULTS["anonymize"] | PRESETS[preset]
    for request in (anonymize_request({"preset": preset}), parse_url_options(f"anonymize=fill,preset={preset}").image):
        assert request.hiding is not None
        assert request.detect.min_confidence == expected["detect.min_confidence"]
        assert request.detect.detail == expected["detect.detail"]
        assert request.hiding.margin == expected.get("hiding.margin", Hiding.margin)
    given = anonymize_request({"preset": preset, "detail": "high", "margin": "2"})
    url_given = parse_url_options(f"anonymize=fill,preset={preset},detail=high,min-confidence=40").image
    assert given.detect.detail == url_given.detect.detail == "high"
    assert given.hiding is not None and given.hiding.margin == 2.0
    assert url_given.detect.min_confidence == 40.0


def test_the_options_with_one_meaning_set_the_same_field_in_both_grammars():
    upload = {p.name: p.into for table in (DETECT, CROP, ANONYMIZE) for p in table if p.into}
    url = {p.name: p.into for p in OPTIONS if p.into}
    for name in ("detail", "width", "height", "gravity", "zoom", "faces", "fit", "anim"):
        assert upload[name] == url[name]
    assert upload["min_confidence"] == url["min-confidence"]
    assert upload["method"] == url["anonymize"]


def test_a_new_url_option_is_one_row(monkeypatch):
    """A stand-in option (the hidden regions' shape, which only /v1/anonymize offers) registered in
    the table alone: parsed, validated and carried into the request with no other change."""
    row = Parameter(
        "anonymize.shape",
        "choice",
        "ellipse",
        "The hidden regions' shape.",
        choices=("ellipse", "rect"),
        into="hiding.shape",
    )
    monkeypatch.setattr(options, "OPTIONS", (*OPTIONS, row))
    monkeypatch.setattr(options, "_OPTIONS", {p.name: p for p in (*OPTIONS, row)})
    parse_url_options.cache_clear()
    try:
        hidden = parse_url_options("anonymize=blur,anonymize.shape=rect").image.hiding
        assert hidden is not None and hidden.shape == "rect"
        hidden = parse_url_options("anonymize=pixelate").image.hiding
        assert hidden is not None and (hidden.method, hidden.shape) == ("pixelate", "ellipse")
        with pytest.raises(InvalidParameter) as refused:
            parse_url_options("anonymize=blur,anonymize.shape=star")
        assert refused.value.parameter == "anonymize.shape"
    finally:
        parse_url_options.cache_clear()
