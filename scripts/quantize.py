"""Make RetinaFace's int8 graph for OpenVINO (NNCF post-training quantization), as committed in
scripts/int8/: `python scripts/quantize.py` (from the repository root, after `make model`, with
`pip install nncf==3.4.0`; NNCF is not in the project's lock: the committed files are what runs).

- In: `retinaface_uint8`, the wire graph scripts/fetch_model.py builds (uint8 pixels in, the best
  candidates out), read by OpenVINO.
- Calibration: CALIBRATION_PICTURES pictures made here, not photos of the project's evaluation
  data (a user does not have those, and AP is measured on them, held out): matplotlib's sample
  portrait of Grace Hopper (a US Navy photo, public domain; in the pinned matplotlib wheel) as
  faces of 12 to 480 pixels, flipped, lightened and darkened, tiled over a blurred copy of itself on
  the gateway's four canonical shapes, as the standard pass sends them (uint8 BGR, long side 1024).
- NNCF's MIXED preset (weights symmetric, activations asymmetric), every picture, default fast bias
  correction; no accuracy control: AP50 moved by -0.0025 to +0.0001 at standard on the four labeled
  sets (bench/results/2026-11-29-session-22.md), within 0.005.
- Out: `scripts/int8/retinaface_uint8.xml` and `.bin` (OpenVINO IR, weights kept f32 where not int8)
  and `manifest.json` (the source graph's sha256, the versions, each file's sha256). fetch_model.py
  checks those sha256 and that the source is the graph it builds, and puts the files in place as
  `retinaface_uint8/1/model.int8.xml` and `.bin`.

The pictures and NNCF's statistics are deterministic; the bytes may differ in their last bits on
another CPU (the statistics' float sums): the committed files, sha256-checked, are the ones served.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import cv2
import matplotlib
import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "int8"
SOURCE = HERE.parent / "model_repository" / "retinaface_uint8" / "1" / "model.onnx"
NAME = "retinaface_uint8"
CALIBRATION_PICTURES = 64
SHAPES = ((768, 1024), (1024, 768), (576, 1024), (1024, 1024))  # (H, W): the standard pass's inputs
FACE_SIDES = (12, 20, 32, 48, 80, 140, 260, 480)  # pixels, small crowds' faces to one close-up
SEED = 20261129


def portrait() -> np.ndarray:
    """matplotlib's sample photo of Grace Hopper (BGR)."""
    path = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    return cv2.imread(str(path), cv2.IMREAD_COLOR)


def calibration_pictures(count: int = CALIBRATION_PICTURES) -> list[np.ndarray]:
    """`count` uint8 BGR batches of one picture each, [1, H, W, 3]: faces of one size per picture
    (cycling through FACE_SIDES, each 0.7-1.4x), as many as fit a sixth of it, over a blurred copy."""
    rng = np.random.default_rng(SEED)
    face = portrait()
    pictures = []
    for index in range(count):
        height, width = SHAPES[index % len(SHAPES)]
        ground = cv2.GaussianBlur(cv2.resize(face, (width, height), interpolation=cv2.INTER_AREA), (31, 31), 0)
        canvas = ((ground.astype(np.uint16) + rng.integers(0, 256, 3).astype(np.uint16)) // 2).astype(np.uint8)
        side = FACE_SIDES[index % len(FACE_SIDES)]
        for _ in range(max(1, min(200, height * width // (side * side * 6)))):
            size = max(8, int(side * rng.uniform(0.7, 1.4)))
            tile = cv2.resize(face, (size, size * face.shape[0] // face.shape[1]), interpolation=cv2.INTER_AREA)
            if rng.random() < 0.5:
                tile = tile[:, ::-1]
            tile = np.clip(tile * rng.uniform(0.6, 1.3) + rng.uniform(-30, 30), 0, 255).astype(np.uint8)
            y, x = (
                int(rng.integers(0, max(1, height - tile.shape[0]))),
                int(rng.integers(0, max(1, width - tile.shape[1]))),
            )
            h, w = min(tile.shape[0], height - y), min(tile.shape[1], width - x)
            canvas[y : y + h, x : x + w] = tile[:h, :w]
        pictures.append(canvas[None])
    return pictures


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    import nncf
    import openvino

    if not SOURCE.is_file():
        sys.exit(f"{SOURCE} is missing: run `make model` first")
    pictures = calibration_pictures()
    quantized = nncf.quantize(
        openvino.Core().read_model(str(SOURCE)),
        nncf.Dataset(pictures),
        preset=nncf.QuantizationPreset.MIXED,
        subset_size=len(pictures),
    )
    OUT.mkdir(exist_ok=True)
    xml = OUT / f"{NAME}.xml"
    openvino.save_model(quantized, str(xml), compress_to_fp16=False)
    manifest = {
        "source": f"{NAME}/1/model.onnx",
        "source_sha256": sha256_of(SOURCE),
        "openvino": openvino.__version__,
        "nncf": nncf.__version__,
        "calibration": f"{len(pictures)} pictures from scripts/quantize.py (seed {SEED})",
        "files": {path.name: sha256_of(path) for path in (xml, xml.with_suffix(".bin"))},
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(json.dumps(manifest, indent=2))


if __name__ == "__main__":
    main()
