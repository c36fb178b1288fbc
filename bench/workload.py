"""What the benchmarks send, and how: the shared photos and one call of the service."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Callable

import requests

from local_triton.processes import SHARED_FACES

PHOTO_SETS = ("demo", "dlib_voc_faces", "facemask", "wider_val_416sq")


def photo_paths() -> list[Path]:
    """The demo photos, then every photo of the labeled sets (not the 1024-pixel crowds)."""
    return sorted(SHARED_FACES.glob("demo/*.jpg")) + sorted(
        p for name in PHOTO_SETS[1:] for p in (SHARED_FACES / name / "images").glob("*.jpg")
    )


def load_photos() -> list[bytes]:
    paths = photo_paths()
    if not paths:
        sys.exit(f"no photos under {SHARED_FACES}: the checkout needs ../shared/faces beside it")
    return [p.read_bytes() for p in paths]


def service_call(url: str, endpoint: str = "/v1/detect", params: dict | None = None) -> Callable[[bytes], int]:
    """POST the bytes as body to `endpoint`, one session per thread; the status (0: no answer)."""
    sessions = threading.local()

    def call(data: bytes) -> int:
        if not hasattr(sessions, "session"):
            sessions.session = requests.Session()
        try:
            response = sessions.session.post(
                f"{url}{endpoint}", params=params, data=data, headers={"Content-Type": "image/jpeg"}, timeout=60
            )
        except requests.RequestException:
            return 0
        return response.status_code

    return call


def must_succeed(call: Callable[[bytes], int]) -> Callable[[bytes], None]:
    """A benchmark only counts answers: any other status stops it."""

    def checked(data: bytes) -> None:
        status = call(data)
        if status != 200:
            raise RuntimeError(f"the service answered {status}")

    return checked
