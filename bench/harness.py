"""Closed-loop timing: run a call over a list of inputs at a fixed concurrency, bounded in count and time."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Measurement:
    name: str
    latencies_s: np.ndarray
    wall_s: float

    @property
    def count(self) -> int:
        return len(self.latencies_s)

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies_s, q) * 1000)

    @property
    def throughput(self) -> float:
        return self.count / self.wall_s


def closed_loop(
    name: str, call: Callable, inputs: Sequence, concurrency: int, max_count: int, max_seconds: float, warmup: int = 2
) -> Measurement:
    """`concurrency` workers each take the next input and call `call` on it, until `max_count`
    calls are done or `max_seconds` have passed; the first `warmup` inputs run untimed."""
    for item in inputs[:warmup]:
        call(item)
    counter = itertools.count()
    lock = threading.Lock()
    latencies: list[float] = []
    deadline = time.perf_counter() + max_seconds

    def worker() -> None:
        while time.perf_counter() < deadline:
            index = next(counter)
            if index >= max_count:
                return
            started = time.perf_counter()
            call(inputs[index % len(inputs)])
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        for future in [pool.submit(worker) for _ in range(concurrency)]:
            future.result()
    return Measurement(name, np.array(latencies), time.perf_counter() - started)
