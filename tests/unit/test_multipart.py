"""Multipart bodies as the gateway reads them (gateway/web/uploads.py, python-multipart) against
Werkzeug's own parser, on bodies an independent encoder (urllib3's, as `requests` sends them) builds
from generated fields and files, whole and cut short: the same fields, files and errors."""

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from urllib3 import encode_multipart_formdata
from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.formparser import FormDataParser

from gateway.web.uploads import InMemoryFormParser

NAMES = st.text(st.characters(codec="utf-8", exclude_characters='"\\\r\n\0'), min_size=1, max_size=12)
BOUNDARY_LIKE = st.sampled_from([b"\r\n--", b"\r\n", b"--", b"\r", b"\n", b"\r\n\r\n"])
CONTENT = st.lists(st.one_of(st.binary(max_size=300), BOUNDARY_LIKE), max_size=8).map(b"".join)


def read(parser_class: type[FormDataParser], body: bytes, content_type: str, parts: int = 1000) -> tuple:
    """(fields, files as (name, filename, type, bytes)) or the error, as `parser_class` reads the body
    under Flask's default limits (500 kB of text a field, `parts` parts)."""
    parser = parser_class(cls=MultiDict, silent=True, max_form_memory_size=500_000, max_form_parts=parts)
    mimetype, _, options = content_type.partition("; boundary=")
    try:
        _, form, files = parser.parse(io.BytesIO(body), mimetype, len(body), {"boundary": options} if options else {})
    except RequestEntityTooLarge:
        return ("413",)
    uploads = [(name, f.filename, f.content_type, f.read()) for name, f in files.items(multi=True)]
    return list(form.items(multi=True)), uploads


def both(body: bytes, content_type: str, **limits) -> tuple:
    ours = read(InMemoryFormParser, body, content_type, **limits)
    assert ours == read(FormDataParser, body, content_type, **limits)
    return ours


@settings(max_examples=300, deadline=None)
@given(
    fields=st.lists(st.tuples(NAMES, st.text(max_size=40)), max_size=4),
    files=st.lists(st.tuples(NAMES, NAMES, CONTENT), max_size=3),
    boundary=st.sampled_from([None, "x", "----WebKitFormBoundary7MA4YWxkTrZu0gW", "a" * 70]),
)
def test_generated_forms_read_as_werkzeug_reads_them(fields, files, boundary):
    parts = [*fields, *((name, (filename, content, "image/jpeg")) for name, filename, content in files)]
    body, content_type = encode_multipart_formdata(parts, boundary=boundary)
    read_fields, read_files = both(body, content_type)
    assert sorted(read_fields) == sorted(fields)
    assert sorted(read_files) == sorted((name, filename, "image/jpeg", content) for name, filename, content in files)


@settings(max_examples=200, deadline=None)
@given(content=CONTENT, cut=st.floats(0, 1))
def test_a_body_cut_short_reads_as_werkzeug_reads_it(content, cut):
    body, content_type = encode_multipart_formdata([("min_size", "20"), ("image", ("a.jpg", content, "image/jpeg"))])
    both(body[: int(len(body) * cut)], content_type)


BIG = 600_000  # over Flask's MAX_FORM_MEMORY_SIZE (500 kB), the gateway's


@pytest.mark.parametrize(
    ("parts", "limits", "expected"),
    [
        ([("a", "1"), ("b", "2"), ("image", ("a.jpg", b"x", "image/jpeg"))], {"parts": 2}, ("413",)),
        (
            [("a", "1"), ("image", ("a.jpg", b"x", "image/jpeg"))],
            {"parts": 2},
            ([("a", "1")], [("image", "a.jpg", "image/jpeg", b"x")]),
        ),
        ([("a", "x" * BIG)], {}, ("413",)),
        ([("a", "x" * 400_000)], {}, ([("a", "x" * 400_000)], [])),
        ([("image", ("a.jpg", b"x" * BIG, "image/jpeg"))], {}, ([], [("image", "a.jpg", "image/jpeg", b"x" * BIG)])),
    ],
)
def test_the_limits_on_parts_and_text_fields_are_werkzeug_s(parts, limits, expected):
    """More parts than max_form_parts, or a text field (not a file) over max_form_memory_size: 413."""
    body, content_type = encode_multipart_formdata(parts)
    assert both(body, content_type, **limits) == expected


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"not multipart at all", "multipart/form-data; boundary=x"),
        (b"--x\r\nContent-Disposition: form-data; name=image\r\n\r\nabc\r\n--x--\r\n", "multipart/form-data"),
        (b"", "multipart/form-data; boundary=x"),
    ],
)
def test_bodies_that_are_not_multipart_read_as_no_form(body, content_type):
    assert both(body, content_type) == ([], [])
