"""The gateway's allocators on 12 MP photos, side by side (part of `make bench`; `make soak` judges
their memory over a mixed day): one gateway per allocator of local_triton/allocators.py on the same
Triton, 12 MP EXIF-rotated photos to /v1/detect, rounds alternating between them. Per request: the
gateway's CPU and its workers' minor page faults (a fresh page touched: what purging between
requests costs); then its workers' resident memory right after the photos and once idle.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

from bench.phone import phone_photos, process_cpu_s
from bench.workload import must_succeed, service_call
from local_triton.allocators import ALLOCATORS
from local_triton.processes import Stack, child_pids, memory_mib, running_gateway

IDLE_S = 11.0  # past a purge's second of quiet, and jemalloc's decay
COMPARED = [name for name in ALLOCATORS if name != "mimalloc"]


def minor_faults(pid: int) -> int:
    """Minor page faults of `pid`'s children (the gunicorn workers) so far."""
    total = 0
    for child in child_pids(pid):
        try:
            total += int(Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[7])
        except OSError:
            continue
    return total


def workers_rss(pid: int) -> str:
    return ", ".join(f"{memory_mib(child)['VmRSS']:.0f}" for child in sorted(child_pids(pid)))


def report(stack: Stack, gateway_env: dict[str, str], rounds: int = 4) -> tuple[str, dict[str, float]]:
    """The table, and each allocator's gateway CPU ms per 12 MP photo."""
    photos = phone_photos(8)
    totals = {name: [0.0, 0, 0] for name in COMPARED}  # CPU s, faults, requests
    rss: dict[str, list[str]] = {}
    with ExitStack() as running:
        gateways = {
            name: running.enter_context(
                running_gateway(stack.triton_grpc, {**gateway_env, "FACECROP_MALLOC": name}, f"malloc-{name}")
            )
            for name in COMPARED
        }
        calls = {name: must_succeed(service_call(g.url)) for name, g in gateways.items()}
        for name in COMPARED:
            for data in photos[:2]:
                calls[name](data)
        for _ in range(rounds):
            for name, gateway in gateways.items():
                pid = gateway.process.pid
                cpu, faults = process_cpu_s(pid), minor_faults(pid)
                for data in photos:
                    calls[name](data)
                time.sleep(0.05)
                totals[name][0] += process_cpu_s(pid) - cpu
                totals[name][1] += minor_faults(pid) - faults
                totals[name][2] += len(photos)
        rss = {name: [workers_rss(g.process.pid)] for name, g in gateways.items()}
        time.sleep(IDLE_S)
        for name, gateway in gateways.items():
            rss[name].append(workers_rss(gateway.process.pid))
    lines = [
        "| allocator | gateway CPU ms per 12 MP /v1/detect | minor page faults per request "
        f"| workers' RSS MiB: after the photos | {IDLE_S:.0f} s idle later |",
        "|---|---:|---:|---|---|",
    ]
    cpu_ms = {}
    for name, (cpu_s, faults, requests_sent) in totals.items():
        cpu_ms[name] = cpu_s / requests_sent * 1000
        lines.append(
            f"| {name} | {cpu_ms[name]:.1f} | {faults / requests_sent:,.0f} | {rss[name][0]} | {rss[name][1]} |"
        )
    return "\n".join(lines), cpu_ms
