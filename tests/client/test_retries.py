"""The client's retry policy against a scripted HTTP server on a real loopback socket."""

import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from evaluation.origins import answer
from facecrop_client import Client, FacecropError
from tests.support import ONE_FACE, json_answer, refusal, serving


class Scripted(BaseHTTPRequestHandler):
    """Answers POSTs from `self.server.script`, a list of (status, headers, body) consumed in order."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.seen.append((time.monotonic(), self.path, dict(self.headers)))
        status, headers, body = self.server.script.pop(0)
        answer(self, status, body, headers)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    httpd.script, httpd.seen = [], []
    with serving(httpd):
        yield httpd


def ok():
    return json_answer(200, ONE_FACE)


def client_for(server, **kwargs) -> Client:
    return Client(f"http://127.0.0.1:{server.server_port}", backoff=0.01, **kwargs)


def test_503_and_429_are_retried_and_retry_after_respected(server):
    server.script = [refusal(503, "backend_unavailable"), (429, {"Retry-After": "1"}, b"{}"), ok()]
    detection = client_for(server).detect(b"bytes", min_confidence=20, landmarks=False)
    assert detection.faces[0].rectangle.width == 2 and detection.faces[0].landmarks is None
    assert len(server.seen) == 3
    assert server.seen[2][0] - server.seen[1][0] >= 0.95  # waited for Retry-After
    assert server.seen[0][1] == "/v1/detect?min_confidence=20&landmarks=false"


def test_a_load_balancers_502_is_retried(server):
    """ingress-nginx answers its own HTML 502 when the replica it sent the request to went away."""
    server.script = [(502, {"Content-Type": "text/html"}, b"<html><body>502 Bad Gateway</body></html>"), ok()]
    detection = client_for(server).detect(b"bytes")
    assert detection.faces[0].rectangle.width == 2 and len(server.seen) == 2


@pytest.mark.parametrize(
    "status,code",
    [
        (400, "invalid_parameter"),
        (401, "unauthorized"),
        (413, "payload_too_large"),
        (415, "unsupported_image"),
        (504, "backend_timeout"),
    ],
)
def test_other_errors_raise_at_once_with_the_service_code(server, status, code):
    server.script = [refusal(status, code), ok()]
    with pytest.raises(FacecropError) as raised:
        client_for(server).detect(b"bytes")
    assert raised.value.status == status and raised.value.code == code
    assert len(server.seen) == 1


def test_retries_give_up_after_the_limit(server):
    server.script = [refusal(503, "backend_unavailable")] * 3
    with pytest.raises(FacecropError) as raised:
        client_for(server, retries=2).detect(b"bytes")
    assert raised.value.code == "backend_unavailable" and len(server.seen) == 3


def test_an_address_nobody_answers_at_is_reported_at_once():
    client = Client("http://127.0.0.1:9", retries=5, backoff=10)  # a retry would sleep seconds
    started = time.monotonic()
    with pytest.raises(FacecropError) as raised:
        client.detect(b"bytes")
    assert raised.value.code == "connection_error" and "Connection refused" in raised.value.message
    assert time.monotonic() - started < 1


def test_api_key_is_sent(server):
    server.script = [ok()]
    client_for(server, api_key="s3cret").detect(b"bytes")
    assert server.seen[0][2]["Authorization"] == "Bearer s3cret"


@pytest.mark.parametrize(
    "method, answered",
    [
        ("detect", (200, {"Content-Type": "text/html"}, b"<html>sign in</html>")),
        ("detect", json_answer(200, {"faces": []})),  # JSON, but not facecrop's
        ("crop", (200, {"Content-Type": "image/jpeg", "X-Face-Count": "1"}, b"picture")),  # X-Crop-Rect dropped
        ("crop", (200, {"Content-Type": "image/jpeg", "X-Face-Count": "1", "X-Crop-Rect": "1,2"}, b"picture")),
        ("anonymize", (200, {"Content-Type": "image/jpeg"}, b"picture")),  # X-Face-Count dropped
    ],
)
def test_a_success_that_is_not_facecrops_answer_raises_at_once_saying_what_came_back(server, method, answered):
    server.script = [answered]
    with pytest.raises(FacecropError) as raised:
        getattr(client_for(server), method)(b"bytes")
    error = raised.value
    assert (error.status, error.code) == (200, "unreadable_answer") and len(server.seen) == 1
    assert error.message == (
        "not an answer of facecrop's (is the address the gateway's, not Triton's?): " + answered[2].decode()
    )
