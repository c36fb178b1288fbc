"""Backend faults: Triton missing or stopped mid-traffic, a gateway worker killed mid-request."""

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from prometheus_client.mmap_dict import MmapedDict

from evaluation.images import photo
from gateway.triton.shm import host_tag, owner
from local_triton.processes import (
    BUILD_DIR,
    LOG_DIR,
    TritonPorts,
    child_pids,
    free_port,
    running,
    running_gateway,
    running_stack,
    start_gateway,
    start_triton,
    stop,
    wait_until_ok,
)
from tests.integration.test_shared_memory import regions_of


@pytest.fixture
def orphan_gateway():
    """A gateway whose Triton address has nothing listening (yet)."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    ports = TritonPorts.free()
    port = free_port()
    gateway = start_gateway(port, f"127.0.0.1:{ports.grpc}", log_path=LOG_DIR / "orphan-gateway.log")
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
    logged = [
        json.loads(line) for line in (LOG_DIR / "orphan-gateway.log").read_text().splitlines() if '"cause"' in line
    ]
    assert logged and all("UNAVAILABLE" in line["cause"] for line in logged)  # why, for the operator

    triton = start_triton(
        ports, BUILD_DIR / "test-recovery", intra_op_threads=1, log_path=LOG_DIR / "recovery-triton.log"
    )
    try:
        wait_until_ok(f"http://127.0.0.1:{ports.http}/v2/health/ready", triton, timeout_s=180)
        # every worker's gRPC channel reconnects by itself (backoff capped at one second)
        deadline = time.monotonic() + 10
        while requests.get(f"{url}/readyz", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, "gateway did not notice Triton coming back"
            time.sleep(0.2)
        answers = []
        while len(answers) < 4 or answers[-4:] != [200] * 4:
            assert time.monotonic() < deadline, f"gateway did not serve again: {answers}"
            answers.append(requests.post(f"{url}/v1/detect", files={"image": data}, timeout=30).status_code)
        assert set(answers) <= {200, 503}
    finally:
        stop(triton)


def test_triton_stopped_while_it_loads_its_models_leaves_no_process_or_region():
    """`make serve` stopped at once: Triton stopped while its Python backend starts its model
    instances left stubs running (deadlocked, for good) and their 64 MiB regions in /dev/shm
    (3 to 9 files a try). stop() leaves none of them: it kills what Triton left and removes the
    regions of its own prefix. The event waited for: Triton's first stub has started."""
    ports = TritonPorts.free()
    triton = start_triton(ports, BUILD_DIR / "test-early-stop", intra_op_threads=1, log_path=LOG_DIR / "early-stop.log")
    try:
        deadline = time.monotonic() + 120
        while not child_pids(triton.pid):
            assert triton.poll() is None and time.monotonic() < deadline, "Triton started no stub"
            time.sleep(0.01)
        stubs = child_pids(triton.pid)
    finally:
        stop(triton)
    assert not [pid for pid in stubs if running(pid)], "a stub outlived its Triton"
    assert not list(Path("/dev/shm").glob(f"facecrop_triton_{ports.http}_*")), "a region outlived its Triton"


def test_triton_stopped_while_requests_flow(tmp_path):
    data = photo("demo/skimage_astronaut.jpg").read_bytes()
    with running_stack("faults", {"FACECROP_WORKERS": "1"}, intra_op_threads=1) as stack:
        outcomes = []
        stop_flowing = threading.Event()

        def flow() -> None:
            session = requests.Session()
            while not stop_flowing.is_set():
                started = time.monotonic()
                try:
                    status = session.post(f"{stack.gateway}/v1/detect", files={"image": data}, timeout=10).status_code
                except requests.RequestException as error:
                    status = type(error).__name__
                outcomes.append((started, status, time.monotonic() - started))

        flowing = [threading.Thread(target=flow) for _ in range(3)]
        for thread in flowing:
            thread.start()
        time.sleep(1.5)
        stopping_at = time.monotonic()
        stop(stack.triton_process)
        stopped_at = time.monotonic()  # tritonserver has exited
        time.sleep(3)
        ready = requests.get(f"{stack.gateway}/readyz", timeout=5)
        stop_flowing.set()
        for thread in flowing:
            thread.join(15)
    before = [status for started, status, took in outcomes if started + took < stopping_at]
    after = [(status, took) for started, status, took in outcomes if started > stopped_at]
    assert before and set(before) == {200}
    assert after and {status for status, _ in after} == {503}, after[:5]
    assert max(took for _, took in after) < 2
    assert ready.status_code == 503 and ready.json()["error"]["code"] == "backend_unavailable"


def in_flight(metrics_dir: Path, pid: int) -> int:
    """The requests worker `pid` is handling now, from its own file of Prometheus' multiprocess gauges."""
    path = metrics_dir / f"gauge_livesum_{pid}.db"
    if not path.exists():
        return 0
    values = MmapedDict.read_all_values_from_file(str(path))
    return round(sum(value for key, value, *_ in values if "facecrop_in_flight_requests" in key))


def registered_regions(stack, pid: int) -> int:
    """How many of worker `pid`'s shared-memory regions Triton has registered."""
    status = requests.get(f"{stack.triton_http}/v2/systemsharedmemory/status", timeout=5).json()
    return sum(owner(region["name"]) == (host_tag(), pid) for region in status)


def test_a_killed_worker_is_replaced_and_requests_succeed_again():
    """Triton paused (SIGSTOP), requests pile up in both workers: one worker is killed while it
    holds some, Triton resumes; the killed worker's requests are lost (a closed connection), every
    one of the other's is answered 200, and the service answers again once it is replaced."""
    data = photo("demo/widertest_20_Family_Group_Family_Group_20_435.jpg").read_bytes()
    metrics_dir = Path(tempfile.mkdtemp(prefix="facecrop-test-metrics-", dir="/dev/shm"))
    env = {"FACECROP_WORKERS": "2", "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    with (
        contextlib.ExitStack() as cleanup,
        running_stack("workers", env, intra_op_threads=1) as stack,
        ThreadPoolExecutor(16) as pool,
    ):
        cleanup.callback(shutil.rmtree, metrics_dir, ignore_errors=True)
        old = child_pids(stack.gateway_process.pid)
        assert len(old) == 2
        # Each worker settles its transport once started (registering its region pool's first
        # region with Triton: FACECROP_TRITON_SHM=auto), before it takes requests; a worker still
        # doing so when Triton is paused would take none. Both are done once Triton has a region
        # of each worker (one pool per worker, for all its models).
        deadline = time.monotonic() + 10
        while min(registered_regions(stack, pid) for pid in old) < 1:
            assert time.monotonic() < deadline, "a worker registered no shared-memory region"
            time.sleep(0.1)
        os.kill(stack.triton_process.pid, signal.SIGSTOP)
        try:
            pending = []
            # until both hold a request, as they do but on a loaded machine (one worker may then take
            # all 16: it is the one killed, and no request survives)
            while len(pending) < 16 and min(in_flight(metrics_dir, pid) for pid in old) == 0:
                pending.append(
                    pool.submit(requests.post, f"{stack.gateway}/v1/detect", files={"image": data}, timeout=60)
                )
                deadline = time.monotonic() + 10
                while sum(in_flight(metrics_dir, pid) for pid in old) < len(pending):
                    assert time.monotonic() < deadline, "a request never reached a worker"
                    time.sleep(0.02)
            killed = max(old, key=lambda pid: in_flight(metrics_dir, pid))
            survivors = sum(in_flight(metrics_dir, pid) for pid in old if pid != killed)
            os.kill(killed, signal.SIGKILL)  # mid-request: it holds at least one
        finally:
            os.kill(stack.triton_process.pid, signal.SIGCONT)
        answered, lost = [], 0
        for future in pending:
            try:
                answered.append(future.result().status_code)
            except requests.ConnectionError:
                lost += 1  # the killed worker's: its connection closed without an answer
        assert answered == [200] * survivors and lost == len(pending) - survivors, (answered, lost)
        deadline = time.monotonic() + 30
        while (
            sorted(child_pids(stack.gateway_process.pid)) == sorted(old)
            or len(child_pids(stack.gateway_process.pid)) < 2
        ):
            assert time.monotonic() < deadline, "the killed worker was not replaced"
            time.sleep(0.2)
        assert killed not in child_pids(stack.gateway_process.pid)
        while regions_of([killed]):  # swept by its successor once it has loaded the app
            assert time.monotonic() < deadline, "the killed worker's regions were not swept"
            time.sleep(0.2)
        for _ in range(6):
            assert requests.post(f"{stack.gateway}/v1/detect", files={"image": data}, timeout=30).status_code == 200


def test_one_model_missing_from_triton_is_a_quick_503_and_one_model_alone_serves(stack):
    """A served model Triton does not have (here YuNet under a name it lacks) fails every request
    that needs it as Triton down does, and readiness; an operator who serves the other model alone
    (FACECROP_DETECTORS) is served."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    missing = {"FACECROP_MODEL_NAMES": "yunet_n_uint8=no_such_model"}
    port = free_port()
    gateway = start_gateway(port, stack.triton_grpc, missing, LOG_DIR / "missing-model-gateway.log")
    data = photo("demo/skimage_astronaut.jpg").read_bytes()
    try:
        wait_until_ok(f"http://127.0.0.1:{port}/healthz", gateway, timeout_s=60)
        for detail in ("standard", "fast"):
            started = time.monotonic()
            response = requests.post(
                f"http://127.0.0.1:{port}/v1/detect", files={"image": data}, params={"detail": detail}, timeout=10
            )
            assert time.monotonic() - started < 2
            assert response.status_code == 503 and response.json()["error"]["code"] == "backend_unavailable"
        assert requests.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 503
    finally:
        stop(gateway)
    with running_gateway(
        stack.triton_grpc, {**missing, "FACECROP_DETECTORS": "retinaface"}, "retinaface-alone"
    ) as alone:
        for detail in ("standard", "fast"):
            response = requests.post(
                f"{alone.url}/v1/detect", files={"image": data}, params={"detail": detail}, timeout=10
            )
            assert response.status_code == 200 and response.headers["X-Detectors"] == "retinaface"
            assert len(response.json()["faces"]) == 1


def test_a_missing_ensemble_fails_what_needs_it_quickly_and_fast_still_serves(stack):
    """A repository without the ensemble (here under a name Triton lacks): the passes that run both
    models answer a quick 503 and readiness says not ready; detail=fast, YuNet's own call, serves."""
    port = free_port()
    env = {"FACECROP_MODEL_NAMES": "faces_uint8=no_such_model"}
    gateway = start_gateway(port, stack.triton_grpc, env, LOG_DIR / "no-ensemble-gateway.log")
    data = photo("demo/skimage_astronaut.jpg").read_bytes()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ok(f"{url}/healthz", gateway, timeout_s=60)
        started = time.monotonic()
        response = requests.post(f"{url}/v1/detect", files={"image": data}, timeout=10)
        assert time.monotonic() - started < 2
        assert response.status_code == 503 and response.json()["error"]["code"] == "backend_unavailable"
        fast = requests.post(f"{url}/v1/detect", files={"image": data}, params={"detail": "fast"}, timeout=10)
        assert fast.status_code == 200 and len(fast.json()["faces"]) == 1
        assert requests.get(f"{url}/readyz", timeout=5).status_code == 503
    finally:
        stop(gateway)
