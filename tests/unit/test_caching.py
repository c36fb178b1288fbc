"""The URL form's validators and hints, read alone: the sealed ETags (AES-SIV, so one key seals one
validator for one answer to the same tag every time) and the client hints' bounds."""

from __future__ import annotations

import pytest
from werkzeug.datastructures import Headers

from gateway.web.url.caching import EtagSealer, conditions, negotiate, slow_connection
from tests.support import SLOW_HINTS

KEY = b"k" * 32
# Sealed with KEY for the answer "public-a", computed once (2026-11-29): the key's derivation, the
# cipher and the encoding (URL-safe base64, its padding stripped) are what make them.
SEALED = {
    "v": '"s5I1Rt1rSOw8B7MFfL4FwzM"',
    "va": '"d1JGzjVM8NalqHPo48VWEx61"',
    "val": '"_zbm_w9T45BYVmp49Fq5d6yvkQ"',
    "validator-1": '"vhbDfT5-D6U-RM4NT5Rnm5Tk5BDwApRNZn45"',
    "abcdef": '"-SZyXmJkbAa2siclb30wAZagOT8q4g"',  # 30 characters: two of padding stripped
    "w1004": '"n-7OnaSYAe0z2X9FdE1IlG-b3iRX"',  # ends in X (only "=" is stripped)
}


@pytest.mark.parametrize("validator", SEALED)
def test_an_etag_is_the_validator_sealed_for_its_answer(validator):
    sealer = EtagSealer(KEY)
    tag = sealer.seal("public-a", validator)
    assert tag == SEALED[validator]
    assert sealer.offered(tag, "public-a") == [validator]  # every padding length read back
    assert sealer.offered(f"W/{tag}", "public-a") == [validator]  # a weak comparison, as If-None-Match is
    assert sealer.offered(tag, "public-b") == []  # another answer's
    assert EtagSealer(b"j" * 32).offered(tag, "public-a") == []  # another key's
    assert sealer.offered(None, "public-a") == []


def test_tags_it_cannot_read_are_skipped_and_the_others_read():
    sealer = EtagSealer(KEY)
    unreadable = ['"!!"', '"abc"', '"' + "A" * 43 + '"', 'W/"x"']
    offered = ", ".join([*unreadable, SEALED["va"], *unreadable, SEALED["validator-1"]])
    assert sorted(sealer.offered(offered, "public-a")) == ["va", "validator-1"]


def test_without_a_secret_each_sealer_has_its_own_key():
    tag = EtagSealer(b"").seal("public-a", "v")
    assert EtagSealer(b"").offered(tag, "public-a") == []


@pytest.mark.parametrize(
    "hints,slow",
    [
        *SLOW_HINTS,  # the list the compose proxy's cache classes are held to
        ({"Save-Data": " ON "}, True),
        ({"ECT": "3G"}, True),
        ({"RTT": "151"}, True),
        ({"Downlink": "4.9"}, True),
        ({"RTT": "50", "Downlink": "1"}, True),
        ({"RTT": "fast"}, False),
        ({"Downlink": "many"}, False),
    ],
)
def test_the_hints_say_a_slow_connection_at_their_bounds(hints, slow):
    """Save-Data on, an effective type of 3G or worse, a round trip over 150 ms or under 5 Mbps;
    a hint that is not a number says nothing. As the gateway reads them (Werkzeug's headers, any
    case) and as sent (a mapping). Behind the compose proxy the gateway is sent the class alone:
    nginx's map must say what this rule says, edge by edge (SLOW_HINTS, which test_proxy sends
    through it)."""
    assert slow_connection(hints) is slow
    assert slow_connection(Headers(hints)) is slow
    assert slow_connection(Headers({name.lower(): value for name, value in hints.items()})) is slow


@pytest.mark.parametrize(
    "validator,headers",
    [
        ('e:"abc:1"', {"If-None-Match": '"abc:1"'}),
        ("m:Wed, 21 Oct 2015 07:28:00 GMT", {"If-Modified-Since": "Wed, 21 Oct 2015 07:28:00 GMT"}),
        ("h:0123abcd", None),  # a hash: only the bytes confirm it
        ("m:caf\u00e9", None),  # no header can carry it
    ],
)
def test_a_validator_is_revalidated_with_its_own_condition(validator, headers):
    """The origin's ETag or Last-Modified, each sent back as its conditional header (a date has
    colons of its own: the kind is what comes before the first)."""
    assert conditions(validator) == headers


@pytest.mark.parametrize("accept", ["text/html", "image/*", "*/*", "image/png,image/*;q=0.8", None])
def test_format_auto_without_a_named_format_is_the_inputs(accept):
    """format=auto answers AVIF or WebP only to a client that names it (a wildcard is no promise)."""
    assert negotiate("auto", accept) == "input"
    assert negotiate(None, accept) == "input"
