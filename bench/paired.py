"""Before and after, measured in one run (`python -m bench.paired --revision REV`: the request kinds
of #45's check): the gateway of an earlier commit (a git worktree under
build/) beside this checkout's, on the same Triton, rounds alternating between the two so the
machine's drift falls on both alike (bench/cpu.py's `measure`). A claim that something is not
slower than before is only made from this.

BASELINE is the tree the work on issues #34-#38 started from; each tree runs as it runs by default,
the baseline with the allocator settings it shipped with (jemalloc with its 1 s decay).
"""

from __future__ import annotations

import argparse
import subprocess
from contextlib import ExitStack
from pathlib import Path

from bench.cpu import measure
from bench.phone import phone_photos
from bench.workload import URL_FORM
from local_triton import BUILD_DIR, PROJECT_ROOT
from local_triton.processes import SHARED_FACES, Stack, running_gateway, running_stack

BASELINE = "de1c82e"
BASELINE_MALLOC = "jemalloc-decay"  # its local_triton/allocators.py's jemalloc


def baseline_tree(revision: str = BASELINE) -> Path:
    """A checkout of `revision` under build/ (made once, a detached git worktree)."""
    path = BUILD_DIR / f"baseline-{revision}"
    if not (path / "gateway").is_dir():
        subprocess.run(["git", "worktree", "prune"], cwd=PROJECT_ROOT, check=True)
        subprocess.run(
            ["git", "worktree", "add", "--detach", "--force", str(path), revision],
            cwd=PROJECT_ROOT,
            check=True,
            capture_output=True,
        )
    return path


def before_and_after(
    stack: Stack,
    cases: dict[str, tuple[str, dict, list[bytes]]],
    gateway_env: dict[str, str],
    rounds: int = 8,
    revision: str = BASELINE,
    baseline_malloc: str | None = BASELINE_MALLOC,
) -> dict[str, tuple[float, float]]:
    """Gateway CPU ms per request of this tree and of `revision`'s (with `baseline_malloc`, or its
    own default allocator where None), for each case (name -> endpoint, parameters, photos):
    {name: (this tree, the baseline)}."""
    results = {}
    with ExitStack() as running:
        now = running.enter_context(running_gateway(stack.triton_grpc, gateway_env, "paired-now"))
        then_env = gateway_env | ({"FACECROP_MALLOC": baseline_malloc} if baseline_malloc else {})
        then = running.enter_context(
            running_gateway(stack.triton_grpc, then_env, "paired-baseline", baseline_tree(revision))
        )
        gateways = {"now": (now.url, now.process.pid), "then": (then.url, then.process.pid)}
        for name, (endpoint, params, photos) in cases.items():
            totals = measure(stack, gateways, photos, rounds, endpoint, params)
            results[name] = (totals["now"].per_request_ms()[0], totals["then"].per_request_ms()[0])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--revision", default=BASELINE, help="the tree before (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    folder = SHARED_FACES / "wider_val_native" / "images"
    paths = sorted(folder.glob("*.jpg"))[:12]
    jpegs = [path.read_bytes() for path in paths]
    crop = {"width": 256, "height": 256}
    cases = {
        "/v1/detect, ordinary JPEGs": ("/v1/detect", {}, jpegs),
        "/v1/crop 256x256, ordinary JPEGs": ("/v1/crop", crop, jpegs),
        "/v1/anonymize, ordinary JPEGs": ("/v1/anonymize", {}, jpegs),
        "/v1/crop 256x256, 12 MP JPEGs": ("/v1/crop", crop, phone_photos(6)),
        "URL form 256x256 face crop, ordinary JPEGs": (
            f"{URL_FORM}width=256,height=256,fit=cover,gravity=face",
            {},
            [path.name.encode() for path in paths],
        ),
    }
    with running_stack("paired") as stack:
        gateway_env = {"FACECROP_ORIGIN": str(folder)}
        results = before_and_after(stack, cases, gateway_env, args.rounds, args.revision, baseline_malloc=None)
    print(f"Gateway CPU ms per request, this tree against {args.revision}'s, rounds alternating:\n")
    print("| request | this tree ms | before ms | this / before |\n|---|---:|---:|---:|")
    for name, (now, then) in results.items():
        print(f"| {name} | {now:.1f} | {then:.1f} | {now / then:.3f}x |")


if __name__ == "__main__":
    main()
