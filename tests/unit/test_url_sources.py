"""gateway/web/url/sources.py: which sources the URL form reads, and from where, judged on the URLs and
files a request names (what an HTTP client would fetch, which file a directory origin opens)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.errors import PayloadTooLarge, SourceNotAllowed, SourceNotFound
from gateway.web.url.sources import normalized, read_file, resolve_source

ANY = ("*",)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/a.jpg",  # a scheme with a host, but not http(s)
        "http:///a.jpg",  # http with no host
        "http://alice@example.com/a.jpg",  # a user name alone is a credential too
        "http://:secret@example.com/a.jpg",  # a password alone
        "http://example.com/a/./b.jpg",  # a dot segment
        "http://example.com/a/%2E/b.jpg",
        "http://example.com/a\\..\\b.jpg",  # backslashes: segments to the WHATWG parsers clients use
        "http://example.com/a%5C..%5Cb.jpg",
    ],
)
def test_what_is_not_a_plain_http_url_under_a_prefix_is_refused(url):
    with pytest.raises(SourceNotAllowed):
        normalized(url)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTP://Example.COM:80/A.jpg?x=1", "http://example.com/A.jpg?x=1"),
        ("https://example.com:8443", "https://example.com:8443/"),  # no path: the root
        ("http://[::1]:8080/a.jpg", "http://[::1]:8080/a.jpg"),  # an IPv6 host keeps its brackets
        ("https://[2001:db8::1]:443/a.jpg", "https://[2001:db8::1]/a.jpg"),
    ],
)
def test_urls_are_compared_in_one_spelling(url, expected):
    assert normalized(url) == expected


def test_an_http_origin_keeps_every_character_of_its_path_and_the_source():
    source = resolve_source("Xray.jpg", "", "http://images.internal/boX", ANY)
    assert source.url == "http://images.internal/boX/Xray.jpg" and source.origin == "http://images.internal"
    assert resolve_source("//lib/a.jpg", "w=1", "http://images.internal/base/", ANY).url == (
        "http://images.internal/base/lib/a.jpg?w=1"
    )


def test_an_absolute_source_keeps_its_query_and_needs_an_allowed_prefix():
    source = resolve_source("https:/cdn.example.com/a.jpg", "v=2", "", ("https://cdn.example.com/",))
    assert source.url == "https://cdn.example.com/a.jpg?v=2" and source.origin is None
    with pytest.raises(SourceNotAllowed):
        resolve_source("https://other.example.com/a.jpg", "", "", ("https://cdn.example.com/",))
    with pytest.raises(SourceNotAllowed):
        resolve_source("a.jpg", "", "", ANY)  # relative, and no origin


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    (tmp_path / "root" / "lib").mkdir(parents=True)
    (tmp_path / "root" / "lib" / "a.jpg").write_bytes(b"12345")
    (tmp_path / "secret.jpg").write_bytes(b"secret")
    return tmp_path / "root"


@pytest.mark.parametrize("raw", ["lib/a.jpg", "//lib/a.jpg", "lib//a.jpg", "lib%2Fa.jpg", "./lib/./a.jpg"])
def test_a_directory_origin_reads_the_file_a_path_names(origin, raw):
    assert resolve_source(raw, "ignored=1", str(origin), ANY).path == origin / "lib" / "a.jpg"


@pytest.mark.parametrize(
    "raw", ["../secret.jpg", "lib/../../secret.jpg", "%2e%2e/secret.jpg", "lib/a%00.jpg", "/", "lib"]
)
def test_a_directory_origin_never_answers_outside_it_nor_with_an_error_of_its_own(origin, raw):
    with pytest.raises(SourceNotFound):
        resolve_source(raw, "", str(origin), ANY)


def test_a_file_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(origin):
    path = origin / "lib" / "a.jpg"
    data, validator = read_file(path, 5)
    assert data == b"12345" and validator.endswith("-5")
    with pytest.raises(PayloadTooLarge):
        read_file(path, 4)
    with pytest.raises(SourceNotFound):
        read_file(origin / "missing.jpg", 5)


def test_no_more_than_the_limit_and_a_byte_is_read():
    """An endless file (a device, a FIFO someone left under the origin) is refused at once."""
    with pytest.raises(PayloadTooLarge):
        read_file(Path("/dev/zero"), 1 << 20)
