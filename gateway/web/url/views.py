"""GET (and HEAD) /cdn-cgi/image/[<signature>/]<options>/<source>: the /v1/crop pipeline by URL.

In order: the URL form allowed at all (API keys need signed URLs or an explicit opt-in), the
signature, the options, the source; then, for an If-None-Match of ours, the source revalidated
(a conditional request to the origin, or a file's stat) and a 304 without a download; else the
source read (a fetch holds no model slot: gateway/web/url/admission.py), and, once it is here and its
client still waits, one of the worker's in-flight slots taken for the picture (gateway/processing/),
in the negotiated format, at the quality the client hints ask for (slow-connection-quality).
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Blueprint, Response, current_app, g, redirect, request
from flask.typing import ResponseReturnValue

from gateway.errors import ApiError, InvalidParameter, InvalidSignature, SourceNotAllowed
from gateway.web.observe import note
from gateway.web.responses import served
from gateway.web.url.caching import (
    CLIENT_HINTS,
    DEFAULT_MAX_AGE,
    MIN_MAX_AGE,
    cache_control,
    conditions,
    describe,
    error_cache_control,
    etag_validator,
    negotiate,
    slow_connection,
)
from gateway.web.url.options import asks_redirect, parse_url_options
from gateway.web.url.signing import unsigned_path
from gateway.web.url.sources import ABSOLUTE, Source, file_validator, read_file, resolve_source

PREFIX = "/cdn-cgi/image"
bp = Blueprint("url", __name__)


@dataclass(frozen=True)
class Loaded:
    """A source read (`data`), or found unchanged since `validator` (`data` None)."""

    data: bytes | None
    validator: str
    cache_control: str | None = None  # the origin's
    revalidated: bool = False  # the origin answered a conditional request with 304


def request_tail() -> tuple[str, str]:
    """What follows /cdn-cgi/image in the request as sent (not percent-decoded: it is what was
    signed, and what an origin is asked for), and the query string."""
    environ = request.environ
    path = (environ.get("RAW_URI") or environ.get("REQUEST_URI") or request.path).partition("?")[0]
    start = path.find(PREFIX)  # past a scheme and host in an absolute-form request target
    tail = path[start + len(PREFIX) :] if start >= 0 else ""  # none where the prefix came encoded
    return tail, environ.get("QUERY_STRING", "")


@bp.get(f"{PREFIX}/<path:_>", merge_slashes=False)
def image(_: str):
    try:
        return serve(*request_tail())
    except ApiError as error:
        source = g.pop("url_redirect", None)
        if source is None or isinstance(error, SourceNotAllowed):
            raise
        note(error=error.code, redirected=True)
        return redirect(source, 302)


@bp.after_request
def cache_errors(response: Response) -> Response:
    """Errors are cached briefly where a retry would not change them, else not at all."""
    if response.status_code >= 300 and response.status_code != 304:
        response.headers["Cache-Control"] = error_cache_control(response.status_code)
    return response


def serve(tail: str, query: str) -> ResponseReturnValue:
    services = current_app.extensions["facecrop"]
    settings = services.settings
    if settings.api_keys and not settings.url_key and not settings.allow_unsigned_urls:
        raise InvalidSignature(
            "API keys are set: the URL form needs signed URLs (FACECROP_URL_KEY) or FACECROP_ALLOW_UNSIGNED_URLS=true"
        )
    unsigned = unsigned_path(tail, query, settings.url_key, settings.url_salt)
    segment, _, raw_source = unsigned.lstrip("/").partition("/")
    if not raw_source:
        raise InvalidParameter(
            "source",
            f"is missing: the URL form is /cdn-cgi/image/<options>/<source> (got {segment[:80]!r}; "
            "options are key=value, e.g. /cdn-cgi/image/width=256/photo.jpg)",
        )
    if asks_redirect(segment):
        g.url_redirect = redirect_target(raw_source, query)
    options = parse_url_options(segment)
    source = resolve_source(raw_source, query, settings.origin, settings.allowed_sources)
    fmt = negotiate(options.format, request.headers.get("Accept"))
    slow = options.slow_quality is not None and slow_connection(request.headers)
    quality = options.slow_quality if slow and options.slow_quality else options.quality
    models = ",".join(settings.model_name(name) for name in settings.detectors)
    # what decides the faces found: the models, and the input they see (its size and padding)
    detection = f"{models}@{settings.target_size}/{settings.pad_multiple}"
    public = describe(detection, f"{raw_source}?{query}", options.canonical, f"{fmt}@{quality}")
    vary = (["Accept"] if options.format == "auto" else []) + (list(CLIENT_HINTS) if options.slow_quality else [])
    headers = {"Vary": ", ".join(vary)} if vary else {}
    if options.slow_quality:
        headers["Accept-CH"] = ", ".join(CLIENT_HINTS)

    offered = services.etags.offered(request.headers.get("If-None-Match"), public)
    loaded = load(source, offered[0]) if offered else load(source)
    default_age = MIN_MAX_AGE if loaded.revalidated else DEFAULT_MAX_AGE
    headers |= {
        "ETag": services.etags.seal(public, loaded.validator),
        "Cache-Control": cache_control(loaded.cache_control, default_age),
    }
    if loaded.data is None or request.if_none_match.contains_weak(headers["ETag"].strip('"')):
        note(not_modified=True)
        return Response(status=304, headers=headers)
    return served(loaded.data, options.request(fmt, quality), headers)


def redirect_target(raw_source: str, query: str) -> str | None:
    """Where onerror=redirect sends the browser: a relative source to its path on this host (the
    site's own original, as Cloudflare's), an absolute one the allowlist passes to itself; None
    for one it does not (the redirect would be an open one)."""
    if not ABSOLUTE.match(raw_source):
        return "/" + raw_source.lstrip("/") + (f"?{query}" if query else "")
    settings = current_app.extensions["facecrop"].settings
    try:
        return resolve_source(raw_source, query, settings.origin, settings.allowed_sources).url
    except SourceNotAllowed:
        return None


def load(source: Source, validator: str | None = None) -> Loaded:
    """The source's bytes; or, where `validator` is given and still current (the origin answered a
    conditional request with 304, the file's stat, or the same bytes), no bytes."""
    services = current_app.extensions["facecrop"]
    with g.timer.stage("fetch"):
        if source.path is not None:
            current = f"f:{file_validator(source.path)}"
            if current == validator:
                return Loaded(None, current)
            data, version = read_file(source.path, services.settings.max_upload_bytes)
            return Loaded(data, f"f:{version}")
        assert source.url is not None
        client = request.environ.get("gunicorn.socket")
        fetched = services.fetcher.get(source.url, source.origin, validator and conditions(validator), client)
    if not fetched.modified and validator is not None:
        return Loaded(None, validator, fetched.cache_control, revalidated=True)
    current = etag_validator(fetched.etag, fetched.last_modified, fetched.body)
    return Loaded(None if current == validator else fetched.body, current, fetched.cache_control)
