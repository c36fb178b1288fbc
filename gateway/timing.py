"""Per-request stage timings (fetch, decode, queue, resize, preprocess, infer, postprocess, crop, anonymize,
colour, encode), and the deadline a request's processing is held to."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gateway.errors import ClientGone, ProcessingTimeout


@dataclass(frozen=True)
class Deadline:
    """When a request's processing must have ended, in seconds of `clock` (perf_counter's; a test's
    fake clock): checked between its steps and between an animation's frames (as imgproxy checks its
    timeout), so a request past it stops at the next step with 504, not after the last frame; and,
    where `gone` can tell, whether its client is still there to take the answer (else ClientGone)."""

    at: float
    clock: Callable[[], float] = time.perf_counter
    gone: Callable[[], bool] | None = None  # whether the client closed its connection

    @staticmethod
    def after(
        seconds: float,
        started: float | None = None,
        clock: Callable[[], float] = time.perf_counter,
        gone: Callable[[], bool] | None = None,
    ) -> Deadline:
        """`seconds` after `started` (now where None), on `clock`."""
        return Deadline((clock() if started is None else started) + seconds, clock, gone)

    def remaining(self) -> float | None:
        """Seconds of `clock` left (none below 0); None where there is no deadline."""
        return None if self.at == float("inf") else max(0.0, self.at - self.clock())

    def check(self, before: str) -> None:
        """Raise ProcessingTimeout (504) once the deadline has passed, ClientGone once the client has
        hung up (no work for nobody); `before`: what would run next."""
        if self.clock() >= self.at:
            raise ProcessingTimeout(f"the request ran past its processing deadline before {before}")
        if self.gone is not None and self.gone():
            raise ClientGone(f"the client closed its connection before {before}")


NEVER = Deadline(float("inf"))


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
