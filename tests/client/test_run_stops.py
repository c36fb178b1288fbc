"""A failure of the service's or of this client's (nobody answers, the key refused, an address that
is not facecrop's, the service unavailable) stops a run at the first: every photo after would fail
the same way. A photo's own refusal does not. Against a scripted service on a real loopback socket,
which counts the photos sent."""

from __future__ import annotations

import errno
import inspect
import json
import math
import os
import time
from functools import partial
from pathlib import Path

import pytest
from PIL import Image

from facecrop_client import Client
from facecrop_client.batch import UNANSWERED_IN_A_ROW, DetectSink, PictureSink, progress_bar, reason, run_batch
from facecrop_client.on_ray import PhotoJob, Service, one_photo
from facecrop_client.sources import Folder, Item
from tests.support import ONE_FACE, Ran, facecrop_here, json_answer, refusal, scripted_service

PHOTOS = 40
CONCURRENCY = 2  # at most 2 x 2 photos in flight (run_batch's window)


@pytest.fixture
def photos(tmp_path) -> Path:
    folder = tmp_path / "photos"
    folder.mkdir()
    for n in range(PHOTOS):
        Image.new("RGB", (8, 8), (n, n, n)).save(folder / f"p{n:02}.jpg")
    return folder


def facecrop(url: str, *args: str) -> Ran:
    return facecrop_here("--url", url, *args)


def batch(url: str, photos: Path, output: Path) -> Ran:
    return facecrop(url, "batch", str(photos), str(output), "--mode", "detect", "--concurrency", str(CONCURRENCY), "-q")


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_refused_key_stops_the_batch_at_once_and_the_next_run_does_everything(photos, tmp_path):
    output = tmp_path / "faces.jsonl"
    with scripted_service(lambda n: refusal(401, "unauthorized")) as service:
        done = batch(service.url, photos, output)
    assert done.returncode == 1
    assert service.posts <= 2 * CONCURRENCY  # those in flight, not one per photo
    assert done.stderr.startswith("stopped (run again to continue): 40 images, 0 already done, 0 processed, 0 failed")
    assert "; why: 401 unauthorized: the service's unauthorized" in done.stderr
    assert lines(output.with_name("faces.jsonl.failures.jsonl")) == []  # not the photos' failures
    with scripted_service(lambda n: json_answer(200, ONE_FACE)) as service:
        again = batch(service.url, photos, output)
    assert again.returncode == 0 and service.posts == PHOTOS
    assert len(lines(output)) == PHOTOS


@pytest.mark.parametrize(
    "status,code,tries", [(403, "forbidden", 1), (404, "not_found", 1), (503, "backend_unavailable", 2)]
)
def test_the_service_unable_to_answer_stops_the_run(photos, tmp_path, status, code, tries):
    summary, service = run_once(photos, tmp_path, lambda n: refusal(status, code))
    assert summary.stopped == f"{status} {code}: the service's {code}"
    assert service.posts <= tries * 2 * CONCURRENCY and summary.failed == 0


@pytest.mark.parametrize(
    "status,code,tries",
    [
        (400, "invalid_parameter", 1),
        (413, "image_too_large", 1),
        (415, "unsupported_image", 1),
        (500, "internal_error", 1),
        (504, "backend_timeout", 1),
        (429, "overloaded", 2),  # retried once (run_once's client), then the photo's failure
        (502, "bad_gateway", 2),
    ],
)
def test_a_photos_own_refusal_fails_that_photo_and_the_run_goes_on(photos, tmp_path, status, code, tries):
    summary, service = run_once(photos, tmp_path, lambda n: refusal(status, code))
    assert not summary.stopped and service.posts == tries * PHOTOS
    assert (summary.succeeded, summary.failed) == (0, PHOTOS)


def test_a_service_gone_mid_run_stops_it_keeping_what_was_done(photos, tmp_path):
    """5 photos answered, then nothing answers (its /healthz neither): the 5 are kept, the run stops
    (each photo retried once, not a failure per photo), and the next run sends only the other 35."""
    output = tmp_path / "faces.jsonl"

    def gone_after_five(service):
        def answer_for(n):
            if n < 5:
                return json_answer(200, ONE_FACE)
            service.healthy = False
            return None

        return answer_for

    summary, service = run_once(photos, tmp_path, gone_after_five)
    assert summary.stopped.startswith("connection_error: cannot reach http://127.0.0.1:")
    assert (summary.succeeded, summary.failed) == (5, 0)
    assert service.posts <= 5 + 2 * (2 * CONCURRENCY)  # the photos in flight, each sent twice
    assert len(lines(output)) == 5
    summary, service = run_once(photos, tmp_path, lambda n: json_answer(200, ONE_FACE))
    assert service.posts == PHOTOS - 5 and summary.skipped == 5 and not summary.stopped
    assert sorted(line["path"] for line in lines(output)) == sorted(p.name for p in photos.iterdir())


def test_a_photo_the_service_never_answers_fails_alone_and_the_run_goes_on(photos, tmp_path):
    """One photo of 40 held past the timeout (and its retry) while the service answers every other:
    that photo's failure (not_answered), the other 39 done; the next run sends only it again."""
    held = (photos / "p03.jpg").read_bytes()
    unanswered = lambda body: math.inf if body == held else None  # noqa: E731
    summary, service = run_once(photos, tmp_path, lambda n: json_answer(200, ONE_FACE), unanswered)
    assert not summary.stopped and (summary.succeeded, summary.failed) == (PHOTOS - 1, 1)
    (failure,) = lines(tmp_path / "failures.jsonl")
    said = "the service answers, but not this photo: Read timed out. (read timeout=0.5)"  # not where it was sent
    assert failure == {"path": "p03.jpg", "status": 0, "code": "not_answered", "message": said}
    (row,) = [row for row in lines(tmp_path / "faces.jsonl.manifest.jsonl") if row["source"] == "p03.jpg"]
    assert (row["output"], row["faces"], row["status"]) == ("", 0, "failed")
    assert {"path": "p03.jpg", **row["error"]} == failure
    assert 1000 <= row["duration_ms"] < 30_000  # both tries' half seconds, from when it was sent
    assert len(lines(tmp_path / "faces.jsonl")) == PHOTOS - 1
    summary, service = run_once(photos, tmp_path, lambda n: json_answer(200, ONE_FACE))
    assert service.posts == 1 and summary.skipped == PHOTOS - 1 and summary.succeeded == 1


@pytest.mark.parametrize("answered", [0, 7])
def test_photos_the_service_never_answers_in_a_row_stop_the_run_none_counted(photos, tmp_path, answered):
    """The service answers its /healthz but no upload past the first `answered`: the run stops once
    UNANSWERED_IN_A_ROW photos in a row went unanswered, none counted as a photo's failure (the next
    run sends them again), and no more are sent."""
    first = {(photos / f"p{n:02}.jpg").read_bytes() for n in range(answered)}
    unanswered = lambda body: None if body in first else math.inf  # noqa: E731
    summary, service = run_once(photos, tmp_path, lambda n: json_answer(200, ONE_FACE), unanswered, timeout=0.2)
    assert summary.stopped.startswith("not_answered: the service answers, but not this photo: ")
    assert summary.stopped.endswith(f"({UNANSWERED_IN_A_ROW} photos in a row)")
    assert (summary.succeeded, summary.failed) == (answered, 0) and lines(tmp_path / "failures.jsonl") == []
    assert service.posts <= answered + 2 * (UNANSWERED_IN_A_ROW + 2 * CONCURRENCY)  # each sent twice


def test_photos_not_answered_apart_are_each_their_own_failure(photos, tmp_path):
    """The first photo's connection cut (twice: its retry too) while the others are answered, then the
    last four's: never UNANSWERED_IN_A_ROW in a row between two answers, so the run goes on, and each
    of the five is its photo's failure."""
    cut = {(photos / f"p{n:02}.jpg").read_bytes() for n in (0, 36, 37, 38, 39)}
    slowly = lambda n: time.sleep(0.05) or json_answer(200, ONE_FACE)  # noqa: E731
    summary, _ = run_once(photos, tmp_path, slowly, lambda body: 0 if body in cut else None)
    assert not summary.stopped and (summary.succeeded, summary.failed) == (PHOTOS - 5, 5)
    assert sorted(line["path"] for line in lines(tmp_path / "failures.jsonl")) == [
        "p00.jpg",
        *(f"p{n}.jpg" for n in range(36, 40)),
    ]
    assert {line["code"] for line in lines(tmp_path / "failures.jsonl")} == {"not_answered"}


def run_once(photos: Path, tmp_path: Path, answer_for, unanswered=lambda body: None, timeout: float = 0.5):
    """One run_batch of detect into tmp_path/faces.jsonl, the client retrying once without waiting;
    `answer_for` may take the service instead of a turn (it returns the turn's function)."""
    output = tmp_path / "faces.jsonl"
    with scripted_service(answer_for, unanswered) as service:
        if "service" in inspect.signature(answer_for).parameters:
            service.answer_for = answer_for(service)
        client = Client(service.url, retries=1, backoff=0.001, timeout=timeout)
        client.check()
        failures = tmp_path / "failures.jsonl"
        summary = run_batch(client, Folder(photos, output), DetectSink(output), {}, CONCURRENCY, failures, quiet)
    return summary, service


quiet = partial(progress_bar, quiet=True)  # run_batch's progress, shown nowhere


def test_photos_named_on_the_command_line_stop_at_a_refused_key(photos):
    named = sorted(str(p) for p in photos.iterdir())[:5]
    with scripted_service(lambda n: refusal(401, "unauthorized")) as service:
        done = facecrop(service.url, "detect", *named)
    assert done.returncode == 1 and service.posts == 1
    assert done.stderr == f"facecrop: {named[0]}: 401 unauthorized: the service's unauthorized\n"


def test_a_stopped_anonymize_batch_does_not_go_on_to_the_videos(photos, tmp_path):
    (photos / "clip.mp4").write_bytes(b"not read: the run stopped before the videos")
    output = tmp_path / "hidden"
    with scripted_service(lambda n: refusal(401, "unauthorized")) as service:
        done = facecrop(service.url, "batch", str(photos), str(output), "--mode", "anonymize", "-q")
    assert done.returncode == 1 and "why: 401 unauthorized" in done.stderr
    assert lines(output.with_name("hidden.failures.jsonl")) == []  # no video_failed line


def test_an_output_that_cannot_be_written_fails_that_photo_as_a_write_error(photos, tmp_path):
    """Not the photo's reading (read_error) but its output's writing: `hidden/sub` is a file, so
    sub/a.jpg's picture has no folder to go in; the other photos are written."""
    (photos / "sub").mkdir()
    Image.new("RGB", (8, 8)).save(photos / "sub" / "a.jpg")
    output = tmp_path / "hidden"
    output.mkdir()
    (output / "sub").write_bytes(b"a file where the folder would be")
    picture = (200, {"Content-Type": "image/jpeg", "X-Face-Count": "1"}, (photos / "p00.jpg").read_bytes())
    with scripted_service(lambda n: picture) as service:
        done = facecrop(service.url, "batch", str(photos), str(output), "--mode", "anonymize", "-q")
    assert done.returncode == 1 and service.posts == PHOTOS + 1
    (failure,) = lines(output.with_name("hidden.failures.jsonl"))
    assert (failure["path"], failure["code"]) == ("sub/a.jpg", "write_error")
    assert len(list(output.glob("p*.jpg"))) == PHOTOS
    with scripted_service(lambda n: picture) as service:  # a Ray task's photo, as the task does it
        job = PhotoJob(Folder(photos, output), PictureSink(output, None, "anonymize"), {}, Service(service.url))
        done_on_a_node = one_photo(job, Item("sub/a.jpg", str(photos / "sub" / "a.jpg")))
    assert done_on_a_node.error is not None and done_on_a_node.error["code"] == "write_error"


class FullDisk(PictureSink):
    """A disk that fills after `room` pictures: each later write fails as the OS says it (ENOSPC)."""

    def __init__(self, output: Path, room: int):
        super().__init__(output, None, "anonymize")
        self.room = room

    def write(self, relative, result):
        if self.room == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.target(relative)))
        self.room -= 1
        super().write(relative, result)


def test_a_full_disk_stops_the_run_as_a_storage_error(photos, tmp_path):
    output = tmp_path / "hidden"
    picture = (200, {"Content-Type": "image/jpeg", "X-Face-Count": "1"}, (photos / "p00.jpg").read_bytes())
    with scripted_service(lambda n: picture) as service:
        failures = tmp_path / "failures.jsonl"
        sink = FullDisk(output, room=3)
        summary = run_batch(Client(service.url), Folder(photos, output), sink, {}, CONCURRENCY, failures, quiet)
    assert summary.stopped.startswith("storage_error: ") and summary.stopped.endswith(": No space left on device")
    assert (summary.succeeded, summary.failed) == (3, 0) and lines(failures) == []
    assert service.posts <= 3 + 1 + 2 * CONCURRENCY  # those written, the one that found the disk full, those in flight
    assert [reason(OSError(errno.EACCES, "Permission denied"), "write_error")["code"]] == ["write_error"]


@pytest.mark.parametrize("healthy, code", [(True, "not_answered"), (False, "connection_error")])
def test_a_ray_task_tells_a_photo_not_answered_from_a_service_gone(photos, tmp_path, healthy, code):
    """A Ray task asks, from its node, whether the service still answers: the driver then holds the
    photo (the run goes on) or stops the run, as the local path does."""
    output = tmp_path / "faces.jsonl"
    with scripted_service(lambda n: json_answer(200, ONE_FACE), lambda body: 0) as service:
        service.healthy = healthy
        job = PhotoJob(Folder(photos, output), DetectSink(output), {}, Service(service.url, timeout=0.5))
        job.service.client().answered = True  # as after its first answer: a cut connection is retried
        done = one_photo(job, Item("p00.jpg", str(photos / "p00.jpg")))
    assert done.error is not None and done.error["code"] == code
