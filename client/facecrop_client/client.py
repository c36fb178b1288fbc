"""The HTTP client: one connection pool per Client, thread-safe, with retries that respect Retry-After."""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Union
from urllib.parse import urlencode

import urllib3

from facecrop_client.models import AnonymizeResult, CropResult, Detection, Rectangle

ImageInput = Union[str, Path, bytes, bytearray, BinaryIO]
# 429 and 503 are the service's own "try again". 502 is a load balancer's (a Kubernetes ingress whose
# replica went away mid-request): the gateway answers an upload no 502 of its own, and every call
# here is a pure function of its body, so sending it again is safe.
RETRYABLE_STATUSES = frozenset({429, 502, 503})
UNREADABLE_ANSWER = "unreadable_answer"  # a success (2xx) that is not facecrop's answer
POOL_SIZE = 32  # connections kept to a service: as many requests may be in flight to it at once


class FacecropError(Exception):
    """The service refused a request (4xx) or kept failing (5xx, connection errors) after retries.

    `status` is the HTTP status, 0 when the service never answered (code `connection_error`).
    Connection errors are retried only after the service has answered this client once: an
    address nobody answers at is reported at once."""

    def __init__(self, status: int, code: str, message: str, request_id: str = ""):
        super().__init__(f"{status} {code}: {message}" if status else f"{code}: {message}")
        self.status, self.code, self.message, self.request_id = status, code, message, request_id


def read_image(image: ImageInput) -> bytes:
    if isinstance(image, (bytes, bytearray)):
        return bytes(image)
    if isinstance(image, (str, Path)):
        return Path(image).read_bytes()
    return image.read()


class Client:
    """`Client("http://127.0.0.1:8080")`; safe to share between threads (urllib3's pool is)."""

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        timeout: float = 60.0,
        api_key: str | None = None,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        pool_size: int = POOL_SIZE,
    ):
        self.base_url = (base_url if "://" in base_url else f"http://{base_url}").rstrip("/")  # 127.0.0.1:8080 too
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.headers = {"Content-Type": "application/octet-stream"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self.pool = urllib3.PoolManager(maxsize=pool_size, block=True, retries=False)
        self.answered = False  # connection errors are retried only once the service has answered

    def check(self) -> None:
        """Raise FacecropError (connection_error) at once, without retries, where nobody answers."""
        try:
            self.pool.request("GET", f"{self.base_url}/healthz", headers=self.headers, timeout=min(self.timeout, 5.0))
        except urllib3.exceptions.HTTPError as error:
            message = f"cannot reach {self.base_url}: {_connection_problem(error)}"
            raise FacecropError(0, "connection_error", message) from error
        self.answered = True

    def detect(self, image: ImageInput, **params) -> Detection:
        """Faces in `image` (a path, bytes or a binary file); params as for POST /v1/detect."""
        response = self._post("/v1/detect", read_image(image), params)
        with facecrops_answer(response):
            return Detection.from_json(json.loads(response.data))

    def crop(self, image: ImageInput, **params) -> CropResult:
        """A face-centred crop of `image`; params as for POST /v1/crop (width, height, zoom, ...)."""
        response = self._post("/v1/crop", read_image(image), params)
        with facecrops_answer(response):
            x, y, width, height = (int(v) for v in response.headers["X-Crop-Rect"].split(","))
            return CropResult(
                content=response.data,
                content_type=response.headers.get("Content-Type", ""),
                region=Rectangle(x, y, width, height),
                face_count=int(response.headers["X-Face-Count"]),
                request_id=response.headers.get("X-Request-ID", ""),
            )

    def anonymize(self, image: ImageInput, **params) -> AnonymizeResult:
        """`image` with every face hidden; params as for POST /v1/anonymize (method, strength, margin, ...)."""
        response = self._post("/v1/anonymize", read_image(image), params)
        with facecrops_answer(response):
            return AnonymizeResult(
                content=response.data,
                content_type=response.headers.get("Content-Type", ""),
                face_count=int(response.headers["X-Face-Count"]),
                request_id=response.headers.get("X-Request-ID", ""),
            )

    def _post(self, path: str, body: bytes, params: Mapping[str, object]) -> urllib3.BaseHTTPResponse:
        query = urlencode({k: _text(v) for k, v in params.items() if v is not None})
        url = f"{self.base_url}{path}?{query}" if query else f"{self.base_url}{path}"
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = self.pool.request("POST", url, body=body, headers=self.headers, timeout=self.timeout)
            except urllib3.exceptions.HTTPError as error:  # connection refused, reset, timed out
                if last or not self.answered:  # an address nobody ever answered at: told at once
                    message = f"cannot reach {self.base_url}: {_connection_problem(error)}"
                    raise FacecropError(0, "connection_error", message) from error
                self._sleep(attempt, None)
                continue
            self.answered = True
            if response.status < 400:
                return response
            if response.status not in RETRYABLE_STATUSES or last:
                raise _error_of(response)
            self._sleep(attempt, response.headers.get("Retry-After"))
        raise AssertionError("unreachable")

    def _sleep(self, attempt: int, retry_after: str | None) -> None:
        """Exponential backoff with full jitter, never shorter than the server's Retry-After."""
        delay = random.uniform(0, min(self.max_backoff, self.backoff * 2**attempt))
        if retry_after and retry_after.isdigit():
            delay = max(delay, float(retry_after))
        time.sleep(delay)


def _connection_problem(error: urllib3.exceptions.HTTPError) -> str:
    """The cause in a few words: "Connection refused", "Read timed out. (read timeout=60.0)", ..."""
    cause = error.__context__
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    return str(error).split(": ", 1)[-1]  # without urllib3's "HTTPConnectionPool(host=..., port=...)" prefix


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _error_of(response: urllib3.BaseHTTPResponse) -> FacecropError:
    try:
        error = json.loads(response.data)["error"]
        return FacecropError(response.status, error["code"], error["message"], response.headers.get("X-Request-ID", ""))
    except (ValueError, KeyError, TypeError):
        return _not_facecrops(response, "http_error")


@contextmanager
def facecrops_answer(response: urllib3.BaseHTTPResponse) -> Iterator[None]:
    """Reading a success's body and headers: one that is not facecrop's (a login page, a proxy's own
    page, headers a proxy dropped) is a FacecropError (`unreadable_answer`), not a KeyError."""
    try:
        yield
    except (ValueError, KeyError, TypeError) as error:
        raise _not_facecrops(response, UNREADABLE_ANSWER) from error


def _not_facecrops(response: urllib3.BaseHTTPResponse, code: str) -> FacecropError:
    answer = response.data[:200].decode(errors="replace").strip() or "(empty)"
    message = f"not an answer of facecrop's (is the address the gateway's, not Triton's?): {answer}"
    return FacecropError(response.status, code, message, response.headers.get("X-Request-ID", ""))


class Services:
    """Several services (one URL each: say the node-local service of every GPU host) used as one
    Client: calls spread over them in turn, and a call whose service cannot be reached, answers
    what is not facecrop's, or is unavailable past its retries, is made on the next one (each once)
    before it fails."""

    def __init__(self, clients: list[Client]):
        if not clients:
            raise ValueError("Services needs at least one service")
        self.clients = clients
        self._turns = itertools.count()
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return ", ".join(client.base_url for client in self.clients)

    def check(self) -> None:
        """Raise FacecropError (connection_error) at once where no service answers."""
        problems = []
        for client in self.clients:
            try:
                client.check()
                return
            except FacecropError as error:
                problems.append(error.message)
        raise FacecropError(0, "connection_error", "; ".join(problems))

    def detect(self, image: ImageInput, **params) -> Detection:
        return self._call("detect", read_image(image), params)

    def crop(self, image: ImageInput, **params) -> CropResult:
        return self._call("crop", read_image(image), params)

    def anonymize(self, image: ImageInput, **params) -> AnonymizeResult:
        return self._call("anonymize", read_image(image), params)

    def _call(self, method: str, body: bytes, params: dict):
        with self._lock:
            first = next(self._turns)
        for attempt in range(len(self.clients)):
            client = self.clients[(first + attempt) % len(self.clients)]
            try:
                return getattr(client, method)(body, **params)
            except FacecropError as error:
                if not _elsewhere(error) or attempt == len(self.clients) - 1:
                    raise
        raise AssertionError("unreachable")


NOT_THIS_SERVICE_CODES = frozenset({"connection_error", "http_error", UNREADABLE_ANSWER})
NOT_THIS_SERVICE_STATUSES = frozenset({404, 503})


def _elsewhere(error: FacecropError) -> bool:
    """Whether another service may answer what this one did not: it cannot be reached, its answer is
    not facecrop's (a proxy's or a sign-in page, an address without the route: 404), or it is
    unavailable past its retries (503: its Triton down); facecrop's refusal is the same everywhere."""
    return error.code in NOT_THIS_SERVICE_CODES or error.status in NOT_THIS_SERVICE_STATUSES


AnyClient = Union[Client, Services]  # what the command line and the batch and video jobs call


def connect(urls: str, timeout: float = 60.0, api_key: str | None = None, pool_size: int = POOL_SIZE) -> AnyClient:
    """The Client of one URL, or Services over several, comma-separated; `pool_size` requests at
    once to each."""
    clients = [
        Client(url.strip(), timeout=timeout, api_key=api_key, pool_size=pool_size)
        for url in urls.split(",")
        if url.strip()
    ]
    return clients[0] if len(clients) == 1 else Services(clients)  # none: Services refuses
