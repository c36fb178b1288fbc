"""The anonymize report: faces hidden and area changed, ours against `deface`, on every labeled set.

For each photo of ../shared/faces' labeled sets, the service's faces (`/v1/detect`, every face
down to 2 %) are turned into the regions `/v1/anonymize` would hide with a given threshold,
margin and size rule (facecrop_hiding), and deface 1.5.0's regions at its defaults are
computed in-process (evaluation/hidden.py). A ground-truth face counts as hidden when 80 % of its
box lies inside the regions; "area" is the mean share of each photo inside them.

`make bench` and `python -m bench.anonymize` print the table for the endpoint's defaults and
preset=fast; `--candidates` adds the policies the defaults were chosen from, and the choice made
on every set with each set held out in turn.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import cv2
import numpy as np
import requests

from bench.verdicts import missing, record, shown
from bench.workload import report_command
from evaluation.hidden import deface_regions, hidden_faces, region_mask
from evaluation.images import labeled_set
from facecrop_hiding import plausible, regions
from gateway.params import ANONYMIZE, FAST_PRESET
from local_triton.processes import SHARED_FACES

SETS = ("wider_val_native", "wider_val_416sq", "facemask", "dlib_voc_faces")
DEFAULTS = {p.name: p.default for p in ANONYMIZE}


@dataclass(frozen=True)
class Policy:
    min_confidence: float
    margin: float
    detail: str
    size_rule: bool  # drop low-confidence faces far larger than the confident ones (facecrop_hiding.plausible)

    def label(self) -> str:
        rule = ", size rule" if self.size_rule else ""
        return f"{self.min_confidence:g} %, {self.margin:g}x, {self.detail}{rule}"


FAST = Policy(
    FAST_PRESET["detect.min_confidence"], FAST_PRESET["hiding.margin"], FAST_PRESET["detect.detail"], size_rule=True
)
LEAD, MAX_AREA = 0.03, 1.5  # issue #37: faces hidden >= deface's + LEAD within MAX_AREA times its area
TIE = 0.005  # faces hidden on the mean set: closer than this, the cheaper detail is chosen
DETAIL_COST = {"standard": 0, "auto": 1, "high": 2}


@dataclass
class Photo:
    truth: dict
    size: tuple[int, int]
    faces: dict[str, tuple[np.ndarray, np.ndarray]]  # detail -> (scores 0-1, corner boxes)
    deface: np.ndarray  # deface's mask


def load_photo(url: str, images: Path, truth: dict, details: set[str]) -> Photo:
    data = (images / truth["image"]).read_bytes()
    faces = {}
    for detail in details:
        response = requests.post(
            f"{url}/v1/detect",
            params={"min_confidence": "2", "max_faces": "1000", "detail": detail, "landmarks": "false"},
            data=data,
            headers={"Content-Type": "image/jpeg"},
            timeout=120,
        )
        response.raise_for_status()
        body = response.json()
        rects = [f["face_rectangle"] for f in body["faces"]]
        boxes = np.array([[r["x"], r["y"], r["x"] + r["width"], r["y"] + r["height"]] for r in rects], float)
        scores = np.array([f["confidence"] / 100 for f in body["faces"]])
        faces[detail] = (scores, boxes.reshape(-1, 4))
    size = (body["image"]["width"], body["image"]["height"])
    bgr = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    return Photo(truth, size, faces, region_mask(size, deface_regions(bgr)))


def score(photos: list[Photo], policy: Policy) -> tuple[float, float]:
    """(faces hidden, mean area share) under `policy`."""
    hidden = counted = 0
    areas = []
    for photo in photos:
        scores, boxes = photo.faces[policy.detail]
        keep = scores >= policy.min_confidence / 100
        if policy.size_rule:
            keep &= plausible(scores, boxes)
        mask = region_mask(photo.size, [tuple(r) for r in regions(boxes[keep], policy.margin, photo.size).tolist()])
        found, total = hidden_faces(photo.truth, mask)
        hidden, counted = hidden + found, counted + total
        areas.append(mask.mean())
    return hidden / max(counted, 1), float(np.mean(areas))


def deface_score(photos: list[Photo]) -> tuple[float, float]:
    results = [hidden_faces(p.truth, p.deface) for p in photos]
    return sum(h for h, _ in results) / max(sum(c for _, c in results), 1), float(
        np.mean([p.deface.mean() for p in photos])
    )


def report(url: str, candidates: bool = False) -> str:
    default = Policy(DEFAULTS["min_confidence"], DEFAULTS["margin"], DEFAULTS["detail"], size_rule=True)
    policies = [default, FAST]
    if candidates:
        policies += [
            Policy(t, m, d, True)
            for d in ("high", "auto")
            for t in (2, 3, 5, 8, 12, 16, 20, 25, 30)
            for m in (1.3, 1.4, 1.5, 1.6, 1.7)
        ]
    details = {p.detail for p in policies}
    lines = [
        "| set | policy | faces hidden | area | deface: hidden | deface: area | hidden - deface | area / deface |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    scores: dict[tuple[str, Policy], tuple[float, float, float]] = {}  # hidden, deface's, area / deface's
    for name in SETS:
        if not (SHARED_FACES / name).is_dir():
            continue
        images, truths = labeled_set(name)
        with ThreadPoolExecutor(2) as pool:
            photos = list(pool.map(partial(load_photo, url, images, details=details), truths))
        reference = deface_score(photos)
        for policy in dict.fromkeys(policies):
            hidden, area = score(photos, policy)
            scores[(name, policy)] = (hidden, reference[0], area / max(reference[1], 1e-9))
            label = policy.label() + {default: " (defaults)", FAST: " (preset=fast)"}.get(policy, "")
            lines.append(
                f"| {name} | {label} | {hidden:.3f} | {area:.3f} | {reference[0]:.3f} | {reference[1]:.3f} "
                f"| {hidden - reference[0]:+.3f} | {area / max(reference[1], 1e-9):.2f}x |"
            )
    sets = sorted({name for name, _ in scores})
    lead, area = anonymize_verdicts({n: scores[(n, default)] for n in sets}, SETS)
    record(
        "#37",
        f"/v1/anonymize defaults: faces hidden >= deface + {LEAD} on every photo set (1.000 where deface hides all)",
        *lead,
    )
    record("#37", f"/v1/anonymize defaults: area <= {MAX_AREA}x deface's on every set", *area)
    if candidates:
        lines += ["", *choice_lines(scores, sets, list(dict.fromkeys(policies)))]
    return "\n".join(lines)


def anonymize_verdicts(
    by_set: dict[str, tuple[float, float, float]], expected: Iterable[str]
) -> tuple[tuple[str, bool], tuple[str, bool]]:
    """The defaults' two verdicts "on every set" from each set's (hidden, deface's hidden, area /
    deface's), unrounded: a set of `expected` that was not measured (missing from ../shared/faces)
    is said, and neither verdict is met without it."""
    absent = missing(by_set, expected)
    unmeasured = [f"not measured: {', '.join(absent)}"] if absent else []
    short = {n: shortfall(hidden, deface) for n, (hidden, deface, _) in by_set.items()}
    below = [f"{n} {shown(s, 0, 3)}" for n, s in short.items() if s < 0]
    lead = "; ".join((["short of it: " + ", ".join(below)] if below else []) + unmeasured) or "on every set"
    largest = max((ratio for _, _, ratio in by_set.values()), default=float("nan"))
    area = "; ".join([f"largest {shown(largest, MAX_AREA)}x", *unmeasured])
    return (lead, not below and not absent and bool(by_set)), (area, largest <= MAX_AREA and not absent)


def shortfall(hidden: float, deface: float) -> float:
    """Faces hidden beyond the target: deface's + LEAD, or every face where deface hides them all."""
    return hidden - min(deface + LEAD, 1.0)


def chosen(scores: dict, sets: list[str], policies: list[Policy]) -> Policy:
    """Privacy first: of the policies within MAX_AREA times deface's area on every set, those
    meeting the target on the most sets, then hiding the most beyond it on the mean set (each set
    counts alike; within TIE of the most, the cheaper detail: high tiles every photo for what auto
    gains where faces are small), then in the worst set."""

    def rank(policy: Policy) -> tuple[bool, int, float, float]:
        rows = [scores[(name, policy)] for name in sets]
        short = [shortfall(hidden, deface) for hidden, deface, _ in rows]
        within = all(area <= MAX_AREA for _, _, area in rows)
        return within, sum(s >= 0 for s in short), float(np.mean(short)), min(short)

    ranks = {policy: rank(policy) for policy in policies}
    best = max(ranks.values())
    close = [p for p, r in ranks.items() if r[:2] == best[:2] and r[2] >= best[2] - TIE]
    return min(close, key=lambda p: (DETAIL_COST[p.detail], [-x for x in ranks[p][2:]]))


def choice_lines(scores: dict, sets: list[str], policies: list[Policy]) -> list[str]:
    best = chosen(scores, sets, policies)
    lines = [
        f"Chosen on every set: {best.label()}",
        "",
        "| held out | chosen on the others | there: hidden - deface, area / deface |",
    ]
    lines.append("|---|---|---|")
    for held_out in sets:
        policy = chosen(scores, [name for name in sets if name != held_out], policies)
        hidden, deface, area = scores[(held_out, policy)]
        lines.append(f"| {held_out} | {policy.label()} | {hidden - deface:+.3f}, {area:.2f}x |")
    return lines


def main() -> None:
    report_command(
        __doc__, "bench-anonymize", report, "--candidates", "also the policies the defaults were chosen from"
    )


if __name__ == "__main__":
    main()
