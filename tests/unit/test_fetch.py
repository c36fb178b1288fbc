"""gateway/web/url/fetch.py's Fetcher against a real HTTP server on loopback, in process: what each
answer of an origin becomes (a body, a 304, or the error a client gets), the redirects it follows,
the limit on a body, and that a refused address is never connected to (connections counted at the
server)."""

from __future__ import annotations

import gzip
import http.client
import queue
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gateway.errors import (
    ClientGone,
    OriginError,
    OriginTimeout,
    OriginUnavailable,
    PayloadTooLarge,
    SourceNotAllowed,
    SourceNotFound,
)
from gateway.web.url.admission import FetchAdmission
from gateway.web.url.fetch import MAX_INTERIM, MAX_REDIRECTS, MAX_TRAILER_LINES, Fetcher
from tests.support import serving

LIMIT = 1000
DRIBBLE = 400
PHOTO = b"\xff\xd8" + b"x" * 500
BOMB = gzip.compress(b"\0" * LIMIT * 100)  # small as sent, a hundred times the limit inflated


class Origin(ThreadingHTTPServer):
    """Answers each path as ROUTES says; counts the connections it accepts and keeps the headers sent."""

    daemon_threads = True

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), Handler)
        self.connections = 0
        self.dribbled: queue.Queue[int] = queue.Queue()  # bytes of each /dribble sent before its socket shut
        self.dribbling = threading.Event()  # a /dribble has begun
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
    "/malformed": redirect("http://[::1/photo.jpg"),
    "/to-self": redirect("/photo.jpg"),  # on the operator's origin: followed there, trusted
    "/gzipped": (200, {"Content-Encoding": "gzip"}, BOMB),  # though identity was asked for
}


def chunk(data: bytes) -> bytes:
    """`data` framed as one chunk of a chunked body."""
    return b"%x\r\n" % len(data) + data + b"\r\n"


def chunked_answer(interim: int = 0, trailers: tuple[bytes, ...] = (), end: bytes = b"\r\n") -> bytes:
    """A whole answer as sent: `interim` 100 Continue answers, then PHOTO in one chunk, the
    `trailers` lines and `end`."""
    final = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(PHOTO) + b"0\r\n"
    return b"HTTP/1.1 100 Continue\r\n\r\n" * interim + final + b"".join(trailers) + end


LONGEST = http.client._MAXLINE  # type: ignore[attr-defined]  # a line's bytes http.client allows
RAW = {  # answers written as they are
    "/interim-most": chunked_answer(interim=MAX_INTERIM),
    "/interim-over": chunked_answer(interim=MAX_INTERIM + 1),
    "/trailers-most": chunked_answer(trailers=(b"X-T: 1\r\n",) * (MAX_TRAILER_LINES - 1)),  # and the blank line
    "/trailers-over": chunked_answer(trailers=(b"X-T: 1\r\n",) * MAX_TRAILER_LINES),
    "/trailer-longest": chunked_answer(trailers=(b"X-T: " + b"t" * (LONGEST - 7) + b"\r\n",)),
    "/trailer-too-long": chunked_answer(trailers=(b"X-T: " + b"t" * (LONGEST - 6) + b"\r\n",)),
    "/trailers-bare": chunked_answer(trailers=(b"X-T: 1\n",), end=b"\n"),  # lines ended by LF alone
    "/trailers-unended": chunked_answer(end=b""),  # the connection closed after the last chunk
    "/trailer-endless": chunked_answer(trailers=(b"X-T: " + b"t" * LONGEST,), end=b""),  # no line end, kept open
}

CHUNKED = {  # answers sent in chunks, no length declared
    "/chunked": [b"\xff\xd8", b"a" * 300, b"b" * 300],  # each chunk a read of its own
    "/chunked-large": [b"c" * 400] * 3,
    "/chunked-cut": [b"\xff\xd8", b"a" * 300],  # the connection closed before the last chunk
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
            self.server.dribbling.set()
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
        if self.path in RAW:
            self.wfile.write(RAW[self.path])
            self.close_connection = self.path == "/trailers-unended"
            return
        if self.path in CHUNKED:
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in CHUNKED[self.path]:
                self.wfile.write(chunk(part))
            if self.path == "/chunked-cut":
                self.close_connection = True
                return
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


def fetcher(
    allow_private: bool = True, allowed: tuple[str, ...] = ("*",), total_s: float = 5, connect_s: float = 2
) -> Fetcher:
    return Fetcher(allowed, allow_private, connect_s, total_s, LIMIT, FetchAdmission(8, 4, 5, 30))


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
    ("path", "error", "message"),
    [
        ("/gone", SourceNotFound, "the origin answered 410"),
        ("/missing", SourceNotFound, "the origin answered 404"),
        ("/broken", OriginError, "the origin answered 500"),
        ("/unasked-304", OriginError, "the origin answered 304 to an unconditional request"),
        ("/declared-large", PayloadTooLarge, f"the source is larger than the limit of {LIMIT} bytes"),
        # no length declared: cut off as it arrives
        ("/chunked-large", PayloadTooLarge, f"the source is larger than the limit of {LIMIT} bytes"),
        ("/empty", OriginError, "the origin's answer was empty"),
        ("/short", OriginError, "the origin's answer was cut short or malformed"),  # short of its Content-Length
        ("/chunked-cut", OriginError, "the origin's answer was cut short or malformed"),
        ("/r4", OriginError, f"the origin redirected more than {MAX_REDIRECTS} times"),
        ("/malformed", OriginError, "the origin redirected to a malformed URL"),
        # a redirect status with nowhere to go is an answer, not a 200
        ("/no-location", OriginError, "the origin answered 302"),
    ],
)
def test_what_an_origin_answers_becomes_the_clients_error(origin, path, error, message):
    with pytest.raises(error) as raised:
        fetcher(allowed=(origin.base + "/",)).get(f"{origin.base}{path}")
    assert raised.value.message == message


def test_a_redirect_to_a_source_not_allowed_is_refused_without_naming_it(origin):
    """The answer does not repeat where the origin pointed (it may name hosts of its network); the
    log line (the error's cause) says why it was refused."""
    with pytest.raises(SourceNotAllowed) as raised:
        fetcher(allowed=(origin.base + "/",)).get(f"{origin.base}/elsewhere")
    assert raised.value.message == "the origin redirected to a source that is not allowed"
    assert "not-allowed.example" not in raised.value.message
    assert raised.value.cause == "the source is not under FACECROP_ALLOWED_SOURCES"


def test_a_chunked_answer_is_read_whole_in_order(origin):
    assert fetcher().get(f"{origin.base}/chunked").body == b"".join(CHUNKED["/chunked"])


def test_the_operators_origin_redirecting_to_itself_is_followed_though_not_an_allowed_prefix(origin):
    """Trusted for its own host: a private address, no prefix allowed, and its redirect to its own
    host is followed (a source elsewhere would not be)."""
    got = fetcher(allow_private=False, allowed=()).get(f"{origin.base}/to-self", origin=origin.base)
    assert got.body == PHOTO


def test_max_redirects_of_every_kind_are_followed(origin):
    assert MAX_REDIRECTS == 3  # /r3: 307 -> 301 -> 302 -> the photo
    assert fetcher().get(f"{origin.base}/r3").body == PHOTO


def test_a_body_of_exactly_the_limit_is_read(origin):
    assert fetcher().get(f"{origin.base}/exactly-limit").body == b"y" * LIMIT


def test_a_private_address_is_refused_before_connecting_unless_it_is_the_operators_origin(origin):
    before = origin.connections
    with pytest.raises(SourceNotAllowed) as raised:
        fetcher(allow_private=False).get(f"{origin.base}/photo.jpg")
    assert (
        raised.value.message == "the source resolves only to addresses that are not public: refused before connecting"
    )
    assert origin.connections == before  # not even a TCP handshake
    trusted = fetcher(allow_private=False).get(f"{origin.base}/photo.jpg", origin=origin.base)
    assert trusted.body == PHOTO and origin.connections > before


def resolving(fetcher: Fetcher, name: str, addresses: list[str] | OSError) -> Fetcher:
    """`fetcher`, its name lookups answering `name` with `addresses` in that order (as DNS may), or
    failing with that error."""
    real = fetcher.watchdog.resolve

    def resolve(host: str, port: int) -> list:
        if host != name:
            return real(host, port)
        if isinstance(addresses, OSError):
            raise addresses
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port)) for address in addresses]

    fetcher.watchdog.resolve = resolve  # type: ignore[method-assign]
    return fetcher


@pytest.mark.parametrize("order", [["127.0.0.1", "127.0.0.2"], ["127.0.0.2", "127.0.0.1"]])
def test_a_name_with_several_addresses_is_reached_only_at_one_that_is_allowed(twins, monkeypatch, order):
    """127.0.0.2 taken for a public address, 127.0.0.1 for a private one: whichever DNS lists first,
    the fetch connects to the public one only (connections counted at both)."""
    private, public = twins
    monkeypatch.setattr("gateway.web.url.fetch.is_public", lambda address: str(address) == "127.0.0.2")
    port = public.server_address[1]
    got = resolving(fetcher(allow_private=False), "photos.test", order).get(f"http://photos.test:{port}/photo.jpg")
    assert got.body == PHOTO and (private.connections, public.connections) == (0, 1)
    again = resolving(fetcher(allow_private=False), "photos.test", order)
    for _ in range(2):  # on a new connection and on the same one reused: the name, not the address connected to
        assert again.get(f"http://photos.test:{port}/photo.jpg").body == PHOTO
        assert public.seen[-1]["Host"] == f"photos.test:{port}"
    assert (private.connections, public.connections) == (0, 2)
    with pytest.raises(SourceNotAllowed):  # only private addresses: none tried
        resolving(fetcher(allow_private=False), "inside.test", ["127.0.0.1"]).get(f"http://inside.test:{port}/a.jpg")
    assert (private.connections, public.connections) == (0, 2)
    allowed = resolving(fetcher(allow_private=True), "photos.test", order).get(f"http://photos.test:{port}/photo.jpg")
    assert allowed.body == PHOTO and private.connections + public.connections == 3  # the first, whichever it is
    assert (private if order[0] == "127.0.0.1" else public).connections == 1 + 2 * (order[0] == "127.0.0.2")


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
    with pytest.raises(OriginTimeout) as raised:
        fetcher(total_s=1).get(f"{origin.base}/dribble")
    assert raised.value.message == "the origin did not answer within 1 s"
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


@pytest.mark.parametrize(
    "path", ["/interim-most", "/trailers-most", "/trailer-longest", "/trailers-bare", "/trailers-unended"]
)
def test_answers_at_the_bounds_are_read_whole_and_their_connection_reused(origin, path):
    """MAX_INTERIM 1xx answers, MAX_TRAILER_LINES trailer lines (the blank one included), a trailer
    line as long as http.client allows, lines ended by LF: read whole, every byte of the answer read
    (the next fetch reuses the connection: one counted; urllib3 drops one with bytes left unread)."""
    pooled = fetcher()
    before = origin.connections
    assert pooled.get(f"{origin.base}{path}").body == PHOTO
    assert pooled.get(f"{origin.base}/photo.jpg").body == PHOTO
    assert origin.connections == before + 1 + (path == "/trailers-unended")  # that one closed by the origin


@pytest.mark.parametrize(
    ("path", "message", "why"),
    [
        ("/interim-over", "the origin could not be reached: ProtocolError", "more 1xx answers than allowed"),
        ("/trailers-over", "the origin's answer was cut short or malformed", "more trailer lines than allowed"),
        (
            "/trailer-too-long",
            "the origin's answer was cut short or malformed",
            f"got more than {LONGEST} bytes when reading trailer line",
        ),
        (  # refused once a line's bound is read, not at the deadline
            "/trailer-endless",
            "the origin's answer was cut short or malformed",
            f"got more than {LONGEST} bytes when reading trailer line",
        ),
    ],
)
def test_answers_past_the_bounds_are_502s_whose_log_says_why(origin, path, message, why):
    with pytest.raises(OriginError) as raised:
        fetcher().get(f"{origin.base}{path}")
    assert raised.value.message == message and f"('{why}')" in raised.value.cause


def test_a_compressed_answer_is_kept_as_sent_never_inflated(origin):
    """Identity was asked for; an origin that compresses anyway gets back what it sent (a small
    gzip can hold far more than the limit: inflated, this one would be refused as too large)."""
    assert fetcher().get(f"{origin.base}/gzipped").body == BOMB


def test_a_name_that_does_not_resolve_is_a_502_whose_log_names_it():
    failing = resolving(fetcher(), "nowhere.test", socket.gaierror(socket.EAI_NONAME, "Name or service not known"))
    with pytest.raises(OriginError) as raised:
        failing.get("http://nowhere.test/photo.jpg")
    assert raised.value.message == "the origin could not be reached: NameResolutionError"
    assert (
        "Failed to resolve 'nowhere.test'" in raised.value.cause and "Name or service not known" in raised.value.cause
    )


def test_a_lookup_that_outlives_the_deadline_is_a_504_whatever_the_watchdog_has_seen():
    """The lookup's own wait ends at the deadline (gateway/web/url/deadline.py); the watchdog thread,
    late on a busy machine, may not have ended the watch yet: still a 504, never a 502."""
    late = resolving(fetcher(), "slow.test", TimeoutError("resolving slow.test took too long"))
    with pytest.raises(OriginTimeout) as raised:
        late.get("http://slow.test/photo.jpg")
    assert raised.value.message == "the origin did not answer in time"
    assert "resolving slow.test took too long" in raised.value.cause


def test_a_refused_connection_is_a_502_whose_log_says_why():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: refused
        with pytest.raises(OriginError) as raised:
            fetcher().get(f"http://127.0.0.1:{closed.getsockname()[1]}/photo.jpg")
    assert raised.value.message == "the origin could not be reached: NewConnectionError"
    assert "Connection refused" in raised.value.cause


def test_a_connection_never_accepted_ends_at_the_connect_timeout():
    """A listening socket whose backlog is full (listen(0) and one connection waiting): the
    handshake is never answered; the connect timeout (0.3 s) ends it, not the fetch's deadline (5 s)."""
    with socket.socket() as full:
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        port = full.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port)), pytest.raises(OriginTimeout) as raised:
            fetcher(connect_s=0.3).get(f"http://127.0.0.1:{port}/photo.jpg")
    assert raised.value.message == "the origin did not answer in time"
    assert "timed out (connect timeout 0.3 s)" in raised.value.cause


def test_an_https_source_at_a_private_address_is_refused_before_connecting(origin):
    before = origin.connections
    with pytest.raises(SourceNotAllowed):
        fetcher(allow_private=False).get(f"https://127.0.0.1:{origin.server_address[1]}/photo.jpg")
    assert origin.connections == before


def test_failures_at_one_origin_open_its_breaker_alone(twins):
    """The breaker and the budget are per origin (scheme, host, port): one failure (the breaker's
    threshold here) closes that origin for its cool-down, not another one."""
    failing, healthy = twins
    shared = Fetcher(("*",), True, 2, 5, LIMIT, FetchAdmission(8, 4, 1, 30))
    with pytest.raises(OriginError):
        shared.get(f"{failing.base}/broken")
    with pytest.raises(OriginUnavailable):
        shared.get(f"{failing.base}/photo.jpg")
    assert shared.get(f"{healthy.base}/photo.jpg").body == PHOTO
    assert (failing.connections, healthy.connections) == (1, 1)


def test_a_fetch_stops_when_its_client_has_gone(origin):
    """The client closes its end once the origin has begun dribbling: the fetch ends long before its
    deadline (30 s), the origin stopped (counted there) before it has sent half."""
    ours, theirs = socket.socketpair()
    origin.dribbling.clear()
    leaving = threading.Thread(target=lambda: origin.dribbling.wait(30) and theirs.close())
    leaving.start()
    with ours, pytest.raises(ClientGone) as raised:
        fetcher(total_s=30).get(f"{origin.base}/dribble", client=ours)
    assert raised.value.message == "the client closed its connection"
    leaving.join()
    assert origin.dribbled.get(timeout=60) < DRIBBLE / 2
