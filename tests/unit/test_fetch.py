"""gateway/url/fetch.py's Fetcher against a real HTTP server on loopback, in process: what each
answer of an origin becomes (a body, a 304, or the error a client gets), the redirects it follows,
the limit on a body, and that a refused address is never connected to (connections counted at the
server)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gateway.errors import OriginError, PayloadTooLarge, SourceNotAllowed, SourceNotFound
from gateway.url.admission import FetchAdmission
from gateway.url.fetch import MAX_REDIRECTS, Fetcher

LIMIT = 1000
PHOTO = b"\xff\xd8" + b"x" * 500


class Origin(ThreadingHTTPServer):
    """Answers each path as ROUTES says; counts the connections it accepts and keeps the headers sent."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.connections = 0
        self.seen: list[dict[str, str]] = []

    def get_request(self):  # type: ignore[no-untyped-def]
        self.connections += 1
        return super().get_request()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


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

    def do_GET(self) -> None:
        self.server.seen.append(dict(self.headers))
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


@pytest.fixture(scope="module")
def origin() -> Iterator[Origin]:
    server = Origin()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def fetcher(allow_private: bool = True, allowed: tuple[str, ...] = ("*",)) -> Fetcher:
    return Fetcher(allowed, allow_private, 2, 5, LIMIT, FetchAdmission(8, 4, 5, 30))


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
