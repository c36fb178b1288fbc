"""HTTP caching of the URL form, as a CDN expects: strong ETags, revalidation, Cache-Control, and
format=auto negotiated from Accept.

An ETag carries the source's validator (its ETag, else its Last-Modified, else a hash of its
bytes; a file's modification time and size), sealed with AES-SIV under a server-side secret
(FACECROP_ETAG_SECRET) and bound to what the URL says: the pipeline and model version, the source
as the URL names it, the canonical options and the negotiated format. It reveals nothing the URL
does not (not the origin's address, not its validator); `If-None-Match` with it is unsealed and
checked against the origin with a conditional request (a 304 from it: no download, no decode, no
model call), or a file's stat. Nothing is kept between requests: the same URL gets the same ETag
on every replica that has the same secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV
from werkzeug.datastructures import Headers, MIMEAccept
from werkzeug.http import parse_accept_header, parse_etags

from gateway.imaging.encode import negotiable

PIPELINE_VERSION = "9"  # raised whenever the same source and options would give other pixels
DEFAULT_MAX_AGE = 86_400  # when the origin says nothing
MIN_MAX_AGE = 3_600  # also where a 304 from the origin does not repeat its Cache-Control
ERROR_MAX_AGE = 60  # answers that a retry will not change: no such source, not an image, too large
LASTING_ERRORS = frozenset({404, 413, 415})


def etag_validator(etag: str | None, last_modified: str | None, body: bytes = b"") -> str:
    """What identifies a source's version: `e:` its ETag, else `m:` its Last-Modified, else `h:` a hash."""
    if etag:
        return f"e:{etag}"
    if last_modified:
        return f"m:{last_modified}"
    return f"h:{hashlib.sha256(body).hexdigest()[:32]}"


class EtagSealer:
    """Seals a source's validator into an ETag bound to the answer's public description, and
    unseals the ETags of If-None-Match; `secret` empty: one made now (this process's own)."""

    def __init__(self, secret: bytes):
        key = hmac.digest(secret or secrets.token_bytes(32), b"facecrop etag", "sha512")
        self._siv = AESSIV(key)

    def seal(self, public: str, validator: str) -> str:
        """The answer's strong ETag (quoted)."""
        sealed = self._siv.encrypt(validator.encode(), [public.encode()])
        return f'"{base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()}"'

    def offered(self, if_none_match: str | None, public: str) -> list[str]:
        """The validators sealed in the ETags of `if_none_match` for `public` (others are skipped)."""
        validators = []
        for tag in parse_etags(if_none_match).as_set(include_weak=True):
            try:
                sealed = base64.urlsafe_b64decode(tag + "=" * (-len(tag) % 4))
                validators.append(self._siv.decrypt(sealed, [public.encode()]).decode())
            except (binascii.Error, InvalidTag, UnicodeDecodeError, ValueError):
                continue
        return validators


def describe(version: str, source: str, canonical: str, fmt: str) -> str:
    """The public description an ETag is bound to: what the URL says, and the detection's `version`
    (the models and the input they see)."""
    return "\n".join((PIPELINE_VERSION, version, source, canonical, fmt))


def conditions(validator: str) -> dict[str, str] | None:
    """The conditional request headers that revalidate `validator` at its origin (None: a hash, which
    only the bytes can confirm)."""
    kind, _, value = validator.partition(":")
    if not (value.isascii() and value.isprintable()):  # a made-up one: no header can carry it
        return None
    return {"e": {"If-None-Match": value}, "m": {"If-Modified-Since": value}}.get(kind)


def cache_control(origin: str | None, default_age: int = DEFAULT_MAX_AGE) -> str:
    """From the origin's Cache-Control, as Cloudflare follows it: its max-age (or s-maxage; 0 where
    it says `no-cache`) but at least MIN_MAX_AGE unless it says `must-revalidate` (passed on, its
    own age kept), else `default_age`; public, unless it says `private` (kept so) or `no-store`
    (passed on). An origin's `no-cache` was a day: no max-age, so the default."""
    directives = {}
    for directive in (origin or "").lower().split(","):
        name, _, value = directive.strip().partition("=")
        directives[name] = value.strip('"')
    if "no-store" in directives:
        return "no-store"
    ages = [int(directives[name]) for name in ("max-age", "s-maxage") if directives.get(name, "").isdigit()]
    if "no-cache" in directives:  # fresh for no time: revalidated before each use
        ages = [0]
    revalidate = "must-revalidate" in directives
    age = (max(ages) if revalidate else max(max(ages), MIN_MAX_AGE)) if ages else default_age
    scope = "private" if "private" in directives else "public"
    return f"{scope}, max-age={age}" + (", must-revalidate" if revalidate else "")


def error_cache_control(status: int) -> str:
    return f"public, max-age={ERROR_MAX_AGE}" if status in LASTING_ERRORS else "no-store"


def accepts(accept: MIMEAccept, mimetype: str) -> bool:
    """Whether the client names `mimetype` itself (a wildcard is no promise), with a quality above 0."""
    return any(value.lower() == mimetype and quality > 0 for value, quality in accept)


# The client hints slow-connection-quality follows, and what makes each count as slow (Cloudflare's).
CLIENT_HINTS = ("Save-Data", "ECT", "RTT", "Downlink")
SLOW_ECT = frozenset({"slow-2g", "2g", "3g"})
SLOW_RTT_MS = 150
SLOW_DOWNLINK_MBPS = 5


def slow_connection(headers: Headers | Mapping[str, str]) -> bool:
    """Whether the client hints say the connection is slow: Save-Data on, an effective type of 3G or
    worse, a round trip over 150 ms, or under 5 Mbps."""
    if headers.get("Save-Data", "").strip().lower() == "on" or headers.get("ECT", "").strip().lower() in SLOW_ECT:
        return True
    try:
        rtt, downlink = headers.get("RTT"), headers.get("Downlink")
        return (rtt is not None and float(rtt) > SLOW_RTT_MS) or (
            downlink is not None and float(downlink) < SLOW_DOWNLINK_MBPS
        )
    except ValueError:
        return False


def negotiate(requested: str | None, accept_header: str | None) -> str:
    """The output format: format=auto picks AVIF (where Accept names it and the encoder is here),
    else WebP (where Accept names it), else "input" as Cloudflare falls back to "the original
    format" (a PNG stays a PNG, its transparency kept; an animated GIF or an APNG stays one; a format
    not every client reads is a JPEG: encode.READABLE_INPUTS); "input" too where none was requested
    (the source's own format; encode.output_format settles it, AVIF as WebP without an encoder)."""
    accept = parse_accept_header(accept_header, MIMEAccept)
    if requested == "auto":
        return next((fmt.name for fmt in negotiable() if accepts(accept, fmt.content_type)), "input")
    return requested or "input"
