"""Which face models at which `detail`, and how their faces are fused, chosen on every labeled set.

Each model runs alone, in-process (onnxruntime, the served files and the gateway's own
pipeline: decoding, canonical shapes, tiles, decoders, NMS), on every photo of every set of
../shared/faces at each detail value, with the accuracy policy (min_confidence 2). Since the
gateway fuses each model's own suppressed faces, every fusion is then replayed on those lists:
- `union`: both lists pooled, one NMS;
- `wbf`: weighted box fusion of the two lists, a pair scoring the higher of its two scores
  (gateway/detection/fusion.py, the gateway's), its match IoU chosen on three sets and judged
  on the fourth, each set held out in turn;
- `wbf, mean, alone x0.5`: the same boxes, a pair scoring the mean of its two scores and a face
  one model alone found half its score (as in Solovyev et al.), its parameters held out alike;
- `calibrated`: each model's scores mapped to the precision they reach on the three other sets
  (isotonic), then pooled with one NMS.
The report gives AP50 per set x detail for each model alone and each fusion (held out), the
CPU per photo of each model, and false faces: on the faceless product photos (bench/faceless.py)
and on 128 px avatars cut around each face of `dlib_voc_faces`, the faces reported at the default
min_confidence (50 %) that overlap no labeled face, for each model and the fusion.
`python -m bench.detectors [--threads N] [--cached]` (`--cached` reuses the runs kept in
build/detectors/ by an earlier `--cached` run, to try other fusions).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, replace
from functools import partial
from unittest import mock

import cv2
import numpy as np

from bench.faceless import products
from bench.onnx_model import OnnxModel
from bench.verdicts import record, shown
from evaluation.ap50 import average_precision, iou_matrix
from evaluation.images import labeled_set
from gateway.config import Settings
from gateway.detection import fusion, yunet
from gateway.detection.detections import Detections
from gateway.detection.detectors import serve
from gateway.detection.postprocess import NMS_IOU_THRESHOLD, nms
from gateway.params import DetectOptions
from gateway.processing.answer import faces_in
from local_triton import BUILD_DIR

SETS = ("wider_val_native", "wider_val_416sq", "facemask", "dlib_voc_faces")
DETAILS = ("fast", "standard", "high")
MODELS = ("retinaface", "yunet")
MATCH_IOUS = (0.3, 0.4, 0.5, 0.6)
CACHE = BUILD_DIR / "detectors"

Faces = dict[str, Detections]  # image name -> one model's faces


@dataclass(frozen=True)
class Run:
    faces: Faces
    cpu_s: float  # process time per photo


def run_model(model: str, detail: str, set_name: str, threads: int, cached: bool = False) -> Run:
    """One model alone on every photo of a set (kept in build/detectors/, and reused, if `cached`);
    YuNet's scores raw (uncalibrated: the report calibrates them on the other sets)."""
    path = CACHE / f"{model}-{detail}-{set_name}.npz"
    if cached and path.is_file():
        stored = np.load(path, allow_pickle=True)
        return Run(stored["faces"].item(), float(stored["cpu_s"]))
    settings = Settings(detectors=(model,))
    detectors = serve((model,), settings.wire_format, lambda wire: OnnxModel(wire, threads))
    options = DetectOptions(min_confidence=2, max_faces=1000, detail=detail)
    images, truths = labeled_set(set_name)
    faces: Faces = {}
    started = time.process_time()
    with mock.patch.object(yunet, "CALIBRATED_SCORES", yunet.RAW_SCORES):
        for truth in truths:
            data = (images / truth["image"]).read_bytes()
            faces[truth["image"]] = faces_in(data, detectors, settings, options).faces
    cpu_s = (time.process_time() - started) / len(truths)
    if cached:
        CACHE.mkdir(parents=True, exist_ok=True)
        np.savez(path, faces=np.array(faces, dtype=object), cpu_s=cpu_s)
    return Run(faces, cpu_s)


def ap(set_name: str, faces: Faces) -> float:
    _, truths = labeled_set(set_name)
    found = {
        name: [(float(s), [x1, y1, x2 - x1, y2 - y1]) for s, (x1, y1, x2, y2) in zip(d.scores, d.boxes.tolist())]
        for name, d in faces.items()
    }
    return average_precision(truths, found)


def union(a: Detections, b: Detections) -> Detections:
    pooled = Detections.concatenate([a, b])
    return pooled[nms(pooled.boxes, pooled.scores, NMS_IOU_THRESHOLD)]


def wbf(a: Detections, b: Detections, match_iou: float) -> Detections:
    """Weighted box fusion, a pair scoring the higher of its two scores."""
    return fusion.fuse_pair(a, b, match_iou, np.maximum)


def wbf_either(a: Detections, b: Detections, match_iou: float) -> Detections:
    """The gateway's (gateway/detection/fusion.py): the same boxes, a pair scoring 1 - (1 - a)(1 - b)."""
    return fusion.fuse_pair(a, b, match_iou, fusion.either)


def wbf_mean(a: Detections, b: Detections, match_iou: float) -> Detections:
    """Solovyev et al.'s scores on the same boxes: a pair's mean, a face one model alone found halved."""
    in_a, in_b = fusion.matches(a, b, match_iou)
    weights_a, weights_b = a.scores[in_a, None], b.scores[in_b, None]
    only_a, only_b = np.setdiff1d(np.arange(len(a)), in_a), np.setdiff1d(np.arange(len(b)), in_b)
    scores = np.concatenate([(a.scores[in_a] + b.scores[in_b]) / 2, a.scores[only_a] / 2, b.scores[only_b] / 2])
    pairs = (a.boxes[in_a] * weights_a + b.boxes[in_b] * weights_b) / (weights_a + weights_b)
    boxes = np.concatenate([pairs, a.boxes[only_a], b.boxes[only_b]]).reshape(-1, 4)
    return Detections(scores, boxes, np.zeros((len(scores), 5, 2), np.float32))


FUSIONS = {"wbf, the higher": wbf, "wbf, either (the gateway's)": wbf_either, "wbf, mean, alone x0.5": wbf_mean}


def precision_curve(runs: list[tuple[str, Faces]]) -> tuple[np.ndarray, np.ndarray]:
    """Isotonic map from a model's score to the share of its faces at that score that hit an
    unmatched ground-truth face (IoU 0.5), fitted on `runs` (set name, faces)."""
    scores, hits = [], []
    for set_name, faces in runs:
        _, truths = labeled_set(set_name)
        for truth in truths:
            found = faces[truth["image"]]
            boxes = np.asarray(truth["boxes"], float).reshape(-1, 4)
            if not len(found):
                continue
            corners = np.hstack([found.boxes[:, :2], found.boxes[:, 2:] - found.boxes[:, :2]])
            overlaps = iou_matrix(corners, boxes) if len(boxes) else np.zeros((len(found), 0))
            matched = np.zeros(len(boxes), bool)
            for i in np.argsort(-found.scores):
                best = int(np.argmax(overlaps[i])) if len(boxes) else -1
                hit = best >= 0 and overlaps[i, best] >= 0.5 and not matched[best]
                if hit:
                    matched[best] = True
                scores.append(found.scores[i])
                hits.append(hit)
    order = np.argsort(scores)
    xs, ys = np.asarray(scores)[order], np.asarray(hits, float)[order]
    return xs, pool_adjacent_violators(ys)


def pool_adjacent_violators(values: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence nearest to `values` in least squares."""
    blocks: list[list[float]] = []  # [mean, count]
    for value in values:
        blocks.append([float(value), 1.0])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            mean, count = blocks.pop()
            blocks[-1] = [
                (blocks[-1][0] * blocks[-1][1] + mean * count) / (blocks[-1][1] + count),
                blocks[-1][1] + count,
            ]
    return np.repeat([b[0] for b in blocks], [int(b[1]) for b in blocks])


def calibration(runs: dict[str, Faces], yunet_runs: dict[str, Faces]) -> np.ndarray:
    """yunet.CALIBRATED_SCORES fitted on the sets of `runs` (RetinaFace's faces per set) and
    `yunet_runs` (YuNet's, raw scores): each knot of yunet.RAW_SCORES mapped to the lowest
    RetinaFace score whose precision is at least YuNet's there; strictly increasing."""
    retina_scores, retina_precision = precision_curve(list(runs.items()))
    yunet_precision = np.interp(yunet.RAW_SCORES, *precision_curve(list(yunet_runs.items())))
    index = np.minimum(np.searchsorted(retina_precision, yunet_precision), len(retina_scores) - 1)
    knots = np.maximum.accumulate(retina_scores[index].astype(np.float64))
    knots[0], knots[-1] = 0.0, 1.0
    for i in range(1, len(knots) - 1):  # strictly increasing (YuNet's own order kept), below 1
        knots[i] = min(max(knots[i], knots[i - 1] + 1e-4), 1 - 1e-4 * (len(knots) - 1 - i))
    return np.round(knots, 4)


def on_one_scale(faces: Faces, knots: np.ndarray) -> Faces:
    """YuNet's raw-scored faces with `knots` as the calibration."""
    return {
        name: replace(d, scores=np.interp(d.scores, yunet.RAW_SCORES, knots).astype(np.float32))
        for name, d in faces.items()
    }


def fused_faces(method, a: Faces, b: Faces) -> Faces:
    return {name: method(a[name], b[name]) for name in a}


def worst_ratio(fused: dict, single: dict, match_iou: float, sets: list[str]) -> float:
    """The lowest ratio, over `sets`, of a fusion's AP to the better single model's."""
    return min(fused[match_iou, s] / max(single["retinaface", s], single["yunet", s]) for s in sets)


def report(threads: int, cached: bool = False) -> str:
    runs = {(m, d, s): run_model(m, d, s, threads, cached) for m in MODELS for d in DETAILS for s in SETS}
    standard = {m: {s: runs[m, "standard", s].faces for s in SETS} for m in MODELS}
    knots = calibration(standard["retinaface"], standard["yunet"])
    held_knots = {
        held: calibration(
            {s: f for s, f in standard["retinaface"].items() if s != held},
            {s: f for s, f in standard["yunet"].items() if s != held},
        )
        for held in SETS
    }
    lines = [
        "| detail | set | RetinaFace | YuNet | union (one NMS) | "
        + " | ".join(f"{name} (held out)" for name in FUSIONS)
        + " | wbf, either, YuNet uncalibrated |",
        "|---|---|---|---|---|" + "---|" * len(FUSIONS) + "---|",
    ]
    served: dict[str, dict[str, float]] = {}  # detail -> set -> AP of what the gateway runs there
    better: dict[str, dict[str, float]] = {}  # the better model alone
    retina: dict[str, dict[str, float]] = {}  # RetinaFace alone: the gateway before YuNet
    for detail in DETAILS:
        raw = {m: {s: runs[m, detail, s].faces for s in SETS} for m in MODELS}
        single = {(m, s): ap(s, raw[m][s]) for m in MODELS for s in SETS}
        # every set's YuNet faces calibrated on the three other sets: each fusion is judged held out
        scaled = {s: on_one_scale(raw["yunet"][s], held_knots[s]) for s in SETS}
        fused = {
            name: {
                (iou, s): ap(s, fused_faces(partial(method, match_iou=iou), raw["retinaface"][s], scaled[s]))
                for iou in MATCH_IOUS
                for s in SETS
            }
            for name, method in FUSIONS.items()
        }
        for held in SETS:
            training = [s for s in SETS if s != held]
            chosen = {
                name: max(MATCH_IOUS, key=lambda iou, table=table: worst_ratio(table, single, iou, training))
                for name, table in fused.items()
            }
            pooled = ap(held, fused_faces(union, raw["retinaface"][held], scaled[held]))
            gateway_fusion = partial(wbf_either, match_iou=fusion.MATCH_IOU)
            uncalibrated = ap(held, fused_faces(gateway_fusion, raw["retinaface"][held], raw["yunet"][held]))
            held_out = " | ".join(f"{fused[name][chosen[name], held]:.3f} (IoU {chosen[name]})" for name in FUSIONS)
            lines.append(
                f"| {detail} | {held} | {single['retinaface', held]:.3f} | {single['yunet', held]:.3f} "
                f"| {pooled:.3f} | {held_out} | {uncalibrated:.3f} |"
            )
        served[detail] = {
            s: single["yunet", s] if detail == "fast" else fused["wbf, either (the gateway's)"][fusion.MATCH_IOU, s]
            for s in SETS
        }
        better[detail] = {s: max(single["retinaface", s], single["yunet", s]) for s in SETS}
        retina[detail] = {s: single["retinaface", s] for s in SETS}
    detection_verdicts(served, better, retina)
    cpu = ["| model | " + " | ".join(DETAILS) + " |", "|---|" + "---|" * len(DETAILS)]
    for m in MODELS:
        per_detail = [f"{np.mean([runs[m, d, s].cpu_s for s in SETS]) * 1000:.0f} ms" for d in DETAILS]
        cpu.append(f"| {m} | " + " | ".join(per_detail) + " |")
    in_code = "as in the code" if np.allclose(knots, yunet.CALIBRATED_SCORES, atol=1e-4) else "NOT the code's"
    return "\n".join(
        [
            *lines,
            "",
            f"YuNet's calibration fitted on every set (yunet.CALIBRATED_SCORES, at yunet.RAW_SCORES): "
            f"{', '.join(f'{k:g}' for k in knots)} ({in_code})",
            "",
            "CPU per photo (in-process, the mean over the sets):",
            *cpu,
            "",
            false_faces(threads),
        ]
    )


def detection_verdicts(served: dict, better: dict, retina: dict) -> None:
    """Issue #44's AP targets, on what the gateway runs at each detail (YuNet alone at fast; both,
    fused at fusion.MATCH_IOU, from standard up)."""

    def below(detail: str, floor: dict) -> list[str]:
        return [
            f"{s} {shown(served[detail][s], floor[s], 3)} < {floor[s]:.3f}"
            for s in SETS
            if served[detail][s] < floor[s]
        ]

    short = below("standard", better["standard"])
    record("#44", "standard: AP50 >= the better model alone on every set", "; ".join(short) or "all met", not short)
    crowd = served["standard"]["wider_val_native"]
    record("#44", "standard: AP50 >= 0.74 on wider_val_native", shown(crowd, 0.74, 3), crowd >= 0.74)
    fast = served["fast"]["wider_val_native"]
    record("#44", "fast: AP50 >= 0.50 on wider_val_native", shown(fast, 0.5, 3), fast >= 0.5)
    for detail in ("fast", "high"):
        lower = below(detail, retina[detail])
        record("#44", f"{detail}: no set below RetinaFace alone's AP50", "; ".join(lower) or "none below", not lower)


def false_faces(threads: int) -> str:
    """Faces reported at the default min_confidence where there is none: on the faceless photos, and
    on 128 px avatars beyond the avatar's own face, per model alone and fused, at each detail."""
    photos = [product.path.read_bytes() for product in products()]
    avatars = avatar_photos()
    rows = [
        "| models | detail | faceless photos: faces (highest %) | avatars: extra faces (highest %) |",
        "|---|---|---|---|",
    ]
    for names in (("retinaface",), ("yunet",), MODELS):
        settings = Settings(detectors=names)
        detectors = serve(names, settings.wire_format, lambda wire: OnnxModel(wire, threads))
        for detail in ("fast", "standard"):
            options = DetectOptions(detail=detail)
            faceless = [faces_in(data, detectors, settings, options).faces.scores for data in photos]
            extra = [unlabeled(faces_in(data, detectors, settings, options).faces, faces) for data, faces in avatars]
            if len(names) > 1:
                worst = max((float(x.max()) for x in faceless if len(x)), default=0.0)
                record(
                    "#44",
                    f"{detail}: no face above the default min_confidence on the faceless photos",
                    f"{worst * 100:.0f} %",
                    not worst,
                )
            counts = [
                f"{sum(map(len, found))} ({max((float(x.max()) for x in found if len(x)), default=0) * 100:.0f})"
                for found in (faceless, extra)
            ]
            rows.append(f"| {' + '.join(names)} | {detail} | {counts[0]} | {counts[1]} |")
    return "\n".join(rows)


def unlabeled(found: Detections, faces: np.ndarray) -> np.ndarray:
    """The scores of `found` that overlap no labeled face (x1, y1, x2, y2) by IoU 0.3 or more."""
    if not len(found) or not len(faces):
        return found.scores
    return found.scores[fusion.iou_matrix(found.boxes, faces).max(axis=1) < 0.3]


def avatar_photos(side: int = 128) -> list[tuple[bytes, np.ndarray]]:
    """A square around each face of dlib_voc_faces (twice its size) at `side` pixels, as JPEG, with
    every labeled face in its pixels (x1, y1, x2, y2)."""
    images, truths = labeled_set("dlib_voc_faces")
    avatars = []
    for truth in truths:
        pixels = cv2.imread(str(images / truth["image"]))
        corners = np.array([[x, y, x + w, y + h] for x, y, w, h in truth["boxes"]], np.float32)
        for x, y, w, h in truth["boxes"]:
            half = max(w, h)
            x0, y0 = max(0, round(x + w / 2 - half)), max(0, round(y + h / 2 - half))
            crop = pixels[y0 : y0 + 2 * half, x0 : x0 + 2 * half]
            scale = np.array([side / crop.shape[1], side / crop.shape[0]] * 2, np.float32)
            jpeg = cv2.imencode(".jpg", cv2.resize(crop, (side, side), interpolation=cv2.INTER_AREA))[1].tobytes()
            avatars.append((jpeg, (corners - [x0, y0, x0, y0]) * scale))
    return avatars


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cached", action="store_true", help="reuse (and keep) each model's runs")
    parser.add_argument("--calibrate", action="store_true", help="print YuNet's calibration fitted on every set")
    arguments = parser.parse_args()
    if arguments.calibrate:
        standard = {
            m: {s: run_model(m, "standard", s, arguments.threads, arguments.cached).faces for s in SETS} for m in MODELS
        }
        print(", ".join(f"{k:g}" for k in calibration(standard["retinaface"], standard["yunet"])))
        return
    print(report(arguments.threads, arguments.cached))


if __name__ == "__main__":
    main()
