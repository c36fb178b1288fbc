"""Fetching an HTTP source the way careful image proxies do (go-camo, imgproxy).

- The address is checked when connecting, after DNS, on every hop: loopback, private,
  link-local, CGNAT, multicast, unspecified, reserved and IPv4-in-IPv6 addresses are refused
  (unless FACECROP_ALLOW_PRIVATE_SOURCES), and the connection goes to the address that was
  checked, so a name cannot resolve to another one in between. Nothing is sent to a refused
  address: not even a TCP handshake.
- The operator's origin (FACECROP_ORIGIN) is trusted for its own host only.
- At most MAX_REDIRECTS redirects, each one checked again like a new source.
- Connect timeout, and a deadline for the whole fetch (name lookups aside) that a slow body
  cannot stretch; the body
  is streamed and cut off at the upload limit (413); nothing is decoded (no Content-Encoding),
  nothing is written to disk.
- Connections are pooled per origin host.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from dataclasses import dataclass
from urllib.parse import urljoin

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util import connection

from gateway.errors import OriginError, OriginTimeout, PayloadTooLarge, SourceNotAllowed, SourceNotFound
from gateway.url.sources import allowed_url, normalized, origin_of

MAX_REDIRECTS = 3
REDIRECTS = frozenset({301, 302, 303, 307, 308})
NOT_FOUND = frozenset({404, 410})
CHUNK = 64 * 1024
NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# IETF protocol assignments (RFC 6890); Python before 3.11.10 calls most of it global.
PROTOCOL_ASSIGNMENTS = ipaddress.ip_network("192.0.0.0/24")
HEADERS = {"User-Agent": "facecrop (+https://github.com/facecrop)", "Accept": "image/*", "Accept-Encoding": "identity"}


class AddressRefused(Exception):
    """The source resolves only to addresses that may not be reached (not an OSError: urllib3 passes it on)."""


def is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Global unicast (not reserved, not site-local), and so is any IPv4 address embedded in it
    (mapped, IPv4-compatible, 6to4, Teredo, NAT64)."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (address.teredo or (None, None))[1]
        if address in NAT64 or address in IPV4_COMPATIBLE:
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if (embedded is not None and not is_public(embedded)) or address.is_site_local:
            return False
    if address in PROTOCOL_ASSIGNMENTS:
        return False
    return address.is_global and not (address.is_multicast or address.is_reserved)


def public_address(host: str, port: int) -> str:
    """The first address `host` resolves to that is public; AddressRefused if none is."""
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        if is_public(ipaddress.ip_address(str(sockaddr[0]).split("%")[0])):
            return str(sockaddr[0])
    raise AddressRefused(f"{host} resolves only to addresses that are not public")


class _PublicOnly(HTTPConnection):
    """A connection made only to a checked public address (TLS still checks the host name)."""

    def _new_conn(self) -> socket.socket:
        try:
            address = public_address(self._dns_host, self.port)
            return connection.create_connection(
                (address, self.port), self.timeout, self.source_address, self.socket_options
            )
        except socket.gaierror as error:
            raise NameResolutionError(self.host, self, error) from error
        except UnicodeError as error:  # a name IDNA cannot encode
            raise NameResolutionError(self.host, self, socket.gaierror(str(error))) from error
        except TimeoutError as error:
            raise ConnectTimeoutError(self, f"connecting to {self.host} timed out") from error
        except OSError as error:
            raise NewConnectionError(self, f"cannot connect to {self.host}: {error}") from error


class _PublicOnlyHTTPS(_PublicOnly, HTTPSConnection):
    pass


def _pools(public_only: bool) -> urllib3.PoolManager:
    manager = urllib3.PoolManager(num_pools=64, maxsize=8, block=False, retries=False)
    if public_only:
        manager.pool_classes_by_scheme = {
            "http": type("PublicHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": _PublicOnly}),
            "https": type("PublicHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": _PublicOnlyHTTPS}),
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

    def __init__(self, allowed: tuple[str, ...], allow_private: bool, connect_s: float, total_s: float, limit: int):
        self.allowed, self.connect_s, self.total_s, self.limit = allowed, connect_s, total_s, limit
        self.trusted = _pools(public_only=False)  # the operator's origin
        self.checked = _pools(public_only=not allow_private)

    def get(self, url: str, origin: str | None = None, conditions: dict[str, str] | None = None) -> Fetched:
        """The source at `url` (normalized, and allowed or under the trusted `origin`), conditionally with
        `conditions` (If-None-Match / If-Modified-Since): 404, 413, 502 and 504 as ApiErrors."""
        deadline = time.monotonic() + self.total_s
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
                    timeout=urllib3.Timeout(
                        connect=min(self.connect_s, self._left(deadline)), read=self._left(deadline)
                    ),
                )
                if response.status not in REDIRECTS or "Location" not in response.headers:
                    return self._answer(response, deadline)
                response.close()  # a redirect's body is not read, nor any other error's
                try:
                    location = normalized(urljoin(url, response.headers["Location"]))
                except ValueError:
                    raise OriginError("the origin redirected to a malformed URL") from None
                url = location if under(location, origin) else allowed_url(location, self.allowed)
            raise OriginError(f"the origin redirected more than {MAX_REDIRECTS} times")
        except AddressRefused as refused:
            raise SourceNotAllowed(f"{refused}: refused before connecting") from None
        except urllib3.exceptions.HTTPError as error:
            # a refused connection (NewConnectionError) is a ConnectTimeoutError too, for old code's sake
            if isinstance(error, urllib3.exceptions.TimeoutError) and not isinstance(error, NewConnectionError):
                raise OriginTimeout("the origin did not answer in time") from None
            raise OriginError(f"the origin could not be reached: {type(error).__name__}") from None

    def _left(self, deadline: float) -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise OriginTimeout("the origin did not answer in time")
        return left

    def _answer(self, response: urllib3.BaseHTTPResponse, deadline: float) -> Fetched:
        headers = response.headers
        if response.status == 304:
            response.release_conn()
            body, modified = b"", False
        else:
            if response.status != 200:
                response.close()
            if response.status in NOT_FOUND:
                raise SourceNotFound(f"the origin answered {response.status}")
            if response.status != 200:
                raise OriginError(f"the origin answered {response.status}")
            declared = headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > self.limit:
                response.close()
                raise PayloadTooLarge(f"the source is larger than the limit of {self.limit} bytes")
            body, modified = self._body(response, deadline), True
        return Fetched(
            modified=modified,
            body=body,
            etag=headers.get("ETag"),
            last_modified=headers.get("Last-Modified"),
            cache_control=headers.get("Cache-Control"),
        )

    def _body(self, response: urllib3.BaseHTTPResponse, deadline: float) -> bytes:
        """The body, read as it arrives; cut off past the limit or the deadline."""
        chunks, size = [], 0
        try:
            while chunk := self._read(response, deadline):
                size += len(chunk)
                if size > self.limit:
                    raise PayloadTooLarge(f"the source is larger than the limit of {self.limit} bytes")
                chunks.append(chunk)
        except BaseException:
            response.close()
            raise
        response.release_conn()
        return b"".join(chunks)

    def _read(self, response: urllib3.BaseHTTPResponse, deadline: float) -> bytes:
        """What has arrived (up to CHUNK), waiting no later than the deadline."""
        sock = getattr(getattr(response, "connection", None), "sock", None)
        if sock is not None:
            sock.settimeout(self._left(deadline))
        return response.read1(CHUNK)
