"""`facecrop video` against the `deface` command, side by side in one run (part of `make bench`).

Clips: every clip of ../shared/faces/video (300 frames each, per-frame ground truth). Each tool
runs end to end on each clip (decode, detect, hide, encode, audio): frames per second, faces
hidden (the shared README's rule: detail in the inner 60 % of a ground-truth box below 0.3 of
the input's), frames leaving a face visible, and the area hidden: the mean share of each frame
inside the regions the hiding used (`facecrop video` says it; deface's are its own regions,
found in process by bench/video_tuning.py), as the photo rows of bench/anonymize.py measure it.
`facecrop video` at its defaults and with `--fast`; deface at its defaults with --keep-audio (its
own virtual environment, build/deface, bench/deface.lock).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.ray import FACECROP
from bench.verdicts import record, shown
from bench.video_tuning import WORK, deface_area
from bench.workload import report_command
from evaluation.hidden import VideoHiding, video_hiding
from local_triton.processes import SHARED_FACES

ROOT = Path(__file__).resolve().parent.parent
DEFACE_VENV = ROOT / "build" / "deface"
MARGIN, FAST_RATE, DEFAULT_RATE, MAX_AREA = 0.03, 2.0, 0.7, 1.5  # issue #37's targets, against deface


@dataclass(frozen=True)
class Run:
    clip: str
    tool: str
    seconds: float
    frames: int
    hiding: VideoHiding
    area: float  # mean share of each frame inside the hiding's regions

    @property
    def fps(self) -> float:
        return self.frames / self.seconds


def deface_command() -> Path:
    """The deface command, installed from bench/deface.lock into its own environment once."""
    command = DEFACE_VENV / "bin" / "deface"
    if not command.exists():
        subprocess.run([sys.executable, "-m", "venv", str(DEFACE_VENV)], check=True)
        pip = [
            str(DEFACE_VENV / "bin" / "pip"),
            "install",
            "--quiet",
            "--no-deps",
            "-r",
            str(ROOT / "bench" / "deface.lock"),
        ]
        subprocess.run(pip, check=True)
    return command


def run_tool(url: str, tool: str, clip: Path, truth: dict, extra: tuple[str, ...] = ()) -> Run:
    output = WORK / f"{clip.stem}.{tool.replace(' ', '_').replace('-', '')}.mp4"
    output.unlink(missing_ok=True)
    if tool == "deface":
        command = [str(deface_command()), "--keep-audio", "-o", str(output), str(clip)]
    else:
        command = [
            *FACECROP,
            "--url",
            url,
            "video",
            "-q",
            str(clip),
            str(output),
            *extra,
        ]
    started = time.monotonic()
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    seconds = time.monotonic() - started
    hiding = video_hiding(clip, output, truth)
    if tool == "deface":
        area = deface_area(clip.stem)
    else:
        area = float(re.search(r"([0-9.]+)% of the picture hidden", done.stderr).group(1)) / 100
    return Run(clip.stem, tool, seconds, hiding.frames, hiding, area)


def report(url: str, fast: bool = True) -> str:
    clips = sorted((SHARED_FACES / "video").glob("*.mp4"))
    if not clips:
        return "(no ../shared/faces/video: video bench skipped)"
    WORK.mkdir(parents=True, exist_ok=True)
    lines = [
        "| clip | tool | fps | faces hidden | frames with a face visible | area hidden "
        "| fps / deface | hidden - deface | area / deface |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    defaults, quick = [], []
    for clip in clips:
        truth = json.loads(clip.with_name(f"{clip.stem}_gt.json").read_text())
        deface = run_tool(url, "deface", clip, truth)
        runs = [run_tool(url, "facecrop video", clip, truth), deface]
        if fast:
            runs.append(run_tool(url, "facecrop video --fast", clip, truth, ("--fast",)))
        for run in runs:
            h = run.hiding
            rate, gain, area = run.fps / deface.fps, h.share - deface.hiding.share, run.area / max(deface.area, 1e-9)
            (defaults if run.tool == "facecrop video" else quick if run.tool.endswith("--fast") else []).append(
                (run.clip, rate, gain, area)
            )
            lines.append(
                f"| {run.clip} | {run.tool} | {run.fps:.1f} | {h.share:.3f} | {h.exposed}/{h.frames} | {run.area:.3f} "
                f"| {rate:.2f}x | {gain:+.3f} | {area:.2f}x |"
            )
    judge(defaults, "video defaults", gain=MARGIN, area=MAX_AREA, rate=DEFAULT_RATE)
    if quick:
        judge(quick, "video --fast", gain=-MARGIN, rate=FAST_RATE)
    return "\n".join(lines)


def judge(rows: list[tuple[str, float, float, float]], name: str, gain: float, rate: float, area: float = 0) -> None:
    """Record the verdicts on rows of (clip, frame rate, faces hidden and area, each against deface's)."""
    clip, lowest = min(((row[0], row[2]) for row in rows), key=lambda pair: pair[1])
    record(
        "#37",
        f"{name}: faces hidden >= deface {gain:+.2f} on every clip",
        f"worst {'+' if lowest >= 0 else ''}{shown(lowest, gain, 3)} ({clip})",
        lowest >= gain,
    )
    clip, slowest = min(((row[0], row[1]) for row in rows), key=lambda pair: pair[1])
    record(
        "#37", f"{name}: frame rate >= {rate}x deface's", f"slowest {shown(slowest, rate)}x ({clip})", slowest >= rate
    )
    if area:
        clip, largest = max(((row[0], row[3]) for row in rows), key=lambda pair: pair[1])
        record(
            "#37",
            f"{name}: area hidden <= {area}x deface's",
            f"largest {shown(largest, area)}x ({clip})",
            largest <= area,
        )


def main() -> None:
    report_command(__doc__, "bench-video", report, "--fast", "also `facecrop video --fast`")


if __name__ == "__main__":
    main()
