"""`facecrop video` against the `deface` command, side by side in one run (part of `make bench`).

Clips: ../shared/faces/video/parade_720p.mp4 (300 frames, a crowd, per-frame ground truth) and
the same clip scaled to 1080p (built once into build/bench-video/, its truth scaled with it).
Each tool runs end to end on each clip (decode, detect, hide, encode, audio): frames per second,
faces hidden (the shared README's rule: detail in the inner 60 % of a ground-truth box below
0.3 of the input's), frames leaving a face visible, and the share of pixels changed. Then
`--hold` (boxes carried over gaps) on the 720p clip. deface runs from its own virtual
environment (build/deface, bench/deface.lock), at its defaults with --keep-audio.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av

from bench.workload import report_command
from local_triton.processes import SHARED_FACES
from tests.hidden import VideoHiding, video_hiding

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "bench-video"
DEFACE_VENV = ROOT / "build" / "deface"
PARADE = SHARED_FACES / "video" / "parade_720p.mp4"


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


def scaled_clip(source: Path, truth: dict, height: int) -> tuple[Path, dict]:
    """`source` scaled to `height` lines (audio copied), and its truth scaled alike; built once."""
    factor = height / truth["height"]
    target = WORK / f"{source.stem.rsplit('_', 1)[0]}_{height}p.mp4"
    scaled = {**truth, "width": round(truth["width"] * factor), "height": height}
    scaled["frames"] = [{**f, "boxes": [[v * factor for v in b] for b in f["boxes"]]} for f in truth["frames"]]
    if not target.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        with av.open(str(source)) as container, av.open(str(target), "w") as output:
            video_in, audio_in = container.streams.video[0], container.streams.audio[0]
            video = output.add_stream("libx264", rate=video_in.average_rate, options={"crf": "20"})
            video.width, video.height, video.pix_fmt = scaled["width"], height, "yuv420p"
            video.codec_context.time_base = Fraction(video_in.time_base)
            audio = output.add_stream_from_template(audio_in)
            for packet in container.demux(video_in, audio_in):
                if packet.stream is audio_in:
                    if packet.dts is not None:
                        packet.stream = audio
                        output.mux(packet)
                    continue
                for frame in packet.decode():
                    big = frame.reformat(scaled["width"], height, interpolation="BICUBIC")
                    big.pts, big.time_base = frame.pts, frame.time_base
                    output.mux(video.encode(big))
            output.mux(video.encode(None))
    return target, scaled


def timed(command: list[str]) -> float:
    started = time.monotonic()
    subprocess.run(command, check=True, capture_output=True)
    return time.monotonic() - started


def run_tool(url: str, tool: str, clip: Path, truth: dict, extra: tuple[str, ...] = ()) -> Run:
    output = WORK / f"{clip.stem}.{tool.replace(' ', '_')}.mp4"
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


def report(url: str, holds: bool = True) -> str:
    if not PARADE.exists():
        return "(no ../shared/faces/video: video bench skipped)"
    WORK.mkdir(parents=True, exist_ok=True)
    truth = json.loads(PARADE.with_name("parade_720p_gt.json").read_text())
    clips = [(PARADE, truth), scaled_clip(PARADE, truth, 1080)]
    lines = [
        "| clip | tool | fps | faces hidden | frames with a face visible | pixels changed "
        "| fps / deface | hidden - deface | changed / deface |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for clip, clip_truth in clips:
        deface = run_tool(url, "deface", clip, clip_truth)
        runs = [run_tool(url, "facecrop video", clip, clip_truth), deface]
        if holds and clip == PARADE:
            runs += [run_tool(url, f"facecrop video --hold {n}", clip, clip_truth, ("--hold", str(n))) for n in (2, 4)]
        for run in runs:
            h = run.hiding
            lines.append(
                f"| {run.clip} | {run.tool} | {run.fps:.1f} | {h.share:.3f} | {h.exposed}/{h.frames} | {h.changed:.3f} "
                f"| {run.fps / deface.fps:.2f}x | {h.share - deface.hiding.share:+.3f} "
                f"| {h.changed / max(deface.hiding.changed, 1e-9):.2f}x |"
            )
    return "\n".join(lines)


def main() -> None:
    report_command(__doc__, "bench-video", report, "--holds", "also --hold 2 and 4 on the 720p clip")


if __name__ == "__main__":
    main()
