"""`make profile`: where the gateway's CPU goes, per photo class (py-spy, non-idle samples).

Starts a local stack (Triton I/O through shared memory), then for each photo class of
`bench.cpu` sends the photos one at a time to /v1/detect (multipart, as `curl -F` does; `--upload
raw`: as the body) while py-spy samples every gunicorn worker, and writes build/profile/CLASS.txt:
collapsed stacks, one per line with its sample count (speedscope.app or flamegraph.pl draw the
flame graph from it). Prints, per class, the functions with the largest share of samples: "own"
where the sample was taken in the function itself, "total" where it was anywhere on the stack.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from bench.cpu import photo_classes
from bench.workload import must_succeed, service_call
from local_triton import BUILD_DIR
from local_triton.processes import running_stack

OUT_DIR = BUILD_DIR / "profile"
SAMPLES_PER_S = 200


def sample(gateway_pid: int, output: Path, seconds: float) -> subprocess.Popen:
    """py-spy recording the gateway's master and workers for `seconds`, collapsed stacks to `output`."""
    return subprocess.Popen(
        [
            str(Path(sys.executable).with_name("py-spy")),
            *("record", "--pid", str(gateway_pid), "--subprocesses", "--nolineno"),
            *("--rate", str(SAMPLES_PER_S), "--duration", str(round(seconds)), "--format", "raw"),
            *("--output", str(output)),
        ],
        stdout=subprocess.DEVNULL,
    )


def top_functions(collapsed: str, count: int) -> list[tuple[str, float, float]]:
    """(function, own share, total share) of the samples in `collapsed` stacks, by total share."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in collapsed.splitlines():
        stack, _, weight = line.rpartition(" ")
        frames = [re.sub(r" \((\S+/)?([^/]+)\)$", r" (\2)", f) for f in stack.split(";")[1:]]  # drop the process
        if not frames:
            continue
        samples += int(weight)
        own[frames[-1]] += int(weight)
        for frame in set(frames):
            total[frame] += int(weight)
    return [(f, own[f] / samples, total[f] / samples) for f, _ in total.most_common(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20, help="seconds of sampling per photo class")
    parser.add_argument("--top", type=int, default=30, help="functions listed per class")
    parser.add_argument("--upload", choices=("raw", "multipart"), default="multipart", help="how photos are sent")
    args = parser.parse_args()
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with running_stack("profile", {"FACECROP_TRITON_SHM": "on"}, intra_op_threads=2) as stack:
        call = must_succeed(service_call(stack.gateway, upload=args.upload))
        for name, photos in photo_classes().items():
            for data in photos[:2]:  # warm-up
                call(data)
            output = OUT_DIR / (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ".txt")
            recorder = sample(stack.gateway_process.pid, output, args.seconds)
            while recorder.poll() is None:
                for data in photos:
                    call(data)
            print(f"\n## {name}: {output}\n\n| function | own | total |\n|---|---:|---:|")
            for function, own, total in top_functions(output.read_text(), args.top):
                print(f"| `{function}` | {own:.1%} | {total:.1%} |")


if __name__ == "__main__":
    main()
