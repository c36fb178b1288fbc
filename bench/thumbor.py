"""thumbor 7.8's `smart` crop as a peer of /v1/crop: its own server, started beside ours.

thumbor runs from its own virtual environment (build/thumbor, from bench/thumbor.lock; OpenCV 4,
since OpenCV 5 has no CascadeClassifier) with its face detector (the Haar cascade
haarcascade_frontalface_alt.xml that ships inside thumbor) and, where that finds no face, its
feature detector. Every request is a cache miss: no result storage, and no storage of originals,
which is also where thumbor keeps detector results. EXIF orientation is applied and MAX_WIDTH /
MAX_HEIGHT are off, so the crop thumbor reports is in the upright original's pixels, like ours.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from urllib.parse import quote

import requests

from local_triton.processes import child_pids, free_port, stop, wait_until_ok

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "bench" / "thumbor.lock"
THUMBOR_VENV = ROOT / "build" / "thumbor"
LOADERS = {"file": "thumbor.loaders.file_loader", "http": "thumbor.loaders.http_loader"}


def thumbor_venv() -> Path:
    """build/thumbor, installed from bench/thumbor.lock once (and again whenever the lock changes)."""
    stamp = THUMBOR_VENV / "lock.sha256"
    digest = hashlib.sha256(LOCK.read_bytes()).hexdigest()
    if not stamp.exists() or stamp.read_text() != digest:
        shutil.rmtree(THUMBOR_VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(THUMBOR_VENV)], check=True)
        pip = [str(THUMBOR_VENV / "bin" / "pip"), "install", "--quiet", "--no-deps", "-r", str(LOCK)]
        subprocess.run(pip, check=True)
        stamp.write_text(digest)
    return THUMBOR_VENV


def thumbor_conf(root: Path, loader: str, work: Path) -> str:
    """thumbor.conf: `smart` by face then feature detection, nothing cached, anything it writes under `work`."""
    settings = {
        "LOADER": LOADERS[loader],
        "FILE_LOADER_ROOT_PATH": str(root.resolve()),
        "ALLOWED_SOURCES": ["127.0.0.1"],  # the http loader's hosts, matched literally
        "DETECTORS": ["thumbor.detectors.face_detector", "thumbor.detectors.feature_detector"],
        "STORAGE": "thumbor.storages.no_storage",  # originals and detector results
        "RESULT_STORAGE": "thumbor.result_storages.no_storage",
        "FILE_STORAGE_ROOT_PATH": str(work / "storage"),
        "RESULT_STORAGE_FILE_STORAGE_ROOT_PATH": str(work / "result_storage"),
        "ENABLE_ETAGS": False,
        "ALLOW_UNSAFE_URL": True,
        "QUALITY": 85,
        "RESPECT_ORIENTATION": True,
        "MAX_WIDTH": 0,
        "MAX_HEIGHT": 0,
    }
    return "".join(f"{name} = {value!r}\n" for name, value in settings.items())


@contextmanager
def running_thumbor(root: Path, loader: str = "file", processes: int = 1) -> Iterator[str]:
    """A thumbor server on a free loopback port, its base URL: `loader` "file" reads sources as paths under
    `root`, "http" as http://127.0.0.1:PORT/... URLs. `processes` as thumbor's --processes (0: one per core)."""
    with tempfile.TemporaryDirectory(prefix="thumbor-") as temp:
        work = Path(temp)
        (work / "thumbor.conf").write_text(thumbor_conf(root, loader, work))
        port = free_port()
        command = [
            str(thumbor_venv() / "bin" / "thumbor"),
            f"--conf={work / 'thumbor.conf'}",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--log-level=warning",
            f"--processes={processes}",
        ]
        log = work / "thumbor.log"
        with log.open("ab") as output:
            server = subprocess.Popen(
                command, cwd=work, env={**os.environ, "TMPDIR": temp}, stdout=output, stderr=subprocess.STDOUT
            )
        try:
            try:
                wait_until_ok(f"http://127.0.0.1:{port}/healthcheck", server, timeout_s=60)
            except (RuntimeError, TimeoutError) as error:
                raise RuntimeError(f"{error}\n{log.read_text(errors='replace')}") from error
            yield f"http://127.0.0.1:{port}"
        finally:
            stop_forked(server)


def stop_forked(server: subprocess.Popen, timeout_s: float = 15) -> None:
    """Stop thumbor and the workers it forked for --processes > 1: they exit cleanly on SIGTERM, then their
    parent (which restarts a worker that a signal killed, and dies of SIGTERM itself) exits on its own."""
    workers = child_pids(server.pid)
    for pid in workers:
        os.kill(pid, signal.SIGTERM)
    try:
        server.wait(timeout_s if workers else 0)
    except subprocess.TimeoutExpired:
        workers = child_pids(server.pid)
        stop(server)
        for pid in workers:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def smart_url(base_url: str, source: str, width: int, height: int, meta: bool = False) -> str:
    """thumbor's unsafe URL for a `smart` crop of `source` (a path under its root, or an http URL)."""
    return f"{base_url}/unsafe/{'meta/' if meta else ''}{width}x{height}/smart/{quote(source, safe='/:')}"


def smart_crop_rect(base_url: str, source: str, width: int, height: int) -> tuple[int, int, int, int]:
    """(x, y, w, h) of the region that `width`x`height` `smart` cuts out of the upright original, from thumbor's
    meta endpoint: its crop operation, already in those pixels (no pre-resize); the whole photo where it does
    not crop (the photo's ratio is the target's to 2 decimals)."""
    response = requests.get(smart_url(base_url, source, width, height, meta=True), timeout=60)
    response.raise_for_status()
    meta = response.json()["thumbor"]
    for operation in meta["operations"]:
        if operation["type"] == "crop":
            left, top = operation["left"], operation["top"]
            return left, top, operation["right"] - left, operation["bottom"] - top
    whole = requests.get(f"{base_url}/unsafe/meta/{quote(source, safe='/:')}", timeout=60)
    whole.raise_for_status()
    size = whole.json()["thumbor"]["source"]
    return 0, 0, size["width"], size["height"]


def smart_crop(base_url: str, source: str, width: int, height: int) -> bytes:
    """The JPEG thumbor answers for a `width`x`height` `smart` crop of `source`."""
    response = requests.get(smart_url(base_url, source, width, height), timeout=60)
    response.raise_for_status()
    return response.content
