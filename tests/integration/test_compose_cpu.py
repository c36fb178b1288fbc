"""The whole stack in containers, CPU variant (docker-compose.yml + docker-compose.cpu.yml).

Docker, its plugins and base-image stand-ins are set up as `make up-cpu` does
(local_triton/compose.py); the stack runs as its own compose project on a free port, and
every check goes through the proxy. Tests run in file order: scaling, a Triton stop and
`down -v` come last. `pytest -m "not compose"` skips the module.
"""

from __future__ import annotations

import http.client
import io
import json
import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from urllib.parse import urlsplit

import pytest
import requests
from PIL import Image

from evaluation.images import photo
from gateway.triton.shm import owner
from local_triton import BUILD_DIR, compose
from local_triton.cpu import choose, cpu_flags
from local_triton.processes import free_port
from tests.support import REPORT_LINES

# The first test carries the build (minutes on a fresh machine); every step has its own bound
# in local_triton/compose.py, this is the backstop.
pytestmark = [pytest.mark.integration, pytest.mark.compose, pytest.mark.timeout(2400)]

PHOTOS = (
    "demo/skimage_astronaut.jpg",
    "demo/widertest_20_Family_Group_Family_Group_20_217.jpg",
    "demo/yxlijun_S3FD_test.jpg",
)
DETECT_PARAMS = {"min_confidence": "20", "max_faces": "1000"}
PID_FILE = BUILD_DIR / "docker" / "test-dockerd.pid"
SPREAD_REQUESTS = 60  # even at random over 3 replicas, fewer than 5 for one of them has odds below 1e-5


@dataclass(frozen=True)
class Stack:
    """A running compose project of the CPU variant."""

    project: str
    env: dict[str, str]  # FACECROP_PORT: every compose call needs it, or the proxy is recreated
    url: str

    def compose(self, *args: str) -> str:
        return compose.compose(self.project, *args, env=self.env, capture=True).stdout


@pytest.fixture(scope="module")
def cpu_stack(pytestconfig, tmp_path_factory):
    started = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str, since: float) -> float:
        now = time.monotonic()
        phases[name] = now - since
        return now

    project = f"facecrop-test-{os.getpid()}"
    port = free_port()
    originals = tmp_path_factory.mktemp("originals")  # the gateways' FACECROP_ORIGIN, mounted read-only
    shutil.copy(photo(PHOTOS[0]), originals / "astronaut.jpg")
    originals.chmod(0o755)  # the gateways run as uid 10001
    env = {**os.environ, "FACECROP_PORT": str(port), "FACECROP_ORIGINALS": str(originals)}
    daemon_started = False
    mark = started
    try:
        daemon_started = compose.prepare(PID_FILE)
        mark = phase("Docker and base images", started)
        compose.build(project, env=env)
        mark = phase("build", mark)
        compose.up(project, env=env)
        mark = phase("up", mark)
        yield Stack(project, env, f"http://127.0.0.1:{port}")
        mark = phase("checks", mark)
    finally:
        if compose.daemon_answers():
            compose.compose(project, "down", "--volumes", env=env, capture=True)
        if daemon_started:
            compose.stop_daemon(PID_FILE)
        total = time.monotonic() - started
        details = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in phases.items())
        pytestconfig.stash.setdefault(REPORT_LINES, []).append(
            f"docker compose CPU stack test: {total / 60:.1f} minutes ({details}, down {time.monotonic() - mark:.0f} s)"
            if "checks" in phases
            else f"docker compose CPU stack test: {total / 60:.1f} minutes, setup failed ({details})"
        )


def post(url: str, endpoint: str, data: bytes, params: dict | None = None, **kwargs) -> requests.Response:
    return requests.post(f"{url}{endpoint}", files={"image": ("photo", data)}, params=params, timeout=60, **kwargs)


def same_faces(container: list[dict], local: list[dict]) -> bool:
    """The same faces in the same order, rectangles within a pixel, confidence within 0.01
    (onnxruntime may use another thread count in the container)."""
    if len(container) != len(local):
        return False
    for a, b in zip(container, local):
        ra, rb = a["face_rectangle"], b["face_rectangle"]
        if abs(a["confidence"] - b["confidence"]) > 0.01 or any(abs(ra[k] - rb[k]) > 1 for k in ra):
            return False
    return True


def test_ready_through_the_proxy(cpu_stack):
    response = requests.get(f"{cpu_stack.url}/readyz", timeout=10)
    assert response.status_code == 200, response.text
    chosen = {model: choose(model, cpu_flags()) for model in ("retinaface_uint8", "yunet_n_uint8")}  # this host's
    models = {model: f"{choice.precision} ({choice.runtime})" for model, choice in chosen.items()}
    ensemble = {"faces_uint8": "ensemble of retinaface_uint8, yunet_n_uint8"}
    assert response.json() == {"status": "ready", "models": {**models, **ensemble}}


@pytest.mark.parametrize("name", PHOTOS)
def test_detect_finds_the_faces_of_the_local_stack(cpu_stack, stack, name):
    data = photo(name).read_bytes()
    container = post(cpu_stack.url, "/v1/detect", data, DETECT_PARAMS)
    local = post(stack.gateway, "/v1/detect", data, DETECT_PARAMS)
    assert container.status_code == local.status_code == 200, container.text
    assert container.json()["image"] == local.json()["image"]
    assert container.json()["faces"], "no face found"
    assert same_faces(container.json()["faces"], local.json()["faces"]), (container.json(), local.json())


def test_crop_returns_the_image_of_the_local_stack(cpu_stack, stack):
    data = photo(PHOTOS[1]).read_bytes()
    params = {"width": "256", "height": "256"}
    container = post(cpu_stack.url, "/v1/crop", data, params)
    local = post(stack.gateway, "/v1/crop", data, params)
    assert container.status_code == 200, container.text
    assert container.headers["Content-Type"] == "image/jpeg"
    assert Image.open(io.BytesIO(container.content)).size == (256, 256)
    for header in ("X-Crop-Rect", "X-Face-Count"):
        assert container.headers[header] == local.headers[header]


@pytest.mark.parametrize(
    "data, params, status, code",
    [
        (b"this is not an image", None, 415, "unsupported_image"),
        (None, {"min_confidence": "500"}, 400, "invalid_parameter"),
    ],
    ids=["unsupported_image", "invalid_parameter"],
)
def test_errors_are_the_local_stack_s(cpu_stack, stack, data, params, status, code):
    data = data or photo(PHOTOS[0]).read_bytes()
    container = post(cpu_stack.url, "/v1/detect", data, params)
    local = post(stack.gateway, "/v1/detect", data, params)
    assert container.status_code == local.status_code == status
    assert container.json() == local.json() and container.json()["error"]["code"] == code


def test_containers_run_as_non_root(cpu_stack):
    for service in ("gateway", "triton"):
        assert cpu_stack.compose("exec", "-T", service, "id", "-u").strip() == "10001", service
    image = compose.sh(
        "docker", "image", "inspect", "--format", "{{.Config.User}}", "facecrop-model-init:0.1.0", capture=True
    )
    assert image.stdout.strip() == "10001"


def model_files(cpu_stack: Stack) -> str:
    """Every file of the `models` volume with its sha256, as Triton sees it."""
    return cpu_stack.compose(
        "exec", "-T", "triton", "sh", "-c", "cd /models && find . -type f -exec sha256sum {} + | sort -k 2"
    )


def test_model_init_again_changes_nothing(cpu_stack):
    before = model_files(cpu_stack)
    assert "./retinaface_uint8/1/model.onnx" in before and "./retinaface/config.pbtxt" in before
    cpu_stack.compose("run", "--rm", "model-init")
    assert model_files(cpu_stack) == before
    assert post(cpu_stack.url, "/v1/detect", photo(PHOTOS[0]).read_bytes()).status_code == 200


def gateway_hits(cpu_stack: Stack, marker: str) -> Counter:
    """How many requests whose id starts with `marker` each gateway replica logged."""
    hits: Counter = Counter()
    for container in cpu_stack.compose("ps", "--quiet", "gateway").split():
        name = compose.sh("docker", "inspect", "--format", "{{.Name}}", container, capture=True).stdout.strip("/\n")
        logs = compose.sh("docker", "logs", container, capture=True).stderr
        for line in logs.splitlines():
            if line.startswith("{") and json.loads(line).get("request_id", "").startswith(marker):
                hits[name] += 1
    return hits


def test_the_proxy_caches_url_answers_by_accept_class(cpu_stack, pytestconfig):
    image = f"{cpu_stack.url}/cdn-cgi/image/width=128,height=128,fit=cover,gravity=face,f=auto/astronaut.jpg"

    def fetch(marker: str, accept: str) -> requests.Response:
        return requests.get(image, headers={"X-Request-ID": marker, "Accept": accept}, timeout=60)

    first, second = fetch("cache-1", "image/webp,*/*"), fetch("cache-2", "image/webp,*/*")
    assert first.status_code == second.status_code == 200, first.text
    assert (first.headers["X-Cache-Status"], second.headers["X-Cache-Status"]) == ("MISS", "HIT")
    assert second.content == first.content and second.headers["ETag"] == first.headers["ETag"]
    assert second.headers["Content-Type"] == "image/webp" and second.headers["Cache-Control"] == "public, max-age=86400"
    avif = fetch("cache-3", "image/avif,image/webp,*/*")  # another Accept class: its own entry
    assert avif.headers["X-Cache-Status"] == "MISS" and avif.headers["Content-Type"] == "image/avif"
    hits = []
    for i in range(50):
        started = time.perf_counter()
        assert fetch(f"cache-hit-{i}", "image/webp").headers["X-Cache-Status"] == "HIT"
        hits.append(time.perf_counter() - started)
    seen = gateway_hits(cpu_stack, "cache-")
    assert sum(seen.values()) == 2, seen  # the two misses; no HIT reached a gateway
    revalidated = requests.get(
        image, headers={"Accept": "image/webp", "If-None-Match": first.headers["ETag"]}, timeout=60
    )
    assert revalidated.status_code == 304
    pytestconfig.stash.setdefault(REPORT_LINES, []).append(
        f"compose proxy cache: HIT p50 {sorted(hits)[len(hits) // 2] * 1000:.1f} ms over {len(hits)} requests, "
        f"gateway requests seen for them: {sum(seen.values()) - 2}"
    )


# Accept headers that a regex over the raw header and a parser of the header read differently:
# quoted and escaped types, q-values (0 refuses a type), cases, duplicates (sent as two headers).
TRICKY_ACCEPTS = (
    ['"image/a\\vif"'],
    ['image/webp, "image/a\\vif"'],
    ["image/avif;q=0"],
    ["image/avif ; q = 0.0, image/webp"],
    ["image/webp;q=0"],
    ["IMAGE/AVIF"],
    ["image/jpeg;q=1, image/avif;q=0.001"],
    ["image/png", "image/avif"],
    ["image/avif;q=0", "image/webp"],
    ["*/*;q=0.8, image/avif;q=0, image/webp;q=0"],
)
CLASS_ACCEPTS = {"image/avif": "image/avif,image/webp,*/*", "image/webp": "image/webp,*/*", "image/jpeg": "*/*"}


def get_with_accepts(url: str, accepts: list[str]) -> tuple[int, dict[str, str]]:
    """GET with each of `accepts` as an Accept header of its own (requests cannot send two)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.putrequest("GET", parts.path)
        for accept in accepts:
            connection.putheader("Accept", accept)
        connection.endheaders()
        response = connection.getresponse()
        response.read()
        return response.status, dict(response.getheaders())
    finally:
        connection.close()


@pytest.mark.parametrize("accepts", TRICKY_ACCEPTS, ids=lambda accepts: " | ".join(accepts))
def test_no_accept_header_poisons_the_proxy_cache(cpu_stack, accepts):
    """Whatever the tricky request stored, each plain Accept of a class then gets its own format."""
    image = f"{cpu_stack.url}/cdn-cgi/image/width={60 + TRICKY_ACCEPTS.index(accepts)},f=auto/astronaut.jpg"
    status, _ = get_with_accepts(image, accepts)
    assert status == 200
    for answered, accept in CLASS_ACCEPTS.items():
        response = requests.get(image, headers={"Accept": accept}, timeout=60)
        assert response.headers["Content-Type"] == answered, (accept, response.headers["X-Cache-Status"])


def test_the_proxy_keys_slow_connections_apart(cpu_stack):
    """slow-connection-quality: every hint that makes a connection slow lands in one cache entry,
    every other client in another, and each gets its own quality."""
    image = f"{cpu_stack.url}/cdn-cgi/image/width=200,q=90,scq=20/astronaut.jpg"
    fast = requests.get(image, timeout=60)
    slow = requests.get(image, headers={"Save-Data": "on"}, timeout=60)
    assert (fast.headers["X-Cache-Status"], slow.headers["X-Cache-Status"]) == ("MISS", "MISS")
    assert len(slow.content) < 0.6 * len(fast.content)
    for hints in ({"ECT": "2g"}, {"RTT": "300"}, {"Downlink": "1.2"}):
        again = requests.get(image, headers=hints, timeout=60)
        assert again.headers["X-Cache-Status"] == "HIT" and again.content == slow.content, hints
    for hints in ({"ECT": "4g"}, {"RTT": "100"}, {}):
        again = requests.get(image, headers=hints, timeout=60)
        assert again.headers["X-Cache-Status"] == "HIT" and again.content == fast.content, hints


def test_requests_spread_over_three_gateways(cpu_stack, pytestconfig):
    compose.up(cpu_stack.project, "--scale", "gateway=3", env=cpu_stack.env)
    data = photo(PHOTOS[0]).read_bytes()
    for i in range(SPREAD_REQUESTS):
        response = post(cpu_stack.url, "/v1/detect", data, headers={"X-Request-ID": f"spread-{i}"})
        assert response.status_code == 200 and response.headers["X-Request-ID"] == f"spread-{i}"
    hits = gateway_hits(cpu_stack, "spread-")
    spread = ", ".join(f"{name} {count}" for name, count in sorted(hits.items()))
    pytestconfig.stash.setdefault(REPORT_LINES, []).append(
        f"{SPREAD_REQUESTS} requests through the proxy, logged by: {spread}"
    )
    # nginx takes the replicas from Docker's DNS answer, re-resolved every 10 s: about a third each.
    assert sum(hits.values()) == SPREAD_REQUESTS and len(hits) == 3 and min(hits.values()) >= 5, hits


def test_gateways_send_tensors_through_triton_s_shared_memory(cpu_stack):
    """Every replica chose shared memory (logged), and Triton's /dev/shm holds the regions of
    each replica's workers, named by container host name."""
    said = [line for line in cpu_stack.compose("logs", "gateway").splitlines() if "facecrop: Triton I/O" in line]
    assert said and all("through system shared memory" in line for line in said), said
    regions = cpu_stack.compose("exec", "-T", "triton", "ls", "/dev/shm").split()
    replicas = cpu_stack.compose("ps", "--quiet", "gateway").split()
    hosts = {made_by[0] for made_by in map(owner, regions) if made_by}
    assert hosts == {replica[:12] for replica in replicas}, (hosts, replicas)


def test_triton_stopped_gives_503_at_once_then_recovers(cpu_stack):
    data = photo(PHOTOS[0]).read_bytes()
    cpu_stack.compose("stop", "triton")
    for _ in range(6):  # over every replica (round robin)
        started = time.monotonic()
        response = post(cpu_stack.url, "/v1/detect", data)
        assert time.monotonic() - started < 2
        assert response.status_code == 503 and response.json()["error"]["code"] == "backend_unavailable"
    cpu_stack.compose("start", "triton")
    # Triton loads the models again, then each gateway worker's gRPC channel reconnects by
    # itself (backoff capped at 1 s): 503 until then, and from then on 200 from every replica.
    deadline = time.monotonic() + 180
    answers: list[int] = []
    while answers[-12:] != [200] * 12:
        assert time.monotonic() < deadline, (
            f"not serving again within 3 minutes of `docker compose start triton`: {answers[-20:]}"
        )
        answers.append(post(cpu_stack.url, "/v1/detect", data).status_code)
        time.sleep(0.2 if answers[-1] != 200 else 0)
    assert set(answers) <= {200, 503}
    assert requests.get(f"{cpu_stack.url}/readyz", timeout=10).status_code == 200


def test_down_leaves_nothing_behind(cpu_stack):
    cpu_stack.compose("down", "--volumes")
    label = f"label=com.docker.compose.project={cpu_stack.project}"
    for kind in (["ps", "--all"], ["network", "ls"], ["volume", "ls"]):
        left = compose.sh("docker", *kind, "--quiet", "--filter", label, capture=True)
        assert left.stdout.strip() == "", f"docker {' '.join(kind)}: {left.stdout}"
