"""`python -m bench.levers`: the service's deployment levers, measured side by side on this machine.

For each combination of local Triton instances x onnxruntime threads and gateway workers x
threads, a fresh local stack serves the shared photos at concurrency 1 and 16.
"""

from __future__ import annotations

import argparse

from bench.harness import closed_loop
from bench.workload import load_photos, must_succeed, service_call
from local_triton.processes import running_stack

# (Triton instances, onnxruntime threads each, gunicorn workers, threads each)
LEVERS = [(1, 2, 2, 4), (2, 1, 2, 4), (1, 2, 1, 8), (2, 1, 1, 8)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=150)
    parser.add_argument("--seconds", type=float, default=25)
    args = parser.parse_args()
    photos = load_photos()
    print("| Triton instances x ORT threads | gateway workers x threads | c=1 p50 ms | c=16 images/s |")
    print("|---|---|---:|---:|")
    for instances, threads, workers, worker_threads in LEVERS:
        env = {"FACECROP_WORKERS": str(workers), "FACECROP_THREADS": str(worker_threads)}
        with running_stack("levers", env, intra_op_threads=threads, instances=instances) as stack:
            call = must_succeed(service_call(stack.gateway))
            single = closed_loop("c=1", call, photos, 1, args.count, args.seconds, warmup=4)
            loaded = closed_loop("c=16", call, photos, 16, args.count, args.seconds, warmup=4)
        print(
            f"| {instances} x {threads} | {workers} x {worker_threads} "
            f"| {single.percentile_ms(50):.1f} | {loaded.throughput:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
