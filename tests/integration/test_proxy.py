"""The production proxy (deploy/proxy/nginx.conf, run by Debian's nginx) in front of a real gateway:
its cache key must be what the gateway negotiates on. For format=auto the key holds the Accept's
class (AVIF, WebP or other) and the gateway is sent that class's own Accept, so every Accept of a
class gets the one cached answer, of the class's format, whatever else the header says (a quoted
type, a q-value, an order). slow-connection-quality's client hints become one class of the key too.

The configuration is the committed file with only the addresses replaced (the gateway's, the port,
the cache folder) and an access log added (each request's cache status, printed when a cache
assertion fails): a change to anything else in it is tested as written.
"""

from __future__ import annotations

import io
import json
import os
import pwd
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import requests
from PIL import Image

from evaluation.images import astronaut
from evaluation.origins import hostile_origin
from gateway.config import Settings
from gateway.imaging.encode import AVIF_AVAILABLE
from local_triton.processes import free_port, running_gateway, stop
from tests.support import SLOW_HINTS, sticker

ROOT = Path(__file__).resolve().parents[2]
NGINX_CONF = ROOT / "deploy" / "proxy" / "nginx.conf"
NGINX = Path("/usr/sbin/nginx")  # Debian's package; `make test` installs it
AUTO = "/cdn-cgi/image/width=200,format=auto/astronaut.jpg"
SLOW = "/cdn-cgi/image/width=200,format=jpeg,quality=90,slow-connection-quality=20/astronaut.jpg"
# Accept headers, as browsers and other clients send them, and the format each must get.
# The first of each class is the one the gateway sees: the quoted type first, where the gateway's
# own parse (WebP) and the proxy's class (AVIF) differ.
ACCEPTS = [
    ('text/plain;note="image/avif", image/webp', "avif"),
    ("image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8", "avif"),  # Chrome
    ("image/avif,image/webp,*/*", "avif"),  # Firefox
    ("image/webp;q=0.5, image/avif;q=0.1", "avif"),  # q-values do not order the class
    ("image/avif;q=0, image/webp", "webp"),  # AVIF refused: not the AVIF class
    ("image/webp,*/*", "webp"),
    ("image/webp ;q=0.0, image/png", "jpeg"),
    ("*/*", "jpeg"),
    (None, "jpeg"),
]


# Each request's cache status, upstream status and times, per worker: what a failed cache
# assertion prints (the committed file logs nothing).
ACCESS_LOG = (
    'log_format cache_probe "$msec pid=$pid cache=$upstream_cache_status upstream=$upstream_status '
    '$upstream_response_time s request=$request_time s class=$facecrop_accept accept=[$http_accept]";\n'
    "  access_log {folder}/access.log cache_probe;"
)


class Proxy(NamedTuple):
    url: str
    folder: Path

    def logs(self) -> str:
        """nginx's access and error logs, for an assertion's message."""
        return "\n".join(f"{name}:\n{(self.folder / name).read_text()}" for name in ("access.log", "error.log"))


def configuration(gateway: str, port: int, folder: Path, settings: dict[str, str] | None = None) -> str:
    """deploy/proxy/nginx.conf with the compose addresses replaced by loopback ones, nginx's own
    files (pid, temporary files, an access log) in `folder`, its workers run as this user (as root,
    nginx would run them as nobody, who cannot enter pytest's folders); `settings`: lines replaced
    for one test (a shorter timeout)."""
    text = NGINX_CONF.read_text()
    replaced = {
        **(settings or {}),
        "access_log off;": ACCESS_LOG.format(folder=folder),
        "listen 8080;": f"listen 127.0.0.1:{port};",
        "set $gateway http://gateway:8080;": f"set $gateway {gateway};",
        "proxy_cache_path /var/cache/nginx/facecrop ": f"proxy_cache_path {folder}/cache ",
        "http {": f"http {{\n  proxy_temp_path {folder}/proxy;\n  client_body_temp_path {folder}/body;",
    }
    for old, new in replaced.items():
        assert text.count(old) == 1, f"deploy/proxy/nginx.conf no longer has {old!r} once"
        text = text.replace(old, new)
    return f"user {pwd.getpwuid(os.getuid()).pw_name};\npid {folder}/nginx.pid;\n" + text


@contextmanager
def running_proxy(gateway: str, folder: Path, settings: dict[str, str] | None = None) -> Iterator[str]:
    """nginx with the production configuration in front of `gateway`, until the block ends: its URL."""
    if not NGINX.is_file():
        pytest.fail("nginx is missing: `make test` installs Debian's package")
    port = free_port()
    conf = folder / "nginx.conf"
    conf.write_text(configuration(gateway, port, folder, settings))
    command = [str(NGINX), "-p", str(folder), "-c", str(conf), "-e", str(folder / "error.log"), "-g", "daemon off;"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"nginx exited: {process.stderr.read().decode(errors='replace')}")  # type: ignore[union-attr]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "nginx did not listen within 20 s"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


@pytest.fixture(scope="module")
def proxy(stack, tmp_path_factory) -> Iterator[Proxy]:
    originals = tmp_path_factory.mktemp("originals")
    astronaut().save(originals / "astronaut.jpg", quality=90)
    sticker().save(originals / "sticker.png")
    folder = tmp_path_factory.mktemp("nginx")
    with (
        running_gateway(stack.triton_grpc, {"FACECROP_ORIGIN": str(originals)}, name="proxy") as gateway,
        running_proxy(gateway.url, folder) as url,
    ):
        yield Proxy(url, folder)


def fetched(url: str, headers: dict[str, str | None]) -> tuple[str, bytes, str]:
    """The answer's format (read from its bytes), its bytes and X-Cache-Status."""
    answer = requests.get(url, headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    fmt = Image.open(io.BytesIO(answer.content)).format.lower()
    assert answer.headers["Content-Type"] == f"image/{fmt}"
    return fmt, answer.content, answer.headers["X-Cache-Status"]


def test_format_auto_is_cached_by_the_accept_class_the_gateway_answered(proxy):
    """Each Accept gets its class's format; the first of a class is a miss, every later one a hit on
    the same bytes (a key that left the class out, or a gateway sent the client's own Accept, fails)."""
    first: dict[str, bytes] = {}
    for accept, expected in ACCEPTS:
        expected = expected if AVIF_AVAILABLE or expected != "avif" else "webp"
        fmt, data, cache = fetched(proxy.url + AUTO, {"Accept": accept})  # None: no Accept
        assert fmt == expected, (accept, fmt)
        assert cache == ("HIT" if expected in first else "MISS"), f"{accept!r}: {cache}\n{proxy.logs()}"
        assert data == first.setdefault(expected, data), accept


def test_format_auto_of_a_transparent_png_is_cached_per_class_each_keeping_its_transparency(proxy):
    """One origin PNG, clients of every class: those that take neither AVIF nor WebP get a PNG (the
    original format, not a flattened JPEG), the others AVIF or WebP, each class from its own cache
    entry, every answer transparent where the sticker is."""
    first: dict[str, bytes] = {}
    for accept, expected in ACCEPTS:
        expected = "png" if expected == "jpeg" else expected if AVIF_AVAILABLE or expected != "avif" else "webp"
        fmt, data, cache = fetched(proxy.url + "/cdn-cgi/image/width=200,format=auto/sticker.png", {"Accept": accept})
        assert fmt == expected, (accept, fmt)
        assert cache == ("HIT" if expected in first else "MISS"), f"{accept!r}: {cache}\n{proxy.logs()}"
        assert data == first.setdefault(expected, data), accept
        alpha = np.asarray(Image.open(io.BytesIO(data)).convert("RGBA"))[..., 3]
        assert alpha[2, 2] == 0 and alpha[75, 100] == 255, accept


def test_slow_connection_hints_are_one_class_of_the_key(proxy):
    """Client hints that say slow get slow-connection-quality's answer (one cached entry for all of
    them), the others the usual quality's."""
    first: dict[bool, bytes] = {}
    for hints, slow in SLOW_HINTS:
        _, data, cache = fetched(proxy.url + SLOW, hints)
        assert cache == ("HIT" if slow in first else "MISS"), f"{hints}: {cache}\n{proxy.logs()}"
        assert data == first.setdefault(slow, data), hints
    assert len(first[True]) < len(first[False]) * 0.7, "quality 20 is not smaller than quality 90"


def proxy_error(answer: requests.Response, status: int, code: str, request_id: str | None) -> dict:
    """The proxy's own error: JSON with its code, as the gateway's are, and the request's id: the
    caller's (`request_id`), else one of nginx's own (32 hexadecimal digits)."""
    assert answer.status_code == status, answer.text
    assert answer.headers["Content-Type"] == "application/json", answer.text
    assert answer.json()["error"]["code"] == code, answer.text
    if request_id is None:
        assert re.fullmatch(r"[0-9a-f]{32}", answer.headers["X-Request-ID"]), answer.headers
    else:
        assert answer.headers["X-Request-ID"] == request_id, answer.headers
    return answer.json()["error"]


@pytest.mark.parametrize("request_id", ["proxy-test", None])
def test_the_proxys_own_errors_are_json_with_a_code_as_the_gateways_are(proxy, tmp_path, request_id):
    """nginx answered a body over its limit, a gateway that does not answer and one too slow with
    its own HTML pages (and 502, which clients do not retry): now JSON, the id, and 503 with
    Retry-After while no gateway answers. Its limit is the gateway's (one byte over it was sent on,
    refused unread by the gateway, and sometimes answered 502 by nginx: a race). The
    gateway's own errors pass as they are. A client that sends no X-Request-ID (most do not) gets
    nginx's own id."""
    named = {"X-Request-ID": request_id} if request_id else {}
    headers = {"Content-Type": "image/jpeg", **named}
    limit = Settings().max_upload_bytes  # the proxy's too: the gateway never gets a body it would refuse
    over = requests.post(f"{proxy.url}/v1/detect", data=b"\xff" * (limit + 1), headers=headers, timeout=60)
    proxy_error(over, 413, "payload_too_large", request_id)
    own = requests.post(f"{proxy.url}/v1/detect", data=b"\xff" * limit, headers=headers, timeout=60)
    assert (own.status_code, own.json()["error"]["code"]) == (415, "unsupported_image")  # the gateway's answer
    assert own.headers["X-Request-ID"] == (request_id or own.headers["X-Request-ID"]) and own.headers["X-Request-ID"]
    with running_proxy(f"http://127.0.0.1:{free_port()}", tmp_path) as url:  # nobody listens there
        for path in ("/v1/detect", "/cdn-cgi/image/width=100/astronaut.jpg"):
            down = requests.get(url + path, headers=named, timeout=30)
            proxy_error(down, 503, "gateway_unavailable", request_id)
            assert down.headers["Retry-After"] == "1"
    silent = {"proxy_read_timeout 60s;": "proxy_read_timeout 1s;"}
    (tmp_path / "slow").mkdir()
    with hostile_origin(b"") as (base, _), running_proxy(base.rstrip("/"), tmp_path / "slow", silent) as url:
        proxy_error(requests.get(url + "/hold", headers=named, timeout=30), 504, "gateway_timeout", request_id)


def raw_request(url: str, head: bytes) -> tuple[int, dict[str, str], bytes]:
    """`head` sent as it is (no client library would send it): the status, headers and body back."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(head)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    header, _, body = received.partition(b"\r\n\r\n")
    lines = header.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), fields, body


@pytest.mark.parametrize(
    ("head", "status", "code"),
    [
        (b"GET /cdn-cgi/image/width=" + b"9" * 9000 + b"/a.jpg HTTP/1.1\r\nHost: x\r\n\r\n", 414, "uri_too_long"),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", 400, "request_header_too_large"),
        (b"GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n", 400, "bad_request"),
        (b"POST /v1/detect HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not_implemented"),
    ],
)
def test_what_nginx_refuses_before_any_gateway_is_json_with_a_code_too(proxy, head, status, code):
    """Requests nginx itself refuses as it reads them (a URL longer than its buffers, as a long
    options segment makes, an oversized header, a malformed request line, an encoding it does not
    take): JSON with a stable code and an id, as every other error, not nginx's HTML page."""
    got, fields, body = raw_request(proxy.url, head)
    assert got == status, body
    assert fields.get("Content-Type") == "application/json", (fields, body)
    assert json.loads(body)["error"]["code"] == code
    assert re.fullmatch(r"[0-9a-f]{32}", fields.get("X-Request-ID", "")), fields
