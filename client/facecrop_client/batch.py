"""Resumable batch runs over a directory tree: the output is the manifest of what is done."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, TextIO

from tqdm import tqdm

from facecrop_client.client import Client, FacecropError

IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".webp", ".avif", ".heic", ".heif", ".bmp", ".gif", ".tif", ".tiff"}
)
VIDEO_SUFFIXES = frozenset({".mp4", ".mov", ".m4v", ".mkv", ".webm", ".avi"})  # batch --mode anonymize
CROP_SUFFIXES = {"jpeg": ".jpg", "png": ".png", "webp": ".webp", "avif": ".avif"}
SUFFIX_FORMATS = {".jpg": "jpeg", ".jpeg": "jpeg", ".png": "png", ".webp": "webp", ".avif": "avif"}


def find_images(root: Path, suffixes: frozenset[str] = IMAGE_SUFFIXES) -> list[str]:
    """Image files (or others, by `suffixes`) under `root`, as sorted POSIX paths relative to it."""
    found = []
    for directory, _, files in os.walk(root):
        for name in files:
            if Path(name).suffix.lower() in suffixes:
                found.append((Path(directory) / name).relative_to(root).as_posix())
    return sorted(found)


class DetectSink:
    """One JSON line per image (the response plus `path`) in a JSON Lines file."""

    def __init__(self, output: Path):
        self.output = output
        self.written: set[str] = set()

    def load(self) -> None:
        """Read the paths already written; a last line cut short by a crash is removed first."""
        if not self.output.exists():
            return
        data = self.output.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) != len(data):
            with open(self.output, "r+b") as file:
                file.truncate(len(complete))
        self.written = {json.loads(line)["path"] for line in complete.splitlines() if line.strip()}

    def is_done(self, relative: str) -> bool:
        return relative in self.written

    def open(self) -> None:
        self.output.parent.mkdir(parents=True, exist_ok=True)
        self.file: TextIO = open(self.output, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def call(self, client: Client, path: Path, params: dict) -> dict:
        return client.detect(path, **params).raw

    def write(self, relative: str, result: dict) -> None:
        self.file.write(json.dumps({"path": relative, **result}) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class PictureSink:
    """The pictures an endpoint returns (crops, anonymized photos), mirroring the input tree;
    each appears whole (written aside, then renamed)."""

    def __init__(self, output: Path, fmt: str | None, endpoint: str = "crop"):
        self.output = output
        self.format = fmt
        self.endpoint = endpoint  # the Client method: crop or anonymize

    def format_of(self, relative: str) -> str:
        return self.format or SUFFIX_FORMATS.get(Path(relative).suffix.lower(), "jpeg")

    def target(self, relative: str) -> Path:
        return (self.output / relative).with_suffix(CROP_SUFFIXES[self.format_of(relative)])

    def load(self) -> None:
        pass  # the crops on disk are the manifest

    def is_done(self, relative: str) -> bool:
        return self.target(relative).exists()

    def open(self) -> None:
        self.output.mkdir(parents=True, exist_ok=True)

    def call(self, client: Client, path: Path, params: dict) -> bytes:
        return getattr(client, self.endpoint)(path, **params, format=self.format_of(path.name)).content

    def write(self, relative: str, content: bytes) -> None:
        target = self.target(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_bytes(content)
        os.replace(partial, target)

    def close(self) -> None:
        pass


@dataclass
class Summary:
    total: int
    skipped: int = 0
    succeeded: int = 0
    failed: int = 0
    interrupted: bool = False
    seconds: float = 0.0

    def line(self) -> str:
        rate = self.succeeded / self.seconds if self.seconds else 0.0
        state = "interrupted (run again to continue)" if self.interrupted else "done"
        return (
            f"{state}: {self.total} images, {self.skipped} already done, {self.succeeded} processed, "
            f"{self.failed} failed, {self.seconds:.1f} s ({rate:.1f} images/s)"
        )


LOG_INTERVAL_S = 10.0
LOG_FORMAT = (
    "{{n_fmt}}/{{total_fmt}} {things} ({{percentage:.0f}}%) in {{elapsed}}, {{rate_fmt}}, ETA {{remaining}}{{postfix}}"
)


class LogLines(tqdm):
    """tqdm for logs and pipes: each refresh is one plain line (no carriage return)."""

    def display(self, msg: str | None = None, pos: int | None = None) -> None:
        if msg is None:  # tqdm passes "" only to erase a bar, and a log has none to erase
            self.fp.write(f"{self}\n")
            self.fp.flush()


def progress_bar(
    total: int, stream: TextIO | None = None, quiet: bool = False, unit: str = "img", things: str = "images"
) -> tqdm:
    """Progress on `stream` (stderr): a live bar on a terminal, else a line every LOG_INTERVAL_S; none if quiet.
    Images show their failures so far; other things (video frames) do not."""
    postfix = {"failed": 0} if things == "images" else None
    stream = stream or sys.stderr
    if quiet:
        return tqdm(total=total, disable=True)
    if stream.isatty():
        return tqdm(total=total, file=stream, unit=unit, dynamic_ncols=True, postfix=postfix)
    return LogLines(
        total=total,
        file=stream,
        unit=unit,
        bar_format=LOG_FORMAT.format(things=things),
        mininterval=LOG_INTERVAL_S,
        maxinterval=LOG_INTERVAL_S,
        leave=False,  # the summary line follows
        postfix=postfix,
    )


def run_batch(
    client: Client,
    root: Path,
    sink,
    params: dict,
    concurrency: int,
    failures_path: Path,
    progress: Callable[[int], tqdm] = progress_bar,
) -> Summary:
    """Process every image under `root` not yet in the output; failures go to `failures_path`.

    `progress(count)` makes the progress display for the `count` images to do."""
    images = find_images(root)
    sink.load()
    todo = [relative for relative in images if not sink.is_done(relative)]
    summary = Summary(total=len(images), skipped=len(images) - len(todo))
    bar = progress(len(todo))
    started = time.monotonic()
    sink.open()
    with open(failures_path, "w", encoding="utf-8") as failures:
        queue = iter(todo)
        running: dict[Future, str] = {}
        pool = ThreadPoolExecutor(concurrency)
        try:
            _fill(pool, running, queue, client, root, sink, params, 2 * concurrency)
            while running:
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    relative = running.pop(future)
                    try:
                        sink.write(relative, future.result())
                        summary.succeeded += 1
                    except (FacecropError, OSError) as error:
                        summary.failed += 1
                        failures.write(json.dumps({"path": relative, **_reason(error)}) + "\n")
                        failures.flush()
                        bar.set_postfix(failed=summary.failed, refresh=False)
                    bar.update()
                _fill(pool, running, queue, client, root, sink, params, 2 * concurrency)
        except KeyboardInterrupt:
            summary.interrupted = True
            for future in running:
                future.cancel()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            sink.close()
            bar.close()
            summary.seconds = time.monotonic() - started
    return summary


def _fill(pool, running: dict, queue: Iterator[str], client, root: Path, sink, params: dict, window: int) -> None:
    """Keep at most `window` images submitted (memory stays flat on any tree size)."""
    while len(running) < window:
        relative = next(queue, None)
        if relative is None:
            return
        running[pool.submit(sink.call, client, root / relative, params)] = relative


def _reason(error: FacecropError | OSError) -> dict:
    if isinstance(error, FacecropError):
        return {"status": error.status, "code": error.code, "message": error.message}
    return {"status": 0, "code": "read_error", "message": file_problem(error)}


def file_problem(error: OSError) -> str:
    """One line naming the file: "photos/a.jpg: No such file or directory"."""
    if error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return str(error)
