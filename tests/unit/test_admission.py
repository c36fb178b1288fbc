"""The fetch budget and the breakers of gateway/web/url/admission.py, in process and driven by a fake
clock: a breaker goes through open, its one probe after the cool-down, closed again and reopened by
a failed probe in milliseconds, without waiting on anything. Through a real gateway and origins:
tests/integration/test_hostile_origins.py."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from gateway.errors import OriginBusy, OriginError, OriginTimeout, OriginUnavailable, SourceNotFound
from gateway.web.url.admission import FetchAdmission

DEAD, OTHER = "http://dead.example:80", "http://other.example:80"
FAILURES, COOL_DOWN_S = 3, 30.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def admission(clock: FakeClock) -> FetchAdmission:
    return FetchAdmission(total=8, per_origin=4, failures=FAILURES, cool_down_s=COOL_DOWN_S, clock=clock)


def fetch(admission: FetchAdmission, origin: str, outcome: type[Exception] | None = None) -> None:
    """One fetch from `origin` that succeeds, or raises `outcome` inside the admitted block."""
    with admission.admitted(origin):
        if outcome is not None:
            raise outcome("what the origin did")


def fail(admission: FetchAdmission, origin: str, outcome: type[Exception] = OriginError) -> None:
    with pytest.raises(outcome):
        fetch(admission, origin, outcome)


def refused(admission: FetchAdmission, origin: str) -> OriginUnavailable:
    with pytest.raises(OriginUnavailable) as refusal:
        fetch(admission, origin)
    return refusal.value


def open_breaker(admission: FetchAdmission, origin: str = DEAD) -> None:
    for _ in range(FAILURES):
        fail(admission, origin)


def test_the_breaker_opens_after_failures_in_a_row_and_only_for_that_origin(admission, clock):
    for _ in range(FAILURES - 1):
        fail(admission, DEAD)
    fetch(admission, DEAD)  # a success in between: the count starts again
    for _ in range(FAILURES - 1):
        fail(admission, DEAD)
    fetch(admission, DEAD)  # still closed: two failures in a row, not three
    open_breaker(admission)
    refusal = refused(admission, DEAD)
    assert refusal.retry_after == COOL_DOWN_S
    fetch(admission, OTHER)  # other origins are asked as before
    clock.now += 10.5
    assert refused(admission, DEAD).retry_after == 20  # the seconds left, rounded up


def test_timeouts_count_as_failures_and_other_endings_do_not(admission):
    for _ in range(FAILURES):
        fail(admission, DEAD, OriginTimeout)
    refused(admission, DEAD)
    for _ in range(FAILURES + 2):  # a 404 is the origin answering: never a failure
        fail(admission, OTHER, SourceNotFound)
    fetch(admission, OTHER)


def test_after_the_cool_down_one_probe_and_a_success_closes_the_breaker(admission, clock):
    open_breaker(admission)
    clock.now += COOL_DOWN_S - 0.001
    refused(admission, DEAD)
    clock.now += 0.001
    with admission.admitted(DEAD):  # the one probe, in flight
        assert refused(admission, DEAD).retry_after == 1  # no second probe beside it
        assert refused(admission, DEAD).retry_after == 1
    for _ in range(FAILURES + 3):  # closed: every fetch is admitted
        fetch(admission, DEAD)
    for _ in range(FAILURES - 1):  # and its failures counted from nothing again
        fail(admission, DEAD)
    fetch(admission, DEAD)


def test_a_failed_probe_reopens_the_breaker_for_a_whole_cool_down(admission, clock):
    open_breaker(admission)
    clock.now += COOL_DOWN_S
    fail(admission, DEAD, OriginTimeout)  # the probe fails
    assert refused(admission, DEAD).retry_after == COOL_DOWN_S
    clock.now += COOL_DOWN_S - 1
    refused(admission, DEAD)
    clock.now += 1
    fetch(admission, DEAD)  # the next probe succeeds
    fetch(admission, DEAD)


def test_a_probe_whose_client_went_lets_the_next_request_probe(admission, clock):
    open_breaker(admission)
    clock.now += COOL_DOWN_S
    with pytest.raises(KeyboardInterrupt), admission.admitted(DEAD):
        raise KeyboardInterrupt  # neither a success nor a failure of the origin
    fetch(admission, DEAD)  # another probe, which closes it
    fetch(admission, DEAD)


def test_the_budget_in_all_and_per_origin(clock):
    admission = FetchAdmission(total=3, per_origin=2, failures=FAILURES, cool_down_s=COOL_DOWN_S, clock=clock)
    with ExitStack() as held:
        held.enter_context(admission.admitted(DEAD))
        held.enter_context(admission.admitted(DEAD))
        with pytest.raises(OriginBusy) as busy:
            fetch(admission, DEAD)  # the origin's two places are taken
        assert busy.value.retry_after == 1
        held.enter_context(admission.admitted(OTHER))
        with pytest.raises(OriginBusy):
            fetch(admission, "http://third.example:80")  # three in all: none left for any origin
        with pytest.raises(OriginBusy):
            fetch(admission, OTHER)
    for origin in (DEAD, DEAD, OTHER):  # every place was given back
        fetch(admission, origin)
    with ExitStack() as held:
        for origin in (DEAD, DEAD, OTHER):
            held.enter_context(admission.admitted(origin))


def test_a_probe_refused_for_want_of_a_place_does_not_hold_the_probe(clock):
    admission = FetchAdmission(total=1, per_origin=1, failures=FAILURES, cool_down_s=COOL_DOWN_S, clock=clock)
    open_breaker(admission)
    clock.now += COOL_DOWN_S
    with admission.admitted(OTHER), pytest.raises(OriginBusy):
        fetch(admission, DEAD)
    fetch(admission, DEAD)  # the probe is still to be made: this one
