"""Which fetches may start, as imgproxy keeps downloads apart from processing: a budget of fetches
in flight in each worker, in all and per origin, that never takes one of the model's slots; and a
breaker per origin that, after repeated failures (timeouts, refused connections, 5xx), answers
at once for a cool-down instead of waiting on the origin again. Beyond either: a quick 503 with
Retry-After.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gateway.errors import OriginBusy, OriginError, OriginTimeout, OriginUnavailable

FAILURES = (OriginError, OriginTimeout)  # what an origin did wrong; 404, 413 and refusals are not
MAX_BREAKERS = 4096  # origins remembered as failing; the oldest is forgotten first


@dataclass
class Breaker:
    failures: int = 0  # in a row
    open_until: float = 0.0
    probing: bool = False  # one request tries the origin again once the cool-down is over


class FetchAdmission:
    """Admits fetches in one worker process (its threads share it)."""

    def __init__(
        self,
        total: int,
        per_origin: int,
        failures: int,
        cool_down_s: float,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.total, self.per_origin, self.failures, self.cool_down_s = total, per_origin, failures, cool_down_s
        self._clock = clock
        self._lock = threading.Lock()
        self._active: Counter[str] = Counter()
        self._breakers: dict[str, Breaker] = {}

    @contextmanager
    def admitted(self, origin: str) -> Iterator[None]:
        """A fetch from `origin` (scheme://host:port) in the block; its outcome feeds the breaker."""
        probe = self._admit(origin)
        try:
            yield
        except FAILURES:
            self._settle(origin, probe, failed=True)
            raise
        except BaseException:
            self._settle(origin, probe, failed=None)
            raise
        self._settle(origin, probe, failed=False)

    def _admit(self, origin: str) -> bool:
        """Take a place for `origin`, or raise; True where this fetch is the breaker's probe."""
        with self._lock:
            breaker = self._breakers.get(origin)
            probe = False
            if breaker is not None and breaker.failures >= self.failures:
                left = breaker.open_until - self._clock()
                if left > 0 or breaker.probing:
                    wait = max(1, math.ceil(left))
                    raise OriginUnavailable(f"the origin failed {breaker.failures} times in a row", retry_after=wait)
                breaker.probing = probe = True
            if sum(self._active.values()) >= self.total or self._active[origin] >= self.per_origin:
                if probe and breaker is not None:
                    breaker.probing = False
                raise OriginBusy("too many fetches in flight; retry after the delay in Retry-After", retry_after=1)
            self._active[origin] += 1
            return probe

    def _settle(self, origin: str, probe: bool, failed: bool | None) -> None:
        """Give the place back; count a failure (`failed`), clear the record after a success, or
        leave it as it is (None: the fetch ended for another reason, its client gone, say)."""
        with self._lock:
            self._active[origin] -= 1
            if not self._active[origin]:
                del self._active[origin]
            breaker = self._breakers.get(origin)
            if breaker is not None and probe:
                breaker.probing = False
            if failed is False and breaker is not None:
                del self._breakers[origin]
            elif failed:
                if breaker is None:
                    breaker = self._breakers[origin] = Breaker()
                    if len(self._breakers) > MAX_BREAKERS:
                        del self._breakers[next(iter(self._breakers))]
                breaker.failures += 1
                if breaker.failures >= self.failures:
                    breaker.open_until = self._clock() + self.cool_down_s
