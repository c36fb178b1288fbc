"""Fetching an HTTP source the way careful image proxies do (go-camo, imgproxy).

- The address is checked when connecting, after DNS, on every hop: loopback, private,
  link-local, CGNAT, multicast, unspecified, reserved and IPv4-in-IPv6 addresses are refused
  (unless FACECROP_ALLOW_PRIVATE_SOURCES), and the connection goes to the address that was
  checked, so a name cannot resolve to another one in between. Nothing is sent to a refused
  address: not even a TCP handshake.
- The operator's origin (FACECROP_ORIGIN) is trusted for its own host only.
- At most MAX_REDIRECTS redirects, each one checked again like a new source.
- One wall-clock deadline for the whole fetch, name lookups, connecting, every redirect, the
  status line, headers, 1xx answers, the body, chunk lines and trailers included
  (gateway/web/url/deadline.py); a fetch whose client has gone stops; at most MAX_INTERIM 1xx
  answers and MAX_TRAILER_LINES trailer lines.
- Admitted by gateway/web/url/admission.py: a budget of fetches apart from the model's slots, and a
  breaker per origin.
- The body is streamed and cut off at the upload limit (413); nothing is decoded (no
  Content-Encoding), nothing is written to disk; an answer cut short, empty, or a 304 that was
  not asked for is a 502.
- Answers never repeat what the origin said (a redirect's host, say): internal names stay inside.
- Connections are pooled per origin host.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection

from gateway.errors import (
    ApiError,
    ClientGone,
    OriginError,
    OriginTimeout,
    PayloadTooLarge,
    SourceNotAllowed,
    SourceNotFound,
)
from gateway.web.url.admission import FetchAdmission
from gateway.web.url.deadline import Watchdog, client_gone
from gateway.web.url.sources import allowed_url, normalized, origin_of

MAX_REDIRECTS = 3
MAX_INTERIM = 4  # 1xx answers before the final one
MAX_TRAILER_LINES = 32
REDIRECTS = frozenset({301, 302, 303, 307, 308})
NOT_FOUND = frozenset({404, 410})
CHUNK = 64 * 1024
# IETF protocol assignments (RFC 6890); Python before 3.11.10 calls most of it global.
PROTOCOL_ASSIGNMENTS = ipaddress.ip_network("192.0.0.0/24")
HEADERS = {"User-Agent": "facecrop (+https://github.com/facecrop)", "Accept": "image/*", "Accept-Encoding": "identity"}


class AddressRefused(Exception):
    """The source resolves only to addresses that may not be reached (not an OSError: urllib3 passes it on)."""


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Global unicast (not reserved, not site-local), and so is any IPv4 address embedded in it
    (mapped, 6to4, Teredo). NAT64 (64:ff9b::/96) and IPv4-compatible (::/96) addresses lie in ::/8,
    which is reserved: refused whatever they embed."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo or (None, None))[1]
        if (embedded is not None and not is_public(embedded)) or address.is_site_local:
            return False
    if address in PROTOCOL_ASSIGNMENTS:
        return False
    return address.is_global and not (address.is_multicast or address.is_reserved)


def first_address(addresses: list[Any], public_only: bool) -> str:
    """The first of getaddrinfo's `addresses` that may be reached; AddressRefused if none may."""
    for *_, sockaddr in addresses:
        if not public_only or is_public(ipaddress.ip_address(sockaddr[0])):  # a scope (fe80::1%eth0) included
            return str(sockaddr[0])
    raise AddressRefused("the source resolves only to addresses that are not public")


class CappedResponse(http.client.HTTPResponse):
    """http.client's response with at most MAX_INTERIM 1xx answers and MAX_TRAILER_LINES trailer lines
    (it reads them in loops of its own, without a bound)."""

    _statuses = 0

    def _read_status(self) -> tuple[str, int, str]:
        self._statuses += 1
        if self._statuses > MAX_INTERIM + 1:
            raise http.client.HTTPException("more 1xx answers than allowed")
        return super()._read_status()  # type: ignore[misc]

    def _read_and_discard_trailer(self) -> None:
        for _ in range(MAX_TRAILER_LINES):
            line = self.fp.readline(http.client._MAXLINE + 1)  # type: ignore[attr-defined]
            if len(line) > http.client._MAXLINE:  # type: ignore[attr-defined]
                raise http.client.LineTooLong("trailer line")
            if line in (b"\r\n", b"\n", b""):
                return
        raise http.client.HTTPException("more trailer lines than allowed")


class _Watched(HTTPConnection):
    """A connection whose name is resolved, and whose socket is read, within the fetch's deadline
    (the pool's `watchdog`); made only to a checked public address where `public_only` (TLS still
    checks the host name)."""

    response_class = CappedResponse
    watchdog: Watchdog
    public_only: bool

    def _new_conn(self) -> socket.socket:
        try:  # (the host stays the name: the Host header, SNI and the certificate check use it)
            address = first_address(self.watchdog.resolve(self._dns_host, self.port), self.public_only)
            sock = connection.create_connection(
                (address, self.port), self.timeout, self.source_address, self.socket_options
            )
        except socket.gaierror as error:  # (a name IDNA cannot encode is no normalized source)
            raise NameResolutionError(self.host, self, error) from error
        except TimeoutError as error:  # the lookup outlived the deadline (before the watchdog says so), or the connect
            raise ConnectTimeoutError(self, f"{error} (connect timeout {self.timeout} s)") from error
        except OSError as error:
            raise NewConnectionError(self, f"cannot connect to the origin: {error.strerror}") from error
        self.watchdog.adopt(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is not None:  # a pooled connection, made under an earlier fetch's watch
            self.watchdog.adopt(self.sock)
        super().request(*args, **kwargs)


class _WatchedHTTPS(_Watched, HTTPSConnection):
    pass


def _pools(watchdog: Watchdog, public_only: bool) -> urllib3.PoolManager:
    """Pools per origin host (the 64 hosts last used, 8 idle connections each), their connections
    watched and checked; no retries (a GET is asked once, and a redirect's answer returned as it is)."""
    manager = urllib3.PoolManager(num_pools=64, maxsize=8, retries=False)
    settings = {"watchdog": watchdog, "public_only": public_only}
    manager.pool_classes_by_scheme = {
        scheme: type(pool.__name__, (pool,), {"ConnectionCls": type(watched.__name__, (watched,), settings)})
        for scheme, pool, watched in (
            ("http", HTTPConnectionPool, _Watched),
            ("https", HTTPSConnectionPool, _WatchedHTTPS),
        )
    }
    return manager


@dataclass(frozen=True)
class Fetched:
    """An origin's answer: the body (empty when not modified) and its caching facts."""

    modified: bool
    body: bytes = b""
    etag: str | None = None
    last_modified: str | None = None
    cache_control: str | None = None  # the origin's own


def under(url: str, origin: str | None) -> bool:
    """Whether `url` (normalized) is on the operator's trusted `origin` (scheme://host:port)."""
    return origin is not None and origin_of(url) == origin


class Fetcher:
    """GETs sources with the checks above; one per worker process (its pools are shared by threads)."""

    def __init__(
        self,
        allowed: tuple[str, ...],
        allow_private: bool,
        connect_s: float,
        total_s: float,
        limit: int,
        admission: FetchAdmission,
    ):
        self.allowed, self.connect_s, self.total_s, self.limit = allowed, connect_s, total_s, limit
        self.admission = admission
        self.watchdog = Watchdog()
        self.trusted = _pools(self.watchdog, public_only=False)  # the operator's origin
        self.checked = _pools(self.watchdog, public_only=not allow_private)

    def get(
        self,
        url: str,
        origin: str | None = None,
        conditions: dict[str, str] | None = None,
        client: socket.socket | None = None,
    ) -> Fetched:
        """The source at `url` (normalized, and allowed or under the trusted `origin`), conditionally with
        `conditions` (If-None-Match / If-Modified-Since), for `client` (the caller's socket: the fetch
        stops when it closes): 404, 413, 499, 502, 503 and 504 as ApiErrors."""
        with self.admission.admitted(origin_of(url)), self.watchdog.watching(self.total_s, client) as watch:
            try:
                fetched = self._follow(url, origin, conditions)
            except (ApiError, urllib3.exceptions.HTTPError, http.client.HTTPException, OSError, ValueError):
                if not watch.ended:
                    raise
            # ended: whatever was read may be cut short (a body that ends at the connection's close)
            if watch.ended == "client":
                raise ClientGone("the client closed its connection")
            if watch.ended:
                raise OriginTimeout(f"the origin did not answer within {self.total_s:g} s")
            return fetched

    def _follow(self, url: str, origin: str | None, conditions: dict[str, str] | None) -> Fetched:
        try:
            for _ in range(MAX_REDIRECTS + 1):
                pools = self.trusted if under(url, origin) else self.checked
                response = pools.request(
                    "GET",
                    url,
                    headers={**HEADERS, **(conditions or {})},
                    redirect=False,
                    preload_content=False,
                    decode_content=False,
                    timeout=urllib3.Timeout(connect=self.connect_s, read=self.total_s),
                )
                if response.status not in REDIRECTS or "Location" not in response.headers:
                    return self._answer(response, conditions is not None)
                response.close()  # a redirect's body is not read, nor any other error's
                url = self._redirected(url, response.headers["Location"], origin)
            raise OriginError(f"the origin redirected more than {MAX_REDIRECTS} times")
        except AddressRefused as refused:
            raise SourceNotAllowed(f"{refused}: refused before connecting") from None
        except urllib3.exceptions.HTTPError as error:
            # a refused connection (NewConnectionError) is a ConnectTimeoutError too, for old code's sake
            if isinstance(error, urllib3.exceptions.TimeoutError) and not isinstance(error, NewConnectionError):
                raise OriginTimeout("the origin did not answer in time", cause=str(error)) from None
            raise OriginError(f"the origin could not be reached: {type(error).__name__}", cause=str(error)) from None

    def _redirected(self, url: str, location: str, origin: str | None) -> str:
        """The redirect's target, allowed as a new source; refused without repeating it (it may name
        hosts of the origin's network)."""
        try:
            target = normalized(urljoin(url, location))
            return target if under(target, origin) else allowed_url(target, self.allowed)
        except ValueError:  # urljoin's, for what is no URL at all
            raise OriginError("the origin redirected to a malformed URL") from None
        except SourceNotAllowed as refused:
            raise SourceNotAllowed("the origin redirected to a source that is not allowed", refused.message) from None

    def _answer(self, response: urllib3.BaseHTTPResponse, conditional: bool) -> Fetched:
        headers = response.headers
        if response.status == 304 and conditional:
            response.release_conn()
            body, modified = b"", False
        else:
            if response.status != 200:
                response.close()
            if response.status in NOT_FOUND:
                raise SourceNotFound(f"the origin answered {response.status}")
            if response.status == 304:
                raise OriginError("the origin answered 304 to an unconditional request")
            if response.status != 200:
                raise OriginError(f"the origin answered {response.status}")
            declared = headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > self.limit:
                response.close()
                raise PayloadTooLarge(f"the source is larger than the limit of {self.limit} bytes")
            body, modified = self._body(response), True
            if not body:
                raise OriginError("the origin's answer was empty")
        return Fetched(
            modified=modified,
            body=body,
            etag=headers.get("ETag"),
            last_modified=headers.get("Last-Modified"),
            cache_control=headers.get("Cache-Control"),
        )

    def _body(self, response: urllib3.BaseHTTPResponse) -> bytes:
        """The body, read as it arrives; cut off past the limit (the deadline ends it by shutting
        its socket down); a connection closed short of the declared length or the last chunk is a 502."""
        chunks, size = [], 0
        try:
            while chunk := response.read1(CHUNK):
                size += len(chunk)
                if size > self.limit:
                    raise PayloadTooLarge(f"the source is larger than the limit of {self.limit} bytes")
                chunks.append(chunk)
        except BaseException as error:
            response.close()
            if isinstance(error, urllib3.exceptions.ProtocolError):  # a closed connection, a malformed chunk
                raise OriginError("the origin's answer was cut short or malformed", cause=str(error)) from None
            raise
        response.release_conn()
        return b"".join(chunks)


__all__ = ["Fetched", "Fetcher", "client_gone", "is_public"]
