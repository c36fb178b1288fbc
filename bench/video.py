"""`facecrop video` against the `deface` command, side by side in one run (part of `make bench`).

Clips: every clip of ../shared/faces/video (300 frames each, per-frame ground truth). Each tool
runs end to end on each clip (decode, detect, hide, encode, audio): frames per second, faces
hidden (the shared README's rule: detail in the inner 60 % of a ground-truth box below 0.3 of
the input's), frames leaving a face visible, and the share of pixels changed: `facecrop video`
at its defaults, deface at its defaults with --keep-audio (its own virtual environment,
build/deface, bench/deface.lock), and the documented higher-recall setting (HIGHER_RECALL).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.workload import report_command
from local_triton.processes import SHARED_FACES
from tests.hidden import VideoHiding, video_hiding

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "bench-video"
DEFACE_VENV = ROOT / "build" / "deface"
# The documented higher-recall setting (README, "Video"): the tiled pass where small faces are,
# and /v1/anonymize's threshold and margin.
HIGHER_RECALL = ("--detail", "auto", "--min-confidence", "8", "--margin", "1.5")


@dataclass(frozen=True)
class Run:
    clip: str
    tool: str
    seconds: float
    frames: int
    hiding: VideoHiding

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


def timed(command: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(command, check=True, capture_output=True)
    return time.monotonic() - started


def run_tool(url: str, tool: str, clip: Path, truth: dict, extra: tuple[str, ...] = ()) -> Run:
    output = WORK / f"{clip.stem}.{tool.replace(' ', '_').replace('-', '')}.mp4"
    output.unlink(missing_ok=True)
    if tool == "deface":
        command = [str(deface_command()), "--keep-audio", "-o", str(output), str(clip)]
    else:
        command = [
            sys.executable,
            "-m",
            "facecrop_client.cli",
            "--url",
            url,
            "video",
            "-q",
            str(clip),
            str(output),
            *extra,
        ]
    seconds = timed(command)
    hiding = video_hiding(clip, output, truth)
    return Run(clip.stem, tool, seconds, hiding.frames, hiding)


def report(url: str, higher_recall: bool = True) -> str:
    clips = sorted((SHARED_FACES / "video").glob("*.mp4"))
    if not clips:
        return "(no ../shared/faces/video: video bench skipped)"
    WORK.mkdir(parents=True, exist_ok=True)
    lines = [
        "| clip | tool | fps | faces hidden | frames with a face visible | pixels changed "
        "| fps / deface | hidden - deface | changed / deface |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for clip in clips:
        truth = json.loads(clip.with_name(f"{clip.stem}_gt.json").read_text())
        deface = run_tool(url, "deface", clip, truth)
        runs = [run_tool(url, "facecrop video", clip, truth), deface]
        if higher_recall:
            runs.append(run_tool(url, f"facecrop video {' '.join(HIGHER_RECALL)}", clip, truth, HIGHER_RECALL))
        for run in runs:
            h = run.hiding
            lines.append(
                f"| {run.clip} | {run.tool} | {run.fps:.1f} | {h.share:.3f} | {h.exposed}/{h.frames} | {h.changed:.3f} "
                f"| {run.fps / deface.fps:.2f}x | {h.share - deface.hiding.share:+.3f} "
                f"| {h.changed / max(deface.hiding.changed, 1e-9):.2f}x |"
            )
    return "\n".join(lines)


def main() -> None:
    report_command(__doc__, "bench-video", report, "--higher-recall", f"also {' '.join(HIGHER_RECALL)}")


if __name__ == "__main__":
    main()
