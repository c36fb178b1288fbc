"""A worker's memory (gateway/memory.py): the pixel budget's order and bounds, between threads; the
idle purge's decisions, one check at a time."""

import ctypes.util
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from gateway.errors import ProcessingTimeout
from gateway.memory import IdlePurge, Jemalloc, PixelBudget, start_idle_purge
from gateway.timing import NEVER, Deadline
from local_triton.allocators import allocator_env

MIB = 1024 * 1024


def wait_for(condition: Callable[[], bool]) -> None:
    """Until `condition` holds (a thread has reached a wait): the event, not a pause."""
    limit = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < limit, "the threads never reached the expected state"
        time.sleep(0.001)


class Holder:
    """A thread holding `pixels` of the budget until told to let go; `entered` once it holds them."""

    def __init__(self, budget: PixelBudget, pixels: int, order: list[str], name: str):
        self.entered, self.go, self.failed = threading.Event(), threading.Event(), None

        def run() -> None:
            try:
                with budget.held(pixels, NEVER):
                    order.append(name)
                    self.entered.set()
                    self.go.wait()
            except Exception as error:  # reported by let_go
                self.failed = error

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def let_go(self) -> None:
        self.go.set()
        self.thread.join(30)
        assert not self.thread.is_alive() and self.failed is None


def test_requests_that_fit_the_budget_hold_it_together_and_one_over_it_waits():
    budget, order = PixelBudget(10), []
    with budget.held(4, NEVER), budget.held(6, NEVER):  # 10 of 10: no wait
        assert budget.held_pixels == 10
        late = Holder(budget, 1, order, "late")
        wait_for(lambda: budget.waiting() == 1)
        assert not late.entered.is_set()
    assert late.entered.wait(30)
    assert order == ["late"] and budget.held_pixels == 1
    late.let_go()
    assert budget.held_pixels == 0 and budget.waiting() == 0


def test_requests_wait_in_arrival_order_so_a_large_one_is_not_passed_by_small_ones():
    budget, order = PixelBudget(10), []
    first = Holder(budget, 5, order, "first")
    assert first.entered.wait(30)
    large = Holder(budget, 10, order, "large")  # 5 + 10 > 10: waits for the first
    wait_for(lambda: budget.waiting() == 1)
    small = Holder(budget, 1, order, "small")  # 5 + 1 fits, but the large one came before it
    wait_for(lambda: budget.waiting() == 2 or small.entered.is_set())
    assert not small.entered.is_set()
    first.let_go()
    assert large.entered.wait(30)
    assert budget.waiting() == 1 and not small.entered.is_set()  # 10 + 1 > 10: after the large one
    large.let_go()
    assert small.entered.wait(30)
    small.let_go()
    assert order == ["first", "large", "small"]


def test_the_next_in_line_goes_in_when_the_one_before_it_gives_up():
    budget, order, now = PixelBudget(10), [], [0.0]
    first = Holder(budget, 5, order, "first")
    assert first.entered.wait(30)
    gave_up = threading.Event()

    def impatient() -> None:  # 5 + 10 > 10: waits until its deadline (moved by the test) passes
        with pytest.raises(ProcessingTimeout), budget.held(10, Deadline(1.0, clock=lambda: now[0])):
            pass
        gave_up.set()

    threading.Thread(target=impatient, daemon=True).start()
    wait_for(lambda: budget.waiting() == 1)
    small = Holder(budget, 1, order, "small")  # fits beside the first, but waits behind the impatient one
    wait_for(lambda: budget.waiting() == 2)
    now[0] = 2.0
    assert gave_up.wait(30)
    assert small.entered.wait(30)  # told, though no one let go of any pixels
    assert order == ["first", "small"]
    small.let_go()
    first.let_go()


def test_a_request_larger_than_the_budget_runs_alone():
    budget, order = PixelBudget(10), []
    with budget.held(25, NEVER):
        assert budget.held_pixels == 10  # the whole budget, no more
        other = Holder(budget, 1, order, "other")
        wait_for(lambda: budget.waiting() == 1)
    assert other.entered.wait(30)
    other.let_go()
    assert order == ["other"]


def test_a_request_whose_deadline_passes_while_it_waits_is_504_and_leaves_the_line():
    budget, order = PixelBudget(10), []
    with budget.held(10, NEVER):
        already_past = Deadline(0.0)  # refused without waiting
        with pytest.raises(ProcessingTimeout, match="FACECROP_MAX_PIXELS_IN_FLIGHT"), budget.held(1, already_past):
            pass
        ticks = iter([0.0, 0.0, 1.0])  # the wait's own timeout passes, then the deadline has
        with pytest.raises(ProcessingTimeout), budget.held(1, Deadline(0.5, clock=lambda: next(ticks))):
            pass
        assert budget.waiting() == 0
        after = Holder(budget, 1, order, "after")
        wait_for(lambda: budget.waiting() == 1)
    assert after.entered.wait(30)  # the timed-out tickets block no one
    after.let_go()
    assert budget.held_pixels == 0


def test_no_capacity_no_bound():
    budget = PixelBudget()
    with ExitStack() as held:
        for _ in range(100):
            held.enter_context(budget.held(10**9, Deadline(0.0)))
        assert budget.waiting() == 0


class Worker:
    def __init__(self):
        self.handled, self.dirty, self.purges = 0, 0, 0

    def purge(self):
        self.purges += 1
        self.dirty = 0


def policy(worker: Worker, bound: int = 32 * MIB) -> IdlePurge:
    return IdlePurge(lambda: worker.handled, lambda: worker.dirty, worker.purge, bound)


def test_a_busy_worker_keeps_its_pages_up_to_the_bound():
    """Under the bound and at it exactly (32 MiB), nothing is purged; past it, at once."""
    worker = Worker()
    check = policy(worker)
    for handled, dirty_mib in enumerate((20, 20, 32, 32), start=1):
        worker.handled, worker.dirty = handled, dirty_mib * MIB
        assert not check.check()
    assert worker.purges == 0
    worker.handled, worker.dirty = 5, 33 * MIB
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


def test_a_jemalloc_without_statistics_reads_as_decaying_and_clean():
    """A build whose mallctl answers an error (ENOENT) for the options and statistics read: no purge
    thread is started on a guess (decays), and no pages are counted (a stand-in mallctl)."""
    jemalloc = Jemalloc(lambda *arguments: 2)
    assert jemalloc.decays() and jemalloc.dirty_bytes() == 0


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


IDLE_PROBE = """
import sys, threading, time
import numpy as np
from gateway.memory import Jemalloc, start_idle_purge
jemalloc = Jemalloc.loaded()
buffers = [np.ones(int(sys.argv[1]) * 1024 * 1024 // 8, np.uint8) for _ in range(8)]
del buffers
kept = jemalloc.dirty_bytes()
started = start_idle_purge(lambda: 0)  # a worker that takes no request
limit = time.monotonic() + 30
while started and jemalloc.dirty_bytes() and time.monotonic() < limit:
    time.sleep(0.05)
print(started, kept, jemalloc.dirty_bytes(), [t.name for t in threading.enumerate() if t.daemon])
"""


def idle_probe(allocator: str, freed_mib: int) -> tuple[str, int, int, str]:
    """A Python under `allocator` that frees `freed_mib` and waits (30 s at most) for its idle purge."""
    try:
        env = allocator_env(allocator)
    except LookupError:
        pytest.skip("libjemalloc2 is not installed (make test installs it)")
    probe = subprocess.run(
        [sys.executable, "-c", IDLE_PROBE, str(freed_mib)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,  # a purge thread that keeps the process from ending
    )
    started, kept, after, threads = probe.stdout.split(maxsplit=3)
    return started, int(kept), int(after), threads.strip()


@pytest.mark.parametrize("freed_mib", [64, 16])
def test_a_quiet_worker_under_jemalloc_gives_its_pages_back_by_itself(freed_mib):
    """Under the gateway's MALLOC_CONF (no decay) the purge thread starts; pages freed past the
    bound (64 MiB) go back at its first check, and under it (16 MiB) once the worker stays quiet."""
    started, kept, after, threads = idle_probe("jemalloc", freed_mib)
    assert started == "True" and kept >= (freed_mib - 4) * MIB and after == 0
    assert threads == "['facecrop-idle-purge']"


def test_a_jemalloc_that_decays_by_itself_gets_no_purge_thread():
    started, _, _, threads = idle_probe("jemalloc-decay", 64)
    assert (started, threads) == ("False", "[]")


def test_no_purge_thread_on_glibc():
    assert not start_idle_purge(lambda: 0)
    assert "facecrop-idle-purge" not in [thread.name for thread in threading.enumerate()]


class Expiring(Deadline):
    """A deadline that passes when the test says so (a waiting request re-checks it every 10 ms)."""

    def __init__(self) -> None:
        super().__init__(float("inf"))
        object.__setattr__(self, "passed", threading.Event())

    def remaining(self) -> float:
        return 0.01

    def check(self, before: str) -> None:
        if self.passed.is_set():
            raise ProcessingTimeout(f"the test's deadline passed before {before}")


class Request:
    """A request of the budget: a thread that holds `pixels` until told to end (well, or by an error
    of its own), or gives up waiting when its deadline passes."""

    def __init__(self, budget: PixelBudget, pixels: int, number: int, entries: list[int]):
        self.pixels, self.number, self.deadline = pixels, number, Expiring()
        self.inside, self.end, self.fails = threading.Event(), threading.Event(), False
        self.outcome: str | None = None

        def run() -> None:
            try:
                with budget.held(pixels, self.deadline):
                    entries.append(number)
                    self.inside.set()
                    self.end.wait()
                    if self.fails:
                        raise RuntimeError("the request's own failure")
                self.outcome = "done"
            except ProcessingTimeout:
                self.outcome = "timed out"
            except RuntimeError:
                self.outcome = "failed"

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()


class BudgetMachine(RuleBasedStateMachine):
    """Hundreds of mixed requests against one budget, some larger than the whole, some failing while
    they hold their pixels, some giving up while they wait: every release gives back exactly what was
    taken (what is held is always the sum of the requests inside, each at most the whole budget),
    nothing is held but by one request alone over the capacity, requests go in in arrival order, and
    once all have ended nothing is held and nobody waits."""

    def __init__(self) -> None:
        super().__init__()
        self.capacity = 100
        self.budget = PixelBudget(self.capacity)
        self.requests: list[Request] = []
        self.entries: list[int] = []

    def alive(self) -> list[Request]:
        return [r for r in self.requests if r.outcome is None and r.thread.is_alive()]

    def settled(self) -> None:
        """Until every live request holds its pixels or waits in line (no thread between the two), and
        the first in line cannot go in (it would have: the requests ahead of it have left)."""

        def quiet() -> bool:
            waiting = sorted((r for r in self.alive() if not r.inside.is_set()), key=lambda r: r.number)
            if self.budget.waiting() != len(waiting):
                return False
            held = self.budget.held_pixels
            return not waiting or (held > 0 and held + min(waiting[0].pixels, self.capacity) > self.capacity)

        wait_for(quiet)

    @rule(pixels=st.integers(1, 250))
    def arrive(self, pixels: int) -> None:
        self.requests.append(Request(self.budget, pixels, len(self.requests), self.entries))
        self.settled()

    @rule(data=st.data(), fails=st.booleans())
    def end_one_inside(self, data, fails: bool) -> None:
        inside = [r for r in self.alive() if r.inside.is_set()]
        if not inside:
            return
        request = data.draw(st.sampled_from(inside))
        request.fails = fails
        request.end.set()
        request.thread.join(30)
        assert request.outcome == ("failed" if fails else "done")
        self.settled()

    @rule(data=st.data())
    def give_up_waiting(self, data) -> None:
        waiting = [r for r in self.alive() if not r.inside.is_set()]
        if not waiting:
            return
        request = data.draw(st.sampled_from(waiting))
        request.deadline.passed.set()
        request.thread.join(30)
        assert request.outcome == "timed out" and not request.inside.is_set()
        self.settled()

    @invariant()
    def what_is_held_is_the_requests_inside(self) -> None:
        inside = [r for r in self.alive() if r.inside.is_set()]
        assert self.budget.held_pixels == sum(min(r.pixels, self.capacity) for r in inside)
        assert self.budget.held_pixels <= self.capacity or len(inside) == 1

    @invariant()
    def requests_go_in_in_arrival_order(self) -> None:
        assert self.entries == sorted(self.entries)
        waiting = [r.number for r in self.alive() if not r.inside.is_set()]
        assert all(number < min(waiting) for number in self.entries) if waiting else True

    def teardown(self) -> None:
        for request in self.requests:
            request.end.set()
        for request in self.requests:
            request.thread.join(30)
        assert self.budget.held_pixels == 0 and self.budget.waiting() == 0


BudgetMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
test_the_pixel_budget_gives_back_exactly_what_it_took = BudgetMachine.TestCase
