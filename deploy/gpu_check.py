"""The first minutes on a real GPU host: checks, in order, that the compose stack works there.

Usage (from the repository root, after `make venv`, with ../shared/faces beside it):
    .venv/bin/python deploy/gpu_check.py            # or: make gpu-check

Each step prints `ok` or `FAIL` with what failed; the exit status is 1 if any step failed.
It starts, restarts and finally leaves running the production stack (`docker compose`).
It cannot run without an NVIDIA GPU, so CI never runs it: the unit tests check its logic.

1. driver: `nvidia-smi` answers and the driver is new enough for Triton 24.10 (CUDA 12.6):
   R560 or newer, or on data-centre GPUs a forward-compatible branch (R470.57+, R525, R535, R545).
2. first start: `docker compose up -d --build --wait`, timed (TensorRT builds the engines).
3. Triton's log: no TensorRT provider failure (EP_FAIL, missing profile shapes, fallback).
4. both models ready, their engines in /trt-cache.
5. restart: Triton restarted is ready again in a fraction of the first start (cache reused).
6. batches up to max_batch_size (detail=high sends 9 tiles) at 1024x1024: no new engine.
7. TensorRT (FP16) vs plain CUDA: the same faces on the shared photos (configs/cuda.pbtxt).
8. `python -m bench` against the running stack.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHOTOS = ROOT.parent / "shared" / "faces" / "demo"
GATEWAY = f"http://127.0.0.1:{os.environ.get('FACECROP_PORT', '8080')}"  # the ports docker-compose.yml publishes
TRITON_HTTP = f"http://127.0.0.1:{os.environ.get('TRITON_HTTP_PORT', '8000')}"
TRITON_GRPC = f"127.0.0.1:{os.environ.get('TRITON_GRPC_PORT', '8001')}"
# faces_uint8: the ensemble that runs both uint8 graphs on one request
MODELS = ("retinaface_uint8", "retinaface", "yunet_n_uint8", "yunet_n", "faces_uint8")
# Triton 24.10 is built on CUDA 12.6: R560+, or a data-centre forward-compatibility branch.
MIN_DRIVER = 560
COMPATIBLE_BRANCHES = {470: 57, 525: 0, 535: 0, 545: 0}
FAILURE_PATTERNS = re.compile(
    r"EP_FAIL|provide all the dynamic shape|profile|Falling back|TensorRT EP .*fail|UNAVAILABLE", re.I
)


def driver_verdict(version: str) -> tuple[bool, str]:
    """Whether the driver `version` (e.g. '560.35.03') can run Triton 24.10, and what to know."""
    major, minor = (int(part) for part in version.split(".")[:2])
    if major >= MIN_DRIVER:
        return True, f"driver {version}"
    if major in COMPATIBLE_BRANCHES and minor >= COMPATIBLE_BRANCHES[major]:
        return True, f"driver {version}: CUDA 12.6 through forward compatibility, data-centre GPUs only"
    return False, f"driver {version} is older than R{MIN_DRIVER} (Triton 24.10 needs CUDA 12.6)"


def log_failures(log: str) -> list[str]:
    """Lines of Triton's log that show TensorRT refusing a model or a shape."""
    return [line for line in log.splitlines() if FAILURE_PATTERNS.search(line)]


def same_faces(
    tensorrt: list[dict], cuda: list[dict], min_iou: float = 0.8, max_confidence_gap: float = 3.0
) -> str | None:
    """Why two /v1/detect face lists disagree beyond FP16 noise, or None when they agree."""
    if abs(len(tensorrt) - len(cuda)) > max(1, len(cuda) // 20):
        return f"{len(tensorrt)} faces with TensorRT, {len(cuda)} with CUDA"
    unmatched = 0
    for face in cuda:
        best = max(tensorrt, key=lambda other: iou(face["face_rectangle"], other["face_rectangle"]), default=None)
        overlap = iou(face["face_rectangle"], best["face_rectangle"]) if best else 0.0
        if overlap < min_iou or abs(best["confidence"] - face["confidence"]) > max_confidence_gap:
            unmatched += 1
    return f"{unmatched} of {len(cuda)} faces differ" if unmatched > max(1, len(cuda) // 20) else None


def iou(a: dict, b: dict) -> float:
    width = max(0, min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"]))
    height = max(0, min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"]))
    overlap = width * height
    return overlap / (a["width"] * a["height"] + b["width"] * b["height"] - overlap or 1)


def sh(*command: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    if check and result.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result.stdout


def compose_up(model_config: str | None = None) -> float:
    """`docker compose up -d --wait` (TRITON_MODEL_CONFIG=model_config); seconds until healthy."""
    env = dict(os.environ)
    env.pop("TRITON_MODEL_CONFIG", None)
    if model_config:
        env["TRITON_MODEL_CONFIG"] = model_config
    started = time.monotonic()
    sh("docker", "compose", "up", "-d", "--build", "--wait", "--wait-timeout", "900", env=env)
    return time.monotonic() - started


def ready_after_restart() -> float:
    started = time.monotonic()
    sh("docker", "compose", "restart", "triton")
    while time.monotonic() - started < 900:
        try:
            with urllib.request.urlopen(f"{TRITON_HTTP}/v2/health/ready", timeout=2) as response:
                if response.status == 200:
                    return time.monotonic() - started
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError("Triton was not ready within 15 minutes of a restart")


def cached_engines() -> list[str]:
    return sh("docker", "compose", "exec", "-T", "triton", "find", "/trt-cache", "-type", "f").split()


def run_batches() -> None:
    """Every batch size up to max_batch_size at 1024x1024, on both models, straight to Triton."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(TRITON_GRPC)
    for model in MODELS:
        config = client.get_model_config(model, as_json=True)["config"]
        uint8 = config["input"][0]["data_type"] == "TYPE_UINT8"
        for batch in range(1, int(config["max_batch_size"]) + 1):
            shape = [batch, 1024, 1024, 3] if uint8 else [batch, 3, 1024, 1024]
            tensor = np.zeros(shape, np.uint8 if uint8 else np.float32)
            model_input = grpcclient.InferInput("input", shape, "UINT8" if uint8 else "FP32")
            model_input.set_data_from_numpy(tensor)
            client.infer(model, [model_input], client_timeout=120)


def detect_all() -> dict[str, list[dict]]:
    from facecrop_client import Client

    client = Client(GATEWAY, timeout=120)
    return {
        p.name: client.detect(p, min_confidence=20, max_faces=1000, detail="high").raw["faces"]
        for p in sorted(PHOTOS.glob("*.jpg"))
    }


def main() -> int:
    failed = 0

    def step(name: str, check) -> object:
        nonlocal failed
        try:
            outcome = check()
        except Exception as error:  # a step's failure is reported, and the next steps still run
            outcome = f"FAIL: {error}"
        if isinstance(outcome, str) and outcome.startswith("FAIL"):
            failed += 1
            print(f"{name}: {outcome}", flush=True)
            return None
        print(f"{name}: ok{'' if outcome is None else f' ({outcome})'}", flush=True)
        return outcome

    def driver():
        version, name = (
            sh("nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader").splitlines()[0].split(",", 1)
        )
        usable, verdict = driver_verdict(version.strip())
        return f"{verdict}, {name.strip()}" if usable else f"FAIL: {verdict}"

    step("1 driver", driver)
    first_start = step("2 first start (engine builds)", lambda: round(compose_up(), 1))

    def log_check():
        lines = log_failures(sh("docker", "compose", "logs", "--no-color", "triton"))
        return "FAIL: " + "\n".join(lines[:20]) if lines else None

    step("3 Triton log", log_check)

    def models_ready():
        for model in MODELS:
            with urllib.request.urlopen(f"{TRITON_HTTP}/v2/models/{model}/ready", timeout=5) as response:
                if response.status != 200:
                    return f"FAIL: {model} is not ready"
        engines = cached_engines()
        return f"{len(engines)} files in /trt-cache" if engines else "FAIL: no engine in /trt-cache"

    step("4 models and engines", models_ready)

    def restart():
        seconds = ready_after_restart()
        if first_start and seconds > max(60.0, first_start / 2):
            return f"FAIL: ready after {seconds:.0f} s (first start {first_start:.0f} s): the cache was not reused"
        return f"{seconds:.1f} s"

    step("5 restart reuses the engines", restart)

    def batches():
        before = set(cached_engines())
        started = time.monotonic()
        run_batches()
        new = set(cached_engines()) - before
        return (
            f"FAIL: new engine files {sorted(new)}"
            if new
            else f"{time.monotonic() - started:.1f} s for all batch sizes"
        )

    step("6 batches 1..max at 1024x1024 without a rebuild", batches)

    def parity():
        tensorrt = detect_all()
        compose_up("cuda")
        try:
            cuda = detect_all()
        finally:
            compose_up()
        problems = [f"{name}: {why}" for name in cuda if (why := same_faces(tensorrt[name], cuda[name]))]
        return "FAIL: " + "; ".join(problems) if problems else f"{sum(map(len, cuda.values()))} faces agree"

    step("7 TensorRT vs CUDA parity", parity)
    step("8 bench", lambda: print(sh(sys.executable, "-m", "bench", "--url", GATEWAY, "--triton-url", TRITON_HTTP)))
    print(json.dumps({"failed_steps": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
