"""Shared fixtures: the labeled photo sets in ../shared/faces and the real running stack."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from local_triton.processes import BUILD_DIR, TritonPorts, free_port, start_gateway, start_triton, stop, wait_until_ok

FACES = Path(__file__).resolve().parent.parent.parent / "shared" / "faces"
LOGS = BUILD_DIR / "test-logs"


def photo(relative: str) -> Path:
    path = FACES / relative
    if not path.is_file():
        pytest.fail(f"missing shared test photo {path}: the checkout needs ../shared/faces beside it")
    return path


def labeled_set(name: str) -> tuple[Path, list[dict]]:
    root = FACES / name
    return root / "images", json.loads((root / "gt.json").read_text())


@dataclass(frozen=True)
class Stack:
    gateway: str  # http://127.0.0.1:PORT
    triton_http: str
    triton_grpc: str  # host:port


def start_stack(name: str, gateway_env: dict[str, str] | None = None):
    """Start Triton and a gateway on free ports; returns (Stack, [processes])."""
    LOGS.mkdir(parents=True, exist_ok=True)
    ports = TritonPorts(http=free_port(), grpc=free_port(), metrics=free_port())
    triton = start_triton(ports, BUILD_DIR / f"test-{name}", intra_op_threads=2, log_path=LOGS / f"{name}-triton.log")
    processes = [triton]
    try:
        wait_until_ok(f"http://127.0.0.1:{ports.http}/v2/health/ready", triton, timeout_s=180)
        gateway_port = free_port()
        gateway = start_gateway(gateway_port, f"127.0.0.1:{ports.grpc}", gateway_env, LOGS / f"{name}-gateway.log")
        processes.append(gateway)
        wait_until_ok(f"http://127.0.0.1:{gateway_port}/readyz", gateway, timeout_s=60)
    except Exception:
        for process in processes:
            stop(process)
        raise
    stack = Stack(f"http://127.0.0.1:{gateway_port}", f"http://127.0.0.1:{ports.http}", f"127.0.0.1:{ports.grpc}")
    return stack, processes


@pytest.fixture(scope="session")
def stack():
    """One real Triton + gateway pair for the whole session, on free ports."""
    running, processes = start_stack("main")
    yield running
    for process in reversed(processes):
        stop(process)
