"""Resumable batch runs over a directory tree: the output is the manifest of what is done."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

from tqdm import tqdm

from facecrop_client.client import UNREADABLE_ANSWER, AnyClient, FacecropError
from facecrop_client.models import AnonymizeResult, CropResult
from facecrop_client.sources import Folder, Item, Source

IMAGE_SUFFIXES = frozenset(
    {".jpg", ".jpeg", ".png", ".apng", ".webp", ".avif", ".avifs", ".heic", ".heif", ".bmp", ".gif", ".tif", ".tiff"}
)
VIDEO_SUFFIXES = frozenset({".mp4", ".mov", ".m4v", ".mkv", ".webm", ".avi"})  # batch --mode anonymize
CROP_SUFFIXES = {"jpeg": ".jpg", "png": ".png", "webp": ".webp", "avif": ".avif", "gif": ".gif"}
CONTENT_FORMATS = {f"image/{fmt}": fmt for fmt in CROP_SUFFIXES}  # the picture's Content-Type, its format
# what the service answers in where it cannot answer in the format asked (AVIF past its 1,600-pixel bound: WebP)
SUBSTITUTES = {"avif": ("webp",)}
# the format a photo's picture goes out in, by its suffix (an animated GIF, WebP, PNG or AVIF stays animated)
SUFFIX_FORMATS = {
    ".jpg": "jpeg",
    ".jpeg": "jpeg",
    ".png": "png",
    ".apng": "png",
    ".webp": "webp",
    ".avif": "avif",
    ".avifs": "avif",
    ".gif": "gif",
}
PARTIAL_SUFFIX = ".partial"


class DetectSink:
    """One JSON line per image (the response plus `path`) in a JSON Lines file."""

    def __init__(self, output: Path):
        self.output = output
        self.written: set[str] = set()

    def load(self, images: list[Item]) -> None:
        """Read the paths already written; a last line cut short by a crash is removed then. A file
        whose whole lines are not all a batch's (another tool's, a list of photos) is refused
        untouched (OutputError): its last line was cut off, then a traceback."""
        if not self.output.exists():
            return
        data = self.output.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        try:
            rows = [json.loads(line) for line in complete.splitlines() if line.strip()]
            self.written = {row["path"] for row in rows}
        except (ValueError, TypeError, KeyError):
            said = "holds lines that are not a batch's (JSON with a path): give another file"
            raise OutputError(f"{self.output} {said}") from None
        if len(complete) != len(data):
            with open(self.output, "r+b") as file:
                file.truncate(len(complete))

    def is_done(self, relative: str) -> bool:
        return relative in self.written

    def check(self, relative: str) -> None:
        """Every image may be sent (each has its own line)."""

    def __getstate__(self) -> dict:
        """What a Ray task needs of it (the driver alone writes the file and knows what is done)."""
        return {"output": self.output, "written": set()}

    def open(self) -> None:
        self.output.parent.mkdir(parents=True, exist_ok=True)
        self.file: TextIO = open(self.output, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def call(self, client: AnyClient, image: bytes | Path, name: str, params: dict) -> dict:
        return client.detect(image, **params).raw

    def write(self, relative: str, result: dict) -> Path:
        self.file.write(json.dumps({"path": relative, **result}) + "\n")
        self.file.flush()
        return self.output

    def output_of(self, relative: str) -> Path:
        return self.output

    @staticmethod
    def faces(result: dict) -> int:
        return len(result["faces"])

    def close(self) -> None:
        self.file.close()


class PictureSink:
    """The pictures an endpoint returns (crops, anonymized photos), mirroring the input tree;
    each appears whole (written aside, then renamed)."""

    def __init__(self, output: Path, fmt: str | None, endpoint: str):
        self.output = output
        self.format = fmt
        self.endpoint = endpoint  # the Client method: crop or anonymize
        self.written_by: dict[str, str] = {}  # an image whose output an earlier one writes -> that one

    def format_of(self, relative: str) -> str:
        return self.format or SUFFIX_FORMATS.get(Path(relative).suffix.lower(), "jpeg")

    def target(self, relative: str) -> Path:
        """Where the picture goes in the format asked for."""
        return self.outputs(relative)[0]

    def outputs(self, relative: str) -> list[Path]:
        """Where the picture may be: named for the format asked for, or for the one the service
        answers in instead (a photo asked for as AVIF, larger than AVIF's bound, is a WebP)."""
        fmt = self.format_of(relative)
        return [self.named(relative, each) for each in (fmt, *SUBSTITUTES.get(fmt, ()))]

    def named(self, relative: str, fmt: str) -> Path:
        """The picture of `relative` in `fmt`, under the output folder."""
        return (self.output / relative).with_suffix(CROP_SUFFIXES[fmt])

    def load(self, images: list[Item]) -> None:
        """Note each image whose output an earlier one writes, or may write (x.jpeg's and x.heic's are
        x.jpg's; x.avif's is x.webp's where the service answers a WebP): it fails (same_output)
        rather than overwrite that one or pass for done. The outputs on disk are the manifest."""
        writers: dict[Path, str] = {}
        for item in images:
            for output in self.outputs(item.name):  # x.avif's may be x.webp, x.webp's own
                writer = writers.setdefault(output, item.name)
                if writer != item.name:
                    self.written_by.setdefault(item.name, writer)

    def is_done(self, relative: str) -> bool:
        return relative not in self.written_by and any(path.exists() for path in self.outputs(relative))

    def open(self) -> None:
        self.output.mkdir(parents=True, exist_ok=True)

    def check(self, relative: str) -> None:
        """Refuse (same_output) an image whose output an earlier one writes, before it is read."""
        if relative in self.written_by:
            message = f"its output, {self.target(relative)}, is {self.written_by[relative]}'s: rename one of the two"
            raise FacecropError(0, "same_output", message)

    def call(self, client: AnyClient, image: bytes | Path, name: str, params: dict) -> CropResult | AnonymizeResult:
        return getattr(client, self.endpoint)(image, **params, format=self.format_of(name))

    def write(self, relative: str, result: CropResult | AnonymizeResult) -> Path:
        """The picture, whole or not at all, named for the format it came back in (a WebP where an
        AVIF was asked for and could not be: it was written as a .avif): written under a name of its
        own (two writers of the same output, say a task run again after its node died, never share
        one), then renamed; where it went."""
        fmt = CONTENT_FORMATS.get(result.content_type.split(";")[0].strip(), self.format_of(relative))
        target = self.named(relative, fmt)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f"{target.name}.{uuid.uuid4().hex}{PARTIAL_SUFFIX}")
        try:
            partial.write_bytes(result.content)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        return target

    def output_of(self, relative: str) -> Path:
        """The picture written for `relative` (one is: `is_done`)."""
        return next(path for path in self.outputs(relative) if path.exists())

    @staticmethod
    def faces(result: CropResult | AnonymizeResult) -> int:
        return result.face_count

    def close(self) -> None:
        pass


# Failures of the service's or of this client's, not the photo's: nobody answers (after the
# retries), the key is refused (401, 403), the address is not facecrop's (404: no upload is ever
# answered so; a success that is not facecrop's answer: a login page, a proxy's own), the service is
# unavailable past the retries (503), the outputs' storage is full or read-only (storage_error).
# Every photo after would fail the same way, so the run stops at the first, which is not counted as
# the photo's failure (the next run does it).
RUN_STOPPING_STATUSES = frozenset({401, 403, 404, 503})
RUN_STOPPING_CODES = frozenset({"connection_error", "storage_error", UNREADABLE_ANSWER})
# A photo the service took but never answered (past --timeout and the retries) while it still answers
# (its /healthz): that photo's failure, unless so many fail so in a row that the service is what fails.
NOT_ANSWERED = "not_answered"
UNANSWERED_IN_A_ROW = 5
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})  # a write_error of every output


def stops_the_run(error: dict) -> bool:
    """Whether a failure (`reason`'s dict) is the service's or this client's, not the photo's."""
    return error["code"] in RUN_STOPPING_CODES or error["status"] in RUN_STOPPING_STATUSES


def failure_line(error: dict) -> str:
    """A failure in one line, as FacecropError says it: "401 unauthorized: ..."."""
    return str(FacecropError(error["status"], error["code"], error["message"]))


@dataclass
class Summary:
    total: int
    skipped: int = 0
    succeeded: int = 0
    failed: int = 0
    interrupted: bool = False
    seconds: float = 0.0
    stopped: str = ""  # why the run stopped before its end (stops_the_run), in one line

    @property
    def ended_early(self) -> bool:
        return self.interrupted or bool(self.stopped)

    def line(self) -> str:
        rate = self.succeeded / self.seconds if self.seconds else 0.0
        state = "interrupted (run again to continue)" if self.interrupted else "done"
        if self.stopped:
            state = "stopped (run again to continue)"
        counts = (
            f"{state}: {self.total} images, {self.skipped} already done, {self.succeeded} processed, "
            f"{self.failed} failed, {self.seconds:.1f} s ({rate:.1f} images/s)"
        )
        return f"{counts}; why: {self.stopped}" if self.stopped else counts


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


@dataclass
class Ledger:
    """What a batch writes as its items finish, whichever engine ran them: one manifest line per
    item (source, output, faces, status, error, duration_ms), the failures file, the counts.

    `settle` judges each photo's end first: a failure of the service's stops the run (`stops_the_run`),
    and a photo not answered (NOT_ANSWERED) is held until an answer after it shows the service works
    (then it is the photo's failure, as at the run's end) or UNANSWERED_IN_A_ROW of them show that it
    does not (the run stops; none is counted, the next run sends them again)."""

    summary: Summary
    manifest: TextIO
    failures: TextIO
    bar: tqdm
    unanswered: list[tuple[str, dict, float]] = field(default_factory=list)

    def settle(self, source: str, output: Path | str, faces: int, error: dict | None, seconds: float) -> None:
        """One photo ended: recorded, held (not answered) or, where the service failed, the run stopped."""
        if error and stops_the_run(error):
            self.summary.stopped = self.summary.stopped or failure_line(error)
        elif error and error["code"] == NOT_ANSWERED:
            self.unanswered.append((source, error, seconds))
            if len(self.unanswered) >= UNANSWERED_IN_A_ROW and not self.summary.stopped:
                self.summary.stopped = f"{failure_line(error)} ({len(self.unanswered)} photos in a row)"
        else:
            self.release()
            self.record(source, output, faces, error, seconds)

    def release(self) -> None:
        """The photos held as not answered, each its own failure: the service answered after them."""
        for source, error, seconds in self.unanswered:
            self.record(source, "", 0, error, seconds)
        self.unanswered.clear()

    def record(
        self, source: str, output: Path | str, faces: int, error: dict | None, seconds: float, image: bool = True
    ) -> None:
        """One item done (or failed); `image`: counted among the summary's images (videos are not)."""
        self._line(source, output, faces, error, round(seconds * 1000, 1))
        if error:
            self.summary.failed += 1
            self.failures.write(json.dumps({"path": source, **error}) + "\n")
            self.failures.flush()
            self.bar.set_postfix(failed=self.summary.failed, refresh=False)
        elif image:
            self.summary.succeeded += 1
        if image:
            self.bar.update()

    def found(self, sources: list[str], sink) -> None:
        """Items already done that no line lists (written by a run interrupted before it could
        record them): listed now, so the manifest names every output once."""
        for source in sources:
            self._line(source, sink.output_of(source), None, None, None)

    def _line(
        self, source: str, output: Path | str, faces: int | None, error: dict | None, duration_ms: float | None
    ) -> None:
        row = {"source": source, "output": str(output), "faces": faces, "status": "failed" if error else "done"}
        self.manifest.write(json.dumps({**row, "error": error, "duration_ms": duration_ms}) + "\n")
        self.manifest.flush()


class OutputError(ValueError):
    """An output folder a run cannot take as its own (one line, naming it)."""


def manifest_path(output: Path) -> Path:
    """The manifest beside a batch's output: OUTPUT.manifest.jsonl."""
    return output.with_name(output.name + ".manifest.jsonl")


def foreign(output: Path, sources: list[str]) -> str:
    """Why a first run refuses an output that already holds its outputs' names (no run wrote them:
    taken as done, copies of the photos were listed as anonymized)."""
    named = ", ".join(sources[:3]) + (f" and {len(sources) - 3} more" if len(sources) > 3 else "")
    return (
        f"{output} already holds the outputs of {named}, and no run wrote them (it has no "
        f"{manifest_path(output).name}): give an empty or new output, or move them away"
    )


def unlisted(images: list[Item], todo: list[Item], manifest: Path) -> list[str]:
    """The images done before this run that the manifest does not list."""
    listed = set()
    if manifest.exists():
        for line in manifest.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                row = json.loads(line)
                if row["status"] == "done":
                    listed.add(row["source"])
    waiting = {item.name for item in todo}
    return [item.name for item in images if item.name not in waiting and item.name not in listed]


@contextmanager
def ledger_of(
    sink, images: list[Item], todo: list[Item], summary: Summary, failures_path: Path, bar: tqdm
) -> Iterator[Ledger]:
    """A run's Ledger, either engine's: the sink opened, the failures file begun anew, the manifest
    appended to (first the items an interrupted run wrote but did not list)."""
    manifest = manifest_path(sink.output)
    earlier = unlisted(images, todo, manifest)
    if earlier and isinstance(sink, PictureSink) and not manifest.exists():
        raise OutputError(foreign(sink.output, earlier))
    sink.open()
    with open(failures_path, "w", encoding="utf-8") as failures, open(manifest, "a", encoding="utf-8") as lines:
        ledger = Ledger(summary, lines, failures, bar)
        ledger.found(earlier, sink)
        yield ledger
        if not summary.ended_early:  # every photo sent and the service still there: theirs
            ledger.release()


@contextmanager
def videos_ledger(output: Path, summary: Summary, failures_path: Path) -> Iterator[Ledger]:
    """The Ledger a batch's videos are recorded in after its photos' (the local engine's): the
    manifest and the failures file added to."""
    manifest = manifest_path(output)
    with open(failures_path, "a", encoding="utf-8") as failures, open(manifest, "a", encoding="utf-8") as lines:
        yield Ledger(summary, lines, failures, progress_bar(0, quiet=True))


def video_failure(source: Path, error: Exception) -> dict:
    """A video's failure as either engine records it (the failures file, the manifest, the line that
    `video --ray` tells): one line naming the video."""
    if isinstance(error, FacecropError):
        message = f"{source}: {error}"
    elif isinstance(error, OSError):
        message = file_problem(error)
    else:  # facecrop_client.video.VideoError, which names its file
        message = str(error)
    return {"status": 0, "code": "video_failed", "message": message}


def videos_to_do(root: Path, output: Path) -> list[str]:
    """The videos under `root` (batch --mode anonymize; none under `output`) whose output is not there yet."""
    videos = Folder(root, output).items(VIDEO_SUFFIXES)
    return [item.name for item in videos if not (output / item.name).exists()]


def todo_of(source: Source, sink) -> tuple[list[Item], list[Item]]:
    """Every image of `source`, and those not yet in the sink's output (what a run does)."""
    images = source.items(IMAGE_SUFFIXES)
    sink.load(images)
    return images, [item for item in images if not sink.is_done(item.name)]


def run_batch(
    client: AnyClient,
    source: Source,
    sink,
    params: dict,
    concurrency: int,
    failures_path: Path,
    progress: Callable[[int], tqdm] = progress_bar,
) -> Summary:
    """Process every image of `source` not yet in the output; failures go to `failures_path`,
    every item to the manifest beside the output.

    `progress(count)` makes the progress display for the `count` images to do."""
    images, todo = todo_of(source, sink)
    summary = Summary(total=len(images), skipped=len(images) - len(todo))
    bar = progress(len(todo))
    started = time.monotonic()
    with ledger_of(sink, images, todo, summary, failures_path, bar) as ledger:
        queue = iter(todo)
        running: dict[Future, Item] = {}
        pool = ThreadPoolExecutor(concurrency)
        try:
            _fill(pool, running, queue, client, source, sink, params, 2 * concurrency)
            while running:
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    name = running.pop(future).name
                    finished_as, error, seconds = _finish(future, sink, name)
                    if error is None:
                        result, written = finished_as
                        ledger.settle(name, written, sink.faces(result), None, seconds)
                    else:
                        ledger.settle(name, "", 0, error, seconds)
                if not summary.stopped:  # else the photos in flight end; no more are sent
                    _fill(pool, running, queue, client, source, sink, params, 2 * concurrency)
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


def _finish(future: Future, sink, name: str) -> tuple[Any, dict | None, float]:
    """A finished call's answer and where `sink` wrote it, and its seconds; where the call or the
    write failed, None and the failure (`reason`'s dict) instead."""
    try:
        result, seconds = future.result()
    except Failed as failure:
        return None, reason(failure.error), failure.seconds
    try:
        written = sink.write(name, result)
    except OSError as error:  # the output could not be written
        return None, reason(error, "write_error"), seconds
    return (result, written), None, seconds


class Failed(Exception):
    """An item's call refused or its file unreadable, after `seconds`."""

    def __init__(self, error: FacecropError | OSError, seconds: float):
        super().__init__(str(error))
        self.error, self.seconds = error, seconds


def timed_call(sink, client: AnyClient, source: Source, item: Item, params: dict) -> tuple[Any, float]:
    """The item checked (`sink.check`, before any read), read and `sink.call` on it, and its seconds;
    Failed (with the seconds) where any of them fails."""
    started = time.monotonic()
    try:
        sink.check(item.name)
        return sink.call(client, source.read(item.origin), item.name, params), time.monotonic() - started
    except FacecropError as error:
        raise Failed(unanswered_or_gone(client, error), time.monotonic() - started) from error
    except OSError as error:
        raise Failed(error, time.monotonic() - started) from error


def unanswered_or_gone(client: AnyClient, error: FacecropError) -> FacecropError:
    """A call that could not reach the service (past its retries) asks whether anything answers:
    where the service does (its /healthz), the photo was not answered (NOT_ANSWERED: held up past the
    timeout, a connection cut on it), else the service is gone (the error as it is: the run stops)."""
    if error.code != "connection_error":
        return error
    try:
        client.check()
    except FacecropError:
        return error
    message = f"the service answers, but not this photo: {error.message.split(': ', 1)[-1]}"
    return FacecropError(0, NOT_ANSWERED, message, error.request_id)


def _fill(pool, running: dict, queue: Iterator[Item], client, source: Source, sink, params: dict, window: int) -> None:
    """Keep at most `window` images submitted (memory stays flat on any tree size)."""
    while len(running) < window:
        item = next(queue, None)
        if item is None:
            return
        running[pool.submit(timed_call, sink, client, source, item, params)] = item


PICTURE_PARTIAL = re.compile(r"\.[0-9a-f]{32}\.partial$")  # PictureSink.write's
VIDEO_PARTIAL = re.compile(r"^\..+\.partial-\d+\.[^.]+$")  # video.partial_path's


def stop_on_sigterm() -> None:
    """SIGTERM (`kill`, a container stopping) ends a long job as Ctrl-C does: its partial output removed."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def sweep_partials(output: Path) -> None:
    """Remove what writers left half-written under a batch's `output` folder (a task killed with its
    node mid-write, a run interrupted): the pictures' and videos' partial files only."""
    for path in output.rglob("*.partial*") if output.is_dir() else ():
        if path.is_file() and (PICTURE_PARTIAL.search(path.name) or VIDEO_PARTIAL.match(path.name)):
            path.unlink(missing_ok=True)


def reason(error: FacecropError | OSError, code: str = "read_error") -> dict:
    """A failure as the failures file and the manifest record it: the service's code, else `code`
    (read_error: the photo could not be read; write_error: its output could not be written, and
    storage_error where no output can be: the disk full or read-only)."""
    if isinstance(error, FacecropError):
        return {"status": error.status, "code": error.code, "message": error.message}
    if error.errno in STORAGE_ERRNOS:  # never a read's
        code = "storage_error"
    return {"status": 0, "code": code, "message": file_problem(error)}


def file_problem(error: OSError) -> str:
    """One line naming the file: "photos/a.jpg: No such file or directory"."""
    if error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return str(error)
