"""`make soak`: a mixed day on the local stack, bounded, and the shape of every worker's memory.

The workload (the same sequence for every gateway): bursts of 1 to 16 concurrent requests
mixing /v1/detect, /v1/crop and /v1/anonymize on ordinary photos, crowds with detail=high and
auto, 12 MP EXIF-rotated phone photos, the photos people have (HEIC and AVIF, Display P3 JPEGs),
bad inputs (415, 400, 413, a truncated HEIC), the kinds of file image libraries test with
(evaluation/corpus.py: TIFF orientations, CMYK, 16-bit, transparency, MPO, RLE8 BMP, ...), and the URL
form (face crops, plain resizes, 304 revalidations, an animated GIF and a 5,000-frame one from a
directory origin): `--requests` in all (20,000),
loopback only, stopping by itself.

Every `--sample` seconds: each worker's resident memory (RSS) and its parts (heap: RssAnon;
shared memory: RssShmem) and its regions in /dev/shm. `--allocators` runs one gateway per
allocator on the same Triton (glibc as gunicorn.conf.py tunes it, jemalloc, mimalloc), the
same bursts sent to each in turn: side by side in one run.

Prints a table, writes a plot (build/soak.png), and passes only with what it prints: no 5xx,
no answer other than the one expected for its kind, no worker restarted, every worker at most
150 MiB resident and 130 MiB proportional (PSS) at the end, its RSS and PSS flat over the second
half, its /dev/shm regions at rest within what the region pool keeps, and no region left once the
gateways are stopped.

Flat means what a worker holds at rest does not rise: every SETTLED_EVERY requests the load stops
for SETTLE_S and each worker is sampled settled (a leak raises that; a burst does not), and a line
fitted through the second half's settled samples may change by at most +-5 % of their mean over
the half. A line through every sample cannot judge this: single samples swing by 100 MiB and more
with the bursts (12 MP buffers, tiles), so its slope's standard error is itself about 6 % of the
mean (the output prints it) and the verdict would be a coin toss. The /dev/shm regions swing
with the bursts too, and at rest hold more or fewer pages as the last requests left them (two
samples' difference is another coin toss); what must hold at every sample at rest is the pool's
promise (gateway/triton/client.py): at most KEPT_REGION_BYTES of idle regions per worker, at most
WARM_REGION_BYTES of them with their pages (a region not given back breaks the first, a page kept
past the budget the second). Every sample is written to build/soak-samples.json.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import requests
from PIL import Image

from bench.phone import phone_photos
from bench.verdicts import shown
from bench.workload import load_photos
from evaluation.corpus import corpus, long_gif
from evaluation.images import png_declaring
from evaluation.sources import animation, encoded_as
from gateway.imaging.profiles import DISPLAY_P3
from gateway.triton.client import KEPT_REGION_BYTES, WARM_REGION_BYTES
from gateway.triton.shm import NAME_PREFIX, SHM_DIR, owner
from local_triton import BUILD_DIR
from local_triton.allocators import ALLOCATORS
from local_triton.processes import SHARED_FACES, Gateway, child_pids, memory_mib, running_gateway, running_stack

MAX_WORKER_MIB = 150
MAX_WORKER_PSS_MIB = 130
FLAT = 0.05  # +-5 %
SETTLED_EVERY = 1000  # requests between the pauses in which the workers are sampled at rest
SETTLE_S = 10.0  # quiet before a sample at rest (and the last one, after the soak)
PLOT = BUILD_DIR / "soak.png"
SAMPLES = BUILD_DIR / "soak-samples.json"
DEMO = sorted(SHARED_FACES.glob("demo/*.jpg"))
FACE_CROP = "width=256,height=256,fit=cover,gravity=face"
BURSTS = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class Call:
    """One request of the mix: what it is, and the statuses that are right for it."""

    kind: str
    method: str
    path: str
    params: dict = field(default_factory=dict)
    body: bytes | None = None
    headers: dict = field(default_factory=dict)
    expected: frozenset[int] = frozenset({200})


def mix() -> list[Call]:
    """One round of the mix (106 requests), cycled through the photos."""
    ordinary = load_photos()
    crowds = [p.read_bytes() for p in sorted((SHARED_FACES / "wider_val_native" / "images").glob("*.jpg"))[:12]]
    phones = phone_photos(4)
    relative = url_photos()
    people_have = {  # 1 MP, as phones send them
        container: [
            encoded_as(Image.open(p).convert("RGB").resize((1152, 864)), container, DISPLAY_P3) for p in DEMO[:4]
        ]
        for container in ("HEIF", "AVIF", "JPEG")
    }
    library_files = list(corpus().values())  # the kinds image libraries test with (evaluation/corpus.py)
    pick = itertools.count()

    def photo(pool: list) -> bytes:
        return pool[next(pick) % len(pool)]

    def upload(kind: str, endpoint: str, pool: list, **params) -> Call:
        body = photo(pool)
        return Call(kind, "POST", endpoint, params, body, {"Content-Type": "image/jpeg"})

    def bad(kind: str, endpoint: str, body: bytes, params: dict, status: int) -> Call:
        return Call(kind, "POST", endpoint, params, body, {"Content-Type": "image/jpeg"}, frozenset({status}))

    def by_url(kind: str, options: str, **headers) -> Call:
        expected = frozenset({304}) if "If-None-Match" in headers else frozenset({200})
        return Call(
            kind, "GET", f"/cdn-cgi/image/{options}/shared/{photo(relative)}", headers=headers, expected=expected
        )

    weights: list[tuple[int, Callable[[], Call]]] = [
        (17, lambda: upload("detect", "/v1/detect", ordinary)),
        (3, lambda: upload("HEIC crop", "/v1/crop", people_have["HEIF"], width=256, height=256)),
        (3, lambda: upload("AVIF crop", "/v1/crop", people_have["AVIF"], width=256, height=256)),
        (3, lambda: upload("Display P3 anonymize", "/v1/anonymize", people_have["JPEG"])),
        (2, lambda: bad("bad: truncated HEIC", "/v1/detect", people_have["HEIF"][0][:2000], {}, 415)),
        (10, lambda: upload("crop", "/v1/crop", ordinary, width=256, height=256)),
        (8, lambda: upload("anonymize", "/v1/anonymize", ordinary)),
        (3, lambda: upload("detail=auto", "/v1/detect", crowds, detail="auto", max_faces=1000)),
        (3, lambda: upload("detail=high", "/v1/detect", crowds, detail="high", max_faces=1000)),
        (3, lambda: upload("anonymize crowd", "/v1/anonymize", crowds)),
        (3, lambda: upload("12 MP detect", "/v1/detect", phones)),
        (2, lambda: upload("12 MP crop", "/v1/crop", phones, width=512, height=512)),
        (7, lambda: by_url("URL face crop", FACE_CROP)),
        (8, lambda: by_url("URL resize", "width=320,f=webp")),
        (4, lambda: by_url("URL 304", "width=320,f=webp", **{"If-None-Match": "*"})),
        (
            3,
            lambda: Call(
                "URL animation", "GET", "/cdn-cgi/image/width=200,height=200,fit=cover,gravity=face/party.gif"
            ),
        ),
        (3, lambda: upload("library files: crop", "/v1/crop", library_files, width=128, height=128, format="png")),
        (2, lambda: upload("library files: anonymize", "/v1/anonymize", library_files)),
        (
            1,
            lambda: Call(
                "URL 5,000-frame GIF", "GET", f"/cdn-cgi/image/{FACE_CROP}/long.gif", expected=frozenset({413})
            ),
        ),
        (6, lambda: bad("bad: not an image", "/v1/detect", b"not an image" * 40, {}, 415)),
        (6, lambda: bad("bad: parameter", "/v1/crop", photo(ordinary), {"zoom": "7"}, 400)),
        (6, lambda: bad("bad: bomb", "/v1/detect", png_declaring(90_000, 90_000), {}, 413)),
    ]
    return [make() for weight, make in weights for _ in range(weight)]


@dataclass
class Record:
    """What one gateway answered, and its memory over the soak."""

    statuses: Counter = field(default_factory=Counter)  # (kind, status) -> count; 0: no answer
    failures: Counter = field(default_factory=Counter)  # why there was no answer
    samples: list[tuple[float, int, dict[int, dict[str, float]], float]] = field(default_factory=list)
    # (seconds in, requests done, pid -> memory_mib, /dev/shm MiB of its workers' regions)
    settled: list[tuple[int, dict[int, dict[str, float]], Regions]] = field(default_factory=list)
    # (requests done, pid -> memory_mib, its workers' /dev/shm regions) after SETTLE_S without load

    @property
    def done(self) -> int:
        return sum(self.statuses.values())


def send(base: str, call: Call, session: requests.Session) -> int:
    response = session.request(
        call.method, base + call.path, params=call.params, data=call.body, headers=call.headers, timeout=120
    )
    return response.status_code


class Regions(NamedTuple):
    """The /dev/shm regions named for some processes (gateway/triton/shm.py's names carry the pid)."""

    pages_mib: float  # the memory they hold (idle regions may have given their pages back)
    size_mib: float  # their size


def shm_regions(pids: list[int]) -> Regions:
    stats = [
        path.stat()
        for path in SHM_DIR.glob(f"{NAME_PREFIX}*")
        if (made_by := owner(path.name)) is not None and made_by[1] in pids
    ]
    return Regions(sum(s.st_blocks * 512 for s in stats) / 2**20, sum(s.st_size for s in stats) / 2**20)


def soak(gateways: dict[str, Gateway], count: int, sample_s: float) -> dict[str, Record]:
    """`count` requests of the mix to each gateway, burst by burst, in turn; memory sampled meanwhile."""
    round_ = mix()
    records = {name: Record() for name in gateways}
    started = time.monotonic()
    stop = threading.Event()

    def sample_once(settled: bool = False) -> None:
        for name, gateway in gateways.items():
            workers = child_pids(gateway.process.pid)
            memory, regions = {pid: memory_mib(pid) for pid in workers}, shm_regions(workers)
            records[name].samples.append((time.monotonic() - started, records[name].done, memory, regions.pages_mib))
            if settled:
                records[name].settled.append((records[name].done, memory, regions))

    def sample() -> None:
        while not stop.wait(sample_s):
            sample_once()

    sample_once()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    sessions = threading.local()

    def run(base: str, record: Record, call: Call) -> None:
        if not hasattr(sessions, "session"):
            sessions.session = requests.Session()
        status = 0
        for attempt in range(2):  # a kept-alive connection the server closed meanwhile: sent again once
            try:
                status = send(base, call, sessions.session)
                break
            except requests.ConnectionError as error:
                record.failures[f"{type(error).__name__}{', sent again' if attempt == 0 else ''}"] += 1
            except requests.RequestException as error:
                record.failures[type(error).__name__] += 1
                break
        record.statuses[call.kind, status] += 1

    calls = itertools.cycle(round_)
    bursts = itertools.cycle(BURSTS)
    with ThreadPoolExecutor(max(BURSTS)) as pool:
        sent = 0
        while sent < count:
            burst = [next(calls) for _ in range(min(next(bursts), count - sent))]
            for name, gateway in gateways.items():
                list(pool.map(lambda call, g=gateway, r=records[name]: run(g.url, r, call), burst))
            sent += len(burst)
            if sent % SETTLED_EVERY < len(burst) and sent < count:
                time.sleep(SETTLE_S)
                sample_once(settled=True)
            if sent % 2000 < len(burst):
                print(f"  {sent} requests to each gateway, {time.monotonic() - started:.0f} s", flush=True)
    stop.set()
    sampler.join()
    time.sleep(SETTLE_S)
    sample_once(settled=True)  # "after the soak": the last sample, once the load has stopped
    return records


@dataclass(frozen=True)
class Verdict:
    end_mib: dict[int, float]  # each worker's RSS after the soak (SETTLE_S after the last request)
    end_pss: dict[int, float]  # and its PSS
    slope: dict[int, float]  # settled RSS, MiB per 10,000 requests over the second half (a leak keeps rising)
    trend: dict[int, float]  # that slope over the second half, against the settled samples' mean
    pss_trend: dict[int, float]  # the same for PSS
    every_sample: dict[int, tuple[float, float]]  # RSS trend through every sample, its standard error (not judged)
    shm_pages_mib: float  # the most the workers' /dev/shm regions held at rest
    shm_size_mib: float  # and the largest their sizes added up to at rest
    shm_bounds_mib: tuple[float, float]  # what the region pool may keep: pages, sizes
    server_errors: int  # 5xx, and requests with no answer even when sent again
    restarted: int  # workers that died and were replaced
    wrong: Counter  # (kind, status) not expected for the kind

    @property
    def passed(self) -> bool:
        return (
            self.server_errors == 0
            and not self.wrong
            and self.restarted == 0
            and max(self.end_mib.values()) <= MAX_WORKER_MIB
            and max(self.end_pss.values()) <= MAX_WORKER_PSS_MIB
            and all(abs(t) <= FLAT for t in [*self.trend.values(), *self.pss_trend.values()])  # NaN: not met
            and self.shm_pages_mib <= self.shm_bounds_mib[0]
            and self.shm_size_mib <= self.shm_bounds_mib[1]
        )


def fitted_trend(series: np.ndarray) -> tuple[float, float, float]:
    """(MiB per 10,000 requests, change over the span against the mean, that change's standard
    error) of a line fitted through (requests done, MiB) samples; NaN (no verdict) for fewer than 3."""
    if len(series) < 3:
        return math.nan, math.nan, math.nan
    (slope, _), covariance = np.polyfit(series[:, 0], series[:, 1], 1, cov=True)
    relative = float(series[-1, 0] - series[0, 0]) / float(series[:, 1].mean())
    return float(slope) * 10_000, float(slope) * relative, float(np.sqrt(covariance[0, 0])) * relative


def judge(record: Record, expected: dict[str, frozenset[int]]) -> Verdict:
    """Flatness is the trend of the settled samples over the second half: RSS and PSS rise in every
    burst and fall after it; at rest they rise only where memory is kept (module docstring)."""
    second_half = [s for s in record.samples if s[1] >= record.done / 2]
    at_rest = [(done, memory) for done, memory, _ in record.settled if done >= record.done / 2]
    pids = sorted(record.samples[-1][2])
    last = record.samples[-1][2]
    slope, trend, pss_trend, every_sample = {}, {}, {}, {}
    for pid in pids:
        rss = np.array([(done, memory[pid]["VmRSS"]) for done, memory in at_rest if pid in memory])
        pss = np.array([(done, memory[pid]["Pss"]) for done, memory in at_rest if pid in memory])
        slope[pid], trend[pid], _ = fitted_trend(rss)
        pss_trend[pid] = fitted_trend(pss)[1]
        every_sample[pid] = fitted_trend(np.array([(s[1], s[2][pid]["VmRSS"]) for s in second_half if pid in s[2]]))[1:]
    wrong = Counter({key: n for key, n in record.statuses.items() if key[1] not in expected[key[0]]})
    return Verdict(
        end_mib={pid: last[pid]["VmRSS"] for pid in pids},
        end_pss={pid: last[pid]["Pss"] for pid in pids},
        slope=slope,
        trend=trend,
        pss_trend=pss_trend,
        every_sample=every_sample,
        shm_pages_mib=max(regions.pages_mib for _, _, regions in record.settled),
        shm_size_mib=max(regions.size_mib for _, _, regions in record.settled),
        shm_bounds_mib=(len(pids) * WARM_REGION_BYTES / 2**20, len(pids) * KEPT_REGION_BYTES / 2**20),
        server_errors=sum(n for (_, status), n in record.statuses.items() if status >= 500 or status == 0),
        restarted=len({pid for s in record.samples for pid in s[2]}) - len(pids),
        wrong=wrong,
    )


def plot(records: dict[str, Record], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(records), 1, figsize=(10, 3.2 * len(records)), squeeze=False, sharex=True)
    for axis, (name, record) in zip(axes[:, 0], records.items()):
        pids = sorted({pid for s in record.samples for pid in s[2]})
        for number, pid in enumerate(pids):
            points = [(s[1], s[2][pid]) for s in record.samples if pid in s[2]]
            done = [p[0] for p in points]
            axis.plot(done, [p[1]["VmRSS"] for p in points], label=f"worker {number + 1} RSS")
            axis.plot(done, [p[1]["RssAnon"] for p in points], linestyle="--", label=f"worker {number + 1} heap")
            axis.plot(done, [p[1]["RssShmem"] for p in points], linestyle=":", label=f"worker {number + 1} shared")
        axis.plot(
            [s[1] for s in record.samples], [s[3] for s in record.samples], color="grey", label="/dev/shm regions"
        )
        axis.axhline(MAX_WORKER_MIB, color="red", linewidth=0.8, label=f"{MAX_WORKER_MIB} MiB")
        axis.set_title(name)
        axis.set_ylabel("MiB")
        axis.legend(fontsize=7, ncol=4, loc="lower right")
    axes[-1, 0].set_xlabel("requests")
    figure.tight_layout()
    path.parent.mkdir(exist_ok=True)
    figure.savefig(path, dpi=90)


def trend_text(trend: float) -> str:
    """A trend in percent, signed, with the digits that put it on its side of +-FLAT."""
    if math.isnan(trend):
        return f"n/a (under 3 samples at rest: --requests {4 * SETTLED_EVERY} or more)"
    return f"{'+' if trend >= 0 else ''}{shown(trend * 100, math.copysign(FLAT * 100, trend), 1)} %"


def table(records: dict[str, Record], verdicts: dict[str, Verdict], seconds: float) -> list[str]:
    lines = [
        "| gateway | requests | 5xx | unexpected answers | workers' RSS at the end, MiB | PSS, MiB | heap, MiB "
        "| second half, at rest: RSS trend (MiB per 10k requests) | PSS trend "
        "| /dev/shm regions at rest, most: pages, sizes, MiB (the pool keeps at most) "
        "| workers restarted | passes |",
        "|---|---:|---:|---:|---|---|---|---|---|---|---:|---|",
    ]
    for name, record in records.items():
        verdict, last = verdicts[name], record.samples[-1][2]
        heaps = ", ".join(f"{last[pid]['RssAnon']:.0f}" for pid in verdict.end_mib)
        regions = ", ".join(
            f"{shown(most, bound, 1)} ({bound:.0f})"
            for most, bound in zip((verdict.shm_pages_mib, verdict.shm_size_mib), verdict.shm_bounds_mib)
        )
        trends = ", ".join(f"{trend_text(verdict.trend[p])} ({verdict.slope[p]:+.1f})" for p in verdict.end_mib)
        pss_trends = ", ".join(trend_text(v) for v in verdict.pss_trend.values())
        lines.append(
            f"| {name} | {record.done} | {verdict.server_errors} | {sum(verdict.wrong.values())} "
            f"| {', '.join(shown(v, MAX_WORKER_MIB, 0) for v in verdict.end_mib.values())} "
            f"| {', '.join(shown(v, MAX_WORKER_PSS_MIB, 0) for v in verdict.end_pss.values())} | {heaps} | {trends} "
            f"| {pss_trends} | {regions} | {verdict.restarted} "
            f"| {'yes' if verdict.passed else 'no'} |"
        )
    lines.append(
        f"\n{seconds:.0f} s in all; the plot: {PLOT.relative_to(BUILD_DIR.parent)}, every sample: "
        f"{SAMPLES.relative_to(BUILD_DIR.parent)}"
    )
    for name, verdict in verdicts.items():
        drift = ", ".join(f"{t * 100:+.1f} % +- {se * 100:.1f}" for t, se in verdict.every_sample.values())
        lines.append(f"- {name}: RSS trend through every sample (not judged: the bursts swing it) {drift}")
    for name, verdict in verdicts.items():
        if verdict.wrong:
            lines.append(
                f"- {name}: unexpected answers {dict(verdict.wrong)}, no answer: {dict(records[name].failures)}"
            )
    return lines


def url_photos() -> list[Path]:
    """The shared photos the URL form is asked for, relative to ../shared/faces."""
    return [p.relative_to(SHARED_FACES) for p in sorted(SHARED_FACES.glob("*/images/*.jpg"))[:60]]


def originals() -> Path:
    """The URL form's origin: copies of url_photos() (the gateway serves no link that leaves its
    origin), and an animated GIF of a crowd."""
    folder = BUILD_DIR / "soak-originals"
    for relative in url_photos():
        copy = folder / "shared" / relative
        if not copy.exists():
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(SHARED_FACES / relative, copy)
    crowd = Image.open(SHARED_FACES / "demo" / "widertest_20_Family_Group_Family_Group_20_435.jpg").convert("RGB")
    frames = [crowd.resize((480, 320)).rotate(angle) for angle in range(0, 20, 2)]
    (folder / "party.gif").write_bytes(animation(frames, "GIF", [80] * len(frames), loop=0))
    (folder / "long.gif").write_bytes(long_gif())
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000, help="requests to each gateway")
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between memory samples")
    parser.add_argument("--allocators", default="", help=f"comma-separated, side by side: {', '.join(ALLOCATORS)}")
    args = parser.parse_args()
    names = [a for a in args.allocators.split(",") if a] or [None]
    expected = {call.kind: call.expected for call in mix()}
    origin = {"FACECROP_ORIGIN": str(originals())}
    started = time.monotonic()
    with running_stack("soak", origin, intra_op_threads=2) as stack, contextlib.ExitStack() as stack_of_gateways:
        gateways = {
            (name or "the gateway"): stack_of_gateways.enter_context(
                running_gateway(stack.triton_grpc, {**origin, "FACECROP_MALLOC": name}, f"soak-{name}")
            )
            if name
            else Gateway(stack.gateway, stack.gateway_process)
            for name in names
        }
        pids = [pid for g in gateways.values() for pid in child_pids(g.process.pid)]
        records = soak(gateways, args.requests, args.sample)
    leftover = shm_regions(pids).size_mib
    verdicts = {name: judge(record, expected) for name, record in records.items()}
    plot(records, PLOT)
    SAMPLES.write_text(json.dumps({name: {"samples": r.samples, "settled": r.settled} for name, r in records.items()}))
    print("\n".join(table(records, verdicts, time.monotonic() - started)))
    print(f"- /dev/shm regions of the soak's workers left after stopping: {leftover:.1f} MiB")
    passed = all(v.passed for v in verdicts.values()) and leftover == 0
    print(
        f"\n{'PASS' if passed else 'FAIL'}: no 5xx or unexpected answer, no worker restarted, every worker <= "
        f"{MAX_WORKER_MIB} MiB RSS and {MAX_WORKER_PSS_MIB} MiB PSS, RSS and PSS trends within +-{FLAT:.0%} "
        "over the second half, /dev/shm regions at rest within the pool's budgets, nothing left"
    )
    raise SystemExit(0 if passed else 1)


if __name__ == "__main__":
    main()
