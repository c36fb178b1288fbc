"""The URL form's option values as Cloudflare's grammar spells them (gateway/web/url/options.py): colours,
qualities, trims and what format=auto settles, each read into the request it makes; the error for a
bad one names the option."""

from __future__ import annotations

import pytest

from gateway.errors import InvalidParameter
from gateway.imaging.encode import AVIF_AUTO_MAX_SIDE, AVIF_MAX_SIDE
from gateway.imaging.geometry import BORDER_TOLERANCE, Trim
from gateway.web.url.options import parse_url_options


def refused(segment: str) -> str:
    """The parameter a 400 names for `segment`."""
    with pytest.raises(InvalidParameter) as error:
        parse_url_options(segment)
    return error.value.parameter


@pytest.mark.parametrize(
    ("colour", "bgr"),
    [
        ("%23abc", (0xCC, 0xBB, 0xAA)),  # #RGB: each digit twice
        ("%23abcd", (0xCC, 0xBB, 0xAA)),  # #RGBA: its alpha ignored
        ("%23a1b2c3", (0xC3, 0xB2, 0xA1)),
        ("%23A1B2C3D4", (0xC3, 0xB2, 0xA1)),
        ("rgb(1,2,3)", (3, 2, 1)),
        ("rgba(10, 20, 255, 50%25)", (255, 20, 10)),
        ("Red", (0, 0, 255)),
        ("orange", (0, 165, 255)),  # any of CSS's 148 names (ten were taken)
        ("RebeccaPurple", (153, 51, 102)),
        ("hsl(120,100%25,25%25)", (0, 128, 0)),
        ("hsl(240deg 100%25 50%25 / 0.5)", (255, 0, 0)),
        ("rgb(100%25,0%25,0%25)", (0, 0, 255)),
        ("rgb(10.5,0,0)", (0, 0, 11)),  # CSS numbers have fractions, a half rounded up (as browsers)
        ("rgb(10.6 20.4 0.5e1)", (5, 20, 11)),
        ("rgba(255,0,0,.5)", (0, 0, 255)),
        ("hsl(0.5turn 100%25 50%25)", (255, 255, 0)),  # cyan: a hue in turns
        ("hsl(3.14159265rad 100%25 50%25)", (255, 255, 0)),  # and in radians
        ("hsl(200grad,100%25,50%25)", (255, 255, 0)),  # and in gradians
        ("hsl(-120 100%25 50%25)", (255, 0, 0)),  # a negative angle turns the other way: blue
        ("hsl(480 100%25 50%25)", (0, 255, 0)),  # past a whole turn: green
        ("transparent", (255, 255, 255)),
    ],
)
def test_css_colours_become_bgr(colour, bgr):
    assert parse_url_options(f"background={colour}").image.output.background == bgr


@pytest.mark.parametrize(
    "colour",
    [
        "rgb(256,0,0)",
        "rgb(0,0,256)",
        "rgb(101%25,0,0)",
        "rgb(-1,0,0)",
        "rgb(10deg,0,0)",
        "%23abcde",
        "%23ggg",
        "rgb(1,2)",
        "hsl(0,200%25,50%25)",
        "hsl(0,50,50)",
        "hsl(10%25,50%25,50%25)",
        "oranges",
    ],
)
def test_colours_out_of_range_or_misspelt_are_refused(colour):
    assert refused(f"background={colour}") == "background"


@pytest.mark.parametrize(("given", "quality"), [("1", 1), ("100", 100), ("0100", 100), ("high", 90), ("low", 60)])
def test_quality_is_1_to_100_or_a_word(given, quality):
    assert parse_url_options(f"quality={given}").quality == quality


@pytest.mark.parametrize("given", ["0", "101", "00100", "-5", "50.5", "best"])
def test_quality_outside_1_to_100_is_refused(given):
    assert refused(f"quality={given}") == "quality"


def test_format_auto_is_negotiated_and_bounds_avif_lower():
    auto = parse_url_options("format=auto").request("avif", 80).output
    assert auto.negotiated and auto.avif_max_side == AVIF_AUTO_MAX_SIDE and auto.format == "avif"
    chosen = parse_url_options("format=avif").request("avif", 80).output
    assert not chosen.negotiated and chosen.avif_max_side == AVIF_MAX_SIDE


def test_trim_sides_border_and_single_extents():
    geometry = parse_url_options("trim=1;2;3;0.5").image.geometry
    assert geometry.trim == Trim(top=1, right=2, bottom=3, left=0.5)
    assert parse_url_options("trim.top=5").image.geometry.trim == Trim(top=5, right=0, bottom=0, left=0)
    assert parse_url_options("trim.left=7,trim.width=100").image.geometry.trim == Trim(left=7, width=100)
    border = parse_url_options("trim=border,trim.border.tolerance=30,trim.border.keep=4,dpr=2").image.geometry.trim
    assert border == Trim(border=True, tolerance=30, keep=8)
    assert parse_url_options("trim=border").image.geometry.trim == Trim(border=True, tolerance=BORDER_TOLERANCE)
    assert parse_url_options("width=10").image.geometry.trim is None


@pytest.mark.parametrize("trim", ["1;2;3", "1;2;3;x", "0;0;0;100000.5", "-1;0;0;0"])
def test_a_trim_that_is_not_four_sides_in_range_is_refused(trim):
    assert refused(f"trim={trim}") == "trim"


def test_upscale_interpolates_and_generate_is_refused():
    assert parse_url_options("upscale=interpolate").image is not None
    assert refused("upscale=generate") == "upscale"


@pytest.mark.parametrize(
    ("segment", "named"),
    [
        ("width", "width"),  # no '=': not an option, named as given
        ("=5", "=5"),
        ("format=auto=x", "format"),  # the value is everything after the first '='
        ("width=5,width=6", "width"),
        ("bogus=1", "bogus"),
    ],
)
def test_a_malformed_option_is_named(segment, named):
    assert refused(segment) == named


def test_a_long_unknown_option_is_named_by_its_first_40_characters():
    assert refused("x" * 50) == "x" * 40
    assert refused("y" * 50 + "=1") == "y" * 40


def test_width_auto_is_refused_saying_why():
    with pytest.raises(InvalidParameter, match="client hints"):
        parse_url_options("width=auto")
