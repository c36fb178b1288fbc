"""Cloudflare's options (issue #36), side by side in one run (part of `make bench`):

cost          each option's added cost by URL, from a directory origin of 12 photos: the
              gateway's CPU per request and the cache miss's p50 (c=1), with the option and
              without it, rounds alternating, at a 256x256 face crop and a 1024-pixel resize
gravity=auto  on photos without faces whose subject is known (bench/faceless.py): the share of
              the subject inside the crop at 256x256, 1200x400 and 400x1200, against the centre,
              libvips' attention and entropy (through sharp) and thumbor 7.8's smart crop (its
              feature detector, there being no faces), and the CPU per image
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import requests

from bench.faceless import FOLDER, kept, products
from bench.phone import process_cpu_s
from bench.sources import sharp_crops
from bench.thumbor import running_thumbor, smart_crop_rect
from bench.verdicts import missing, record, shown
from gateway.framing.saliency import SIDE, best_window, feature_map
from local_triton.processes import SHARED_FACES, Stack, running_gateway

BASES = {"256x256 face crop": "width=256,height=256,fit=cover,gravity=face", "1024 px resize": "width=1024"}
FILTERS = ("blur=10", "sharpen=1", "brightness=1.2", "contrast=1.2", "gamma=0.8", "saturation=1.5")
OTHERS = ("rotate=90", "flip=h", "trim=20;20;20;20", "trim=border", "compression=fast", "f=png,q=80", "scq=40")
ROUNDS = 5
MAX_FILTER_COST = 0.15  # of the 256x256 cache miss's p50
AUTO_SIZES = ((256, 256), (1200, 400), (400, 1200))


def option_costs(stack: Stack, gateway_env: dict[str, str]) -> list[str]:
    photos = sorted((SHARED_FACES / "wider_val_native" / "images").glob("*.jpg"))[:12]
    lines = [
        "| output | option | gateway CPU ms | + CPU | cache miss p50 ms | + p50 |",
        "|---|---|---:|---:|---:|---:|",
    ]
    worst = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for photo in photos:
            shutil.copy(photo, Path(folder) / photo.name)
        env = {**gateway_env, "FACECROP_ORIGIN": folder}
        with running_gateway(stack.triton_grpc, env, "bench-options") as gateway, requests.Session() as session:
            for output, base in BASES.items():
                variants = ["", *FILTERS, *OTHERS]
                cpu = {v: 0.0 for v in variants}
                times: dict[str, list[float]] = {v: [] for v in variants}
                for variant in variants:  # warm-up: caches, connections
                    session.get(f"{gateway.url}/cdn-cgi/image/{base},{variant}/{photos[0].name}".replace(",/", "/"))
                for round_ in range(ROUNDS):
                    for variant in variants[round_:] + variants[:round_]:  # none first only in the first round
                        headers = {"Save-Data": "on"} if variant.startswith("scq") else {}
                        before = process_cpu_s(gateway.process.pid)
                        for photo in photos:
                            url = f"{gateway.url}/cdn-cgi/image/{base},{variant}/{photo.name}".replace(",/", "/")
                            started = time.perf_counter()
                            session.get(url, headers=headers, timeout=60).raise_for_status()
                            times[variant].append(time.perf_counter() - started)
                        time.sleep(0.05)
                        cpu[variant] += process_cpu_s(gateway.process.pid) - before
                per_request = {v: cpu[v] / (ROUNDS * len(photos)) * 1000 for v in variants}
                p50 = {v: float(np.median(times[v])) * 1000 for v in variants}
                for variant in variants:
                    added_cpu = per_request[variant] / per_request[""] - 1
                    added_p50 = p50[variant] / p50[""] - 1
                    if variant in FILTERS and output.startswith("256"):
                        worst = max(worst, added_p50)
                    lines.append(
                        f"| {output} | {variant or '(none)'} | {per_request[variant]:.1f} | {added_cpu:+.0%} "
                        f"| {p50[variant]:.1f} | {added_p50:+.0%} |"
                    )
    record(
        "#36",
        f"each filter adds <= {MAX_FILTER_COST:.0%} to a 256x256 cache miss's p50",
        f"worst {'+' if worst >= 0 else ''}{shown(worst * 100, MAX_FILTER_COST * 100, 0)}%",
        worst <= MAX_FILTER_COST,
    )
    return lines


def sharp_window(offset: list[int], size: tuple[int, int], target: tuple[int, int]) -> tuple[int, int, int, int]:
    """sharp's crop in the source's pixels: it resizes to cover `target`, then cuts at `offset`
    (which it reports negated)."""
    scale = max(target[0] / size[0], target[1] / size[1])
    left, top = abs(offset[0]), abs(offset[1])
    return round(left / scale), round(top / scale), round(target[0] / scale), round(target[1] / scale)


def gravity_auto(stack: Stack, gateway_env: dict[str, str]) -> list[str]:

    made = products()
    env = {**gateway_env, "FACECROP_ORIGIN": str(FOLDER)}
    methods = (
        "gravity=auto (ours)",
        "centre",
        "libvips attention (sharp)",
        "libvips entropy (sharp)",
        "thumbor 7.8 smart",
    )
    shares: dict[tuple[str, tuple[int, int]], list[float]] = {}
    cpu_ms: dict[str, float] = {}
    with (
        running_gateway(stack.triton_grpc, env, "bench-auto") as gateway,
        running_thumbor(FOLDER, processes=0) as thumbor,
    ):
        for size in AUTO_SIZES:
            options = f"width={size[0]},height={size[1]},fit=cover"
            before = process_cpu_s(gateway.process.pid)
            ours = [
                requests.get(
                    f"{gateway.url}/cdn-cgi/image/{options},gravity=auto,f=json/{p.path.name}", timeout=60
                ).json()
                for p in made
            ]
            cpu_ms.setdefault(methods[0], (process_cpu_s(gateway.process.pid) - before) / len(made) * 1000)
            centre = [
                requests.get(f"{gateway.url}/cdn-cgi/image/{options},f=json/{p.path.name}", timeout=60).json()
                for p in made
            ]
            shares[(methods[0], size)] = [kept(tuple(o["crop"].values()), p.subject) for o, p in zip(ours, made)]
            shares[(methods[1], size)] = [kept(tuple(c["crop"].values()), p.subject) for c, p in zip(centre, made)]
            for method, position in ((methods[2], "attention"), (methods[3], "entropy")):
                crops = sharp_crops([p.path for p in made], size, position)
                if crops is None:
                    continue
                cpu_ms.setdefault(method, crops["cpu_ms"])
                windows = [sharp_window(offset, p.size, size) for offset, p in zip(crops["offsets"], made)]
                shares[(method, size)] = [kept(w, p.subject) for w, p in zip(windows, made)]
            shares[(methods[4], size)] = [kept(smart_crop_rect(thumbor, p.path.name, *size), p.subject) for p in made]
    lines = ["| method | " + " | ".join(f"{w}x{h}: subject kept" for w, h in AUTO_SIZES) + " | CPU ms per image |"]
    lines.append("|---|" + "---:|" * (len(AUTO_SIZES) + 1))
    for method in methods:
        cells = [f"{np.mean(shares[(method, s)]):.3f}" if (method, s) in shares else "-" for s in AUTO_SIZES]
        cost = f"{cpu_ms[method]:.1f}" if method in cpu_ms else "-"
        lines.append(f"| {method} | " + " | ".join(cells) + f" | {cost} |")
    means = {key: float(np.mean(values)) for key, values in shares.items()}
    record(
        "#36",
        "gravity=auto without faces keeps at least as much of the subject as the best anchor",
        *auto_verdict(means, methods, AUTO_SIZES),
    )
    lines += [
        "",
        f"{len(made)} photos (bench/faceless.py); ours' CPU: the gateway's per request; sharp's: its own process.",
    ]
    return lines


def auto_verdict(
    means: dict[tuple[str, tuple[int, int]], float], methods: tuple[str, ...], sizes: tuple[tuple[int, int], ...]
) -> tuple[str, bool]:
    """Ours (methods[0]) against the best of the others, size by size, from the unrounded means; a
    method not measured at a size (sharp could not be installed, say) is said, and not met: "the best
    on every size" holds only against every method."""
    behind, absent = [], []
    for size in sizes:
        label = f"{size[0]}x{size[1]}"
        unmeasured = missing((m for m, s in means if s == size), methods)
        absent += [f"{m} at {label}" for m in unmeasured]
        others = [means[(m, size)] for m in methods[1:] if (m, size) in means]
        ours = means.get((methods[0], size))
        if ours is not None and others and ours < max(others):
            best = max(others)
            behind.append(f"{label} ({shown(ours, best, 3)} < {shown(best, ours, 3)})")
    parts = (["behind at " + ", ".join(behind)] if behind else []) + (
        ["not measured: " + ", ".join(absent)] if absent else []
    )
    return "; ".join(parts) if parts else "at least the best on every size", not behind and not absent


def symmetric_surround(pixels: np.ndarray) -> np.ndarray:
    """Achanta and Süsstrunk's maximum symmetric surround saliency (Cloudflare's named method), at SIDE."""
    grey = small(pixels)
    lab = cv2.cvtColor(grey.astype(np.float32) / 255, cv2.COLOR_BGR2Lab)
    blurred = cv2.GaussianBlur(lab, (3, 3), 0)
    rows, columns = lab.shape[:2]
    integral = cv2.integral(lab)
    y, x = np.mgrid[0:rows, 0:columns]
    dy, dx = np.minimum(y, rows - 1 - y), np.minimum(x, columns - 1 - x)
    top, bottom, left, right = y - dy, y + dy + 1, x - dx, x + dx + 1
    sums = integral[bottom, right] - integral[top, right] - integral[bottom, left] + integral[top, left]
    return (((sums / ((bottom - top) * (right - left))[..., None]) - blurred) ** 2).sum(axis=2)


def edges(pixels: np.ndarray) -> np.ndarray:
    grey = cv2.cvtColor(small(pixels), cv2.COLOR_BGR2GRAY)
    return np.hypot(cv2.Sobel(grey, cv2.CV_32F, 1, 0), cv2.Sobel(grey, cv2.CV_32F, 0, 1)).astype(np.float64)


def spectral_residual(pixels: np.ndarray) -> np.ndarray:
    """Hou and Zhang's spectral residual saliency."""
    grey = cv2.cvtColor(small(pixels), cv2.COLOR_BGR2GRAY).astype(np.float32)
    spectrum = np.fft.fft2(grey)
    amplitude = np.log(np.abs(spectrum) + 1e-9)
    residual = np.exp(amplitude - cv2.blur(amplitude, (3, 3)) + 1j * np.angle(spectrum))
    return cv2.GaussianBlur((np.abs(np.fft.ifft2(residual)) ** 2).astype(np.float32), (0, 0), 2.5).astype(np.float64)


def small(pixels: np.ndarray) -> np.ndarray:
    height, width = pixels.shape[:2]
    scale = SIDE / max(height, width)
    return cv2.resize(pixels, (round(width * scale), round(height * scale)), interpolation=cv2.INTER_AREA)


CANDIDATES = {
    "Shi-Tomasi corners (the service's)": feature_map,
    "maximum symmetric surround": symmetric_surround,
    "Sobel edges": edges,
    "spectral residual": spectral_residual,
}


def candidate_maps() -> list[str]:
    """Each candidate map on the faceless set, the window placed by the service's own best_window."""
    made = products()
    pictures = [cv2.imread(str(p.path)) for p in made]
    lines = ["| map | " + " | ".join(f"{w}x{h}: subject kept" for w, h in AUTO_SIZES) + " |"]
    lines.append("|---|" + "---:|" * len(AUTO_SIZES))
    for name, make in CANDIDATES.items():
        maps = [make(pixels) for pixels in pictures]
        cells = []
        for target in AUTO_SIZES:
            shares = []
            for weights, product in zip(maps, made):
                width, height = product.size
                aspect = target[0] / target[1]
                window = (height * aspect, height) if width / height > aspect else (width, width / aspect)
                fx, fy = best_window(weights, window, product.size)
                x = min(max(round(fx * width - window[0] / 2), 0), width - round(window[0]))
                y = min(max(round(fy * height - window[1] / 2), 0), height - round(window[1]))
                shares.append(kept((x, y, round(window[0]), round(window[1])), product.subject))
            cells.append(f"{np.mean(shares):.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def report(stack: Stack, gateway_env: dict[str, str]) -> str:
    return "\n".join(
        [
            "Cost of each option by URL (12 photos, c=1):",
            "",
            *option_costs(stack, gateway_env),
            "",
            "gravity=auto on photos without faces:",
            "",
            *gravity_auto(stack, gateway_env),
            "",
            "The maps gravity=auto's was chosen from, each window placed as the service places it:",
            "",
            *candidate_maps(),
        ]
    )
