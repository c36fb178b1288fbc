"""The local engine of `facecrop batch` (facecrop_client.batch) part by part, against a stand-in for
the service on a real loopback socket: how many photos are at the service at once and that a slow
one holds back no other, what its summary and progress are told, where its outputs go (folders made
as deep as the tree, named for the format answered), and each failure's line."""

from __future__ import annotations

import errno
import io
import json
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from facecrop_client import Client, FacecropError
from facecrop_client.batch import (
    DetectSink,
    Ledger,
    Summary,
    file_problem,
    foreign,
    progress_bar,
    run_batch,
    video_failure,
)
from facecrop_client.sources import Folder
from tests.support import ONE_FACE, facecrop_here, json_answer, scripted_service

CONCURRENCY = 2
WAIT_S = 10.0  # what a stand-in waits for a condition the code under test may never meet
QUIET = partial(progress_bar, quiet=True)  # run_batch's progress, shown nowhere


def photo_folder(folder: Path, count: int) -> Path:
    """`count` photos, each body its own name (the stand-in tells them apart)."""
    folder.mkdir(parents=True)
    for n in range(count):
        (folder / f"{n:02}.jpg").write_bytes(f"{n:02}.jpg".encode())
    return folder


def detect_all(service, photos: Path, output: Path, progress=QUIET):
    client = Client(service.url, retries=0, timeout=30)
    return run_batch(
        client, Folder(photos, output), DetectSink(output), {}, CONCURRENCY, output.with_suffix(".f"), progress
    )


@pytest.mark.parametrize("concurrency", [CONCURRENCY, 40])  # 40: past a thread pool's or connection pool's default
def test_as_many_photos_as_the_concurrency_are_at_the_service_at_once(tmp_path, concurrency):
    """Each photo held until `concurrency` are at the service together (or WAIT_S passed)."""
    photos = photo_folder(tmp_path / "photos", concurrency + 4)
    most = []
    lock, at_once = threading.Lock(), [0]

    def answer_for(turn: int):
        with lock:
            at_once[0] += 1
            most.append(at_once[0])
        deadline = time.monotonic() + WAIT_S
        while max(most) < concurrency and time.monotonic() < deadline:
            time.sleep(0.005)
        with lock:
            at_once[0] -= 1
        return json_answer(200, ONE_FACE)

    with scripted_service(answer_for) as service:
        ran = facecrop_here("batch", str(photos), str(tmp_path / "faces.jsonl"), "--mode", "detect", "-q",
                            "--concurrency", str(concurrency), "--url", service.url)  # fmt: skip
    assert ran.returncode == 0 and max(most) == concurrency, ran.stderr
    assert ran.stderr.startswith(f"done: {concurrency + 4} images, 0 already done, {concurrency + 4} processed")


def test_a_photo_the_service_holds_holds_back_no_other(tmp_path):
    """The first photo held until the sixth has reached the service: the others go on around it."""
    photos = photo_folder(tmp_path / "photos", 8)
    sixth_sent, first_released_by_it = threading.Event(), []

    def answer_for(turn: int):
        _, body = service.requests[turn]
        if body == b"05.jpg":
            sixth_sent.set()
        if body == b"00.jpg":
            first_released_by_it.append(sixth_sent.wait(WAIT_S))
        return json_answer(200, ONE_FACE)

    with scripted_service(answer_for) as service:
        summary = detect_all(service, photos, tmp_path / "faces.jsonl")
    assert summary.succeeded == 8 and first_released_by_it == [True]


def test_the_progress_is_made_for_the_photos_to_do_and_the_summary_tells_the_runs_seconds(tmp_path):
    photos = photo_folder(tmp_path / "photos", 5)
    output, totals = tmp_path / "faces.jsonl", []

    def progress(total: int):
        totals.append(total)
        return QUIET(total)

    with scripted_service(lambda turn: json_answer(200, ONE_FACE)) as service:
        started = time.monotonic()
        detect_all(service, photos, output, progress)
        (photos / "05.jpg").write_bytes(b"05.jpg")
        summary = detect_all(service, photos, output, progress)
        took = time.monotonic() - started
    assert totals == [5, 1]  # the second run: the one photo not done yet
    assert 0 < summary.seconds < took


def test_a_detect_batch_makes_the_folders_its_output_goes_in(tmp_path):
    photos = photo_folder(tmp_path / "photos", 2)
    output = tmp_path / "runs" / "today" / "faces.jsonl"
    with scripted_service(lambda turn: json_answer(200, ONE_FACE)) as service:
        ran = facecrop_here("batch", str(photos), str(output), "--mode", "detect", "-q", "--url", service.url)
    assert ran.returncode == 0, ran.stderr
    assert len(output.read_text().splitlines()) == 2


def picture(content_type: str):
    return lambda turn: (200, {"Content-Type": content_type, "X-Face-Count": "1", "X-Crop-Rect": "0,0,1,1"}, b"pic")


@pytest.mark.parametrize(
    "content_type, named",
    [
        ("image/webp; charset=binary", "c.webp"),  # a parameter after the type: still a WebP
        ("image/png", "c.png"),
        ("application/octet-stream", "c.jpg"),  # not a picture type: named for the format asked
    ],
)
def test_each_picture_is_named_for_the_format_answered_in_folders_as_deep_as_the_tree(tmp_path, content_type, named):
    photos = tmp_path / "photos"
    (photos / "a" / "b").mkdir(parents=True)
    (photos / "a" / "b" / "c.jpg").write_bytes(b"photo")
    with scripted_service(picture(content_type)) as service:
        ran = facecrop_here("batch", str(photos), str(tmp_path / "out"), "--mode", "crop", "-q", "--url", service.url)
    assert ran.returncode == 0, ran.stderr
    assert [p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file()] == [
        f"a/b/{named}"
    ]


def failures_of(tmp_path: Path, name: str = "out") -> dict[str, dict]:
    lines = (tmp_path / f"{name}.failures.jsonl").read_text().splitlines()
    return {line["path"]: line for line in map(json.loads, lines)}


def test_two_photos_with_one_output_and_a_listed_photo_gone_fail_each_with_its_reason(tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    for name in ("x.jpeg", "x.jpg"):
        (photos / name).write_bytes(b"photo")
    listed = tmp_path / "list.txt"
    listed.write_text(f"{photos / 'x.jpeg'}\n{photos / 'x.jpg'}\n{photos / 'gone.jpg'}\n")
    with scripted_service(picture("image/jpeg")) as service:
        started = time.monotonic()
        ran = facecrop_here("batch", str(listed), str(tmp_path / "out"), "--mode", "crop", "-q", "--url", service.url)
        took_ms = (time.monotonic() - started) * 1000
    assert ran.returncode == 1 and len(service.requests) == 1
    rows = {row["source"]: row for row in map(json.loads, (tmp_path / "out.manifest.jsonl").open())}
    assert 0 <= rows["photos/gone.jpg"]["duration_ms"] <= took_ms  # the try to read it
    failures = failures_of(tmp_path)
    same = [failure for path, failure in failures.items() if path.endswith("x.jpg")]
    assert same == [
        {
            "path": same[0]["path"],
            "status": 0,
            "code": "same_output",
            "message": f"its output, {tmp_path / 'out' / same[0]['path']}, is {same[0]['path'][:-4]}.jpeg's: "
            "rename one of the two",
        }
    ]
    [gone] = [failure for path, failure in failures.items() if path.endswith("gone.jpg")]
    assert (gone["status"], gone["code"]) == (0, "read_error") and gone["message"].endswith(
        ": No such file or directory"
    )


def test_a_file_problem_names_its_file_where_the_error_does():
    assert file_problem(FileNotFoundError(errno.ENOENT, "No such file or directory", "a.jpg")) == (
        "a.jpg: No such file or directory"
    )
    assert file_problem(OSError(errno.EIO, "Input/output error")) == "[Errno 5] Input/output error"
    assert file_problem(OSError("the disk went away")) == "the disk went away"


def test_an_output_taken_names_three_of_its_photos_and_counts_the_rest(tmp_path):
    said = {count: foreign(tmp_path, [f"{n}.jpg" for n in range(count)]) for count in (3, 4, 6)}
    assert "outputs of 0.jpg, 1.jpg, 2.jpg, and no run" in said[3]
    assert "outputs of 0.jpg, 1.jpg, 2.jpg and 1 more, and no run" in said[4]
    assert "outputs of 0.jpg, 1.jpg, 2.jpg and 3 more, and no run" in said[6]


def test_a_videos_failure_names_the_video_once(tmp_path):
    video = tmp_path / "v.mp4"
    failures = [
        video_failure(video, FacecropError(401, "unauthorized", "the key")),
        video_failure(video, PermissionError(errno.EACCES, "Permission denied", str(video))),
        video_failure(video, ValueError(f"{video}: not a video")),  # as VideoError names it
    ]
    assert [failure["message"] for failure in failures] == [
        f"{video}: 401 unauthorized: the key",
        f"{video}: Permission denied",
        f"{video}: not a video",
    ]
    assert {(failure["status"], failure["code"]) for failure in failures} == {(0, "video_failed")}


def test_a_detect_output_cut_short_by_a_crash_loses_its_half_line_and_the_next_run_redoes_that_photo(tmp_path):
    photos, output = photo_folder(tmp_path / "photos", 3), tmp_path / "faces.jsonl"
    whole = [json.dumps({"path": name, **ONE_FACE}) for name in ("00.jpg", "01.jpg")]
    output.write_text(whole[0] + "\n" + whole[1][:25])  # 01.jpg's line cut off mid-way
    with scripted_service(lambda turn: json_answer(200, ONE_FACE)) as service:
        ran = facecrop_here("batch", str(photos), str(output), "--mode", "detect", "-q", "--url", service.url)
    assert ran.returncode == 0, ran.stderr
    assert sorted(body for _, body in service.requests) == [b"01.jpg", b"02.jpg"]
    lines = output.read_text().splitlines()
    assert lines[0] == whole[0] and sorted(json.loads(line)["path"] for line in lines) == ["00.jpg", "01.jpg", "02.jpg"]


def test_a_detect_output_that_is_not_a_batchs_is_refused_untouched(tmp_path):
    photos, output = photo_folder(tmp_path / "photos", 2), tmp_path / "photos.txt"
    output.write_text("photos/00.jpg\nphotos/01.jpg\nphotos/02")  # a list of photos given as OUTPUT by mistake
    with scripted_service(lambda turn: json_answer(200, ONE_FACE)) as service:
        ran = facecrop_here("batch", str(photos), str(output), "--mode", "detect", "-q", "--url", service.url)
    assert (ran.returncode, ran.stderr) == (
        1,
        f"facecrop: {output} holds lines that are not a batch's (JSON with a path): give another file\n",
    )
    assert output.read_text() == "photos/00.jpg\nphotos/01.jpg\nphotos/02" and service.requests == []


def test_each_manifest_line_tells_the_photos_milliseconds_to_a_tenth(tmp_path):
    photos, output = photo_folder(tmp_path / "photos", 2), tmp_path / "faces.jsonl"

    def slow(turn: int):
        time.sleep(0.2)
        return json_answer(200, ONE_FACE)

    with scripted_service(slow) as service:
        started = time.monotonic()
        detect_all(service, photos, output)
        took_ms = (time.monotonic() - started) * 1000
    rows = [json.loads(line) for line in output.with_name("faces.jsonl.manifest.jsonl").read_text().splitlines()]
    for row in rows:
        assert isinstance(row["duration_ms"], float) and 200 <= row["duration_ms"] <= took_ms
        assert row["duration_ms"] == round(row["duration_ms"], 1)


def test_pictures_an_interrupted_run_wrote_but_did_not_list_are_listed_by_the_next_whatever_else_the_manifest_holds(
    tmp_path,
):
    """a.jpg listed done; b.jpg listed failed by an earlier run, then written by one interrupted before
    it could list it; lines a crash or another tool left: the next run lists b.jpg (its faces and
    milliseconds unknown), sends nothing for either, and reads past the lines that are not its own."""
    photos, out = photo_folder(tmp_path / "photos", 2), tmp_path / "out"
    (photos / "00.jpg").rename(photos / "a.jpg")
    (photos / "01.jpg").rename(photos / "b.jpg")
    out.mkdir()
    for name in ("a.jpg", "b.jpg"):
        (out / name).write_bytes(b"picture")
    manifest = tmp_path / "out.manifest.jsonl"
    rows = [
        {"source": "a.jpg", "output": str(out / "a.jpg"), "faces": 1, "status": "done"},
        {"source": "b.jpg", "output": "", "faces": 0, "status": "failed"},
    ]
    manifest.write_text("\n".join([*map(json.dumps, rows), '{"cut off', '{"source": "c.jpg"}', "[1, 2]"]) + "\n")
    with scripted_service(picture("image/jpeg")) as service:
        ran = facecrop_here("batch", str(photos), str(out), "--mode", "crop", "-q", "--url", service.url)
    assert ran.returncode == 0 and service.requests == [], ran.stderr
    assert ran.stderr.startswith("done: 2 images, 2 already done, 0 processed, 0 failed")
    last = json.loads(manifest.read_text().splitlines()[-1])
    assert (last["source"], last["output"], last["status"], last["faces"], last["duration_ms"]) == (
        "b.jpg",
        str(out / "b.jpg"),
        "done",
        None,
        None,
    )
    assert len(manifest.read_text().splitlines()) == 6  # nothing else added


def test_the_ledger_writes_each_items_line_counts_it_and_shows_the_failures_on_the_bar():
    """A photo done, one failed and a video done: their manifest lines (milliseconds to a tenth of
    the seconds given), the failure's line, the summary's counts and the bar's count and `failed=`."""
    manifest, failures, log = io.StringIO(), io.StringIO(), io.StringIO()
    summary, bar = Summary(total=2), progress_bar(2, log)
    ledger = Ledger(summary, manifest, failures, bar)
    error = {"status": 422, "code": "no_face", "message": "no face"}
    ledger.record("a.jpg", "out/a.jpg", 3, None, 0.25)
    ledger.record("b.jpg", "", 0, error, 0.01234)
    ledger.record("c.mp4", "out/c.mp4", 9, None, 2.0, image=False)
    rows = [json.loads(line) for line in manifest.getvalue().splitlines()]
    assert [(row["source"], row["status"], row["faces"], row["duration_ms"]) for row in rows] == [
        ("a.jpg", "done", 3, 250.0),
        ("b.jpg", "failed", 0, 12.3),
        ("c.mp4", "done", 9, 2000.0),
    ]
    assert rows[1]["error"] == error and rows[0]["error"] is None and rows[0]["output"] == "out/a.jpg"
    assert [json.loads(line) for line in failures.getvalue().splitlines()] == [{"path": "b.jpg", **error}]
    assert (summary.succeeded, summary.failed, bar.n) == (1, 1, 2)
    assert bar.postfix == "failed=1"
    # in a log, a failure brings no line of its own: only the first one is there
    assert log.getvalue().splitlines() == ["0/2 images (0%) in 00:00, ?img/s, ETA ?, failed=0"]


@pytest.mark.parametrize(
    ("summary", "said"),
    [
        (
            Summary(total=10, skipped=2, succeeded=6, failed=2, seconds=1.5),
            "done: 10 images, 2 already done, 6 processed, 2 failed, 1.5 s (4.0 images/s)",
        ),
        (Summary(total=0), "done: 0 images, 0 already done, 0 processed, 0 failed, 0.0 s (0.0 images/s)"),
        (
            Summary(total=3, succeeded=1, seconds=0.5, interrupted=True),
            "interrupted (run again to continue): 3 images, 0 already done, 1 processed, 0 failed, 0.5 s "
            "(2.0 images/s)",
        ),
        (
            Summary(total=3, seconds=2.0, stopped="401 unauthorized: no"),
            "stopped (run again to continue): 3 images, 0 already done, 0 processed, 0 failed, 2.0 s (0.0 images/s); "
            "why: 401 unauthorized: no",
        ),
    ],
)
def test_the_summary_line_tells_the_counts_and_the_rate_of_the_photos_processed(summary, said):
    assert summary.line() == said
