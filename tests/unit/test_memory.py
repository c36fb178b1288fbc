"""The idle purge's decisions (gateway/memory.py), one check at a time."""

import ctypes.util
import os
import subprocess
import sys

import pytest

from gateway.memory import IdlePurge, Jemalloc
from local_triton.allocators import allocator_env

MIB = 1024 * 1024


class Worker:
    def __init__(self):
        self.handled, self.dirty, self.purges = 0, 0, 0

    def purge(self):
        self.purges += 1
        self.dirty = 0


def policy(worker: Worker, bound: int = 32 * MIB) -> IdlePurge:
    return IdlePurge(lambda: worker.handled, lambda: worker.dirty, worker.purge, bound)


def test_a_busy_worker_keeps_its_pages_up_to_the_bound():
    worker = Worker()
    check = policy(worker)
    for handled in range(1, 6):
        worker.handled, worker.dirty = handled, 20 * MIB
        assert not check.check()
    worker.handled, worker.dirty = 6, 33 * MIB
    assert check.check() and worker.dirty == 0


def test_a_quiet_worker_purges_once():
    worker = Worker()
    check = policy(worker)
    worker.handled, worker.dirty = 3, 10 * MIB
    assert not check.check()  # requests came since the last check
    assert check.check()  # none since: quiet, pages kept
    assert not check.check() and worker.purges == 1  # nothing left to give back


def test_no_jemalloc_no_purge_thread():
    """The test process runs on glibc's malloc: no mallctl to call."""
    assert Jemalloc.loaded() is None


PROBE = """
import numpy as np
from gateway.memory import Jemalloc
jemalloc = Jemalloc.loaded()
buffers = [np.ones(8 * 1024 * 1024, np.uint8) for _ in range(8)]
del buffers
kept = jemalloc.dirty_bytes()
jemalloc.purge()
print(kept, jemalloc.dirty_bytes())
"""


def test_jemalloc_keeps_freed_pages_until_purged():
    """Under the gateway's MALLOC_CONF, 64 MiB freed stay with the process (no decay) until purge."""
    env = allocator_env("jemalloc") if ctypes.util.find_library("jemalloc") else None
    if env is None:
        pytest.skip("libjemalloc2 is not installed (make test installs it)")
    probe = subprocess.run(
        [sys.executable, "-c", PROBE], env={**os.environ, **env}, capture_output=True, text=True, check=True
    )
    kept, after = map(int, probe.stdout.split())
    assert kept >= 60 * MIB and after == 0
