"""HTTP caching of the URL form, as a CDN expects: strong ETags, revalidation, Cache-Control, and
format=auto negotiated from Accept.

An ETag is `"<digest>.<validator>"`: the digest covers the pipeline and model version, the
source, the canonical options, the negotiated format and the source's validator (its ETag, else
its Last-Modified, else a hash of its bytes; a file's modification time and size); the
validator rides along, base64url, so that `If-None-Match` can be checked against the origin with
a conditional request (a 304 from it: no download, no decode, no model call), or a file's stat.
Nothing is kept between requests: the same URL gets the same ETag on every replica.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from werkzeug.datastructures import MIMEAccept
from werkzeug.http import parse_accept_header, parse_etags

from gateway.encode import AVIF_AVAILABLE

PIPELINE_VERSION = "1"  # raised whenever the same source and options would give other pixels
DEFAULT_MAX_AGE = 86_400  # when the origin says nothing
MIN_MAX_AGE = 3_600
ERROR_MAX_AGE = 60  # answers that a retry will not change: no such source, not an image, too large
LASTING_ERRORS = frozenset({404, 413, 415})


def etag_validator(etag: str | None, last_modified: str | None, body: bytes = b"") -> str:
    """What identifies a source's version: `e:` its ETag, else `m:` its Last-Modified, else `h:` a hash."""
    if etag:
        return f"e:{etag}"
    if last_modified:
        return f"m:{last_modified}"
    return f"h:{hashlib.sha256(body).hexdigest()[:32]}"


def make_etag(version: str, source: str, canonical: str, fmt: str, validator: str) -> str:
    """The answer's strong ETag (quoted)."""
    digest = hashlib.sha256("\n".join((PIPELINE_VERSION, version, source, canonical, fmt, validator)).encode())
    carried = base64.urlsafe_b64encode(validator.encode()).rstrip(b"=").decode()
    return f'"{digest.hexdigest()[:32]}.{carried}"'


def offered_validators(if_none_match: str | None) -> list[str]:
    """The source validators carried by the ETags of an If-None-Match of ours (others are skipped)."""
    validators = []
    for tag in parse_etags(if_none_match).as_set(include_weak=True):
        _, dot, carried = tag.partition(".")
        if not dot:
            continue
        try:
            validators.append(base64.urlsafe_b64decode(carried + "=" * (-len(carried) % 4)).decode())
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
    return validators


def conditions(validator: str) -> dict[str, str] | None:
    """The conditional request headers that revalidate `validator` at its origin (None: a hash, which
    only the bytes can confirm)."""
    kind, _, value = validator.partition(":")
    if not (value.isascii() and value.isprintable()):  # a made-up one: no header can carry it
        return None
    return {"e": {"If-None-Match": value}, "m": {"If-Modified-Since": value}}.get(kind)


def cache_control(origin: str | None) -> str:
    """From the origin's Cache-Control: its max-age (or s-maxage) but at least MIN_MAX_AGE, else
    DEFAULT_MAX_AGE; public, unless it says `private` (kept so) or `no-store` (passed on)."""
    directives = {}
    for directive in (origin or "").lower().split(","):
        name, _, value = directive.strip().partition("=")
        directives[name] = value.strip('"')
    if "no-store" in directives:
        return "no-store"
    ages = [int(directives[name]) for name in ("max-age", "s-maxage") if directives.get(name, "").isdigit()]
    age = max(max(ages), MIN_MAX_AGE) if ages else DEFAULT_MAX_AGE
    return f"{'private' if 'private' in directives else 'public'}, max-age={age}"


def error_cache_control(status: int) -> str:
    return f"public, max-age={ERROR_MAX_AGE}" if status in LASTING_ERRORS else "no-store"


def accepts(accept: MIMEAccept, mimetype: str) -> bool:
    """Whether the client names `mimetype` itself (a wildcard is no promise), with a quality above 0."""
    return any(value.lower() == mimetype and quality > 0 for value, quality in accept)


def negotiate(requested: str | None, accept_header: str | None) -> str:
    """The output format: format=auto picks AVIF (where Accept names it and the encoder is here),
    else WebP (where Accept names it), else JPEG; "input" where none was requested (the source's
    own format; encode.output_format settles it, AVIF as WebP without an encoder)."""
    accept = parse_accept_header(accept_header, MIMEAccept)
    if requested == "auto":
        if AVIF_AVAILABLE and accepts(accept, "image/avif"):
            return "avif"
        return "webp" if accepts(accept, "image/webp") else "jpeg"
    return requested or "input"
