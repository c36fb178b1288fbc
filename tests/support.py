"""What several test modules share: the shared photos, image builders, an in-process model
stand-in, small helpers for talking to the running stack, and the pages in Chromium. No tests here."""

from __future__ import annotations

import functools
import io
import json
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from socketserver import BaseServer
from typing import NoReturn, TypeVar

import cv2
import numpy as np
import pytest
import requests
from PIL import Image, ImageDraw
from playwright.sync_api import Browser, Page

from evaluation.images import CROWD, MissingSharedData, astronaut, encoded, photo
from evaluation.origins import answer
from gateway.config import Settings
from gateway.detection.detections import Detections
from gateway.detection.detectors import ALL, KINDS, DetectorKind, Detectors, serve
from gateway.detection.model import in_process_batch
from gateway.detection.retinaface import WIRE_FORMATS
from gateway.imaging.decode import DecodedImage, decode_image, read_header
from gateway.triton.wire import Answer, Batch, ModelOutputs, WireFormat
from local_triton.processes import BUILD_DIR

# Client hints: whether each says the connection is slow (Cloudflare's rules, the gateway's own:
# gateway/web/url/caching.py's slow_connection, held to them in tests/unit/test_caching.py; the
# compose proxy's cache classes, held to the same list in tests/integration/test_proxy.py).
SLOW_HINTS = [
    ({}, False),
    ({"ECT": "2g"}, True),
    ({"Save-Data": "on"}, True),
    ({"RTT": "300"}, True),
    ({"ECT": "4g", "Downlink": "10"}, False),
    ({"Downlink": "1.5"}, True),
    ({"RTT": "100"}, False),
    # each rule's edge, as browsers round them (RTT to 25 ms, Downlink to 25 kbit/s): over 150 ms,
    # under 5 Mbit/s, 3g and worse; Save-Data's other value
    ({"RTT": "150"}, False),
    ({"RTT": "175"}, True),
    ({"RTT": "1200"}, True),
    ({"Downlink": "5"}, False),
    ({"Downlink": "4.975"}, True),
    ({"Downlink": "0.025"}, True),
    ({"ECT": "3g"}, True),
    ({"ECT": "slow-2g"}, True),
    ({"Save-Data": "off"}, False),
]

REPORT_LINES = pytest.StashKey[list[str]]()  # lines for the end of the terminal report
MAGIC = [b"\xff\xd8\xff\xe0", b"\x89PNG\r\n\x1a\n", b"RIFF\x00\x00\x00\x00WEBPVP8 ", b"GIF89a", b"BM", b""]
FORMATS = {"jpeg": "JPEG", "png": "PNG", "webp": "WEBP", "gif": "GIF", "bmp": "BMP"}


def decode(data: bytes, max_pixels: int) -> DecodedImage:
    """The whole decoder entry, header check included, at full resolution."""
    return decode_image(data, read_header(data, max_pixels))


PHONE_SIZE = (4032, 3024)


@cache
def upright_phone_photo() -> Image.Image:
    """The crowd photo enlarged to 12 MP (as a phone would have taken it), upright."""
    return Image.open(photo(CROWD)).convert("RGB").resize(PHONE_SIZE, Image.Resampling.BICUBIC)


def stored_with_orientation(orientation: int, upright: Image.Image | None = None) -> bytes:
    """A phone photo as a camera stores it under EXIF `orientation` (6 and 8: turned on its side)."""
    upright = upright or upright_phone_photo()
    turn = {6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}.get(orientation)
    stored = upright.transpose(turn) if turn is not None else upright
    exif = stored.getexif()
    exif[0x0112] = orientation
    return encoded(stored, "JPEG", exif=exif, quality=90)


@cache
def clean_images() -> dict[str, bytes]:
    """The astronaut in each supported format, by short name (jpeg, png, ...)."""
    return {name: encoded(astronaut(), fmt) for name, fmt in FORMATS.items()}


class NoFacesModel:
    """An in-process stand-in for Triton that never finds a face."""

    def __init__(self, wire: WireFormat = WIRE_FORMATS["uint8"]):
        self.wire = wire

    def batch(self, shape: tuple[int, ...]) -> AbstractContextManager[Batch]:
        return in_process_batch(shape, self.wire.dtype, self.run)

    def run(self, tensor: np.ndarray) -> list[Answer]:
        empty = ModelOutputs(
            np.zeros(0, np.int32), np.zeros(0, np.float32), np.zeros((0, 4), np.float32), np.zeros((0, 10), np.float32)
        )
        return [(empty,)] * len(tensor)

    def is_ready(self) -> bool:
        return True


MIN_SQUARE = 10  # like a face model, the square finder finds nothing smaller


class SquareFinder:
    """An in-process stand-in for Triton that answers the light squares of each input image (OpenCV's
    connected components of pixels over 100 in every channel, on the very tensor the gateway sends),
    MIN_SQUARE pixels and up, as faces, box in input pixels, scored by the median brightness inside
    the box over 256 (white 0.996, a grey of 128 exactly 0.5, of 110 0.43): tests judge the
    pipeline's boxes and hidden faces by the squares drawn on a picture, with no model's judgement."""

    def __init__(self) -> None:
        self.wire = KINDS["yunet"].wire_formats["uint8"]
        self.shapes: list[tuple[int, ...]] = []  # each batch's tensor shape, in the order sent

    def batch(self, shape: tuple[int, ...]) -> AbstractContextManager[Batch]:
        self.shapes.append(tuple(shape))
        return in_process_batch(shape, self.wire.dtype, self.run)

    def run(self, tensor: np.ndarray) -> list[Answer]:
        answers = []
        for image in tensor:
            darkest = image.min(axis=2)
            count, _, stats, _ = cv2.connectedComponentsWithStats((darkest > 100).astype(np.uint8))
            kept = [i for i in range(1, count) if min(stats[i, 2], stats[i, 3]) >= MIN_SQUARE]
            x, y, w, h = (stats[kept, i].astype(np.float32) for i in range(4))
            boxes = np.stack([x, y, x + w, y + h], axis=1).reshape(-1, 4)
            brightness = [np.median(darkest[top : top + h, left : left + w]) for left, top, w, h, _ in stats[kept]]
            scores = np.array(brightness, np.float32) / 256
            landmarks = np.zeros((len(boxes), 10), np.float32)
            answers.append((ModelOutputs(np.arange(len(boxes)), scores, boxes, landmarks),))
        return answers

    def candidates(self, outputs: ModelOutputs, input_shape: tuple[int, int], min_score: float) -> Detections:
        """The finder's decoder: its boxes as they are (landmarks at their centres); told the
        input's (H, W), which must be one it was sent."""
        assert tuple(input_shape) in {shape[1:3] for shape in self.shapes}, (input_shape, self.shapes)
        centres = (outputs.loc[:, :2] + outputs.loc[:, 2:]) / 2
        found = Detections(outputs.scores, outputs.loc.copy(), np.repeat(centres[:, None], 5, axis=1))
        return found[found.scores >= min_score]

    def is_ready(self) -> bool:
        return True


@contextmanager
def square_finder() -> Iterator[tuple[Detectors, SquareFinder]]:
    """The detectors of a gateway whose one model is a SquareFinder (a model kind of its own, at
    every detail and in the tiled pass), and the finder."""
    model = SquareFinder()
    kind = DetectorKind("squares", {"uint8": model.wire}, model.candidates, ALL, True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("gateway.detection.detectors.KINDS", {**KINDS, "squares": kind})
        yield serve(("squares",), "uint8", lambda _: model), model


def squares_picture(
    marks: list[tuple[int, int, int]], size: tuple[int, int], background: np.ndarray | None = None, level: int = 255
) -> np.ndarray:
    """RGB pixels of `size` (W, H): `background` (black where None; none of it over 100 in every
    channel), with a square of grey `level` at each (x, y, side) of `marks`."""
    pixels = np.zeros((size[1], size[0], 3), np.uint8) if background is None else background.copy()
    for x, y, side in marks:
        pixels[y : y + side, x : x + side] = level
    return pixels


def detect(stack, data: bytes, params=None, **kwargs) -> requests.Response:
    return requests.post(
        f"{stack.gateway}/v1/detect", files={"image": ("photo", data)}, params=params, timeout=30, **kwargs
    )


def rectangle(face: dict) -> tuple[int, int, int, int]:
    r = face["face_rectangle"]
    return r["x"], r["y"], r["width"], r["height"]


def holds_every_face(window: tuple[int, int, int, int], faces: list[dict]) -> None:
    """The window (x, y, w, h) holds each face's rectangle whole."""
    x, y, width, height = window
    for face in faces:
        fx, fy, fw, fh = rectangle(face)
        assert x <= fx and y <= fy and fx + fw <= x + width and fy + fh <= y + height, (window, rectangle(face))


def iou(a, b) -> float:
    ax2, ay2, bx2, by2 = a[0] + a[2], a[1] + a[3], b[0] + b[2], b[1] + b[3]
    w = max(0, min(ax2, bx2) - max(a[0], b[0]))
    h = max(0, min(ay2, by2) - max(a[1], b[1]))
    return w * h / (a[2] * a[3] + b[2] * b[3] - w * h)


def error_of(response: requests.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == code and error["message"]
    return error


CHROMIUM = "/usr/bin/chromium"  # Debian's package; `make test` installs it
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"  # screenshots, never committed


def watched_page(browser: Browser, width: int) -> tuple[Page, list[str]]:
    """A new page `width` CSS pixels wide, and the errors it reports: console errors (Chromium logs
    every Content-Security-Policy violation as one, and every failed load) and uncaught exceptions."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return page, errors


def assert_strict_policy(policy: str) -> None:
    """Same-origin scripts, styles and connections only: no inline code, no eval, no CDN."""
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    for name in ("default-src", "script-src", "style-src", "connect-src"):
        assert directives[name] == "'self'", policy
    assert "unsafe" not in policy and "http" not in policy, policy


def screenshot(page: Page, name: str, down_to: str | None = None) -> None:
    """The whole page, or its top down to the element `down_to` (a selector), into ARTIFACTS."""
    ARTIFACTS.mkdir(exist_ok=True)
    clip = None
    if down_to:
        box = page.locator(down_to).first.bounding_box()
        assert box is not None, f"{down_to} is not shown"
        bottom = page.evaluate("window.scrollY") + box["y"] + box["height"] + 16
        clip = {"x": 0, "y": 0, "width": page.viewport_size["width"], "height": bottom}
    page.screenshot(path=str(ARTIFACTS / name), full_page=True, clip=clip)


# For a child process that a test stops with SIGINT: Ctrl-C's default handling, even where the
# test runs with SIGINT ignored (a background job of a shell ignores it, and its children inherit that).
restore_ctrl_c = functools.partial(signal.signal, signal.SIGINT, signal.SIG_DFL)


@dataclass
class Gate:
    """What a `gated` proxy lets through: the first `let_through` requests to `path`; later ones wait
    for `release`, and `held` is set as the first of them arrives."""

    path: str
    let_through: int
    held: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)
    seen: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wait_turn(self, path: str) -> None:
        if not path.startswith(self.path):
            return
        with self.lock:
            self.seen += 1
            over = self.seen > self.let_through
        if over:
            self.held.set()
            self.released.wait(60)


HOP_HEADERS = ("connection", "content-length", "transfer-encoding", "content-encoding", "keep-alive")


class _Forward(BaseHTTPRequestHandler):
    """Passes each request on to the server's target once its gate allows, and the answer back."""

    def forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.gate.wait_turn(self.path)  # type: ignore[attr-defined]
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        forwarded = requests.request(
            self.command,
            self.server.target + self.path,
            data=body,
            headers=headers,
            timeout=60,  # type: ignore[attr-defined]
        )
        passed_on = {  # every header but those of this hop (requests has undone the encoding)
            key: value for key, value in forwarded.headers.items() if key.lower() not in HOP_HEADERS
        }
        answer(self, forwarded.status_code, forwarded.content, passed_on)

    do_GET = do_POST = forward

    def log_message(self, *args) -> None:
        pass


@contextmanager
def gated(target: str, gate: Gate) -> Iterator[str]:
    """A forwarding proxy to `target` (the real gateway) on a loopback port, behind `gate`: a job
    that a test stops while the gate holds one of its requests cannot have finished before the
    signal, however slowly the test itself is scheduled. Yields the proxy's URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Forward)
    server.daemon_threads = True
    server.target, server.gate = target, gate  # type: ignore[attr-defined]
    with serving(server):
        try:
            yield f"http://127.0.0.1:{server.server_port}"
        finally:
            gate.released.set()


def gateway_log(name: str = "test") -> str:
    return (BUILD_DIR / "logs" / f"{name}-gateway.log").read_text(errors="replace")


def log_line(request_id: str, name: str = "test") -> dict:
    """The gateway NAME's JSON log line of `request_id`, once written (within 5 s)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for line in gateway_log(name).splitlines():
            if request_id in line:
                return json.loads(line)
        time.sleep(0.1)
    raise AssertionError(f"no log line for {request_id}")


def url_client(originals: Path, **settings):
    """The gateway in process, FACECROP_ORIGIN the directory `originals` (unless `settings` give
    another), with the model stand-in."""
    from gateway.web.app import create_app

    return create_app(Settings(**{"origin": str(originals), **settings}), NoFacesModel).test_client()


def url_get(client, path: str, **headers):
    """GET /cdn-cgi/image/`path` of an in-process gateway."""
    return client.get(f"/cdn-cgi/image/{path}", headers=headers)


def regions_of(body: dict) -> list[tuple[int, int, int, int]]:
    """An anonymize answer's regions as corner boxes."""
    return [(r["x"], r["y"], r["x"] + r["width"], r["y"] + r["height"]) for r in body["regions"]]


def rectangles(faces: list[dict]) -> list[tuple[int, ...]]:
    """Face objects' rectangles (x, y, width, height), sorted: the same faces whatever their order."""
    return sorted(tuple(face["face_rectangle"].values()) for face in faces)


def faces_and_implausible(gateway: str, data: bytes) -> tuple[dict, list[dict]]:
    """/v1/detect's answer at /v1/anonymize's defaults (8 %, detail=auto, every face), and its faces
    under 50 % whose shorter side is over twice the median of the faces of 50 % and up
    (docs/api/anonymize.md's size rule, written out here, not the gateway's code); at least one."""
    every = {"min_confidence": 8, "detail": "auto", "max_faces": 1000, "landmarks": "false"}
    found = requests.post(f"{gateway}/v1/detect", params=every, files={"image": data}, timeout=120).json()
    faces = found["faces"]
    side = [min(face["face_rectangle"]["width"], face["face_rectangle"]["height"]) for face in faces]
    limit = 2 * float(np.median([s for s, face in zip(side, faces) if face["confidence"] >= 50]))
    unsure = [face for s, face in zip(side, faces) if face["confidence"] < 50 and s > limit]
    assert unsure, "the photo no longer shows the size rule's case"
    return found, unsure


ONE_FACE = {
    "image": {"width": 4, "height": 3},
    "faces": [{"confidence": 99.5, "face_rectangle": {"x": 1, "y": 1, "width": 2, "height": 2}}],
}


def missing_data(missing: MissingSharedData) -> NoReturn:
    """A test (or a test module) that needs the shared labeled data this checkout lacks: skipped with
    one line saying what is missing and where it comes from; failed in CI (CI=true), where a missing
    set must never pass for a run."""
    if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
        pytest.fail(f"{missing} (CI=true: a missing set fails the run)", pytrace=False)
    pytest.skip(str(missing), allow_module_level=True)


Listed = TypeVar("Listed")


def needing_shared_data(listing: Callable[[], Listed]) -> Listed:
    """`listing()`, at a test module's import (the shared photos a module parametrizes over): where the
    shared data is missing, the whole module is skipped as `missing_data` says."""
    try:
        return listing()
    except MissingSharedData as missing:
        missing_data(missing)


def sticker(size: tuple[int, int] = (400, 300)) -> Image.Image:
    """A sticker, 400x300: an opaque orange disc (100-300, 50-250) on a transparent ground."""
    image = Image.new("RGBA", size, (0, 0, 0, 0))
    ImageDraw.Draw(image).ellipse((100, 50, 300, 250), fill=(255, 140, 0, 255))
    return image


def json_answer(status: int, body: dict) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json"}, json.dumps(body).encode()


def refusal(status: int, code: str) -> tuple[int, dict[str, str], bytes]:
    """The service's JSON error, as the gateway writes it."""
    return json_answer(status, {"error": {"code": code, "message": f"the service's {code}"}})


class _Service(BaseHTTPRequestHandler):
    """GET /healthz: 200 while `server.healthy` (else the connection closed unanswered); the n-th POST
    (from 0), its path and body kept in `server.requests` (its Authorization header in `server.keys`):
    where `server.unanswered(body)` gives seconds, its connection closed unanswered after them
    (math.inf: once the service closes), else `server.answer_for(n)`, or the connection closed
    unanswered where it is None (a service gone away)."""

    def do_GET(self) -> None:
        if not self.server.healthy:  # type: ignore[attr-defined]
            self.close_connection = True
            return
        answer(self, 200, b"ok", {"Content-Type": "text/plain"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:  # type: ignore[attr-defined]
            turn = self.server.posts  # type: ignore[attr-defined]
            self.server.posts += 1  # type: ignore[attr-defined]
            self.server.requests.append((self.path, body))  # type: ignore[attr-defined]
            self.server.keys.add(self.headers.get("Authorization"))  # type: ignore[attr-defined]
        held = self.server.unanswered(body)  # type: ignore[attr-defined]
        if held is not None:
            self.server.closing.wait(None if held == math.inf else held)  # type: ignore[attr-defined]
            self.close_connection = True
            return
        reply = self.server.answer_for(turn)  # type: ignore[attr-defined]
        if reply is None:
            self.close_connection = True
            return
        status, headers, body = reply
        answer(self, status, body, headers)

    def log_message(self, *args) -> None:
        pass


@contextmanager
def scripted_service(answer_for, unanswered=lambda body: None) -> Iterator[ThreadingHTTPServer]:
    """A stand-in for the service on a loopback port, answering each POST as `answer_for(n)` says
    (one for whose body `unanswered` gives seconds: its connection closed after them, unanswered); its
    `posts` counts them, `requests` holds each one's path and body, `url` is its address, and
    `healthy` set False leaves its /healthz unanswered too (nothing answers)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Service)
    server.daemon_threads = True
    server.answer_for, server.posts, server.lock = answer_for, 0, threading.Lock()  # type: ignore[attr-defined]
    server.requests, server.keys = [], set()  # type: ignore[attr-defined]
    server.unanswered, server.closing, server.healthy = unanswered, threading.Event(), True  # type: ignore[attr-defined]
    server.url = f"http://127.0.0.1:{server.server_port}"  # type: ignore[attr-defined]
    with serving(server):
        try:
            yield server
        finally:
            server.closing.set()  # type: ignore[attr-defined]  # the held calls end


Server = TypeVar("Server", bound=BaseServer)


@contextmanager
def serving(server: Server) -> Iterator[Server]:
    """`server` (a socketserver) answering on a thread of its own until the block ends, then closed."""
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)  # shut down in 0.02 s
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class TickingClock:
    """A clock that moves one second each time it is read: the deadline's checks, counted."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return float(self.reads)


# The `facecrop` command as users run it: the console script pip installs beside this Python (the
# package imported by its name; `python -m` would run it as __main__, which mutmut's map of which
# test reaches which function, and its choice of the mutant to run, would not recognise).
FACECROP = [str(Path(sys.executable).with_name("facecrop"))]


@dataclass(frozen=True)
class Ran:
    """What a `facecrop` command did: its exit status, standard output (bytes) and error (text)."""

    returncode: int
    stdout: bytes
    stderr: str

    def lines(self) -> list[dict]:
        """Standard output's JSON Lines."""
        return [json.loads(line) for line in self.stdout.decode().splitlines()]


def facecrop_here(*argv: str, stdin: bytes = b"") -> Ran:
    """`facecrop ARGV` run in this process (facecrop_client.cli.main) with `stdin` as its standard
    input, where a test needs no signal: as a separate Python runs it, but a mutant of the client
    is judged without a Python started per run. A usage error (argparse's exit) is status 2; the
    SIGTERM handler a batch sets is put back."""
    from facecrop_client.cli import main

    out, err = io.BytesIO(), io.StringIO()
    stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    stdin_text = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    handler = signal.getsignal(signal.SIGTERM)
    kept_stdin, sys.stdin = sys.stdin, stdin_text
    try:
        with redirect_stdout(stdout), redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as exited:
                code = exited.code if isinstance(exited.code, int) else 1
    finally:
        sys.stdin = kept_stdin
        signal.signal(signal.SIGTERM, handler)
    stdout.flush()
    return Ran(code, out.getvalue(), err.getvalue())
