"""`make soak`: the service at its measured capacity for five minutes, loopback only.

Measures capacity (closed loop at concurrency 16), then keeps the service there with the
same closed loop for `--seconds`, sampling memory every `--sample` seconds. Prints the
error count, latency percentiles, and the growth of gateway and Triton memory after
warm-up (the bar: under 5%). Bounded in time; stops by itself.
"""

from __future__ import annotations

import argparse
import threading
import time

import numpy as np

from bench.harness import closed_loop
from bench.workload import load_photos, service_call
from local_triton.processes import child_pids, rss_mib, running_stack


def family_rss_mib(pid: int) -> float:
    """A process plus its children: gunicorn and its workers, tritonserver and its stubs."""
    return rss_mib(pid) + sum(rss_mib(child) for child in child_pids(pid))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--warmup", type=float, default=60, help="memory growth is measured from here on")
    parser.add_argument("--sample", type=float, default=15)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    photos = load_photos()

    with running_stack("soak", intra_op_threads=2) as stack:
        call = service_call(stack.gateway)
        capacity = closed_loop("capacity", call, photos, args.concurrency, max_count=10**9, max_seconds=20, warmup=4)
        print(f"capacity: {capacity.throughput:.1f} images/s at concurrency {args.concurrency}", flush=True)

        statuses: list[int] = []
        samples: list[tuple[float, float, float]] = []  # (seconds in, gateway MiB, Triton MiB)
        started = time.monotonic()
        done = threading.Event()

        def sample_memory() -> None:
            while not done.wait(args.sample):
                gateway = family_rss_mib(stack.gateway_process.pid)
                samples.append((time.monotonic() - started, gateway, family_rss_mib(stack.triton_process.pid)))
                print(
                    f"  {samples[-1][0]:5.0f} s  gateway {gateway:6.1f} MiB  "
                    f"triton {samples[-1][2]:6.1f} MiB  requests {len(statuses)}",
                    flush=True,
                )

        sampler = threading.Thread(target=sample_memory, daemon=True)
        sampler.start()
        soak = closed_loop(
            "soak",
            lambda data: statuses.append(call(data)),
            photos,
            args.concurrency,
            max_count=10**9,
            max_seconds=args.seconds,
            warmup=0,
        )
        done.set()
        sampler.join()

    errors = sum(1 for s in statuses if s != 200)
    settled = [s for s in samples if s[0] >= args.warmup] or samples
    # gateway memory moves with the requests in flight: compare the medians of the first and
    # last thirds of the samples after warm-up rather than two single readings
    window = max(1, len(settled) // 3)
    first, last = (np.median([s[1:] for s in part], axis=0) for part in (settled[:window], settled[-window:]))
    growth = (last - first) / first * 100
    print()
    print("| soak | value |")
    print("|---|---:|")
    print(f"| duration | {soak.wall_s:.0f} s at concurrency {args.concurrency} |")
    print(f"| requests | {soak.count} ({soak.throughput:.1f}/s; capacity {capacity.throughput:.1f}/s) |")
    print(f"| errors (non-200) | {errors} |")
    print("| latency p50 / p95 / p99 | " + " / ".join(f"{soak.percentile_ms(q):.0f}" for q in (50, 95, 99)) + " ms |")
    print(
        f"| gateway memory after warm-up (median of {window} samples) "
        f"| {first[0]:.0f} -> {last[0]:.0f} MiB ({growth[0]:+.1f}%) |"
    )
    print(
        f"| Triton memory after warm-up (median of {window} samples) "
        f"| {first[1]:.0f} -> {last[1]:.0f} MiB ({growth[1]:+.1f}%) |"
    )
    verdict = errors == 0 and max(growth) < 5
    print(f"\n{'PASS' if verdict else 'FAIL'}: zero errors and memory growth under 5% after warm-up")
    raise SystemExit(0 if verdict else 1)


if __name__ == "__main__":
    main()
