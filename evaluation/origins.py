"""Real HTTP origins on loopback for the URL form (GET /cdn-cgi/image/...): a photo origin with
validators and misbehaviours on demand, and a trap that counts every connection made to it (the
"internal" server an SSRF would reach). Shared by tests/integration/test_url.py and the bench."""

from __future__ import annotations

import email.utils
import hashlib
import socket
import socketserver
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

HUGE_BYTES = 100 * 1024 * 1024


@dataclass
class OriginState:
    """What the origin serves and what it has seen."""

    root: Path
    max_age: int = 3600
    seen: Counter = field(default_factory=Counter)  # path -> requests
    bodies: Counter = field(default_factory=Counter)  # path -> 200 answers with a body
    not_modified: Counter = field(default_factory=Counter)  # path -> 304 answers
    sent_bytes: Counter = field(default_factory=Counter)  # path -> body bytes written
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)

    def count(self, counter: Counter, path: str, amount: int = 1) -> None:
        with self.lock:
            counter[path] += amount


def answer(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str]) -> None:
    """Write one whole answer from a test server's handler: status, headers, Content-Length (none on
    a 304) and body."""
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name, value)
    if status != 304:
        handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if body:
        handler.wfile.write(body)


class _Origin(BaseHTTPRequestHandler):
    """GET /<file> under the root with ETag, Last-Modified and Cache-Control (304 when they match);
    /plain/<file> without validators or Cache-Control; /bare304/<file> whose 304s have no Cache-Control;
    /redirect?to=URL (302), /chain?n=N (N redirects to itself, then a photo); /missing (404), /error (500),
    /slow (a body trickling for 30 s), /huge (100 MB)."""

    protocol_version = "HTTP/1.1"
    state: OriginState

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        path, query = unquote(parts.path), parse_qs(parts.query)
        self.state.count(self.state.seen, path)
        if path == "/redirect":
            self._answer(302, b"", {"Location": query["to"][0]})
        elif path == "/chain":
            left = int(query["n"][0])
            then = query["then"][0]
            self._answer(302, b"", {"Location": f"/chain?n={left - 1}&then={then}" if left > 1 else then})
        elif path == "/missing":
            self._answer(404, b"no such thing", {"Content-Type": "text/plain"})
        elif path == "/error":
            self._answer(500, b"broken", {"Content-Type": "text/plain"})
        elif path == "/slow":
            self._trickle(path)
        elif path == "/huge":
            self._huge(path)
        elif path.startswith("/plain/"):
            self._file(path, path.removeprefix("/plain/"), validators=False)
        elif path.startswith("/bare304/"):
            self._file(path, path.removeprefix("/bare304/"), validators=True, bare_304=True)
        else:
            self._file(path, path.lstrip("/"), validators=True)

    def _file(self, path: str, name: str, validators: bool, bare_304: bool = False) -> None:
        file = self.state.root / name
        if not file.is_file():
            self._answer(404, b"", {})
            return
        data = file.read_bytes()
        headers = {"Content-Type": "application/octet-stream"}  # never trusted: the bytes are sniffed
        if validators:
            headers["Cache-Control"] = f"public, max-age={self.state.max_age}"
            etag = f'"{hashlib.sha256(data).hexdigest()[:16]}"'
            headers |= {"ETag": etag, "Last-Modified": email.utils.formatdate(file.stat().st_mtime, usegmt=True)}
            if self.headers.get("If-None-Match") == etag:
                self.state.count(self.state.not_modified, path)
                self._answer(304, b"", {"ETag": etag} if bare_304 else headers)
                return
        self.state.count(self.state.bodies, path)
        self._answer(200, data, headers)

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        answer(self, status, body, headers)
        if body:
            self.state.count(self.state.sent_bytes, urlsplit(self.path).path, len(body))

    def _trickle(self, path: str) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "30")
        self.end_headers()
        for _ in range(30):
            if self.state.stop.wait(1):
                return
            self.wfile.write(b"x")
            self.wfile.flush()

    def _huge(self, path: str) -> None:
        self.send_response(200)  # no Content-Length: only reading tells how large it is
        self.send_header("Connection", "close")
        self.end_headers()
        chunk = b"\xff" * 65536
        for _ in range(HUGE_BYTES // len(chunk)):
            try:
                self.wfile.write(chunk)
            except OSError:
                return
            self.state.count(self.state.sent_bytes, path, len(chunk))

    def log_message(self, *args) -> None:
        pass


@contextmanager
def serving(server: socketserver.TCPServer, *stops: threading.Event) -> Iterator[str]:
    """`server` answering on a thread of its own: its base URL (with a trailing /); on exit `stops`
    are set (its handlers end) and it is shut."""
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    try:
        yield f"http://{host}:{port}/"
    finally:
        for stop in stops:
            stop.set()
        server.shutdown()
        server.server_close()


@contextmanager
def photo_origin(root: Path, host: str = "127.0.0.1") -> Iterator[tuple[str, OriginState]]:
    """An origin serving `root` on a free port of `host`: its base URL (with a trailing /) and state."""
    state = OriginState(root)
    with serving(ThreadingHTTPServer((host, 0), type("Origin", (_Origin,), {"state": state})), state.stop) as url:
        yield url, state


class Trap:
    """Listening sockets on one port of several loopback addresses that count the connections made
    to them. A connection is complete (in the listener's queue) before its maker can go on, so
    counting after a request was answered misses none: nothing waits on time."""

    def __init__(self, listeners: list[socket.socket]):
        self.listeners = listeners
        self.port = listeners[0].getsockname()[1]
        self.caught = 0

    def connections(self) -> int:
        """Connections made so far (each accepted and closed as it is counted)."""
        for listener in self.listeners:
            while True:
                try:
                    connection, _ = listener.accept()
                except BlockingIOError:
                    break
                self.caught += 1
                connection.close()
        return self.caught


@contextmanager
def trap(addresses: tuple[str, ...] = ("127.0.0.2", "127.0.0.1", "::1")) -> Iterator[Trap]:
    """A Trap on the same free port of each address this machine has."""
    listeners = [socket.create_server((addresses[0], 0))]
    port = listeners[0].getsockname()[1]
    for address in addresses[1:]:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        try:
            listeners.append(socket.create_server((address, port), family=family))
        except OSError:
            continue  # no such address here (IPv6 off), or the port is taken on it
    for listener in listeners:
        listener.setblocking(False)
    try:
        yield Trap(listeners)
    finally:
        for listener in listeners:
            listener.close()


# A misbehaving origin's answers, by path: each goes on until the origin stops (or the gateway hangs
# up), so that only a deadline of the gateway's own can end the request.
DRIP_S = 0.1
HOSTILE = {
    "/drip-headers": (b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nX-Drip: ", b"x"),
    "/trickle-close": (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b"x"),
    "/trickle-http10": (b"HTTP/1.0 200 OK\r\n\r\n", b"x"),
    "/endless": (b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\nConnection: close\r\n\r\n", b"\xff" * (1 << 20)),
    "/continue-flood": (b"", b"HTTP/1.1 100 Continue\r\n\r\n"),
    "/endless-trailer": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n", b"X-T: 1\r\n" * 8),
    "/drip-chunk-size": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"0"),
    "/cut-headers": (b"HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\n", None),
    "/cut-body": (b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n\xff\xd8\xff\xe0", None),
    "/unasked-304": (b'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n', None),
}


@dataclass
class HostileState:
    """What the hostile origin has seen: requests by path, and hang-ups (the gateway closing a
    connection it was sending on) by path, each with an event to wait on."""

    photo: bytes
    late_s: float = 8.0  # /late answers after this long
    release: threading.Event = field(default_factory=threading.Event)  # /hold answers once set
    stop: threading.Event = field(default_factory=threading.Event)
    seen: Counter = field(default_factory=Counter)
    hung_up: Counter = field(default_factory=Counter)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def count(self, counter: Counter, path: str) -> None:
        with self.changed:
            counter[path] += 1
            self.changed.notify_all()

    def wait_for(self, counter: Counter, path: str, count: int, timeout_s: float) -> bool:
        """Whether `counter[path]` reached `count` within `timeout_s` (an upper bound, not a pace)."""
        with self.changed:
            return self.changed.wait_for(lambda: counter[path] >= count, timeout_s)


class _Hostile(socketserver.BaseRequestHandler):
    """Reads one request, then answers as HOSTILE says for its path (forever, a piece every
    DRIP_S), or /hold: nothing until `release`, then the photo; /late: the photo after `late_s`;
    /dead: closes at once."""

    state: HostileState

    def handle(self) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = self.request.recv(4096)
            if not data:
                return
            head += data
        path = head.split(b" ", 2)[1].decode().partition("?")[0]
        self.state.count(self.state.seen, path)
        try:
            if path in ("/hold", "/late"):
                until = time.monotonic() + self.state.late_s
                while not (self.state.release.wait(DRIP_S) if path == "/hold" else time.monotonic() >= until):
                    if self._closed_by_peer():
                        raise ConnectionResetError
                photo = self.state.photo
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(photo) + photo)
                return
            if path == "/dead":
                return
            start, piece = HOSTILE[path]
            self.request.sendall(start)
            while piece is not None and not self.state.stop.wait(DRIP_S):
                self.request.sendall(piece)
        except OSError:
            self.state.count(self.state.hung_up, path)

    def _closed_by_peer(self) -> bool:
        try:
            return self.request.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False


@contextmanager
def hostile_origin(photo_bytes: bytes, host: str = "127.0.0.1") -> Iterator[tuple[str, HostileState]]:
    """A misbehaving origin on a free port of `host`: its base URL (with a trailing /) and state."""
    state = HostileState(photo_bytes)
    server = socketserver.ThreadingTCPServer((host, 0), type("Hostile", (_Hostile,), {"state": state}))
    with serving(server, state.stop, state.release) as url:
        yield url, state
