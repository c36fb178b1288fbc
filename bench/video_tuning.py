"""How `facecrop video`'s defaults are chosen: on every shared clip, and held out one at a time.

Every frame of each clip of ../shared/faces/video is sent to /v1/detect once as `facecrop video`
sends it (scaled to the standard pass, every face down to 2 %), and once whole with
detail=high (the tiled pass); the answers are kept in build/bench-video/. Each policy (a
threshold, a margin, a hold, and how often a frame is sent whole with detail=auto, which tiles it
where the standard pass sees small faces) is then applied to the decoded frames with the client's
own hiding code, encoded as the client encodes (compression puts back some of the detail a blur
took from small faces), and judged by the shared README's rule (detail left in the inner 60 % of
each ground-truth box), and by the area it hides: the mean share of each frame inside the regions
the hiding used (as the photo rows of bench/anonymize.py measure it). deface's faces hidden and
frame rate are its end-to-end figures from the shared README's run; its area is measured the same
way, from its own regions (deface's CenterFace at its defaults, in process: evaluation/hidden.py).

`python -m bench.video_tuning` (`--fresh`: detect again) prints every policy on every clip, the
policy chosen on all four, and, for each clip, the policy chosen on the other three with its
figures on the held-out one.
"""

from __future__ import annotations

import itertools
import json
import pickle
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

from bench.workload import report_command
from evaluation.hidden import DETAIL_KEPT, INNER, deface_regions, detail, region_mask
from facecrop_client import Client
from facecrop_client.presets import FAST as PRESET_FAST
from facecrop_client.video import CRF, ENCODER_OPTIONS, ENCODERS, detect_frame, held
from facecrop_hiding import Hiding, hidden_share, hide_faces, plausible
from local_triton.processes import SHARED_FACES

WORK = Path(__file__).resolve().parent.parent / "build" / "bench-video"  # detections and areas, cached
CLIPS = ("parade_720p", "meeting_720p", "masks_720p", "festival_1080p")
FLOOR = 2.0  # percent: every face the policies could want
# deface 1.5.0 at its defaults, end to end on this machine (../shared/faces/README.md): faces
# hidden, frames per second
DEFACE = {
    "parade_720p": (0.649, 4.6),
    "meeting_720p": (0.877, 6.2),
    "masks_720p": (0.885, 3.9),
    "festival_1080p": (0.804, 1.7),
}
TARGET_HIDDEN, TARGET_AREA = 0.03, 1.5  # at least deface + 0.03 hidden, at most 1.5x its area
SMALL_FACE = 24  # gateway/detection/passes.py's AUTO_SMALL_FACE: detail=auto tiles where a sure face is smaller
DETECT_SIDE = 1024  # what the client scales a frame to for the standard pass


@dataclass(frozen=True)
class Policy:
    threshold: float  # percent
    margin: float
    hold: int
    tile_every: int  # every so many frames sent whole with detail=auto (0: never)

    def label(self) -> str:
        passes = {0: "standard only", 1: "auto every frame"}.get(self.tile_every, f"auto every {self.tile_every}")
        return f"{self.threshold:g} %, {self.margin:g}x, hold {self.hold}, {passes}"


def frames(clip: Path) -> Iterator[np.ndarray]:
    with av.open(str(clip)) as container:
        for frame in container.decode(video=0):
            yield frame.to_ndarray(format="bgr24")


def detections(url: str, name: str, fresh: bool = False) -> dict[str, list[np.ndarray]]:
    """Per frame, [K, 5] boxes (x1, y1, x2, y2, score) of the standard pass and of detail=high; cached."""
    cache = WORK / f"{name}.detections.pkl"
    if cache.exists() and not fresh:
        return pickle.loads(cache.read_bytes())
    client = Client(url)
    found: dict[str, list[np.ndarray]] = {"standard": [], "tiled": []}
    with av.open(str(SHARED_FACES / "video" / f"{name}.mp4")) as container, ThreadPoolExecutor(4) as pool:
        decoded = list(container.decode(video=0))
        for detail in ("standard", "high"):
            params = {"min_confidence": FLOOR, "max_faces": 1000, "landmarks": False, "detail": detail}
            answers = pool.map(lambda frame, p=params: detect_frame(client, frame, p)[1], decoded)
            found["standard" if detail == "standard" else "tiled"] = list(answers)
    WORK.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(pickle.dumps(found))
    return found


def tiles(standard: np.ndarray, frame_side: int) -> bool:
    """Whether detail=auto tiles a frame: a face of at least 50 % under SMALL_FACE pixels of the
    standard pass's input (the frame scaled to DETECT_SIDE)."""
    sure = standard[standard[:, 4] >= 0.5]
    sides = np.minimum(sure[:, 2] - sure[:, 0], sure[:, 3] - sure[:, 1]) * DETECT_SIDE / frame_side
    return bool((sides < SMALL_FACE).any())


def passes_per_frame(found: dict[str, list[np.ndarray]], policy: Policy, frame_side: int) -> list[bool]:
    """Per frame, whether `policy` has it tiled."""
    return [
        bool(policy.tile_every) and i % policy.tile_every == 0 and tiles(standard, frame_side)
        for i, standard in enumerate(found["standard"])
    ]


def boxes_per_frame(found: dict[str, list[np.ndarray]], policy: Policy, frame_side: int) -> list[np.ndarray]:
    """What `policy` hides in each frame (corner boxes with scores)."""
    tiled = passes_per_frame(found, policy, frame_side)
    chosen = [found["tiled" if t else "standard"][i] for i, t in enumerate(tiled)]
    chosen = [b[b[:, 4] >= policy.threshold / 100] for b in chosen]
    if policy.hold:
        chosen = [
            held(chosen[max(0, i - policy.hold) : i], b, chosen[i + 1 : i + 1 + policy.hold])
            for i, b in enumerate(chosen)
        ]
    return [b[plausible(b[:, 4], b[:, :4])] if len(b) else b for b in chosen]


def deface_area(name: str) -> float:
    """deface's mean share of each frame inside its regions, at its defaults (cached)."""
    cache = WORK / f"{name}.deface-area.json"
    if cache.exists():
        return json.loads(cache.read_text())["area"]
    areas = []
    for frame in frames(SHARED_FACES / "video" / f"{name}.mp4"):
        size = (frame.shape[1], frame.shape[0])
        areas.append(float(region_mask(size, deface_regions(frame)).mean()))
    WORK.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"area": float(np.mean(areas))}))
    return float(np.mean(areas))


def encoded_again(frames_bgr: list[np.ndarray]) -> Iterator[np.ndarray]:
    """The frames through the client's encoder (libx264 at its defaults) and back, in grey: what a
    viewer of the output sees (compression puts back some detail a blur took out of small faces)."""
    height, width = frames_bgr[0].shape[:2]
    encoder = av.CodecContext.create(ENCODERS["h264"], "w")
    encoder.width, encoder.height, encoder.pix_fmt = width, height, "yuv420p"
    encoder.time_base = Fraction(1, 25)
    encoder.options = {"crf": str(CRF), **ENCODER_OPTIONS[ENCODERS["h264"]]}
    decoder = av.CodecContext.create("h264", "r")
    for index, pixels in enumerate([*frames_bgr, None]):
        frame = None
        if pixels is not None:
            frame = av.VideoFrame.from_ndarray(pixels, format="bgr24")
            frame.pts = index
        for packet in encoder.encode(frame):
            for decoded in decoder.decode(packet):
                yield decoded.to_ndarray(format="gray")
    for decoded in decoder.decode(None):
        yield decoded.to_ndarray(format="gray")


def judge(
    name: str, found: dict[str, list[np.ndarray]], policies: list[Policy]
) -> dict[Policy, tuple[float, float, float]]:
    """Each policy's (faces hidden, mean share of each frame hidden, share of frames tiled) on clip
    `name`: its frames hidden with the client's code and encoded as the client encodes them, then
    judged by the README's rule."""
    truth = json.loads((SHARED_FACES / "video" / f"{name}_gt.json").read_text())
    originals = list(frames(SHARED_FACES / "video" / f"{name}.mp4"))
    grays = [cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY) for frame in originals]
    edge = (1 - INNER) / 2
    inner = []  # per frame: (rows, columns, the input's detail) of each counted ground-truth face
    for gray, labels in zip(grays, truth["frames"]):
        faces = []
        for x, y, w, h in labels["boxes"]:
            rows = slice(max(0, round(y + edge * h)), round(y + (1 - edge) * h))
            columns = slice(max(0, round(x + edge * w)), round(x + (1 - edge) * w))
            reference = detail(gray[rows, columns])
            if reference > 0:
                faces.append((rows, columns, reference))
        inner.append(faces)
    counted = sum(len(faces) for faces in inner)
    size = (originals[0].shape[1], originals[0].shape[0])
    results = {}
    for policy in policies:
        hiding = Hiding(margin=policy.margin)
        boxes = boxes_per_frame(found, policy, max(size))
        shown = [hide_faces(frame.copy(), b[:, :4], hiding) if len(b) else frame for frame, b in zip(originals, boxes)]
        hidden = 0
        for after, faces in zip(encoded_again(shown), inner):
            hidden += sum(detail(after[rows, columns]) < DETAIL_KEPT * ref for rows, columns, ref in faces)
        area = float(np.mean([hidden_share(b[:, :4], hiding, size) for b in boxes]))
        tiled = float(np.mean(passes_per_frame(found, policy, max(size))))
        results[policy] = (hidden / max(counted, 1), area, tiled)
    return results


# `facecrop video --fast`: the standard pass only
FAST = Policy(PRESET_FAST.min_confidence, PRESET_FAST.margin, PRESET_FAST.hold, PRESET_FAST.tile_every)


def candidates() -> list[Policy]:
    return [FAST] + [
        Policy(threshold, margin, 2, every)
        for threshold, margin, every in itertools.product((5, 8, 12), (1.3, 1.4, 1.5), (0, 1, 2, 3))
        if Policy(threshold, margin, 2, every) != FAST
    ]


def meets(name: str, hidden: float, area: float, deface: dict[str, float]) -> bool:
    return hidden >= DEFACE[name][0] + TARGET_HIDDEN and area <= TARGET_AREA * deface[name]


def chosen(scores: dict, clips: list[str], policies: list[Policy], deface: dict[str, float]) -> Policy:
    """The default for `clips`: privacy first. Of the policies hiding at least TARGET_HIDDEN more
    than deface on every clip within TARGET_AREA times its area, the one tiling the fewest frames
    (deface's frame rate is the bound there), then hiding the most in its worst clip; where none
    does, the one hiding the most in its worst clip within the area."""

    def rank(policy: Policy) -> tuple[bool, bool, float, float]:
        rows = [scores[(clip, policy)] for clip in clips]
        within = all(row[1] <= TARGET_AREA * deface[clip] for clip, row in zip(clips, rows))
        worst = min(row[0] - DEFACE[clip][0] for clip, row in zip(clips, rows))
        tiled = max(row[2] for row in rows)
        return within, within and worst >= TARGET_HIDDEN, -tiled if worst >= TARGET_HIDDEN else worst, worst

    return max(policies, key=rank)


def report(url: str, fresh: bool = False) -> str:
    policies = candidates()
    found = {name: detections(url, name, fresh) for name in CLIPS}
    deface = {name: deface_area(name) for name in CLIPS}
    scores: dict[tuple[str, Policy], tuple[float, float, float]] = {}
    with ProcessPoolExecutor(2) as pool:
        for name, judged in zip(CLIPS, pool.map(judge, CLIPS, [found[n] for n in CLIPS], [policies] * len(CLIPS))):
            scores |= {(name, policy): result for policy, result in judged.items()}
    lines = ["| policy | " + " | ".join(f"{c}: hidden, area / deface, frames tiled" for c in CLIPS) + " |"]
    lines.append("|---|" + "---|" * len(CLIPS))
    for policy in policies:
        cells = []
        for c in CLIPS:
            hidden, area, tiled = scores[(c, policy)]
            ok = " ok" if meets(c, hidden, area, deface) else ""
            cells.append(f"{hidden:.3f} ({hidden - DEFACE[c][0]:+.3f}), {area / deface[c]:.2f}x, {tiled:.0%}{ok}")
        lines.append(f"| {policy.label()} | " + " | ".join(cells) + " |")
    best = chosen(scores, list(CLIPS), policies, deface)
    lines += ["", f"Chosen on all four: {best.label()}", "", "| held out | chosen on the other three | there |"]
    lines.append("|---|---|---|")
    for held_out in CLIPS:
        policy = chosen(scores, [c for c in CLIPS if c != held_out], policies, deface)
        hidden, area, tiled = scores[(held_out, policy)]
        verdict = "meets both" if meets(held_out, hidden, area, deface) else "misses"
        lines.append(
            f"| {held_out} | {policy.label()} | {hidden:.3f} ({hidden - DEFACE[held_out][0]:+.3f}), "
            f"{area / deface[held_out]:.2f}x deface's area, {tiled:.0%} tiled: {verdict} |"
        )
    lines += ["", "deface's area (its regions, in process): " + ", ".join(f"{c} {a:.3f}" for c, a in deface.items())]
    return "\n".join(lines)


def main() -> None:
    report_command(__doc__, "bench-video-tuning", report, "--fresh", "detect every frame again (else the cache)")


if __name__ == "__main__":
    main()
