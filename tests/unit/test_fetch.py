"""gateway/url/fetch.py's Fetcher against a real HTTP server on loopback, in process: what each
answer of an origin becomes (a body, a 304, or the error a client gets), the redirects it follows,
the limit on a body, and that a refused address is never connected to (connections counted at the
server)."""

from __future__ import annotations

import queue
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gateway.errors import OriginError, OriginTimeout, PayloadTooLarge, SourceNotAllowed, SourceNotFound
from gateway.url.admission import FetchAdmission
from gateway.url.fetch import MAX_REDIRECTS, Fetcher

LIMIT = 1000
DRIBBLE = 400
PHOTO = b"\xff\xd8" + b"x" * 500


class Origin(ThreadingHTTPServer):
    """Answers each path as ROUTES says; counts the connections it accepts and keeps the headers sent."""

    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), Handler)
        self.connections = 0
        self.dribbled: queue.Queue[int] = queue.Queue()  # bytes of each /dribble sent before its socket shut
        self.seen: list[dict[str, str]] = []

    def get_request(self):  # type: ignore[no-untyped-def]
        self.connections += 1
        return super().get_request()

    @property
    def base(self) -> str:
        return f"http://{self.server_address[0]}:{self.server_address[1]}"


def redirect(target: str, status: int = 302) -> tuple[int, dict[str, str], bytes]:
    return status, {"Location": target}, b""


ROUTES: dict[str, tuple[int, dict[str, str], bytes]] = {
    "/photo.jpg": (
        200,
        {"ETag": '"v1"', "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT", "Cache-Control": "max-age=60"},
        PHOTO,
    ),
    "/gone": (410, {}, b"gone"),
    "/missing": (404, {}, b"no"),
    "/broken": (500, {}, b"oops"),
    "/unasked-304": (304, {}, b""),
    "/declared-large": (200, {"Content-Length": str(LIMIT + 1)}, b""),
    "/exactly-limit": (200, {}, b"y" * LIMIT),
    "/empty": (200, {}, b""),
    "/short": (200, {"Content-Length": "100"}, b"z" * 10),
    "/r1": redirect("/photo.jpg"),
    "/r2": redirect("/r1", 301),
    "/r3": redirect("/r2", 307),
    "/r4": redirect("/r3", 308),
    "/elsewhere": redirect("http://not-allowed.example/photo.jpg"),
    "/no-location": (302, {}, b"moved, nowhere"),
}


class Handler(BaseHTTPRequestHandler):
    server: Origin
    protocol_version = "HTTP/1.1"  # connections kept open between answers, as pools expect

    def do_GET(self) -> None:
        self.server.seen.append(dict(self.headers))
        if self.path == "/hang-up":  # no answer at all: the connection closed
            self.close_connection = True
            return
        if self.path == "/dribble":  # a byte every 50 ms, 20 s in all: no read timeout ends it
            self.send_response(200)
            self.send_header("Content-Length", str(DRIBBLE))
            self.end_headers()
            sent = 0
            try:
                while sent < DRIBBLE:
                    self.wfile.write(b"d")
                    self.wfile.flush()
                    sent += 1
                    time.sleep(0.05)
            except OSError:  # the fetcher shut its socket
                self.close_connection = True
            self.server.dribbled.put(sent)
            return
        if self.path == "/chunked-large":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(3):
                self.wfile.write(b"190\r\n" + b"c" * 400 + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path == "/conditional" and self.headers.get("If-None-Match") == '"v1"':
            self.send_response(304)
            self.send_header("ETag", '"v1"')
            self.end_headers()
            return
        status, headers, body = ROUTES.get(self.path, ROUTES["/photo.jpg"])
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if "Content-Length" not in headers and status != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = "Content-Length" in headers and int(headers["Content-Length"]) != len(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serving(server: Origin) -> Iterator[Origin]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def origin() -> Iterator[Origin]:
    with serving(Origin()) as server:
        yield server


@pytest.fixture
def twins() -> Iterator[tuple[Origin, Origin]]:
    """Two origins on one port, at 127.0.0.1 and 127.0.0.2: what a name with two addresses reaches."""
    for _ in range(20):
        second = Origin("127.0.0.2")
        try:
            first = Origin("127.0.0.1", second.server_address[1])
        except OSError:  # that port is taken at 127.0.0.1: another
            second.server_close()
            continue
        with serving(first), serving(second):
            yield first, second
        return
    pytest.fail("no port free at both loopback addresses")


def fetcher(allow_private: bool = True, allowed: tuple[str, ...] = ("*",), total_s: float = 5) -> Fetcher:
    return Fetcher(allowed, allow_private, 2, total_s, LIMIT, FetchAdmission(8, 4, 5, 30))


def test_a_photo_comes_with_its_caching_facts_and_identity_encoding_asked(origin):
    got = fetcher().get(f"{origin.base}/photo.jpg")
    assert (got.modified, got.body) == (True, PHOTO)
    assert (got.etag, got.last_modified, got.cache_control) == ('"v1"', "Mon, 01 Jan 2024 00:00:00 GMT", "max-age=60")
    sent = origin.seen[-1]
    assert sent["Accept-Encoding"] == "identity" and sent["Accept"] == "image/*" and "facecrop" in sent["User-Agent"]


def test_a_conditional_fetch_answers_not_modified_with_no_body(origin):
    got = fetcher().get(f"{origin.base}/conditional", conditions={"If-None-Match": '"v1"'})
    assert (got.modified, got.body, got.etag) == (False, b"", '"v1"')
    assert origin.seen[-1]["If-None-Match"] == '"v1"'
    assert fetcher().get(f"{origin.base}/conditional", conditions={"If-None-Match": '"v0"'}).modified


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/gone", SourceNotFound),
        ("/missing", SourceNotFound),
        ("/broken", OriginError),
        ("/unasked-304", OriginError),  # a 304 nobody asked for
        ("/declared-large", PayloadTooLarge),
        ("/chunked-large", PayloadTooLarge),  # no length declared: cut off as it arrives
        ("/empty", OriginError),
        ("/short", OriginError),  # cut short of its Content-Length
        ("/r4", OriginError),  # one redirect more than MAX_REDIRECTS
        ("/elsewhere", SourceNotAllowed),  # a redirect to a source not allowed
        ("/no-location", OriginError),  # a redirect status with nowhere to go is an answer, not a 200
    ],
)
def test_what_an_origin_answers_becomes_the_clients_error(origin, path, error):
    with pytest.raises(error):
        fetcher(allowed=(origin.base + "/",)).get(f"{origin.base}{path}")


def test_max_redirects_of_every_kind_are_followed(origin):
    assert MAX_REDIRECTS == 3  # /r3: 307 -> 301 -> 302 -> the photo
    assert fetcher().get(f"{origin.base}/r3").body == PHOTO


def test_a_body_of_exactly_the_limit_is_read(origin):
    assert fetcher().get(f"{origin.base}/exactly-limit").body == b"y" * LIMIT


def test_a_private_address_is_refused_before_connecting_unless_it_is_the_operators_origin(origin):
    before = origin.connections
    with pytest.raises(SourceNotAllowed):
        fetcher(allow_private=False).get(f"{origin.base}/photo.jpg")
    assert origin.connections == before  # not even a TCP handshake
    trusted = fetcher(allow_private=False).get(f"{origin.base}/photo.jpg", origin=origin.base)
    assert trusted.body == PHOTO and origin.connections > before


def resolving(fetcher: Fetcher, name: str, addresses: list[str]) -> Fetcher:
    """`fetcher`, its name lookups answering `name` with `addresses` in that order (as DNS may)."""
    real = fetcher.watchdog.resolve

    def resolve(host: str, port: int) -> list:
        if host != name:
            return real(host, port)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in addresses]

    fetcher.watchdog.resolve = resolve  # type: ignore[method-assign]
    return fetcher


@pytest.mark.parametrize("order", [["127.0.0.1", "127.0.0.2"], ["127.0.0.2", "127.0.0.1"]])
def test_a_name_with_several_addresses_is_reached_only_at_one_that_is_allowed(twins, monkeypatch, order):
    """127.0.0.2 taken for a public address, 127.0.0.1 for a private one: whichever DNS lists first,
    the fetch connects to the public one only (connections counted at both)."""
    private, public = twins
    monkeypatch.setattr("gateway.url.fetch.is_public", lambda address: str(address) == "127.0.0.2")
    port = public.server_address[1]
    got = resolving(fetcher(allow_private=False), "photos.test", order).get(f"http://photos.test:{port}/photo.jpg")
    assert got.body == PHOTO and (private.connections, public.connections) == (0, 1)
    with pytest.raises(SourceNotAllowed):  # only private addresses: none tried
        resolving(fetcher(allow_private=False), "inside.test", ["127.0.0.1"]).get(f"http://inside.test:{port}/a.jpg")
    assert (private.connections, public.connections) == (0, 1)
    allowed = resolving(fetcher(allow_private=True), "photos.test", order).get(f"http://photos.test:{port}/photo.jpg")
    assert allowed.body == PHOTO and private.connections + public.connections == 2  # the first, whichever it is
    assert (private if order[0] == "127.0.0.1" else public).connections == 1 + (order[0] == "127.0.0.2")


def test_a_redirect_from_the_operators_origin_is_checked_like_any_source(twins, monkeypatch):
    """The operator's origin is trusted for its own host only: its redirect to another private
    address is refused before connecting there."""
    trusted, inside = twins
    ROUTES["/to-inside"] = redirect(f"{inside.base}/photo.jpg")
    try:
        with pytest.raises(SourceNotAllowed):
            fetcher(allow_private=False).get(f"{trusted.base}/to-inside", origin=trusted.base)
    finally:
        del ROUTES["/to-inside"]
    assert trusted.connections == 1 and inside.connections == 0
    back = fetcher(allow_private=False, allowed=(inside.base + "/",))  # and back to it from elsewhere: trusted
    ROUTES["/to-trusted"] = redirect(f"{trusted.base}/photo.jpg")
    try:
        with pytest.raises(SourceNotAllowed):  # the first hop, not the operator's, is checked
            back.get(f"{inside.base}/to-trusted", origin=trusted.base)
    finally:
        del ROUTES["/to-trusted"]
    assert inside.connections == 0


def test_an_origin_that_hangs_up_is_asked_once(origin):
    """No retries: a GET the origin closed without answering is not sent again."""
    before = origin.connections
    with pytest.raises(OriginError):
        fetcher().get(f"{origin.base}/hang-up")
    assert origin.connections == before + 1


def test_an_origin_dribbling_its_answer_is_stopped_at_the_deadline(origin):
    """A byte every 50 ms never trips a read timeout; the fetch's deadline (1 s) ends it by shutting
    its socket, long before the 20 s the whole answer takes: an error, and the origin stopped
    (counted there) far short of the last byte."""
    with pytest.raises(OriginTimeout):
        fetcher(total_s=1).get(f"{origin.base}/dribble")
    assert origin.dribbled.get(timeout=60) < DRIBBLE / 2


def test_a_pooled_connection_is_held_to_the_new_fetch_s_deadline(origin):
    """The second fetch reuses the first's connection (one connection counted): the deadline of the
    fetch that reuses it is the one that ends its dribble."""
    pooled = fetcher(total_s=1)
    before = origin.connections
    assert pooled.get(f"{origin.base}/photo.jpg").body == PHOTO
    with pytest.raises(OriginTimeout):
        pooled.get(f"{origin.base}/dribble")
    assert origin.connections == before + 1 and origin.dribbled.get(timeout=60) < DRIBBLE / 2
