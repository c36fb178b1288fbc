"""Who may call the API and how many at once: API keys, the in-flight limit, CORS, security headers."""

from __future__ import annotations

import hmac
import threading

from flask import Response, g, request

from gateway.errors import Overloaded, Unauthorized

# The API needs a key where keys are set; the URL form (whose <img src> cannot carry one:
# gateway/web/url/signing.py) is signed instead. Both take a slot of the in-flight limit once their
# source has arrived (gateway/web/responses.py); everything else (health, metrics, docs, the demo
# page) is open and unlimited.
API_PREFIX = "/v1/"
EXPOSED_HEADERS = "X-Crop-Rect, X-Face-Count, X-Passes, X-Detectors, X-Request-ID"
PAGE_POLICY = (
    "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)


def key_is_valid(header: str | None, keys: tuple[str, ...]) -> bool:
    """Whether `Authorization: Bearer KEY` names one of `keys`, comparing in constant time."""
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        return False
    matches = [hmac.compare_digest(given.strip().encode(), key.encode()) for key in keys]
    return any(matches)


class InFlightLimit:
    """A per-process cap on requests decoding, running the model and encoding at once; beyond it,
    429 at once instead of a queue."""

    def __init__(self, limit: int):
        self._slots = threading.BoundedSemaphore(limit)

    def admit(self) -> None:
        if not self._slots.acquire(blocking=False):
            raise Overloaded("too many requests in flight; retry after the delay in Retry-After")
        g.holds_slot = True

    def release(self) -> None:
        if g.pop("holds_slot", False):
            self._slots.release()


def guard_api(keys: tuple[str, ...]) -> None:
    """before_request: API keys (when configured) for API calls (their slot of the in-flight limit is
    taken once the upload has arrived, as the URL form's once its source has: web/responses.py)."""
    if not request.path.startswith(API_PREFIX) or request.method == "OPTIONS":
        return
    if keys and not key_is_valid(request.headers.get("Authorization"), keys):
        raise Unauthorized("a valid API key is required: Authorization: Bearer KEY")


def add_headers(response: Response, cors_origins: tuple[str, ...]) -> Response:
    """after_request: security headers everywhere, CORS headers for configured origins only."""
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    if response.mimetype == "text/html":
        response.headers["Content-Security-Policy"] = PAGE_POLICY
        response.headers["X-Frame-Options"] = "DENY"
    origin = request.headers.get("Origin")
    if origin and origin in cors_origins:
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Expose-Headers"] = EXPOSED_HEADERS
        response.headers["Access-Control-Allow-Headers"] = "Authorization, Content-Type, X-Request-ID"
        response.headers["Access-Control-Allow-Methods"] = "POST, GET, OPTIONS"
        response.vary.add("Origin")
    return response
