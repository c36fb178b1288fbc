"""Tensors to and from Triton through system shared memory (FACECROP_TRITON_SHM): the same
answers as bytes, the fallback where Triton cannot open the regions, Triton restarts, and no
region left in /dev/shm by a stopped or killed gateway."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import requests
from PIL import Image

from evaluation.images import ASTRONAUT, CROWD, encoded, photo, photos_in, png_declaring
from gateway.detection.detectors import every_wire_format
from gateway.triton.shm import SHM_DIR, host_tag, owner
from local_triton.processes import (
    BUILD_DIR,
    LOG_DIR,
    PRODUCTION_REPOSITORY,
    TritonPorts,
    child_pids,
    free_port,
    production_flags,
    running_gateway,
    running_stack,
    server_command,
    start_triton,
    stop,
    wait_until_ok,
)

TRANSPORT_LOG = "facecrop: Triton I/O"
JPEG = {"Content-Type": "image/jpeg"}
PNG = {"Content-Type": "image/png"}


def regions_of(pids: list[int]) -> list[str]:
    """This host's facecrop regions in /dev/shm that belong to `pids`."""
    mine = {(host_tag(), pid) for pid in pids}
    return sorted(p.name for p in SHM_DIR.glob("facecrop-*") if owner(p.name) in mine)


def transport_lines(log: Path, since: int = 0) -> list[str]:
    """The transport lines a gateway log has after its first `since` lines (logs are appended to)."""
    return [line for line in log.read_text().splitlines()[since:] if TRANSPORT_LOG in line]


def line_count(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def answers(url: str, paths: list[Path], params: dict) -> list[bytes]:
    session = requests.Session()
    bodies = []
    for path in paths:
        response = session.post(f"{url}/v1/detect", data=path.read_bytes(), params=params, headers=JPEG, timeout=60)
        assert response.status_code == 200, response.text
        bodies.append(response.content)
    return bodies


def test_shared_memory_on_off_and_auto_answer_byte_for_byte_the_same(stack):
    """`stack` runs with the default (auto: shared memory here); two more gateways on the same
    Triton force each transport. Crowds (up to hundreds of faces) and detail=high's tiles."""
    photos = photos_in("demo", "wider_val_native/images")
    params = {"max_faces": "1000", "min_confidence": "20"}
    auto = answers(stack.gateway, photos, params)
    tiled = [photo(CROWD), photo(ASTRONAUT), *photos[-3:]]
    auto_high = answers(stack.gateway, tiled, {**params, "detail": "high"})
    assert transport_lines(LOG_DIR / "test-gateway.log")[-1].endswith("through system shared memory (/dev/shm)")
    for mode in ("on", "off"):
        since = line_count(LOG_DIR / f"shm-{mode}-gateway.log")
        with running_gateway(stack.triton_grpc, {"FACECROP_TRITON_SHM": mode}, name=f"shm-{mode}") as extra:
            url = extra.url
            assert answers(url, photos, params) == auto, mode
            assert answers(url, tiled, {**params, "detail": "high"}) == auto_high, mode
        said = transport_lines(LOG_DIR / f"shm-{mode}-gateway.log", since)
        assert said == [] if mode == "off" else said[-1].endswith("through system shared memory (/dev/shm)")


def private_shm_triton(ports: TritonPorts) -> subprocess.Popen:
    """Triton in a mount namespace of its own with an empty /dev/shm (as on another host, or a
    container with a private one): it cannot open the gateway's regions."""
    command, env = server_command(PRODUCTION_REPOSITORY, BUILD_DIR / "test-private-shm", intra_op_threads=1)
    command += [f"--http-port={ports.http}", f"--grpc-port={ports.grpc}", f"--metrics-port={ports.metrics}"]
    command += production_flags()
    private = 'mount -t tmpfs -o size=512m tmpfs /dev/shm && exec "$@"'
    log = open(LOG_DIR / "private-shm-triton.log", "ab")  # noqa: SIM115 - owned by the child
    return subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", private, "sh", *command],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def test_auto_falls_back_to_bytes_where_triton_cannot_open_the_regions():
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    ports = TritonPorts.free()
    triton = private_shm_triton(ports)
    data = photo(CROWD).read_bytes()
    try:
        wait_until_ok(f"http://127.0.0.1:{ports.http}/v2/health/ready", triton, timeout_s=180)
        grpc = f"127.0.0.1:{ports.grpc}"
        log = LOG_DIR / "private-shm-auto-gateway.log"
        since = line_count(log)
        with running_gateway(grpc, {"FACECROP_WORKERS": "1"}, name="private-shm-auto") as extra:
            url = extra.url
            response = requests.post(f"{url}/v1/detect", data=data, headers=JPEG, timeout=60)
            assert response.status_code == 200 and len(response.json()["faces"]) > 10
            said = transport_lines(log, since)  # one line: the worker's models share one pool of regions
            assert len(said) == 1, said
            assert all("as gRPC bytes (Triton cannot open this host's shared memory" in line for line in said)
        with running_gateway(
            grpc, {"FACECROP_WORKERS": "1", "FACECROP_TRITON_SHM": "on"}, name="private-shm-on"
        ) as extra:
            url = extra.url
            response = requests.post(f"{url}/v1/detect", data=data, headers=JPEG, timeout=60)
            assert response.status_code == 503 and response.json()["error"]["code"] == "backend_unavailable"
        status = requests.get(f"http://127.0.0.1:{ports.http}/v2/systemsharedmemory/status", timeout=5).json()
        assert status == []  # nothing was left registered
    finally:
        stop(triton)


def test_triton_restarted_under_load_regions_registered_again_and_nothing_leaked():
    data = photo(CROWD).read_bytes()
    env = {"FACECROP_TRITON_SHM": "on", "FACECROP_WORKERS": "1"}
    with running_stack("shm-restart", env, intra_op_threads=1) as stack:
        workers = child_pids(stack.gateway_process.pid)
        outcomes: list[tuple[float, int]] = []
        flowing = threading.Event()
        flowing.set()

        def flow() -> None:
            session = requests.Session()
            while flowing.is_set():
                status = session.post(f"{stack.gateway}/v1/detect", data=data, headers=JPEG, timeout=15).status_code
                outcomes.append((time.monotonic(), status))

        threads = [threading.Thread(target=flow) for _ in range(3)]
        for thread in threads:
            thread.start()
        triton = stack.triton_process
        try:
            time.sleep(1.5)
            assert regions_of(workers)
            stop(triton)
            stopped_at = time.monotonic()
            http, grpc = (int(url.rsplit(":", 1)[1]) for url in (stack.triton_http, stack.triton_grpc))
            triton = start_triton(
                TritonPorts(http=http, grpc=grpc, metrics=free_port()),
                BUILD_DIR / "test-shm-restart",
                intra_op_threads=1,
                log_path=LOG_DIR / "shm-restart-triton-2.log",
            )
            wait_until_ok(f"{stack.triton_http}/v2/health/ready", triton, timeout_s=180)
            deadline = time.monotonic() + 20
            while [status for _, status in outcomes[-6:]] != [200] * 6:
                assert time.monotonic() < deadline, f"no recovery: {outcomes[-6:]}"
                time.sleep(0.2)
        finally:
            flowing.clear()
            for thread in threads:
                thread.join(20)
            registered = requests.get(f"{stack.triton_http}/v2/systemsharedmemory/status", timeout=5).json()
            stop(triton)
        assert {status for at, status in outcomes if at > stopped_at} == {200, 503}
        assert {region["name"] for region in registered} <= set(regions_of(workers))
        assert registered, "the regions were not registered with the new Triton"
    assert regions_of(workers) == []  # the stopped gateway gave its regions back


def test_regions_are_sized_by_the_canonical_shapes_never_by_the_request(stack):
    """A 36-megapixel photo with detail=high (3x3 tiles) makes the largest batch; a header that
    declares more pixels than allowed is refused before any region is made for it."""
    huge = Image.open(photo(CROWD)).convert("RGB").resize((6000, 6000))
    response = requests.post(
        f"{stack.gateway}/v1/detect", data=encoded(huge, "JPEG", quality=80), params={"detail": "high"}, headers=JPEG
    )
    assert response.status_code == 200
    refused = requests.post(f"{stack.gateway}/v1/detect", data=png_declaring(60_000, 60_000), headers=PNG)
    assert refused.status_code == 413
    outputs = max(wire.output_bytes(1024, 1024) for wire in every_wire_format() if wire.name == "uint8")
    tiles = 9 * (1024 * 1024 * 3 + outputs)
    largest = max(p.stat().st_size for p in map(SHM_DIR.joinpath, regions_of(child_pids(stack.gateway_process.pid))))
    assert largest <= tiles + (2 << 20), largest
