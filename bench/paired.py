"""Before and after, measured in one run: the gateway of an earlier commit (a git worktree under
build/) beside this checkout's, on the same Triton, rounds alternating between the two so the
machine's drift falls on both alike (bench/cpu.py's `measure`). A claim that something is not
slower than before is only made from this.

BASELINE is the tree the work on issues #34-#38 started from; each tree runs as it runs by default,
the baseline with the allocator settings it shipped with (jemalloc with its 1 s decay).
"""

from __future__ import annotations

import subprocess
from contextlib import ExitStack
from pathlib import Path

from bench.cpu import measure
from local_triton import BUILD_DIR, PROJECT_ROOT
from local_triton.processes import Stack, running_gateway

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
) -> dict[str, tuple[float, float]]:
    """Gateway CPU ms per request of this tree and of `revision`'s, for each case (name -> endpoint,
    parameters, photos): {name: (this tree, the baseline)}."""
    results = {}
    with ExitStack() as running:
        now = running.enter_context(running_gateway(stack.triton_grpc, gateway_env, "paired-now"))
        then_env = {**gateway_env, "FACECROP_MALLOC": BASELINE_MALLOC}
        then = running.enter_context(
            running_gateway(stack.triton_grpc, then_env, "paired-baseline", baseline_tree(revision))
        )
        gateways = {"now": (now.url, now.process.pid), "then": (then.url, then.process.pid)}
        for name, (endpoint, params, photos) in cases.items():
            totals = measure(stack, gateways, photos, rounds, endpoint, params)
            results[name] = (totals["now"].per_request_ms()[0], totals["then"].per_request_ms()[0])
    return results
