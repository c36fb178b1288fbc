"""`facecrop batch --ray` against the default path, on one machine, side by side (part of `make bench`).

The same batch (shared photos, `--mode crop`) and one clip (`facecrop video`) run by the command
line as users run it, rounds alternating between the default path and `--ray` (embedded: a Ray
inside the command), each round into fresh outputs: wall time and the command's CPU (its own and
its children's: for `--ray`, the raylet, GCS and workers it starts and stops), and the paired
ratio (issue #54's target: overhead <= 1.15x). Then the same batch on a Cluster of a head and two
worker nodes on this machine: photos/s per worker node (on a 2-core machine that also runs the
service, a floor, not a node's worth on a real host). `python -m bench.ray` starts its own stack.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.verdicts import record, shown
from evaluation.images import labeled_set
from local_triton.processes import running_stack

FACECROP = [sys.executable, "-m", "facecrop_client.cli"]
OVERHEAD = 1.15


def photo_tree(folder: Path, count: int) -> Path:
    """`count` shared photos (wider_val_native, then facemask) in one folder."""
    tree = folder / "photos"
    tree.mkdir()
    sources = []
    for name in ("wider_val_native", "facemask"):
        images, truths = labeled_set(name)
        sources += [images / truth["image"] for truth in truths]
    for source in sources[:count]:
        shutil.copy(source, tree / source.name)
    return tree


def timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the command and every child it waited for) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run(command, check=True, capture_output=True, timeout=1800)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def paired(commands: dict[str, list[str]], output: Path, rounds: int) -> dict[str, np.ndarray]:
    """Each command `rounds` times, alternating, each into a fresh `output`: (wall, cpu) per run."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, command in commands.items():
            shutil.rmtree(output, ignore_errors=True) if output.is_dir() else output.unlink(missing_ok=True)
            output.with_name(output.name + ".manifest.jsonl").unlink(missing_ok=True)
            runs[name].append(timed(command))
    return {name: np.array(values) for name, values in runs.items()}


def report(gateway: str, photos: int = 180, rounds: int = 3) -> str:
    from ray.cluster_utils import Cluster

    from evaluation.clips import build_clip

    lines = [
        "| job | engine | wall s (median) | CPU s (median) | wall / default | CPU / default |",
        "|---|---|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        tree, out = photo_tree(folder, photos), folder / "out"
        clip = folder / "clip.mp4"
        build_clip(clip, frames=60)
        batch = [*FACECROP, "--url", gateway, "batch", str(tree), str(out), "--mode", "crop", "-q"]
        hidden = folder / "hidden.mp4"
        video = [*FACECROP, "--url", gateway, "video", str(clip), str(hidden), "-q"]
        jobs = {
            f"batch --mode crop, {photos} photos": ({"default": batch, "--ray": [*batch, "--ray"]}, out),
            "video, a 60-frame 640x360 clip": ({"default": video, "--ray": [*video, "--ray"]}, hidden),
        }
        ratios = []
        for job, (commands, output) in jobs.items():
            runs = paired(commands, output, rounds)
            for engine, values in runs.items():
                wall, cpu = np.median(values, axis=0)
                ratio = tuple(float(np.median(values[:, i] / runs["default"][:, i])) for i in (0, 1))
                lines.append(f"| {job} | {engine} | {wall:.1f} | {cpu:.1f} | {ratio[0]:.2f}x | {ratio[1]:.2f}x |")
                if engine == "--ray":
                    ratios.append((job, *ratio))
        empty = folder / "empty"
        empty.mkdir()
        start = np.median(
            [
                timed(
                    [
                        *FACECROP,
                        "--url",
                        gateway,
                        "batch",
                        str(empty),
                        str(folder / "none"),
                        "--mode",
                        "crop",
                        "-q",
                        "--ray",
                    ]
                )
                for _ in range(rounds)
            ],
            axis=0,
        )
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        try:
            for _ in range(2):
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            shutil.rmtree(out, ignore_errors=True)
            wall, _ = timed([*batch, "--ray", cluster.address])
        finally:
            cluster.shutdown()
    lines += [
        "",
        f"- Ray's start and stop alone (`--ray` on an empty folder): {start[0]:.1f} s wall, {start[1]:.1f} s CPU: "
        "the fixed cost of a job, whatever its size",
        f"- two worker nodes (a Cluster on this machine, beside the service): {photos / wall:.1f} photos/s, "
        f"{photos / wall / 2:.1f} per node ({photos} crops in {wall:.1f} s)",
    ]
    for job, wall_ratio, cpu_ratio in ratios:
        worst = max(wall_ratio, cpu_ratio)
        lines.append(f"- {job}: `--ray` against the default path, wall {wall_ratio:.2f}x, CPU {cpu_ratio:.2f}x")
        target = f"{job}: --ray embedded <= {OVERHEAD}x the default (wall and CPU)"
        record("#54", target, f"{shown(worst, OVERHEAD)}x", worst <= OVERHEAD)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photos", type=int, default=180)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with running_stack("bench-ray") as stack:
        print(report(stack.gateway, args.photos, args.rounds))


if __name__ == "__main__":
    main()
