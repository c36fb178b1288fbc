"""Per-request stage timings (fetch, decode, resize, preprocess, infer, postprocess, crop, anonymize, colour,
encode)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class StageTimer:
    """Accumulates wall-clock seconds and this thread's CPU seconds per named stage of one request."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started, cpu_started = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started
            self.cpu_seconds[name] = self.cpu_seconds.get(name, 0.0) + time.thread_time() - cpu_started
