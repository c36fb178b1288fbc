"""The URL form (GET /cdn-cgi/image/...) against thumbor 7.8's smart crop, side by side in one run.

- Cache misses: every photo of ../shared/faces' labeled sets at 256x256 and 1200x400,
  `fit=cover,gravity=face,zoom=0` from a directory origin, against thumbor's
  `/unsafe/WxH/smart/` with its file loader on the same folder (bench/thumbor.py: face and
  feature detectors, nothing cached, one process per core): c=1 p50 and c=8 throughput, and
  faces framed and the largest face framed (bench/placement.py's rule, ground truth only here).
- Revalidation: If-None-Match for an HTTP origin's photo (the origin answers the conditional
  request 304): the gateway's CPU per request (all its processes, from /proc) against
  /healthz's, and Triton's inference count before and after.
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np
import requests

from bench.harness import Measurement, closed_loop
from bench.phone import process_cpu_s
from bench.placement import SETS, counted_truth, score
from bench.thumbor import running_thumbor, smart_crop, smart_crop_rect
from bench.verdicts import record, shown
from evaluation.images import labeled_set
from evaluation.origins import photo_origin
from evaluation.service import inferences
from gateway.framing.crop import Rect
from local_triton.processes import SHARED_FACES, Stack, running_gateway, running_stack

SIZES = ((256, 256), (1200, 400))
FACE_CROP = "fit=cover,gravity=face,zoom=0"
REVALIDATIONS = 300


def photos() -> list[tuple[str, np.ndarray]]:
    """(source path under SHARED_FACES, counted ground-truth boxes) of every labeled photo."""
    found = []
    for name in SETS:
        if (SHARED_FACES / name).is_dir():
            found += [(f"{name}/images/{truth['image']}", counted_truth(truth)) for truth in labeled_set(name)[1]]
    return found


def ours(url: str, size: tuple[int, int], source: str) -> Rect:
    """One cache miss of the URL form; its crop."""
    response = requests.get(f"{url}/cdn-cgi/image/width={size[0]},height={size[1]},{FACE_CROP}/{source}", timeout=60)
    response.raise_for_status()
    return Rect(*(int(v) for v in response.headers["X-Crop-Rect"].split(",")))


def miss_rows(url: str, thumbor: str) -> list[str]:
    listed = photos()
    sources, truths = [s for s, _ in listed], [t for _, t in listed]
    lines = []
    for size in SIZES:
        label = f"{size[0]}x{size[1]}"
        runs: dict[str, tuple[Measurement, Measurement, tuple[float, float]]] = {}
        tools = {
            "facecrop (URL form)": partial(ours, url, size),
            "thumbor 7.8 smart": lambda source, size=size: smart_crop(thumbor, source, *size),
        }
        for tool, call in tools.items():
            single = closed_loop(f"{tool} c=1", call, sources, 1, len(sources), 600, warmup=4)
            eight = closed_loop(f"{tool} c=8", call, sources, 8, len(sources), 120, warmup=0)
            if tool.startswith("facecrop"):
                rects = [ours(url, size, source) for source in sources]
            else:
                rects = [Rect(*smart_crop_rect(thumbor, source, *size)) for source in sources]
            framing = score(truths, rects)
            runs[tool] = (single, eight, (framing.faces, framing.largest))
        (mine, peer) = runs.values()
        latency, throughput = (
            mine[0].percentile_ms(50) / peer[0].percentile_ms(50),
            mine[1].throughput / peer[1].throughput,
        )
        record("#28", f"{label} cache-miss p50 <= thumbor's smart crop", f"{shown(latency, 1)}x", latency <= 1)
        record("#28", f"{label} c=8 throughput >= thumbor's", f"{shown(throughput, 1)}x", throughput >= 1)
        for tool, (single, eight, (framed, largest)) in runs.items():
            lines.append(
                f"| {label} | {tool} | {single.percentile_ms(50):.1f} | {eight.throughput:.1f} | {framed:.3f} "
                f"| {largest:.3f} |"
            )
        lines.append(
            f"| {label} | ours / thumbor | **{mine[0].percentile_ms(50) / peer[0].percentile_ms(50):.2f}x** "
            f"| **{mine[1].throughput / peer[1].throughput:.2f}x** | {mine[2][0] - peer[2][0]:+.3f} "
            f"| {mine[2][1] - peer[2][1]:+.3f} |"
        )
    return lines


def revalidation_lines(stack: Stack, gateway_url: str, gateway_pid: int, origin: str, state) -> list[str]:
    """A 304's gateway CPU against /healthz's, for a directory origin (a stat) and an HTTP one (a
    conditional request answered 304), with Triton's inference count and the origin's downloads."""
    crop = f"{gateway_url}/cdn-cgi/image/width=256,height=256,{FACE_CROP}"
    paths = {
        "a directory origin (a stat)": f"{crop}/demo/skimage_astronaut.jpg",
        "an HTTP origin (a conditional request, answered 304)": f"{crop}/{origin}skimage_astronaut.jpg",
    }
    etags = {name: requests.get(path, timeout=60).headers["ETag"] for name, path in paths.items()}

    def cpu_per_request(url: str, headers: dict[str, str], status: int) -> float:
        with requests.Session() as session:
            session.get(url, headers=headers, timeout=60)
            started = process_cpu_s(gateway_pid)
            for _ in range(REVALIDATIONS):
                assert session.get(url, headers=headers, timeout=60).status_code == status
            return (process_cpu_s(gateway_pid) - started) / REVALIDATIONS * 1000

    before, downloads = inferences(stack.triton_http), state.bodies["/skimage_astronaut.jpg"]
    lines = []
    for name, path in paths.items():
        revalidated = cpu_per_request(path, {"If-None-Match": etags[name]}, 304)
        health = cpu_per_request(f"{gateway_url}/healthz", {}, 200)
        record(
            "#28",
            f"304 revalidation from {name.split(' (')[0]}: gateway CPU <= 2x /healthz's",
            f"{shown(revalidated / health, 2)}x",
            revalidated <= 2 * health,
        )
        lines.append(
            f"- 304 revalidation from {name}: gateway CPU **{revalidated:.2f} ms** per request, /healthz "
            f"{health:.2f} ms: **{revalidated / health:.2f}x** (target <= 2)"
        )
    calls = inferences(stack.triton_http) - before
    record("#28", "no model call in a 304", f"{calls} in {2 * (REVALIDATIONS + 1)} revalidations", calls == 0)
    lines.append(
        f"- over {2 * (REVALIDATIONS + 1)} revalidations: model inferences **{calls}**, downloads "
        f"of the photo from the HTTP origin {state.bodies['/skimage_astronaut.jpg'] - downloads}"
    )
    return lines


def report(stack: Stack, gateway_env: dict[str, str]) -> str:
    lines = [
        "| output | tool | c=1 p50 ms | c=8 images/s | faces framed | largest face framed |",
        "|---|---|---:|---:|---:|---:|",
    ]
    with photo_origin(SHARED_FACES / "demo") as (origin, state):
        env = {
            **gateway_env,
            "FACECROP_ORIGIN": str(SHARED_FACES),
            "FACECROP_ALLOWED_SOURCES": origin,
            "FACECROP_ALLOW_PRIVATE_SOURCES": "true",
        }
        with running_gateway(stack.triton_grpc, env, "bench-url") as gateway:
            with running_thumbor(SHARED_FACES, processes=0) as thumbor:
                lines += miss_rows(gateway.url, thumbor)
            lines += ["", *revalidation_lines(stack, gateway.url, gateway.process.pid, origin, state)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()
    with running_stack("bench-url", intra_op_threads=2) as stack:
        print(report(stack, {}))


if __name__ == "__main__":
    main()
