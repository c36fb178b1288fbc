"""Without Triton the gateway answers 503 quickly, and recovers by itself when Triton starts."""

import time

import pytest
import requests

from local_triton.processes import BUILD_DIR, TritonPorts, free_port, start_gateway, start_triton, stop, wait_until_ok
from tests.conftest import LOGS, photo


@pytest.fixture
def orphan_gateway():
    """A gateway whose Triton address has nothing listening (yet)."""
    LOGS.mkdir(parents=True, exist_ok=True)
    ports = TritonPorts(http=free_port(), grpc=free_port(), metrics=free_port())
    port = free_port()
    gateway = start_gateway(port, f"127.0.0.1:{ports.grpc}", log_path=LOGS / "orphan-gateway.log")
    wait_until_ok(f"http://127.0.0.1:{port}/healthz", gateway, timeout_s=60)
    yield f"http://127.0.0.1:{port}", ports
    stop(gateway)


def test_unavailable_backend_gets_a_quick_503_then_recovers(orphan_gateway):
    url, ports = orphan_gateway
    data = photo("demo/skimage_astronaut.jpg").read_bytes()
    for _ in range(3):
        started = time.monotonic()
        response = requests.post(f"{url}/v1/detect", files={"image": data}, timeout=10)
        assert time.monotonic() - started < 2
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "backend_unavailable"
    assert requests.get(f"{url}/readyz", timeout=5).status_code == 503
    assert requests.get(f"{url}/healthz", timeout=5).status_code == 200

    triton = start_triton(ports, BUILD_DIR / "test-recovery", intra_op_threads=1, log_path=LOGS / "recovery-triton.log")
    try:
        wait_until_ok(f"http://127.0.0.1:{ports.http}/v2/health/ready", triton, timeout_s=180)
        deadline = time.monotonic() + 10
        while requests.get(f"{url}/readyz", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, "gateway did not notice Triton coming back"
            time.sleep(0.2)
        response = requests.post(f"{url}/v1/detect", files={"image": data}, timeout=30)
        assert response.status_code == 200 and len(response.json()["faces"]) == 1
    finally:
        stop(triton)
