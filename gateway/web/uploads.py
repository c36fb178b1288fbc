"""Read the image and the parameters of a request, keeping every byte in memory."""

from __future__ import annotations

import io

from flask import Request
from werkzeug.exceptions import RequestEntityTooLarge

from gateway.errors import InvalidParameter, MissingImage
from gateway.imaging.decode import EMPTY_IMAGE

FORM_MIMETYPES = frozenset({"multipart/form-data", "application/x-www-form-urlencoded"})
RAW_MIMETYPES = frozenset({"application/octet-stream"})


class InMemoryRequest(Request):
    """A request whose multipart uploads never spill to a temporary file on disk.

    The body is already capped by MAX_CONTENT_LENGTH, so holding it in memory is bounded.
    """

    def _get_file_stream(self, total_content_length, content_type, filename=None, content_length=None):
        return io.BytesIO()


HOW_TO_SEND = "send the image as multipart form field 'image' or as the request body with an image/* content type"


def read_image_bytes(request: Request) -> bytes:
    """The image: multipart field `image`, or the raw body sent with an image/* content type."""
    if request.mimetype in FORM_MIMETYPES:
        files = request.files.getlist("image")
        if len(files) > 1:
            raise InvalidParameter("image", "was given more than once")
        if not files:
            raise MissingImage(HOW_TO_SEND)
        data = files[0].read()
    elif request.mimetype.startswith("image/") or request.mimetype in RAW_MIMETYPES:
        data = _raw_body(request)
    else:
        raise MissingImage(HOW_TO_SEND)
    if not data:
        raise MissingImage(EMPTY_IMAGE)  # sent as it should be, but a file of 0 bytes
    return data


def _raw_body(request: Request) -> bytes:
    """The raw body; one read of the declared length where there is one (the stream reads a
    chunked body in 64 KiB steps, and gunicorn copies what it holds ahead on every step). A
    chunked body is read from the server's own stream, one byte past the limit: Werkzeug's stops
    at the limit without a word, and the image cut there was answered as corrupt (415)."""
    if request.content_length:
        return request.stream.read(request.content_length)
    limit = request.max_content_length
    if limit is None or "wsgi.input_terminated" not in request.environ:
        return request.get_data(cache=False)  # no limit, or a server that does not end a chunked body
    data = request.environ["wsgi.input"].read(limit + 1)
    if len(data) > limit:
        raise RequestEntityTooLarge()  # answered as Werkzeug's own for a declared length (gateway/web/app.py)
    return data


def read_parameters(request: Request, allowed: frozenset[str]) -> dict[str, str]:
    """Query-string and form parameters, each given at most once and known to the endpoint."""
    sources = [request.args, request.form] if request.mimetype in FORM_MIMETYPES else [request.args]
    values: dict[str, str] = {}
    for source in sources:
        for name in source:
            given = source.getlist(name)
            if name not in allowed:
                raise InvalidParameter(name[:40], "is not a parameter of this endpoint")
            if name in values or len(given) > 1:
                raise InvalidParameter(name, "was given more than once")
            values[name] = given[0]
    return values
