"""Signed URLs, imgproxy's scheme: /cdn-cgi/image/<signature>/<options>/<source>, where signature is
base64url, without padding, of HMAC-SHA256(key, salt + "/<options>/<source>"), the source with its
query string as sent. With a key every URL must carry a valid one; without, none is needed (a
signature segment is told from options because options always contain `=`)."""

from __future__ import annotations

import base64
import hashlib
import hmac

from gateway.errors import InvalidSignature


def signature(key: bytes, salt: bytes, path: str) -> str:
    """The signature of `path` ("/<options>/<source>", as it appears in the URL)."""
    digest = hmac.new(key, salt + path.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def unsigned_path(tail: str, query: str, key: bytes, salt: bytes) -> str:
    """`tail` (what follows /cdn-cgi/image, before any `?`) without its signature segment: checked
    in constant time, over the path and its `query`, when there is a key (403 if missing or
    wrong); dropped unchecked when there is none."""
    first, slash, rest = tail.lstrip("/").partition("/")
    signed = "=" not in first
    path = f"/{rest}" if signed else tail
    if not key:
        return path
    if not signed or not slash:
        raise InvalidSignature("this service needs signed URLs: /cdn-cgi/image/<signature>/<options>/<source>")
    expected = signature(key, salt, f"{path}?{query}" if query else path)
    if not hmac.compare_digest(first.encode(), expected.encode()):
        raise InvalidSignature("the URL's signature does not match its options and source")
    return path
