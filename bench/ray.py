"""`facecrop batch --ray` against the default path, on one machine, side by side (part of `make bench`).

The same batches (shared photos, `--mode crop`) and clips (`facecrop video`) run by the command line
as users run it, rounds alternating between the default path and `--ray` (embedded: a Ray inside the
command), each round into fresh outputs, each job at two sizes (a batch and three times it; a clip and
a clip three times as long). Measured: wall time and the machine's CPU (every process: the command,
Ray's raylet, GCS and workers, and the service, which does the same work for both engines). Ray costs
a fixed amount per job (its processes started and stopped) and then some per item: the two sizes
separate the two (the difference between them is the per-item cost), and issue #54's target
(overhead <= 1.15x) is judged per item, the fixed cost printed beside it. Then the batch on a Cluster
of a head and two worker nodes on this machine: photos/s per worker node (on a 2-core machine that
also runs the service, a floor, not a node's worth on a real host). `python -m bench.ray` starts its
own stack.
"""

from __future__ import annotations

import argparse
import os
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

FACECROP = [str(Path(sys.executable).with_name("facecrop"))]  # the console script pip installs, as users run it
OVERHEAD = 1.15
LARGER = 3  # the larger size of each job, in multiples of the smaller


def photo_tree(folder: Path, count: int, copies: int = 1) -> Path:
    """`count` shared photos (wider_val_native, then facemask) in one folder, each `copies` times
    under names of its own (the service does the same work for each copy)."""
    tree = folder / f"photos-{count}x{copies}"
    tree.mkdir()
    sources = []
    for name in ("wider_val_native", "facemask"):
        images, truths = labeled_set(name)
        sources += [images / truth["image"] for truth in truths]
    for source in sources[:count]:
        for copy in range(copies):
            shutil.copy(source, tree / f"{source.stem}-{copy}{source.suffix}")
    return tree


def machine_cpu() -> float:
    """CPU seconds this machine has spent busy (every process), from /proc/stat."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields[:8]) - fields[3] - fields[4]  # less idle and iowait
    return busy / os.sysconf("SC_CLK_TCK")


def timed(command: list[str]) -> tuple[float, float]:
    """Wall seconds and the machine's CPU seconds of one run."""
    cpu, started = machine_cpu(), time.monotonic()
    subprocess.run(command, check=True, capture_output=True, timeout=1800)
    return time.monotonic() - started, machine_cpu() - cpu


def paired(commands: dict[str, list[str]], output: Path, rounds: int) -> dict[str, np.ndarray]:
    """Each command `rounds` times, alternating, each into a fresh `output`: (wall, cpu) per run."""
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, command in commands.items():
            shutil.rmtree(output, ignore_errors=True) if output.is_dir() else output.unlink(missing_ok=True)
            output.with_name(output.name + ".manifest.jsonl").unlink(missing_ok=True)
            runs[name].append(timed(command))
    return {name: np.array(values) for name, values in runs.items()}


def report(gateway: str, photos: int = 180, rounds: int = 2) -> str:
    from ray.cluster_utils import Cluster

    from evaluation.clips import build_clip

    lines = [
        "| job | engine | wall s (median) | machine CPU s (median) | wall / default | CPU / default |",
        "|---|---|---:|---:|---:|---:|",
    ]
    costs = []
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        trees = [photo_tree(folder, photos), photo_tree(folder, photos, LARGER)]
        clips = [folder / "clip-60.mp4", folder / f"clip-{60 * LARGER}.mp4"]
        for clip, frames in zip(clips, (60, 60 * LARGER), strict=True):
            build_clip(clip, frames=frames)
        out, hidden = folder / "out", folder / "hidden.mp4"
        jobs = {
            ("batch --mode crop", "photo"): [
                (
                    f"{photos * copies} photos",
                    [*FACECROP, "--url", gateway, "batch", str(tree), str(out), "--mode", "crop", "-q"],
                    out,
                    photos * copies,
                )
                for tree, copies in zip(trees, (1, LARGER), strict=True)
            ],
            ("video, a 640x360 clip", "frame"): [
                (
                    f"{frames} frames",
                    [*FACECROP, "--url", gateway, "video", str(clip), str(hidden), "-q"],
                    hidden,
                    frames,
                )
                for clip, frames in zip(clips, (60, 60 * LARGER), strict=True)
            ],
        }
        for (job, unit), sizes in jobs.items():
            medians = {}
            for size, command, output, items in sizes:
                runs = paired({"default": command, "--ray": [*command, "--ray"]}, output, rounds)
                for engine, values in runs.items():
                    wall, cpu = np.median(values, axis=0)
                    medians[engine, items] = np.array([wall, cpu])
                    ratio = [float(np.median(values[:, i] / runs["default"][:, i])) for i in (0, 1)]
                    lines.append(
                        f"| {job}, {size} | {engine} | {wall:.1f} | {cpu:.1f} | {ratio[0]:.2f}x | {ratio[1]:.2f}x |"
                    )
            (small, large) = sorted({items for _, items in medians})
            # each engine's cost as a line through its two sizes: per item, and fixed per job
            per_item = {e: (medians[e, large] - medians[e, small]) / (large - small) for e in ("default", "--ray")}
            fixed = {e: medians[e, small] - per_item[e] * small for e in ("default", "--ray")}
            # the size from which a whole job on Ray is within OVERHEAD of the default's wall time (None:
            # no size, where Ray's cost per item is over OVERHEAD times the default's)
            margin = OVERHEAD * per_item["default"][0] - per_item["--ray"][0]
            within = max(0.0, (fixed["--ray"][0] - OVERHEAD * fixed["default"][0]) / margin) if margin > 0 else None
            costs.append(
                (job, unit, per_item["--ray"] / per_item["default"], fixed["--ray"] - fixed["default"], within)
            )
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
        try:
            for _ in range(2):
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            shutil.rmtree(out, ignore_errors=True)
            wall, _ = timed([*jobs["batch --mode crop", "photo"][0][1], "--ray", cluster.address])
        finally:
            cluster.shutdown()
    lines += [
        "",
        f"- two worker nodes (a Cluster on this machine, beside the service): {photos / wall:.1f} photos/s, "
        f"{photos / wall / 2:.1f} per node ({photos} crops in {wall:.1f} s)",
    ]
    for job, unit, ratio, fixed, within in costs:
        worst = float(max(ratio))
        lines.append(
            f"- {job}: `--ray` per {unit} (the larger job less the smaller) against the default path's, "
            f"wall {ratio[0]:.2f}x, CPU {ratio[1]:.2f}x; Ray's fixed cost per job "
            f"{fixed[0]:.1f} s wall, {fixed[1]:.1f} s CPU; a whole job within {OVERHEAD}x from "
            + (f"~{within:.0f} {unit}s" if within is not None else f"no size (Ray costs over {OVERHEAD}x per {unit})")
        )
        target = f"{job}: --ray embedded <= {OVERHEAD}x the default per {unit} (wall and CPU; fixed cost beside it)"
        record("#54", target, f"{shown(worst, OVERHEAD)}x", worst <= OVERHEAD)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photos", type=int, default=180)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with running_stack("bench-ray") as stack:
        print(report(stack.gateway, args.photos, args.rounds))


if __name__ == "__main__":
    main()
