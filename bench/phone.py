"""The "phone photos" scenario of `make bench`: 12 MP JPEGs, one in two EXIF-rotated, made at
bench time from the shared photos (never stored), sent one at a time to the local service.

Reports the gateway's CPU per image (all gunicorn processes, from /proc) for /v1/detect and a
512x512 /v1/crop, split by stage (the gateway's own per-request CPU timings, from its log),
against bench.cpu's decode + resize floor for the same bytes.
"""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from PIL import Image

from bench.workload import must_succeed, service_call
from local_triton.processes import LOG_DIR, SHARED_FACES, child_pids

PHONE_SIZE = (4032, 3024)
STAGES = ("decode", "resize", "preprocess", "infer", "postprocess", "crop", "encode")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def phone_photos(count: int = 8) -> list[bytes]:
    """`count` demo photos enlarged to 12 MP; every second one stored on its side, EXIF orientation 6."""
    photos = []
    for index, path in enumerate(sorted(SHARED_FACES.glob("demo/*.jpg"))[:count]):
        upright = Image.open(path).convert("RGB").resize(PHONE_SIZE, Image.Resampling.BICUBIC)
        stored, exif = upright, upright.getexif()
        if index % 2:
            stored = upright.transpose(Image.Transpose.ROTATE_90)
            exif[0x0112] = 6
        buffer = io.BytesIO()
        stored.save(buffer, "JPEG", quality=90, exif=exif)
        photos.append(buffer.getvalue())
    return photos


Item = TypeVar("Item")


def process_cpu_s(pid: int) -> float:
    """User plus system CPU seconds of `pid` and its children (gunicorn's master and workers)."""
    total = 0.0
    for process in [pid, *child_pids(pid)]:
        try:
            fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


@dataclass(frozen=True)
class GatewayCpu:
    name: str
    cpu_ms: float  # all gateway processes, per request
    stages_ms: dict[str, float]  # the gateway's per-stage CPU (request thread), per request


def cpu_ms_per_call(pid: int, call: Callable[[Item], object], items: Sequence[Item]) -> float:
    """The CPU ms of process `pid` and its children per `call` of each item, one at a time; the
    last log lines and CPU ticks are let land before the reading."""
    before = process_cpu_s(pid)
    for item in items:
        call(item)
    time.sleep(0.2)
    return (process_cpu_s(pid) - before) / len(items) * 1000


def gateway_cpu(name: str, url: str, gateway_pid: int, endpoint: str, params: dict, photos: list[bytes]) -> GatewayCpu:
    """Send every photo once (after one warm-up), sequentially; the gateway's CPU per request."""
    call = must_succeed(service_call(url, endpoint, params))
    call(photos[0])
    log = LOG_DIR / "bench-gateway.log"
    offset = log.stat().st_size
    cpu_ms = cpu_ms_per_call(gateway_pid, call, photos)
    with open(log, "rb") as lines:
        lines.seek(offset)
        records = [json.loads(line) for line in lines if line.startswith(b"{")]
    stages = {s: sum(r["stages_cpu_ms"].get(s, 0.0) for r in records) / len(records) for s in STAGES}
    return GatewayCpu(name, cpu_ms, stages)


def table(rows: list[GatewayCpu], floor_ms: float) -> str:
    lines = [
        "| phone photos (12 MP, c=1) | gateway CPU ms | / floor | " + " | ".join(STAGES) + " |",
        "|---|---:|---:|" + "---:|" * len(STAGES),
    ]
    for row in rows:
        stages = " | ".join(f"{row.stages_ms[s]:.1f}" for s in STAGES)
        lines.append(f"| {row.name} | {row.cpu_ms:.1f} | {row.cpu_ms / floor_ms:.2f} | {stages} |")
    lines.append(f"| floor: reduced decode + area resize, in-process | {floor_ms:.1f} | 1.00 |" + " |" * len(STAGES))
    return "\n".join(lines)
