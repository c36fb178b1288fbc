"""The gateway's CPU per request, Triton I/O through shared memory and as gRPC bytes, side by side,
and both models against RetinaFace alone.

`make bench` runs it on its stack; `python -m bench.cpu` alone starts one. Three gateways serve
the same Triton, one with FACECROP_TRITON_SHM=on, one with off, one serving RetinaFace alone
(FACECROP_DETECTORS=retinaface, shared memory); rounds alternate between them
so drift of the machine falls on both. For each photo class, photos are sent one at a time
(`/v1/detect`, raw body; and to the shared-memory gateway as multipart, as `curl -F` sends them) and
the OS's CPU time is read from /proc:

  gateway CPU   every gunicorn process of that gateway, per request
  Triton CPU    tritonserver and its Python-backend stubs, per request
  floor         in this process: the JPEG decode at the reduction the gateway uses, plus the
                area (shrinking) or bilinear (enlarging) resize to the model's size
  floor, woken  the same work, each photo after 30 ms asleep, as the gateway's thread is while
                Triton runs: what waking costs this machine (cold caches), for reference

and, for a GPU host where the model is cheap, the images per second one gateway core can feed
(1000 / gateway CPU ms).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import cv2
import numpy as np

from bench.phone import phone_photos, process_cpu_s
from bench.verdicts import record, shown
from bench.workload import must_succeed, service_call
from gateway.detection.preprocess import scale_for
from gateway.imaging.decode import JPEG_REDUCTIONS, jpeg_reduction, read_header
from local_triton.processes import SHARED_FACES, Stack, running_gateway, running_stack

# A third gateway serves RetinaFace alone (the service before YuNet joined it, issue #44), through
# shared memory: what the second model costs Triton and the gateway.
ALONE = "retinaface"
# A fourth column of rounds sends the photos to the shared-memory gateway as `curl -F` does
# (multipart field `image`), the others as the raw body.
MULTIPART = "multipart"
MODES = {
    "on": "shared memory",
    "off": "gRPC bytes",
    ALONE: "shared memory, RetinaFace alone",
    MULTIPART: "shared memory, multipart upload",
}
ORDINARY = ("1024-px photos (wider_val_native)", "small photos, enlarged (facemask)")
TWELVE_MP = "12 MP phone photos, EXIF 6 every second"
ORDINARY_MIX = "ordinary photos (the two above, equal parts)"
WAKE_AFTER_S = 0.03  # about Triton's time for one photo on this machine's CPU


def photo_classes() -> dict[str, list[bytes]]:
    """1024-pixel originals, small photos the gateway enlarges, and 12 MP EXIF-rotated ones."""

    def first(name: str, count: int) -> list[bytes]:
        return [p.read_bytes() for p in sorted((SHARED_FACES / name / "images").glob("*.jpg"))[:count]]

    return {
        ORDINARY[0]: first("wider_val_native", 12),
        ORDINARY[1]: first("facemask", 12),
        TWELVE_MP: phone_photos(8),
    }


def floor_cpu_ms(photos: list[bytes], target_size: int = 1024, rounds: int = 3, asleep_s: float = 0.0) -> float:
    """CPU ms per photo of the decode at the gateway's JPEG reduction plus one resize to the
    model's size; each photo after `asleep_s` of sleep where given (not counted)."""
    cv2.setNumThreads(1)
    cpu_s = 0.0
    for _ in range(rounds):
        for data in photos:
            if asleep_s:
                time.sleep(asleep_s)
            started = time.thread_time()
            header = read_header(data, 50_000_000)
            width, height = header.upright_size
            flags = JPEG_REDUCTIONS[jpeg_reduction(header, scale_for(height, width, target_size))]
            pixels = cv2.imdecode(np.frombuffer(data, np.uint8), flags | cv2.IMREAD_IGNORE_ORIENTATION)
            rows, cols = pixels.shape[:2]
            scale = target_size / max(rows, cols)
            size = (round(cols * scale), round(rows * scale))
            cv2.resize(pixels, size, interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
            cpu_s += time.thread_time() - started
    return cpu_s / (rounds * len(photos)) * 1000


@dataclass
class CpuTotals:
    requests: int = 0
    gateway_s: float = 0.0
    triton_s: float = 0.0

    def per_request_ms(self) -> tuple[float, float]:
        return self.gateway_s / self.requests * 1000, self.triton_s / self.requests * 1000


def measure(
    stack: Stack,
    gateways: dict[str, tuple[str, int]],
    photos: list[bytes],
    rounds: int,
    endpoint: str = "/v1/detect",
    params: dict | None = None,
) -> dict:
    """Alternating rounds over the gateways (mode -> (url, master pid)), each photo POSTed to
    `endpoint` with `params`; CPU totals per mode."""
    calls = {
        mode: must_succeed(service_call(url, endpoint, params, "multipart" if mode == MULTIPART else "raw"))
        for mode, (url, _) in gateways.items()
    }
    totals = {mode: CpuTotals() for mode in gateways}
    for mode in gateways:  # warm-up: connections, regions, caches
        for data in photos[:2]:
            calls[mode](data)
    for _ in range(rounds):
        for mode, (_, pid) in gateways.items():
            gateway_before, triton_before = process_cpu_s(pid), process_cpu_s(stack.triton_process.pid)
            for data in photos:
                calls[mode](data)
            time.sleep(0.05)  # the last CPU ticks land
            totals[mode].requests += len(photos)
            totals[mode].gateway_s += process_cpu_s(pid) - gateway_before
            totals[mode].triton_s += process_cpu_s(stack.triton_process.pid) - triton_before
    return totals


def report(stack: Stack, gateway_env: dict[str, str], rounds: int = 6) -> str:
    """The table (markdown) for `stack`'s Triton, with one gateway per transport, and the ratios
    against the targets: ordinary photos (the 1024-px and small classes in equal parts) and 12 MP."""
    lines = [
        "| photos (c=1, /v1/detect) | Triton I/O | gateway CPU ms | Triton CPU ms | floor ms | gateway / floor "
        "| floor, woken ms | gateway / floor, woken | images/s per gateway core (GPU host) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    results: dict[tuple[str, str], tuple[float, ...]] = {}
    with (
        running_gateway(stack.triton_grpc, {**gateway_env, "FACECROP_TRITON_SHM": "on"}, "cpu-shm") as shm,
        running_gateway(stack.triton_grpc, {**gateway_env, "FACECROP_TRITON_SHM": "off"}, "cpu-bytes") as plain,
        running_gateway(
            stack.triton_grpc, {**gateway_env, "FACECROP_TRITON_SHM": "on", "FACECROP_DETECTORS": ALONE}, "cpu-alone"
        ) as alone,
    ):
        gateways = {
            "on": (shm.url, shm.process.pid),
            "off": (plain.url, plain.process.pid),
            ALONE: (alone.url, alone.process.pid),
            MULTIPART: (shm.url, shm.process.pid),
        }
        for name, photos in photo_classes().items():
            floors = (floor_cpu_ms(photos), floor_cpu_ms(photos, asleep_s=WAKE_AFTER_S))
            totals = measure(stack, gateways, photos, rounds)
            for mode in MODES:
                results[name, mode] = (*totals[mode].per_request_ms(), *floors)
    for mode in MODES:  # equal parts of both ordinary classes: the mean of their means
        results[ORDINARY_MIX, mode] = tuple(
            float(np.mean([results[name, mode][i] for name in ORDINARY])) for i in range(4)
        )
    for (name, mode), (gateway_ms, triton_ms, floor, woken) in results.items():
        lines.append(
            f"| {name} | {MODES[mode]} | {gateway_ms:.1f} | {triton_ms:.1f} | {floor:.1f} "
            f"| **{gateway_ms / floor:.2f}x** | {woken:.1f} | {gateway_ms / woken:.2f}x | {1000 / gateway_ms:.0f} |"
        )

    def ratio(name: str, mode: str) -> float:
        return results[name, mode][0] / results[name, mode][2]

    twelve, ordinary = ratio(TWELVE_MP, "on"), ratio(ORDINARY_MIX, "on")
    count = len(photo_classes()[TWELVE_MP])
    record(
        "#35",
        "12 MP gateway CPU <= 1.3x the decode floor, the allocator make serve runs",
        f"{shown(twelve, 1.3)}x ({count} photos x {rounds} rounds)",
        twelve <= 1.3,
    )
    record("#19", "ordinary photos' gateway CPU <= 2.5x the decode floor", f"{shown(ordinary, 2.5)}x", ordinary <= 2.5)
    multipart = ratio(ORDINARY_MIX, MULTIPART)
    record(
        "#77",
        "ordinary photos' gateway CPU <= 2.5x the decode floor, uploaded as multipart (curl -F)",
        f"{shown(multipart, 2.5)}x",
        multipart <= 2.5,
    )
    triton_ratio = results[ORDINARY_MIX, "on"][1] / results[ORDINARY_MIX, ALONE][1]
    record(
        "#44",
        "standard: Triton CPU per request <= 1.7x RetinaFace alone's (ordinary photos)",
        f"{shown(triton_ratio, 1.7)}x",
        triton_ratio <= 1.7,
    )
    lines += [
        "",
        f"- gateway CPU / floor, ordinary photos: **{ratio(ORDINARY_MIX, 'on'):.2f}x** through shared memory, "
        f"{ratio(ORDINARY_MIX, 'off'):.2f}x as gRPC bytes, {multipart:.2f}x uploaded as multipart (target <= 2.5)",
        f"- gateway CPU / floor, 12 MP EXIF photos: **{ratio(TWELVE_MP, 'on'):.2f}x** through shared memory, "
        f"{ratio(TWELVE_MP, 'off'):.2f}x as gRPC bytes (target <= 1.3)",
        f"- both models against RetinaFace alone, ordinary photos: Triton CPU {triton_ratio:.2f}x, gateway CPU "
        f"{results[ORDINARY_MIX, 'on'][0] / results[ORDINARY_MIX, ALONE][0]:.2f}x",
        f"- floor, woken: the floor's work, each photo after {WAKE_AFTER_S * 1000:.0f} ms asleep (as the gateway's "
        "thread is while Triton runs): the part of the gap that is this machine waking up, not the gateway",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6, help="rounds over each photo class per transport")
    args = parser.parse_args()
    with running_stack("bench-cpu", intra_op_threads=2) as stack:
        print(report(stack, {}, args.rounds))


if __name__ == "__main__":
    main()
