"""What the benchmarks send, and how: the shared photos and one call of the service."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import Callable

import requests

from local_triton.processes import SHARED_FACES, running_stack

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


URL_FORM = "/cdn-cgi/image/"


def service_call(
    url: str, endpoint: str = "/v1/detect", params: dict | None = None, upload: str = "raw"
) -> Callable[[bytes], int]:
    """POST the bytes to `endpoint` as the body (`upload` raw) or as multipart field `image` (as
    `curl -F image=@photo.jpg` sends it), one session per thread; the status (0: no answer). For
    the URL form (an endpoint under URL_FORM, its options), GET the source the bytes name instead."""
    sessions = threading.local()

    def call(data: bytes) -> int:
        if not hasattr(sessions, "session"):
            sessions.session = requests.Session()
        try:
            if endpoint.startswith(URL_FORM):
                response = sessions.session.get(f"{url}{endpoint}/{data.decode()}", timeout=60)
            elif upload == "multipart":
                files = {"image": ("photo.jpg", data, "image/jpeg")}
                response = sessions.session.post(f"{url}{endpoint}", params=params, files=files, timeout=60)
            else:
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


def report_command(doc: str, stack_name: str, report: Callable[[str, bool], str], flag: str, flag_help: str) -> None:
    """The command line of a report on the service: `--url` measures a running gateway, else a
    local stack is started for it; `flag` (a switch) widens the report."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="measure a running gateway instead of starting a local stack")
    parser.add_argument(flag, action="store_true", help=flag_help)
    args = parser.parse_args()
    wider = getattr(args, flag.lstrip("-").replace("-", "_"))
    if args.url:
        print(report(args.url, wider))
        return
    with running_stack(stack_name, intra_op_threads=2) as stack:
        print(report(stack.gateway, wider))
