"""A worker's memory: the pixels its requests hold at once, bounded (PixelBudget); and its unused
pages given back to the system when it goes quiet (jemalloc with its decay off).

jemalloc's own decay purges pages while requests still come; each 12 MP photo then touches its
buffers afresh, ~3,000 page faults and 15-20 % more gateway CPU (bench/README.md). With decay
off (MALLOC_CONF in gateway/Dockerfile and local_triton/allocators.py), a worker thread purges
instead: once the worker has handled no request for a check interval, or when the unused pages
it keeps exceed a bound (glibc's trim threshold, kept where jemalloc can keep it). Where jemalloc
decays by itself (`jemalloc-decay`), nothing starts.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gateway.timing import Deadline

ALL_ARENAS = 4096  # MALLCTL_ARENAS_ALL
CHECK_S = 1.0
DIRTY_BOUND_BYTES = 32 * 1024 * 1024
PAGE_BYTES = 4096


@dataclass
class Jemalloc:
    """The preloaded jemalloc's control interface (mallctl)."""

    mallctl: Callable[..., int]

    @classmethod
    def loaded(cls) -> Jemalloc | None:
        """The jemalloc in this process, or None where another malloc is in use."""
        mallctl = getattr(ctypes.CDLL(None), "mallctl", None)
        if mallctl is None:
            return None
        mallctl.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        mallctl.restype = ctypes.c_int
        return cls(mallctl)

    def decays(self) -> bool:
        """Whether jemalloc purges by itself (its dirty decay is not -1)."""
        value, size = ctypes.c_ssize_t(0), ctypes.c_size_t(ctypes.sizeof(ctypes.c_ssize_t))
        if self.mallctl(b"opt.dirty_decay_ms", ctypes.byref(value), ctypes.byref(size), None, 0):
            return True
        return value.value != -1

    def dirty_bytes(self) -> int:
        """Unused pages the arenas keep (0 where jemalloc keeps no statistics)."""
        epoch = ctypes.c_uint64(1)
        self.mallctl(b"epoch", None, None, ctypes.byref(epoch), ctypes.sizeof(epoch))
        pages, size = ctypes.c_size_t(0), ctypes.c_size_t(ctypes.sizeof(ctypes.c_size_t))
        if self.mallctl(f"stats.arenas.{ALL_ARENAS}.pdirty".encode(), ctypes.byref(pages), ctypes.byref(size), None, 0):
            return 0
        return pages.value * PAGE_BYTES

    def purge(self) -> None:
        """Give every arena's unused pages back to the system."""
        self.mallctl(f"arena.{ALL_ARENAS}.purge".encode(), None, None, None, 0)


@dataclass
class IdlePurge:
    """Decides, one check at a time, when to purge: the worker quiet since the last check with
    pages kept since the last purge, or more unused pages than `bound`."""

    handled: Callable[[], int]  # requests the worker has taken so far
    dirty_bytes: Callable[[], int]
    purge: Callable[[], None]
    bound: int = DIRTY_BOUND_BYTES
    _seen: int = -1

    def check(self) -> bool:
        """One check; True when it purged."""
        handled, dirty = self.handled(), self.dirty_bytes()
        quiet, self._seen = handled == self._seen, handled
        if dirty > self.bound or (quiet and dirty > 0):
            self.purge()
            return True
        return False


def start_idle_purge(handled: Callable[[], int]) -> bool:
    """Check every CHECK_S from a daemon thread, where jemalloc is the malloc in use and does not decay."""
    jemalloc = Jemalloc.loaded()
    if jemalloc is None or jemalloc.decays():
        return False
    policy = IdlePurge(handled, jemalloc.dirty_bytes, jemalloc.purge)

    def run() -> None:
        while True:
            time.sleep(CHECK_S)
            policy.check()

    threading.Thread(target=run, name="facecrop-idle-purge", daemon=True).start()
    return True


class PixelBudget:
    """The pixels one worker's requests hold at once (FACECROP_MAX_PIXELS_IN_FLIGHT): a request whose
    pixels would take the total over `capacity` waits, in arrival order, for those before it to
    finish, up to its deadline (ProcessingTimeout, 504); one larger than the whole runs alone.
    `capacity` None: no bound (a batch job, a test)."""

    def __init__(self, capacity: int | None = None):
        self.capacity = capacity
        self.held_pixels = 0
        self._queue: deque[object] = deque()
        self._changed = threading.Condition()

    @contextmanager
    def held(self, pixels: int, deadline: Deadline) -> Iterator[None]:
        """Hold `pixels` (at most the whole budget) while the block runs."""
        if self.capacity is None:
            yield
            return
        weight, ticket = min(pixels, self.capacity), object()
        with self._changed:
            self._queue.append(ticket)
            try:
                while self._queue[0] is not ticket or (self.held_pixels and self.held_pixels + weight > self.capacity):
                    deadline.check("its pixels fit the worker's budget (FACECROP_MAX_PIXELS_IN_FLIGHT)")
                    self._changed.wait(deadline.remaining())
            finally:
                self._queue.remove(ticket)
                self._changed.notify_all()  # the next in line may fit too, or be first now
            self.held_pixels += weight
        try:
            yield
        finally:
            with self._changed:
                self.held_pixels -= weight
                self._changed.notify_all()

    def waiting(self) -> int:
        """Requests waiting for their pixels to fit."""
        with self._changed:
            return len(self._queue)
