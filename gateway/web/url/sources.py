"""Where a URL's source is read from.

A relative source (`uploads/alice.jpg`) is read from FACECROP_ORIGIN: under an http(s) base URL
(the operator's own, which may be on a private network; no dot segment leaves its path), or from
a directory that it never leaves (`..`, `%2e%2e` and symbolic links that point out are refused; a leading or
doubled slash is a path's, as under an HTTP origin). An
absolute source (`https://...`) must be http or https, carry no credentials and start with one
of FACECROP_ALLOWED_SOURCES (`*` alone: any host); gateway/web/url/fetch.py then checks the address
it connects to, on every redirect too.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from gateway.errors import PayloadTooLarge, SourceNotAllowed, SourceNotFound

ABSOLUTE = re.compile(r"^(https?):/+", re.IGNORECASE)  # a proxy may have merged the slashes of https://
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Source:
    """An HTTP URL to fetch, or a file of the directory origin."""

    url: str | None = None
    path: Path | None = None
    origin: str | None = None  # the operator's origin (scheme://host:port) the URL is under: its address is trusted

    @property
    def identity(self) -> str:
        return self.url or str(self.path)


def normalized(url: str) -> str:
    """`url` with its scheme and host in lower case and no default port; SourceNotAllowed for what
    is not an http(s) URL with a valid host, no credentials and no dot segments (`..`, `%2e%2e`:
    an HTTP client would remove them, leaving the path a prefix was checked against)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise SourceNotAllowed(f"not a valid URL: {url[:80]!r}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        raise SourceNotAllowed("sources are http:// or https:// URLs with a host")
    if parts.username is not None or parts.password is not None:
        raise SourceNotAllowed("source URLs may not carry credentials")
    if any(segment in (".", "..") for segment in unquote(parts.path).replace("\\", "/").split("/")):
        raise SourceNotAllowed("source paths may not have . or .. segments (they would leave a prefix)")
    try:
        parts.hostname.encode("idna")
    except UnicodeError:
        raise SourceNotAllowed(f"not a valid host name: {parts.hostname[:80]!r}") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def origin_of(url: str) -> str:
    """scheme://host[:port] of a normalized URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def allowed_url(url: str, prefixes: tuple[str, ...]) -> str:
    """The normalized URL if it starts with one of `prefixes` (`*`: any), else SourceNotAllowed."""
    checked = normalized(url)
    if "*" in prefixes or any(checked.startswith(normalized(prefix)) for prefix in prefixes):
        return checked
    raise SourceNotAllowed("the source is not under FACECROP_ALLOWED_SOURCES")


def resolve_source(raw: str, query: str, origin: str, prefixes: tuple[str, ...]) -> Source:
    """The Source of `raw` (the URL's source part, as sent) and the request's query string, which
    belongs to an HTTP source's URL (a directory origin has no use for it)."""
    with_query = f"{raw}?{query}" if query else raw
    absolute = ABSOLUTE.match(raw)
    if absolute:
        return Source(url=allowed_url(ABSOLUTE.sub(f"{absolute.group(1)}://", with_query, count=1), prefixes))
    if not origin:
        raise SourceNotAllowed("relative sources need FACECROP_ORIGIN; absolute ones FACECROP_ALLOWED_SOURCES")
    if ABSOLUTE.match(origin):
        base = normalized(origin).rstrip("/") + "/"
        return Source(url=normalized(base + with_query.lstrip("/")), origin=origin_of(base))
    return Source(path=inside(Path(origin), raw))


def inside(root: Path, raw: str) -> Path:
    """The file `raw` (percent-decoded) names under `root`, never outside it (symbolic links
    resolved). A source is a path on the origin, as under an HTTP origin: leading, doubled and
    encoded slashes name the same file (`//lib/a.jpg`, `lib//a.jpg`, `lib%2Fa.jpg`: `lib/a.jpg`)."""
    relative = unquote(raw)
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if not parts or "\x00" in relative or ".." in parts:
        raise SourceNotFound(f"no image {relative[:200]!r} under the origin (FACECROP_ORIGIN)")
    name = "/".join(parts)
    base = root.resolve()
    try:
        path = (base / name).resolve(strict=True)
    except (OSError, RuntimeError):
        raise SourceNotFound(f"no image {name[:200]!r} under the origin (FACECROP_ORIGIN)") from None
    if not path.is_relative_to(base) or not path.is_file():
        raise SourceNotFound(f"no image {name[:200]!r} under the origin (FACECROP_ORIGIN)")
    return path


def read_file(path: Path, max_bytes: int) -> tuple[bytes, str]:
    """The file's bytes and its validator (modification time and size, as nginx's ETag), from one
    open file: the validator is the bytes' own even if the file is replaced meanwhile."""
    try:
        with open(path, "rb") as file:
            status = os.fstat(file.fileno())
            data = file.read(max_bytes + 1)
    except OSError:
        raise SourceNotFound("no such image under the origin") from None
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"the source is larger than the limit of {max_bytes} bytes")
    return data, validator_of(status)


def file_validator(path: Path) -> str:
    """The file's validator now (a stat): for revalidation without reading it."""
    try:
        return validator_of(os.stat(path))
    except OSError:
        raise SourceNotFound("no such image under the origin") from None


def validator_of(status: os.stat_result) -> str:
    return f"{status.st_mtime_ns:x}-{status.st_size:x}"
