"""The photos people actually have (issue #35), side by side in one run (part of `make bench`):

colour        our sRGB against LittleCMS's conversion of the decoded source, per profile and
              container (mean and 99th percentile, in levels; evaluation/sources.py makes the files)
formats       the gateway's CPU per 256x256 /v1/crop of Display P3 phone photos as JPEG, HEIC and
              AVIF, at 12 MP and at 1 MP, against each format's decode floor (its decode, in
              process, and one resize to the model's size), and the faces each finds against
              its JPEG's
animations    the gateway's CPU per frame of a 10-frame GIF and WebP face crop (URL form)
              against a still crop of its first frame in the same format
before/after  the JPEG path's gateway CPU against the tree the work started from (bench/paired.py)
sharp         a 256x256 cover crop to JPEG of the same 1 MP photos by sharp (npm, libvips,
              `position: 'attention'`), CPU per image in its own process: the field's fastest
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import cv2
import numpy as np
import pillow_heif
import requests
from PIL import AvifImagePlugin, Image

from bench.cpu import floor_cpu_ms
from bench.paired import BASELINE, before_and_after
from bench.phone import cpu_ms_per_call
from bench.verdicts import record, shown
from bench.workload import must_succeed, service_call
from evaluation.sources import CONTAINERS, animation, colour_error, encoded_as, profiles, srgb_reference
from local_triton import BUILD_DIR, PROJECT_ROOT
from local_triton.processes import SHARED_FACES, Stack, running_gateway

SIZES = {"12 MP": (4032, 3024), "1 MP": (1152, 864)}
PHOTOS = 4  # demo photos per size (HEIC's x265 takes seconds to write a 12 MP one)
CROP = {"width": "256", "height": "256"}
COLOUR_CROP = {**CROP, "gravity": "center", "zoom": "0", "format": "png"}  # the whole picture, as the reference
SHARP = BUILD_DIR / "sharp"
SHARP_VERSION = "0.34.4"
MAX_COLOUR_ERROR = 2.5


def phone_like(size: tuple[int, int]) -> list[Image.Image]:
    """Demo photos at `size`, upright (their Display P3 tag comes with each container)."""
    paths = sorted(SHARED_FACES.glob("demo/*.jpg"))[:PHOTOS]
    return [Image.open(p).convert("RGB").resize(size, Image.Resampling.BICUBIC) for p in paths]


def decode_floor_ms(photos: list[bytes], container: str) -> float:
    """CPU ms of the decode floor: the gateway's JPEG floor, else Pillow's full decode (one thread,
    as the gateway decodes) and one area resize to 1024 (what HEIC and AVIF cost before any
    gateway work); the process's CPU, which a decoder's own threads would count in."""
    if container == "JPEG":
        return floor_cpu_ms(photos)
    pillow_heif.options.DECODE_THREADS = 1
    AvifImagePlugin.DEFAULT_MAX_THREADS = 1
    started = time.process_time()
    for data in photos:
        with Image.open(io.BytesIO(data)) as image:
            pixels = np.asarray(image.convert("RGB"))
        scale = 1024 / max(pixels.shape[:2])
        cv2.resize(
            pixels, (round(pixels.shape[1] * scale), round(pixels.shape[0] * scale)), interpolation=cv2.INTER_AREA
        )
    return (time.process_time() - started) / len(photos) * 1000


def gateway_ms(
    url: str, pid: int, photos: list[bytes], endpoint: str = "/v1/crop", params: dict | None = None
) -> float:
    """The gateway's CPU ms per request over `photos` (after one warm-up), one at a time."""
    call = must_succeed(service_call(url, endpoint, CROP if params is None else params))
    call(photos[0])
    return cpu_ms_per_call(pid, call, photos)


def colour_table(url: str) -> list[str]:
    astronaut = Image.open(SHARED_FACES / "demo" / "skimage_astronaut.jpg").convert("RGB")
    lines = ["| profile | " + " | ".join(CONTAINERS) + " |", "|---|" + "---:|" * len(CONTAINERS)]
    worst = 0.0
    for name, icc in profiles().items():
        cells = []
        for container in CONTAINERS:
            data = encoded_as(astronaut, container, icc)
            answer = requests.post(f"{url}/v1/crop", params=COLOUR_CROP, files={"image": data}, timeout=60)
            answer.raise_for_status()
            mean, p99 = colour_error(answer.content, srgb_reference(data, icc, (256, 256)))
            worst = max(worst, mean)
            cells.append(f"{mean:.2f} / {p99:.0f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    red = Image.new("RGB", (64, 64), (255, 0, 0))
    swapped = requests.post(
        f"{url}/v1/crop",
        params={"width": "8", "height": "8", "format": "png"},
        files={"image": encoded_as(red, "PNG", profiles()["swapped"])},
        timeout=60,
    )
    r, g, b = np.asarray(Image.open(io.BytesIO(swapped.content)).convert("RGB"), dtype=float).mean(axis=(0, 1))
    record(
        "#35",
        f"colour error <= {MAX_COLOUR_ERROR} levels mean, every profile x container",
        f"worst {shown(worst, MAX_COLOUR_ERROR)}",
        worst <= MAX_COLOUR_ERROR,
    )
    record(
        "#35",
        "the red/green-swapping profile swapped back",
        f"pure red comes out ({shown(r, 15, 0)}, {shown(g, 240, 0)}, {b:.0f})",
        g > 240 and r < 15,
    )
    lines += [
        "",
        "Each cell: mean / 99th percentile of the difference from LittleCMS, levels (256x256 /v1/crop, PNG out).",
    ]
    return lines


def formats_table(url: str, pid: int) -> list[str]:
    lines = [
        "| photos | format | gateway CPU ms | decode floor ms | / floor | faces found / its JPEG's |",
        "|---|---|---:|---:|---:|---:|",
    ]
    fewest = 1.0
    icc = profiles()["display-p3"]
    for label, size in SIZES.items():
        pictures = phone_like(size)
        jpeg_faces = None
        for container in ("JPEG", "HEIF", "AVIF"):
            photos = [encoded_as(p, container, icc, **({"speed": 8} if container == "AVIF" else {})) for p in pictures]
            cpu, floor = gateway_ms(url, pid, photos), decode_floor_ms(photos, container)
            faces = sum(
                len(
                    requests.post(
                        f"{url}/v1/detect", data=d, headers={"Content-Type": "image/jpeg"}, timeout=120
                    ).json()["faces"]
                )
                for d in photos
            )
            jpeg_faces = jpeg_faces or faces
            share = faces / max(jpeg_faces, 1)
            if container != "JPEG":
                fewest = min(fewest, share)
            lines.append(f"| {label} | {container} | {cpu:.1f} | {floor:.1f} | {cpu / floor:.2f}x | {share:.3f} |")
    record(
        "#35",
        "HEIC and AVIF find >= 0.97 of the faces their JPEG finds",
        f"fewest {shown(fewest, 0.97, 3)}",
        fewest >= 0.97,
    )
    return lines


def animation_table(stack: Stack, gateway_env: dict[str, str]) -> list[str]:
    crowd = Image.open(SHARED_FACES / "demo" / "widertest_20_Family_Group_Family_Group_20_435.jpg").convert("RGB")
    frames = [crowd.resize((480, 320)).rotate(angle) for angle in range(10)]
    lines = [
        "| animation | frames | CPU ms per frame | still crop CPU ms | per frame / still |",
        "|---|---:|---:|---:|---:|",
    ]
    ratios: dict[str, float] = {}
    frames_out: dict[str, list[str | None]] = {}
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for container in ("GIF", "WEBP"):
            (root / f"moving.{container.lower()}").write_bytes(animation(frames, container, [100] * 10, loop=0))
            (root / f"still.{container.lower()}").write_bytes(animation(frames[:1], container, [100], loop=0))
        with running_gateway(
            stack.triton_grpc, {**gateway_env, "FACECROP_ORIGIN": folder}, "bench-animation"
        ) as gateway:
            for container in ("gif", "webp"):
                costs = {}
                seen = frames_out.setdefault(container, [])

                def moving_call(path: str, seen: list[str | None] = seen) -> None:
                    answer = requests.get(path, timeout=60)
                    answer.raise_for_status()
                    seen.append(answer.headers.get("X-Frames"))  # every frame out, not one

                for name in ("moving", "still"):
                    path = f"{gateway.url}/cdn-cgi/image/width=256,height=256,fit=cover,gravity=face/{name}.{container}"
                    requests.get(path, timeout=60).raise_for_status()
                    call = moving_call if name == "moving" else lambda p: requests.get(p, timeout=60).raise_for_status()
                    costs[name] = cpu_ms_per_call(gateway.process.pid, call, [path] * 5)
                per_frame = costs["moving"] / len(frames)
                ratios[container] = ratio = per_frame / costs["still"]
                lines.append(
                    f"| {container} | {len(frames)} | {per_frame:.1f} | {costs['still']:.1f} | {shown(ratio, 1.3)}x |"
                )
    record(
        "#35", "animations: CPU per frame <= 1.3x a still crop's", *animation_verdict(ratios, frames_out, len(frames))
    )
    return lines


def animation_verdict(
    ratios: dict[str, float], frames_out: dict[str, list[str | None]], frames: int
) -> tuple[str, bool]:
    """The worst CPU per frame against a still's, met only where every measured answer said it sent
    every frame (X-Frames): an answer of one frame is cheaper per frame and proves nothing."""
    worst = max(ratios.values())
    short = {c: sorted({f or "none" for f in seen if f != str(frames)}) for c, seen in frames_out.items()}
    short = {c: f for c, f in short.items() if f}
    figure = f"worst {shown(worst, 1.3)}x"
    if short:
        figure += ", X-Frames " + "; ".join(f"{c}: {', '.join(f)} (not {frames})" for c, f in short.items())
    return figure, worst <= 1.3 and not short and all(frames_out.get(c) for c in ratios)


def sharp_crops(files: list[Path], size: tuple[int, int], position: str) -> dict | None:
    """sharp's cover crops of `files` to `size` (bench/sharp_crop.js): its CPU ms per image and each
    crop's offset in the resized picture; None where sharp could not be installed."""
    if not (SHARP / "node_modules" / "sharp").is_dir():
        SHARP.mkdir(parents=True, exist_ok=True)
        npm = ["npm", "install", "--silent", "--prefix", str(SHARP), f"sharp@{SHARP_VERSION}"]
        if subprocess.run(npm, capture_output=True).returncode:
            return None
    job = {"files": [str(f) for f in files], "width": size[0], "height": size[1], "position": position}
    script = PROJECT_ROOT / "bench" / "sharp_crop.js"
    env = {**os.environ, "NODE_PATH": str(SHARP / "node_modules")}
    done = subprocess.run(["node", str(script), json.dumps(job)], capture_output=True, text=True, env=env)
    return json.loads(done.stdout) if done.returncode == 0 else None


def sharp_ms(photos: list[bytes]) -> float | None:
    """sharp's CPU ms per 256x256 attention cover crop to JPEG of `photos`."""
    with tempfile.TemporaryDirectory() as folder:
        files = [Path(folder) / f"{index}.jpg" for index in range(len(photos))]
        for file, data in zip(files, photos):
            file.write_bytes(data)
        crops = sharp_crops(files, (256, 256), "attention")
    return crops["cpu_ms"] if crops else None


def report(stack: Stack, gateway_env: dict[str, str]) -> str:
    lines = ["Colour against LittleCMS:", "", *colour_table(stack.gateway), ""]
    with running_gateway(stack.triton_grpc, gateway_env, "bench-formats") as gateway:
        lines += [
            "Formats (Display P3 phone photos, 256x256 /v1/crop, c=1):",
            "",
            *formats_table(gateway.url, gateway.process.pid),
            "",
        ]
        ordinary = [encoded_as(p, "JPEG") for p in phone_like(SIZES["1 MP"])]
        ours = gateway_ms(gateway.url, gateway.process.pid, ordinary)
    lines += ["Animations (the URL form, 256x256 face crop):", "", *animation_table(stack, gateway_env), ""]
    jpegs = [p.read_bytes() for p in sorted((SHARED_FACES / "wider_val_native" / "images").glob("*.jpg"))[:12]]
    phones = [encoded_as(p, "JPEG") for p in phone_like(SIZES["12 MP"])]
    cases = {
        "ordinary JPEGs, /v1/detect": ("/v1/detect", {}, jpegs),
        "ordinary JPEGs, 256x256 /v1/crop": ("/v1/crop", CROP, jpegs),
        "12 MP JPEGs, /v1/detect": ("/v1/detect", {}, phones),
    }
    paired = before_and_after(stack, cases, gateway_env)
    lines += [f"Before and after: this tree's gateway CPU against {BASELINE}'s, rounds alternating:", ""]
    lines += ["| JPEG path | this tree ms | before ms | this / before |", "|---|---:|---:|---:|"]
    worst = 0.0
    for name, (now, then) in paired.items():
        worst = max(worst, now / then)
        lines.append(f"| {name} | {now:.1f} | {then:.1f} | {now / then:.2f}x |")
    record(
        "#35", "JPEG path gateway CPU <= 1.05x the tree before (paired)", f"worst {shown(worst, 1.05)}x", worst <= 1.05
    )
    sharp = sharp_ms(ordinary)
    lines += [
        "",
        f"- a 256x256 cover crop to JPEG of {len(ordinary)} 1 MP photos: the gateway {ours:.1f} ms of CPU per image "
        f"(faces found, Triton aside); sharp {SHARP_VERSION} (libvips, attention) "
        + (f"{sharp:.1f} ms: **{ours / sharp:.2f}x** sharp's" if sharp else "not measured (npm install failed)"),
    ]
    return "\n".join(lines)
