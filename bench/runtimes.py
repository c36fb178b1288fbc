"""The CPU runtimes side by side (local_triton/cpu.py's rule, issue #77), in one run:

1. per graph (`retinaface_uint8`, `yunet_n_uint8`), the CPU ms per photo of onnxruntime fp32 and
   OpenVINO f32, bf16 (where this CPU has BF16; else OpenVINO runs it as f32, said so) and int8
   (RetinaFace's committed graph), one thread, rounds alternating between them, on ordinary photos
   (1024-pixel photos and small ones enlarged) and on crowds;
2. Triton CPU per /v1/detect (both models, the standard pass) against one RetinaFace fp32 run in
   this process on the same inputs, for the stack at fp32, at this CPU's rule and with RetinaFace's
   int8 forced, stacks started one after the other; and each model's resident memory after mixed
   traffic (onnxruntime's arena grows with the largest batch of tiles);
3. AP50 at every detail on every labeled set, the gateway's own detection in process, for fp32
   everywhere, the rule's choice on this CPU and each precision forced.

`make bench` runs it (`--sections runtimes`); `python -m bench.runtimes` alone.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.cpu import measure
from bench.detectors import SETS, ap
from bench.onnx_model import OnnxModel, OpenVinoModel
from bench.verdicts import record, shown
from bench.workload import must_succeed, service_call
from evaluation.images import labeled_set, photos_in
from gateway.config import Settings
from gateway.detection.detectors import KINDS, serve
from gateway.detection.preprocess import to_model_input
from gateway.imaging.decode import decode_image, read_header
from gateway.params import DetectOptions
from gateway.processing.answer import faces_in
from local_triton.cpu import PREFERENCE, choose, cpu_flags
from local_triton.processes import child_pids, running_stack

GRAPHS = {"retinaface": "retinaface_uint8", "yunet": "yunet_n_uint8"}
RUNTIMES = ("onnxruntime fp32", "OpenVINO f32", "OpenVINO bf16", "OpenVINO int8")
DETAILS = ("fast", "standard", "auto", "high")
# What is compared, each a FACECROP_PRECISION value (auto: this CPU's rule), in this order
SETTINGS = {"fp32": "fp32", "this CPU's rule": "auto", "RetinaFace int8": "retinaface_uint8=int8"}


def photo_classes() -> dict[str, list[bytes]]:
    ordinary = photos_in("wider_val_native/images")[:8] + photos_in("facemask/images")[:8]
    crowds = sorted(photos_in("wider_val_native/images"), key=lambda path: -path.stat().st_size)[:8]
    return {"ordinary photos": [p.read_bytes() for p in ordinary], "crowds": [p.read_bytes() for p in crowds]}


def model_inputs(photos: list[bytes], settings: Settings) -> list[np.ndarray]:
    """The standard pass's uint8 input of each photo, as the gateway makes it."""
    wire = KINDS["retinaface"].wire_formats["uint8"]
    inputs = []
    for data in photos:
        pixels = decode_image(data, read_header(data, settings.max_pixels)).pixels
        inputs.append(to_model_input(pixels, settings.target_size, settings.pad_multiple, wire)[0])
    return inputs


def runner(kind: str, graph: str, runtime: str):
    """The model run `runtime` for `graph`, or None where there is no such graph (YuNet's int8)."""
    wire = KINDS[kind].wire_formats["uint8"]
    if runtime == "onnxruntime fp32":
        return OnnxModel(wire, threads=1)
    precision = runtime.split()[1]
    if precision == "int8" and "int8" not in PREFERENCE[graph]:
        return None
    return OpenVinoModel(wire, threads=1, precision=precision)


def cpu_ms_per_photo(rounds: int = 3) -> dict[tuple[str, str, str], float]:
    """(graph, photo class, runtime) -> CPU ms per photo, one thread, runtimes alternating per round."""
    settings, measured = Settings(), {}
    for name, photos in photo_classes().items():
        inputs = model_inputs(photos, settings)
        for kind, graph in GRAPHS.items():
            models = {runtime: runner(kind, graph, runtime) for runtime in RUNTIMES}
            models = {runtime: model for runtime, model in models.items() if model is not None}
            totals = dict.fromkeys(models, 0.0)
            for model in models.values():
                model.run(inputs[0])  # compiled, warm
            for _ in range(rounds):
                for runtime, model in models.items():
                    started = time.thread_time()
                    for tensor in inputs:
                        model.run(tensor)
                    totals[runtime] += time.thread_time() - started
            for runtime, total in totals.items():
                measured[graph, name, runtime] = total / (rounds * len(inputs)) * 1000
    return measured


@dataclass(frozen=True)
class StackFigures:
    triton_ms: float  # Triton's CPU per /v1/detect, ordinary photos
    ratio: float  # that over one RetinaFace fp32 in process
    resident_mib: dict[str, float]  # each model's backend process after the mixed traffic


def model_resident_mib(triton_pid: int) -> dict[str, float]:
    """The resident memory of each model's Python-backend process (its stub: one per model instance)."""
    resident = {}
    for pid in child_pids(triton_pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except OSError:
            continue
        model = next((Path(part.decode()).parent.parent.name for part in command if part.endswith(b"model.py")), None)
        if model:
            resident[model] = pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    return resident


def stack_figures(rounds: int = 4, mixed_rounds: int = 2) -> dict[str, StackFigures]:
    """Per stack: Triton CPU ms per /v1/detect on the ordinary photos, that over one RetinaFace fp32 run
    in this process (one thread) on the same photos' inputs, and each model's resident memory after
    mixed traffic (the crowds at detail=high, whose batches of tiles are the largest, /v1/anonymize
    and the ordinary photos, `mixed_rounds` times)."""
    classes = photo_classes()
    photos = classes["ordinary photos"]
    alone = OnnxModel(KINDS["retinaface"].wire_formats["uint8"], threads=1)
    inputs = model_inputs(photos, Settings())
    results = {}
    for label, precision in SETTINGS.items():
        with running_stack(f"bench-runtimes-{precision.split('=')[0]}", precision=precision) as stack:
            started = time.thread_time()
            for _ in range(rounds):
                for tensor in inputs:
                    alone.run(tensor)
            in_process_ms = (time.thread_time() - started) / (rounds * len(inputs)) * 1000
            totals = measure(stack, {"stack": (stack.gateway, stack.gateway_process.pid)}, photos, rounds)
            triton_ms = totals["stack"].per_request_ms()[1]
            calls = [
                must_succeed(service_call(stack.gateway, params={"detail": "high", "max_faces": "1000"})),
                must_succeed(service_call(stack.gateway, "/v1/anonymize")),
            ]
            for _ in range(mixed_rounds):
                for call in calls:
                    for data in classes["crowds"] + photos:
                        call(data)
            resident = model_resident_mib(stack.triton_process.pid)
            results[label] = StackFigures(triton_ms, triton_ms / in_process_ms, resident)
    return results


def ap_at_every_detail() -> dict[tuple[str, str, str], float]:
    """(setting, detail, set) -> AP50, the service's detection in process, each model on the runtime the
    setting gives it (FACECROP_PRECISION's values)."""
    settings, flags, results = Settings(), cpu_flags(), {}
    for label, setting in SETTINGS.items():

        def model_for(wire, setting=setting):
            choice = choose(wire.model_name, flags, setting)
            if choice.precision == "fp32":
                return OnnxModel(wire, threads=2)
            return OpenVinoModel(wire, threads=2, precision=choice.precision)

        detectors = serve(settings.detectors, settings.wire_format, model_for)
        for detail in DETAILS:
            options = DetectOptions(min_confidence=2, max_faces=1000, detail=detail)
            for set_name in SETS:
                images, truths = labeled_set(set_name)
                faces = {
                    t["image"]: faces_in((images / t["image"]).read_bytes(), detectors, settings, options).faces
                    for t in truths
                }
                results[label, detail, set_name] = ap(set_name, faces)
    return results


def report() -> str:
    flags = cpu_flags()
    has = ", ".join(sorted(flags & {"avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16"}))
    chosen = {graph: choose(graph, flags).describe() for graph in GRAPHS.values()}
    lines = [f"This CPU has {has or 'none of AVX2, AVX-512, VNNI, BF16'}; the rule chooses {chosen}.", ""]
    measured = cpu_ms_per_photo()
    bf16_runs_as = OpenVinoModel(KINDS["yunet"].wire_formats["uint8"], 1, "bf16").floats
    lines += [
        "| graph | photos | " + " | ".join(RUNTIMES) + " |",
        "|---|---|" + "---:|" * len(RUNTIMES),
    ]
    for graph in GRAPHS.values():
        for name in photo_classes():
            base = measured[graph, name, RUNTIMES[0]]
            cells = []
            for runtime in RUNTIMES:
                value = measured.get((graph, name, runtime))
                cells.append("n/a" if value is None else f"{value:.1f} ms ({base / value:.2f}x)")
            lines.append(f"| {graph} | {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"- CPU ms per photo, one thread, the standard pass's input; (Nx): onnxruntime fp32's time over it. "
        f"OpenVINO bf16 ran its float parts in **{bf16_runs_as}** here (bf16 only where the CPU has BF16). "
        "YuNet has no int8 graph: quantized, it lost 0.0067 AP50 on the masked faces.",
        "",
        "| Triton (stack) | Triton CPU ms per /v1/detect (ordinary photos) | / one RetinaFace fp32 in process "
        "| resident MiB after mixed traffic, per model |",
        "|---|---:|---:|---|",
    ]
    figures = stack_figures()
    for label, figure in figures.items():
        resident = ", ".join(f"{model} {mib:.0f}" for model, mib in sorted(figure.resident_mib.items()))
        lines.append(f"| {label} | {figure.triton_ms:.1f} | **{figure.ratio:.2f}x** | {resident} |")
    lines.append(
        "- mixed traffic: the 8 largest crowds at detail=high (batches of up to 9 tiles) and through "
        "/v1/anonymize, and the ordinary photos, twice, after the CPU rounds"
    )
    rule = figures["this CPU's rule"].ratio
    record(
        "#77",
        "Triton CPU per ordinary photo <= 1.0x one RetinaFace fp32 in process",
        f"{shown(rule, 1.0)}x",
        rule <= 1.0,
    )
    aps = ap_at_every_detail()
    lines += ["", "| AP50 | detail | " + " | ".join(SETS) + " |", "|---|---|" + "---:|" * len(SETS)]
    worst = 0.0
    for label in SETTINGS:
        for detail in DETAILS:
            cells = []
            for set_name in SETS:
                value, base = aps[label, detail, set_name], aps["fp32", detail, set_name]
                worst = max(worst, base - value)
                cells.append(f"{value:.4f}" + (f" ({value - base:+.4f})" if label != "fp32" else ""))
            lines.append(f"| {label} | {detail} | " + " | ".join(cells) + " |")
    record(
        "#77",
        "AP50 within 0.005 of fp32's at every detail on every labeled set",
        f"{shown(worst, 0.005, 4)} lost",
        worst <= 0.005,
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())
