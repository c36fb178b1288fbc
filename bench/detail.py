"""`detail=standard`, `auto` and `high` side by side on every labeled set of ../shared/faces.

For each set, every photo is sent once per detail value (`/v1/detect`, one at a time, the
accuracy policy of tests/integration/test_accuracy.py: min_confidence 2, max_faces 1000) and
the report gives AP50, the share of photos the tiled pass ran on (X-Passes) and the mean and
p50 time per photo. `--sweep` adds the rule's threshold replayed offline: a photo counts as
tiled when the standard answer has a face (>= 50 %) whose shorter side, at the model's scale,
is below the threshold, and then takes the `high` answer.

`make bench` runs it on its stack; `python -m bench.detail` alone starts one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import requests

from bench.workload import report_command
from evaluation.ap50 import average_precision
from evaluation.images import labeled_set
from gateway.detection.passes import AUTO_MIN_SCORE, AUTO_SMALL_FACE
from gateway.detection.preprocess import scale_for, tiled_scale
from local_triton.processes import SHARED_FACES

DETAILS = ("standard", "auto", "high")
SETS = ("wider_val_native", "wider_val_416sq", "facemask", "dlib_voc_faces")
SWEEP = (16, 24, 32, 48)

Answer = list[tuple[float, list[float]]]  # (score, [x, y, w, h]) per face


@dataclass
class Runs:
    answers: dict[str, dict[str, Answer]] = field(default_factory=lambda: {d: {} for d in DETAILS})
    seconds: dict[str, list[float]] = field(default_factory=lambda: {d: [] for d in DETAILS})
    tiled: dict[str, list[bool]] = field(default_factory=lambda: {d: [] for d in DETAILS})


def run_set(url: str, name: str) -> tuple[list[dict], Runs]:
    """Every photo of the set through the service at each detail value, one request at a time."""
    images, truths = labeled_set(name)
    runs = Runs()
    session = requests.Session()
    for truth in truths:
        data = (images / truth["image"]).read_bytes()
        for detail in DETAILS:
            params = {"min_confidence": "2", "max_faces": "1000", "detail": detail}
            started = time.perf_counter()
            response = session.post(
                f"{url}/v1/detect", params=params, data=data, headers={"Content-Type": "image/jpeg"}, timeout=120
            )
            runs.seconds[detail].append(time.perf_counter() - started)
            response.raise_for_status()
            faces = response.json()["faces"]
            runs.answers[detail][truth["image"]] = [
                (f["confidence"], [f["face_rectangle"][k] for k in ("x", "y", "width", "height")]) for f in faces
            ]
            runs.tiled[detail].append("tiled" in response.headers["X-Passes"])
    return truths, runs


def replayed_rule(truths: list[dict], runs: Runs, threshold: float) -> tuple[dict[str, Answer], float]:
    """`auto` replayed from the standard and high answers with another threshold; the share tiled."""
    answers, tiled = {}, 0
    for truth in truths:
        width, height = truth["width"], truth["height"]
        standard = runs.answers["standard"][truth["image"]]
        scale = scale_for(height, width, 1024)
        small = any(s >= AUTO_MIN_SCORE * 100 and min(b[2], b[3]) * scale < threshold for s, b in standard)
        tiles = small and tiled_scale(height, width, 1024) is not None
        tiled += tiles
        answers[truth["image"]] = runs.answers["high" if tiles else "standard"][truth["image"]]
    return answers, tiled / len(truths)


def report(url: str, sweep: bool = False) -> str:
    lines = [
        "| set | photos | detail | AP50 | photos tiled | mean ms per photo | p50 ms |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    notes = []
    for name in SETS:
        if not (SHARED_FACES / name).is_dir():
            continue
        truths, runs = run_set(url, name)
        ap = {d: average_precision(truths, runs.answers[d]) for d in DETAILS}
        for detail in DETAILS:
            seconds = np.array(runs.seconds[detail]) * 1000
            lines.append(
                f"| {name} | {len(truths)} | {detail} | {ap[detail]:.3f} | {np.mean(runs.tiled[detail]):.0%} "
                f"| {seconds.mean():.0f} | {np.median(seconds):.0f} |"
            )
        mean = {d: np.mean(runs.seconds[d]) for d in DETAILS}
        p50 = {d: np.median(runs.seconds[d]) for d in DETAILS}
        notes.append(
            f"- {name}: auto - high AP50 **{ap['auto'] - ap['high']:+.3f}**; auto mean time "
            f"**{mean['auto'] / mean['high']:.2f}x** high's; auto p50 {p50['auto'] / p50['standard']:.2f}x standard's"
        )
        if sweep:
            for threshold in SWEEP:
                answers, share = replayed_rule(truths, runs, threshold)
                notes.append(
                    f"  - rule at {threshold} px (default {AUTO_SMALL_FACE}), replayed: "
                    f"AP50 {average_precision(truths, answers):.3f}, {share:.0%} tiled"
                )
    return "\n".join([*lines, "", *notes])


def main() -> None:
    report_command(__doc__, "bench-detail", report, "--sweep", "also replay the rule at other thresholds")


if __name__ == "__main__":
    main()
