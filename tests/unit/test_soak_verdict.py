"""`make soak`'s verdict on the /dev/shm regions: at every sample at rest, within what the region
pool promises to keep (gateway/triton/client.py), however the bursts swing them."""

from __future__ import annotations

from collections import Counter

import numpy as np

from bench.soak import SETTLED_EVERY, Record, Regions, judge
from gateway.triton.client import KEPT_REGION_BYTES, WARM_REGION_BYTES

WORKERS = (101, 102)
WARM_MIB = len(WORKERS) * WARM_REGION_BYTES / 2**20  # 24 MiB of pages for both workers
KEPT_MIB = len(WORKERS) * KEPT_REGION_BYTES / 2**20  # 64 MiB of regions
EXPECTED = {"detect": frozenset({200})}
# at rest in a real soak (2026-11-27, 20,000 requests): 17-22 MiB of pages, the last sample above
# the second half's first
PAGES_AT_REST = [17.4, 18.8, 18.1, 19.3, 20.8, 21.5, 19.6, 19.4, 21.5, 18.8]
PAGES_AT_REST += [18.8, 19.3, 17.6, 20.3, 22.2, 18.2, 17.9, 20.7, 21.2, 19.3]


def memory(rss: float) -> dict[int, dict[str, float]]:
    return {pid: {"VmRSS": rss, "Pss": rss * 0.65, "RssAnon": rss / 2, "RssShmem": 8.0} for pid in WORKERS}


def soaked(at_rest: list[Regions]) -> Record:
    """A soak flat in RSS, one sample at rest every SETTLED_EVERY requests with the given regions,
    and mid-burst samples between them with the regions' pages swinging from 16 to 127 MiB."""
    swings = np.random.default_rng(7)
    record = Record(statuses=Counter({("detect", 200): len(at_rest) * SETTLED_EVERY}))
    for number, regions in enumerate(at_rest, start=1):
        done = number * SETTLED_EVERY
        for step in range(4):
            busy = done - SETTLED_EVERY + step * SETTLED_EVERY // 4
            record.samples.append((float(busy), busy, memory(180.0), float(swings.uniform(16, 127))))
        record.samples.append((float(done), done, memory(140.0), regions.pages_mib))
        record.settled.append((done, memory(140.0), regions))
    return record


def test_regions_within_the_pools_budgets_pass_whichever_sample_comes_last():
    verdict = judge(soaked([Regions(pages, 40.0) for pages in PAGES_AT_REST]), EXPECTED)
    assert verdict.passed
    assert (verdict.shm_pages_mib, verdict.shm_size_mib) == (22.2, 40.0)
    assert verdict.shm_bounds_mib == (WARM_MIB, KEPT_MIB) == (24.0, 64.0)


def test_a_region_never_given_back_fails():
    # one 3 MiB region (a 1024x1024 photo) left behind every 2,000 requests: its pages given back,
    # the region itself not
    sizes = [40.0 + 3 * (n // 2) for n in range(len(PAGES_AT_REST))]
    verdict = judge(soaked([Regions(p, s) for p, s in zip(PAGES_AT_REST, sizes)]), EXPECTED)
    assert not verdict.passed
    assert verdict.shm_size_mib == 67.0


def test_pages_kept_past_the_warm_budget_fail():
    pages = [*PAGES_AT_REST[:-1], WARM_MIB + 0.5]
    assert not judge(soaked([Regions(p, 40.0) for p in pages]), EXPECTED).passed
    assert judge(soaked([Regions(p, 40.0) for p in [*PAGES_AT_REST[:-1], WARM_MIB]]), EXPECTED).passed
