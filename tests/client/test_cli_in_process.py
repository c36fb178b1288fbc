"""The `facecrop` command line run as users run it, in this process (cli.main), against a stand-in
for the service on a real loopback socket that keeps every request: what each command sends (the
endpoint, the options given and no others, each photo's own bytes), what it writes where (each
photo's own answer, named for the format answered), what it says, and its exit status."""

from __future__ import annotations

import json
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import av
import numpy as np
import pytest

from facecrop_client.batch import manifest_path
from tests.support import FACECROP, Ran, facecrop_here, json_answer, refusal, scripted_service

CONTENT_TYPES = {
    "jpeg": "image/jpeg",
    "png": "image/png",
    "webp": "image/webp",
    "avif": "image/avif",
    "gif": "image/gif",
}


def faces_of(body: bytes) -> dict:
    """/v1/detect's answer for a photo: as many faces as its first byte says (each photo its own)."""
    faces = [{"confidence": 90.0, "face_rectangle": {"x": i, "y": 1, "width": 2, "height": 2}} for i in range(body[0])]
    return {"image": {"width": 40, "height": 30}, "faces": faces}


def picture_of(body: bytes) -> bytes:
    """The stand-in's picture for a photo: its bytes behind a marker (a written file names its photo)."""
    return b"picture of " + body


def like_the_service(service, answered_as: dict[str, str] | None = None, finds: Callable[[bytes], dict] = faces_of):
    """An `answer_for` answering each endpoint as the gateway does: `finds(body)` for /v1/detect, a
    picture in the format asked (else `answered_as` names the one it comes back in) with its headers."""

    def answer_for(turn: int):
        path, body = service.requests[turn]
        endpoint, query = path.split("?", 1) if "?" in path else (path, "")
        if endpoint == "/v1/detect":
            return json_answer(200, finds(body))
        asked = dict(parse_qsl(query)).get("format", "jpeg")
        answered = (answered_as or {}).get(asked, asked)
        headers = {"Content-Type": CONTENT_TYPES[answered], "X-Face-Count": str(body[0]), "X-Crop-Rect": "1,2,3,4"}
        return 200, headers, picture_of(body)

    return answer_for


@contextmanager
def stand_in(**answering) -> Iterator:
    """A stand-in answering `like_the_service(answering)`."""
    with scripted_service(None) as service:
        service.answer_for = like_the_service(service, **answering)
        yield service


@contextmanager
def refusing_photos_of(faces: int) -> Iterator:
    """A stand-in for /v1/detect that refuses (415) each photo of `faces` faces and finds the others'."""
    with scripted_service(None) as service:

        def answer_for(turn: int):
            _, body = service.requests[turn]
            return refusal(415, "unsupported_image") if body[0] == faces else json_answer(200, faces_of(body))

        service.answer_for = answer_for
        yield service


@pytest.fixture
def service():
    with stand_in() as service:
        yield service


def sent(service) -> list[tuple[str, dict, bytes]]:
    """Each request as (endpoint, its options, its body)."""
    calls = []
    for path, body in service.requests:
        parts = urlsplit(path)
        calls.append((parts.path, dict(parse_qsl(parts.query)), body))
    return calls


def photo_file(folder: Path, name: str, faces: int) -> Path:
    """A file the stand-in answers with `faces` faces (its first byte)."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes([faces]) + name.encode())
    return path


@pytest.fixture(autouse=True)
def no_service_from_the_environment(monkeypatch):
    monkeypatch.delenv("FACECROP_URL", raising=False)
    monkeypatch.delenv("FACECROP_API_KEY", raising=False)


def test_detect_prints_each_photos_faces_as_a_line_naming_it_and_sends_only_the_options_given(service, tmp_path):
    a, b = photo_file(tmp_path, "a.jpg", 2), photo_file(tmp_path, "b.png", 0)
    ran = facecrop_here("detect", str(a), str(b), "--url", service.url)
    assert ran.returncode == 0 and ran.stderr == ""
    assert ran.lines() == [{"path": str(a), **faces_of(a.read_bytes())}, {"path": str(b), **faces_of(b.read_bytes())}]
    assert sent(service) == [("/v1/detect", {}, a.read_bytes()), ("/v1/detect", {}, b.read_bytes())]
    options = ["--min-confidence", "30", "--min-face-size", "12", "--detail", "high", "--max-faces", "5"]
    ran = facecrop_here("--url", service.url, "detect", str(a), *options, "--no-landmarks")
    assert ran.returncode == 0
    expected = {
        "min_confidence": "30.0",
        "min_face_size": "12.0",
        "detail": "high",
        "max_faces": "5",
        "landmarks": "false",
    }
    assert sent(service)[2] == ("/v1/detect", expected, a.read_bytes())


@pytest.mark.parametrize("detail", ["standard", "auto", "high", "fast"])
def test_every_detail_is_taken_and_no_other(service, tmp_path, detail):
    a = photo_file(tmp_path, "a.jpg", 1)
    assert facecrop_here("detect", str(a), "--detail", detail, "--url", service.url).returncode == 0
    assert sent(service)[0][1] == {"detail": detail}
    refused = facecrop_here("detect", str(a), "--detail", "fastest", "--url", service.url)
    assert refused.returncode == 2 and "argument --detail: invalid choice: 'fastest'" in refused.stderr


def test_crop_writes_each_photos_own_picture_into_out_named_for_its_format(service, tmp_path):
    a, b = photo_file(tmp_path / "in", "a.jpg", 1), photo_file(tmp_path / "in", "b.PNG", 2)
    out = tmp_path / "out"
    crop = ["--width", "64", "--height", "48", "--zoom", "0.3", "--gravity", "face", "--faces", "largest"]
    crop += ["--fit", "crop", "--quality", "70", "--min-confidence", "20", "--detail", "fast", "--max-faces", "3"]
    ran = facecrop_here("crop", str(a), str(b), "--out", str(out), *crop, "--url", service.url)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.decode().splitlines() == [str(out / "a.jpg"), str(out / "b.png")]
    assert (out / "a.jpg").read_bytes() == picture_of(a.read_bytes())
    assert (out / "b.png").read_bytes() == picture_of(b.read_bytes())
    options = {"width": "64", "height": "48", "zoom": "0.3", "gravity": "face", "faces": "largest", "fit": "crop"}
    options |= {"quality": "70", "min_confidence": "20.0", "detail": "fast", "max_faces": "3"}
    assert sent(service) == [
        ("/v1/crop", options | {"format": "jpeg"}, a.read_bytes()),
        ("/v1/crop", options | {"format": "png"}, b.read_bytes()),
    ]
    ran = facecrop_here("crop", str(a), "--out", str(out), "--format", "webp", "--no-landmarks", "--url", service.url)
    assert ran.stdout.decode() == f"{out / 'a.webp'}\n"
    assert sent(service)[2][1] == {"format": "webp", "landmarks": "false"}


def test_a_picture_answered_in_another_format_than_asked_is_named_for_what_it_is(tmp_path):
    with stand_in(answered_as={"avif": "webp"}) as service:
        a = photo_file(tmp_path, "a.jpg", 1)
        ran = facecrop_here(
            "anonymize", str(a), "--out", str(tmp_path / "out"), "--format", "avif", "--url", service.url
        )
    assert ran.returncode == 0 and ran.stdout.decode() == f"{tmp_path / 'out' / 'a.webp'}\n"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.webp"]


def test_anonymize_sends_its_hiding_options_and_not_the_crops(service, tmp_path):
    a = photo_file(tmp_path, "a.jpg", 3)
    hiding = ["--method", "pixelate", "--strength", "0.5", "--margin", "2", "--shape", "rect", "--quality", "80"]
    ran = facecrop_here("anonymize", str(a), "--out", str(tmp_path / "out"), *hiding, "--detail", "auto",
                        "--min-face-size", "9", "--url", service.url)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    expected = {"method": "pixelate", "strength": "0.5", "margin": "2.0", "shape": "rect", "quality": "80"}
    expected |= {"detail": "auto", "min_face_size": "9.0", "format": "jpeg"}
    assert sent(service) == [("/v1/anonymize", expected, a.read_bytes())]
    assert (tmp_path / "out" / "a.jpg").read_bytes() == picture_of(a.read_bytes())
    for crop_only in (["--width", "10"], ["--max-faces", "2"], ["--no-landmarks"]):
        refused = facecrop_here("anonymize", str(a), "--out", str(tmp_path), *crop_only, "--url", service.url)
        assert refused.returncode == 2 and "unrecognized arguments" in refused.stderr
    assert len(service.requests) == 1


def test_a_photo_from_standard_input_and_its_picture_to_standard_output(service, tmp_path):
    photo = bytes([2]) + b"piped photo"
    ran = facecrop_here("detect", "-", "--min-confidence", "80", "--url", service.url, stdin=photo)
    assert ran.returncode == 0 and ran.lines() == [{"path": "-", **faces_of(photo)}]
    ran = facecrop_here("anonymize", "-", "--out", "-", "--method", "fill", "--url", service.url, stdin=photo)
    assert ran.returncode == 0 and ran.stderr == "" and ran.stdout == picture_of(photo)
    named = photo_file(tmp_path, "x.png", 1)
    ran = facecrop_here("crop", str(named), "--out", "-", "--width", "8", "--url", service.url)
    assert ran.returncode == 0 and ran.stdout == picture_of(named.read_bytes())
    assert [(path, options) for path, options, _ in sent(service)] == [
        ("/v1/detect", {"min_confidence": "80.0"}),
        ("/v1/anonymize", {"method": "fill", "format": "jpeg"}),
        ("/v1/crop", {"width": "8", "format": "png"}),
    ]
    assert [body for _, _, body in sent(service)] == [photo, photo, named.read_bytes()]
    assert list(tmp_path.iterdir()) == [named]


@pytest.mark.parametrize(
    "args, said",
    [
        (["detect", "-", "-"], "facecrop: -: standard input holds one photo: give - once"),
        (["crop", "-", "--out", "OUT"], "facecrop: -: standard input's picture goes to standard output: give --out -"),
        (["anonymize", "A", "A", "--out", "-"], "facecrop: --out - writes one picture: give one photo, not 2"),
        (["anonymize", "-", "-", "--out", "-"], "facecrop: -: standard input holds one photo: give - once"),
    ],
)
def test_standard_input_and_output_misused_is_one_line_and_nothing_sent_or_written(service, tmp_path, args, said):
    a = photo_file(tmp_path, "a.jpg", 1)
    args = [str(a) if arg == "A" else str(tmp_path / "out") if arg == "OUT" else arg for arg in args]
    ran = facecrop_here(*args, "--url", service.url, stdin=b"\x01photo")
    assert (ran.returncode, ran.stdout, ran.stderr) == (1, b"", said + "\n")
    assert service.requests == [] and list(tmp_path.iterdir()) == [a]


def test_a_photos_own_failure_is_one_line_and_the_others_are_still_done(tmp_path):
    """A missing file and a refused photo each say why; the others are answered; exit status 1."""
    photos = [photo_file(tmp_path, f"{n}.jpg", n) for n in range(1, 4)]
    missing = tmp_path / "missing.jpg"
    with refusing_photos_of(2) as service:
        ran = facecrop_here(
            "detect", str(photos[0]), str(missing), str(photos[1]), str(photos[2]), "--url", service.url
        )
    assert ran.returncode == 1
    assert [line["path"] for line in ran.lines()] == [str(photos[0]), str(photos[2])]
    assert ran.stderr.splitlines() == [
        f"facecrop: {missing}: No such file or directory",
        f"facecrop: {photos[1]}: 415 unsupported_image: the service's unsupported_image",
    ]
    assert len(service.requests) == 3


@pytest.mark.parametrize("command", [["detect"], ["crop", "--out", "OUT"], ["anonymize", "--out", "OUT"]])
def test_a_refused_key_stops_at_the_first_photo(tmp_path, command):
    photos = [str(photo_file(tmp_path, f"{n}.jpg", 1)) for n in range(3)]
    command = [str(tmp_path / "out") if arg == "OUT" else arg for arg in command]
    with scripted_service(lambda turn: refusal(401, "unauthorized")) as service:
        ran = facecrop_here(*command, *photos, "--url", service.url, "--api-key", "wrong")
    assert (ran.returncode, ran.stdout) == (1, b"")
    assert ran.stderr == f"facecrop: {photos[0]}: 401 unauthorized: the service's unauthorized\n"
    assert len(service.requests) == 1


def test_an_output_that_would_overwrite_its_photo_or_another_photos_is_refused_alone(service, tmp_path):
    out = tmp_path / "out"
    inside = photo_file(out, "in.jpg", 1)
    first, second = photo_file(tmp_path / "x", "a.jpg", 1), photo_file(tmp_path / "y", "a.jpg", 2)
    other = photo_file(tmp_path, "b.jpg", 1)
    ran = facecrop_here(
        "crop", str(inside), str(first), str(second), str(other), "--out", str(out), "--url", service.url
    )
    assert ran.returncode == 1
    assert ran.stdout.decode().splitlines() == [str(out / "a.jpg"), str(out / "b.jpg")]
    assert ran.stderr.splitlines() == [
        f"facecrop: {inside}: its output would overwrite it (give --out another folder)",
        f"facecrop: {second}: its output, {out / 'a.jpg'}, is {first}'s: rename one of the two",
    ]
    assert inside.read_bytes() == bytes([1]) + b"in.jpg"
    assert (out / "a.jpg").read_bytes() == picture_of(first.read_bytes())
    assert [body for _, _, body in sent(service)] == [first.read_bytes(), other.read_bytes()]


def test_a_batch_sends_its_options_writes_each_answer_and_counts_what_failed(tmp_path):
    photos = tmp_path / "photos"
    named = [photo_file(photos, name, faces) for name, faces in (("a.jpg", 1), ("b/c.jpg", 2), ("d.jpg", 3))]
    output = tmp_path / "faces.jsonl"
    options = ["--min-confidence", "40", "--detail", "auto", "--max-faces", "7", "--concurrency", "1", "--json", "-q"]
    with refusing_photos_of(2) as service:
        ran = facecrop_here("batch", str(photos), str(output), "--mode", "detect", *options, "--url", service.url)
    assert ran.returncode == 1
    summary = json.loads(ran.stdout)
    assert (summary["total"], summary["succeeded"], summary["failed"], summary["skipped"]) == (3, 2, 1, 0)
    assert summary["manifest"] == str(output.with_name("faces.jsonl.manifest.jsonl"))
    failures = output.with_name("faces.jsonl.failures.jsonl")
    assert ran.stderr.splitlines()[0].startswith("done: 3 images, 0 already done, 2 processed, 1 failed")
    assert ran.stderr.splitlines()[1:] == [f"failures and their reasons: {failures}"]
    [failure] = [json.loads(line) for line in failures.read_text().splitlines()]
    assert (failure["path"], failure["code"]) == ("b/c.jpg", "unsupported_image")
    written = {line["path"]: line for line in map(json.loads, output.read_text().splitlines())}
    assert sorted(written) == ["a.jpg", "d.jpg"]
    assert written["d.jpg"]["faces"] == faces_of(named[2].read_bytes())["faces"]
    expected = {"min_confidence": "40.0", "detail": "auto", "max_faces": "7"}
    assert all(options == expected for _, options, _ in sent(service))
    with scripted_service(lambda turn: json_answer(200, faces_of(service.requests[turn][1]))) as again:
        service = again
        rerun = facecrop_here("batch", str(photos), str(output), "--mode", "detect", "-q", "--url", again.url)
    assert rerun.returncode == 0 and rerun.stdout == b""
    assert rerun.stderr.startswith("done: 3 images, 2 already done, 1 processed, 0 failed")
    assert [body for _, _, body in sent(again)] == [named[1].read_bytes()]


@pytest.mark.parametrize("mode", ["crop", "anonymize"])
def test_a_batch_of_pictures_mirrors_the_tree_in_the_format_asked(service, tmp_path, mode):
    photos = tmp_path / "photos"
    named = [photo_file(photos, name, 1) for name in ("a.jpg", "b/c.png")]
    ran = facecrop_here("batch", str(photos), str(tmp_path / "out"), "--mode", mode, "--format", "webp",
                        "--quality", "60", "-q", "--url", service.url)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "out" / "a.webp").read_bytes() == picture_of(named[0].read_bytes())
    assert (tmp_path / "out" / "b" / "c.webp").read_bytes() == picture_of(named[1].read_bytes())
    assert {(path, tuple(sorted(options.items()))) for path, options, _ in sent(service)} == {
        (f"/v1/{mode}", (("format", "webp"), ("quality", "60")))
    }


FRAMES, SIZE = 5, (64, 48)


def clip_file(path: Path) -> Path:
    """A clip of FRAMES grey frames of SIZE."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as output:
        stream = output.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = *SIZE, "yuv420p"
        for n in range(FRAMES):
            frame = av.VideoFrame.from_ndarray(np.full((SIZE[1], SIZE[0], 3), 40 * n, np.uint8), format="rgb24")
            output.mux(stream.encode(frame))
        output.mux(stream.encode())
    return path


def frames_in(path: Path) -> int:
    with av.open(str(path)) as video:
        return sum(1 for _ in video.decode(video=0))


def seeing_no_face() -> AbstractContextManager:
    """A stand-in that finds no face in any frame (and answers pictures as the service does)."""
    return stand_in(finds=lambda body: {"image": dict(zip(("width", "height"), SIZE)), "faces": []})


def frame_options(service) -> list[dict]:
    """The options each frame was sent with, in an order of their own (frames travel several at once)."""
    return sorted((options for path, options, _ in sent(service) if path == "/v1/detect"), key=sorted_items)


def sorted_items(options: dict) -> list:
    return sorted(options.items())


def every_second_tiled(options: dict) -> list[dict]:
    """A clip's frames' options where every second frame, from the first, asks for detail=auto."""
    return sorted((options | ({"detail": "auto"} if n % 2 == 0 else {}) for n in range(FRAMES)), key=sorted_items)


SENT_FOR_VIDEOS = {"min_confidence": "12.0", "max_faces": "1000", "landmarks": "false"}


def test_a_video_sends_every_frame_with_its_presets_options_and_tells_its_summary(tmp_path):
    source, target = clip_file(tmp_path / "in.mp4"), tmp_path / "out.mkv"
    with seeing_no_face() as service:
        ran = facecrop_here("video", str(source), str(target), "-q", "--json", "--url", service.url)
    assert ran.returncode == 0, ran.stderr
    assert frame_options(service) == every_second_tiled(SENT_FOR_VIDEOS)
    [summary] = ran.lines()
    assert (summary["source"], summary["output"], summary["frames"], summary["faces"]) == (
        str(source),
        str(target),
        FRAMES,
        0,
    )
    assert ran.stderr.startswith(f"{FRAMES} frames (0 skipped), 0 faces")
    assert frames_in(target) == FRAMES


@pytest.mark.parametrize(
    "given, sent_each",
    [
        (["--fast"], SENT_FOR_VIDEOS),
        (
            ["--min-confidence", "40", "--detail", "high"],
            SENT_FOR_VIDEOS | {"min_confidence": "40.0", "detail": "high"},
        ),
        (
            ["--mode", "detect", "--fast", "--min-face-size", "6"],
            SENT_FOR_VIDEOS | {"landmarks": "true", "min_face_size": "6.0"},
        ),
    ],
)
def test_a_videos_options_given_are_what_each_frame_is_sent_with(tmp_path, given, sent_each):
    source, target = clip_file(tmp_path / "in.mp4"), tmp_path / "out.mp4"
    with seeing_no_face() as service:
        ran = facecrop_here("video", str(source), str(target), "-q", *given, "--url", service.url)
    assert ran.returncode == 0 and ran.stdout == b"", ran.stderr
    assert frame_options(service) == [sent_each] * FRAMES
    if "detect" in given:
        assert [json.loads(line)["faces"] for line in target.read_text().splitlines()[:FRAMES]] == [[]] * FRAMES


def test_a_video_the_service_cannot_be_reached_for_is_one_line_and_leaves_nothing(tmp_path):
    source = clip_file(tmp_path / "in.mp4")
    ran = facecrop_here("video", str(source), str(tmp_path / "out.mp4"), "-q", "--url", "http://127.0.0.1:9")
    assert ran.returncode == 1 and ran.stdout == b""
    [line] = ran.stderr.splitlines()
    assert line.startswith("facecrop: cannot reach http://127.0.0.1:9") and "(is the service running?" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4"]


def test_a_batch_anonymizing_a_folder_hides_its_videos_too_and_counts_those_it_cannot_read(tmp_path):
    photos = tmp_path / "photos"
    photo_file(photos, "a.jpg", 0)
    clip_file(photos / "clips" / "new" / "good.mp4")
    for bad in ("bad.mp4", "worse.mov"):
        (photos / bad).write_bytes(b"not a video")
    out = tmp_path / "out"
    with seeing_no_face() as service:
        ran = facecrop_here("batch", str(photos), str(out), "--mode", "anonymize", "--method", "fill",
                            "--min-confidence", "30", "-q", "--json", "--url", service.url)  # fmt: skip
        assert ran.returncode == 1
        assert frame_options(service) == every_second_tiled(SENT_FOR_VIDEOS | {"min_confidence": "30.0"})
        assert frames_in(out / "clips" / "new" / "good.mp4") == FRAMES
        lines = ran.stderr.splitlines()
        assert lines[0].startswith("done: 1 images, 0 already done, 1 processed, 0 failed")
        assert (out / "a.jpg").read_bytes() == picture_of((photos / "a.jpg").read_bytes())
        assert any(line.startswith(f"clips/new/good.mp4: {FRAMES} frames (0 skipped), 0 faces") for line in lines)
        failures_file = tmp_path / "out.failures.jsonl"
        assert lines[-1] == f"failures and their reasons: {failures_file}"
        assert (json.loads(ran.stdout)["succeeded"], json.loads(ran.stdout)["failed"]) == (1, 2)
        failures = [json.loads(line) for line in failures_file.read_text().splitlines()]
        assert [(f["path"], f["code"]) for f in failures] == [
            ("bad.mp4", "video_failed"),
            ("worse.mov", "video_failed"),
        ]
        assert failures[0] == {"path": "bad.mp4", "status": 0, "code": "video_failed",
                               "message": f"{photos / 'bad.mp4'}: not a video"}  # fmt: skip
        assert manifest_rows(out) == [
            ("a.jpg", "done", 0, "a.jpg"),
            ("bad.mp4", "failed", 0, ""),
            ("clips/new/good.mp4", "done", 0, "good.mp4"),
            ("worse.mov", "failed", 0, ""),
        ]
        again = facecrop_here("batch", str(photos), str(out), "--mode", "anonymize", "-q", "--url", service.url)
    assert again.returncode == 1 and again.stderr.startswith("done: 1 images, 1 already done, 0 processed, 0 failed")
    assert not (out / "bad.mp4").exists()
    assert [path for path, _, _ in sent(service)].count("/v1/detect") == FRAMES  # the video done is not done again


def test_a_video_shows_its_progress_in_frames(tmp_path):
    source = clip_file(tmp_path / "in.mp4")
    with seeing_no_face() as service:
        ran = facecrop_here("video", str(source), str(tmp_path / "out.mp4"), "--url", service.url)
    assert ran.returncode == 0
    assert ran.stderr.startswith(f"0/{FRAMES} frames (0%) in 00:00, ?frame/s")


def test_a_video_refused_or_unreadable_is_one_line_naming_it(tmp_path):
    source, unreadable = clip_file(tmp_path / "in.mp4"), tmp_path / "notes.mp4"
    unreadable.write_bytes(b"not a video")
    with scripted_service(lambda turn: refusal(401, "unauthorized")) as service:
        refused = facecrop_here("video", str(source), str(tmp_path / "out.mp4"), "-q", "--url", service.url)
        unread = facecrop_here("video", str(unreadable), str(tmp_path / "out.mp4"), "-q", "--url", service.url)
    assert (refused.returncode, refused.stderr) == (
        1,
        f"facecrop: {source}: 401 unauthorized: the service's unauthorized\n",
    )
    assert (unread.returncode, unread.stderr) == (1, f"facecrop: {unreadable}: not a video\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "notes.mp4"]


LOGIN_PAGE = (200, {"Content-Type": "text/html"}, b"<html>sign in to the network</html>")
HEADERS_DROPPED = (200, {"Content-Type": "image/jpeg"}, b"\xff\xd8 a picture without facecrop's headers")


@pytest.mark.parametrize(
    "command, answer",
    [
        (["detect"], LOGIN_PAGE),
        (["crop", "--out", "OUT"], LOGIN_PAGE),
        (["anonymize", "--out", "OUT"], HEADERS_DROPPED),
        (["crop", "--out", "OUT"], HEADERS_DROPPED),
    ],
)
def test_a_success_that_is_not_facecrops_answer_stops_at_the_first_photo_in_one_line(tmp_path, command, answer):
    """A captive portal's page, a proxy that drops the service's headers: every photo would fail alike
    (each was a traceback: a JSON or KeyError)."""
    photos = [str(photo_file(tmp_path, f"{n}.jpg", 1)) for n in range(3)]
    command = [str(tmp_path / "out") if arg == "OUT" else arg for arg in command]
    with scripted_service(lambda turn: answer) as service:
        ran = facecrop_here(*command, *photos, "--url", service.url)
    assert (ran.returncode, ran.stdout) == (1, b"")
    said = f"facecrop: {photos[0]}: 200 unreadable_answer: not an answer of facecrop's (is the address the gateway's"
    assert ran.stderr.startswith(said) and answer[2][-20:].decode(errors="replace") in ran.stderr
    assert len(ran.stderr.splitlines()) == 1 and len(service.requests) == 1
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_a_batch_answered_by_something_else_than_facecrop_stops_without_counting_its_photos(tmp_path):
    photos = tmp_path / "photos"
    for n in range(6):
        photo_file(photos, f"{n}.jpg", 1)
    output = tmp_path / "faces.jsonl"
    with scripted_service(lambda turn: LOGIN_PAGE) as service:
        ran = facecrop_here("batch", str(photos), str(output), "--mode", "detect", "--concurrency", "1", "-q",
                            "--url", service.url)  # fmt: skip
    assert ran.returncode == 1
    assert ran.stderr.startswith("stopped (run again to continue): 6 images, 0 already done, 0 processed, 0 failed")
    assert "why: 200 unreadable_answer: not an answer of facecrop's" in ran.stderr
    assert len(service.requests) <= 2  # those in flight (one per --concurrency, and the next)
    failures = output.with_name("faces.jsonl.failures.jsonl")
    assert not failures.exists() or failures.read_text() == ""


# Each numeric option, a command that takes it, and how the service is sent it: the command line
# reads it as a number (a typo is a usage error here, not a refusal per photo there).
NUMBERS = [
    ("--width", "crop", "7"),
    ("--height", "crop", "7"),
    ("--zoom", "crop", "7.0"),
    ("--quality", "anonymize", "7"),
    ("--max-faces", "detect", "7"),
    ("--min-confidence", "detect", "7.0"),
    ("--min-face-size", "detect", "7.0"),
    ("--strength", "anonymize", "7.0"),
    ("--margin", "anonymize", "7.0"),
]
# Each option with choices, a command that takes it, and every value it takes.
CHOICES = [
    ("--format", "crop", ("jpeg", "png", "webp", "avif", "gif")),
    ("--faces", "crop", ("all", "largest")),
    ("--fit", "crop", ("cover", "crop")),
    ("--method", "anonymize", ("blur", "pixelate", "fill")),
    ("--shape", "anonymize", ("ellipse", "rect")),
]


def command_line(command: str, photo: Path, out: Path) -> list[str]:
    return [command, str(photo), *(["--out", str(out)] if command != "detect" else [])]


@pytest.mark.parametrize("option, command, sent_as", NUMBERS)
def test_a_numeric_option_is_read_as_a_number_and_a_typo_is_a_usage_error(service, tmp_path, option, command, sent_as):
    photo = photo_file(tmp_path, "a.jpg", 1)
    ran = facecrop_here(*command_line(command, photo, tmp_path / "out"), option, "07", "--url", service.url)
    assert ran.returncode == 0, ran.stderr
    [(_, options, _)] = sent(service)
    assert options[option.removeprefix("--").replace("-", "_")] == sent_as
    refused = facecrop_here(*command_line(command, photo, tmp_path / "out"), option, "seven", "--url", service.url)
    assert refused.returncode == 2 and f"argument {option}: invalid " in refused.stderr and len(service.requests) == 1


@pytest.mark.parametrize("option, command, values", CHOICES)
def test_an_option_with_choices_takes_each_and_refuses_others(service, tmp_path, option, command, values):
    photo = photo_file(tmp_path, "a.jpg", 1)
    name = option.removeprefix("--")
    for value in values:
        assert (
            facecrop_here(
                *command_line(command, photo, tmp_path / "out"), option, value, "--url", service.url
            ).returncode
            == 0
        )
    assert [options[name] for _, options, _ in sent(service)] == list(values)
    refused = facecrop_here(
        *command_line(command, photo, tmp_path / "out"), option, values[0].upper(), "--url", service.url
    )
    assert refused.returncode == 2 and f"argument {option}: invalid choice: '{values[0].upper()}'" in refused.stderr


def test_help_names_the_command_and_groups_the_service_options(capsys):
    ran = facecrop_here("detect", "--help")
    assert ran.returncode == 0
    text = ran.stdout.decode()
    assert text.startswith("usage: facecrop detect ")
    assert "\nservice:\n  --url URL" in text and "--api-key API_KEY" in text and "--timeout TIMEOUT" in text


def test_an_output_folder_that_is_a_file_is_one_line_naming_it(service, tmp_path):
    photo, taken = photo_file(tmp_path, "a.jpg", 1), tmp_path / "taken"
    taken.write_bytes(b"a file")
    ran = facecrop_here("crop", str(photo), "--out", str(taken), "--url", service.url)
    assert (ran.returncode, ran.stdout, ran.stderr) == (1, b"", f"facecrop: {taken}: File exists\n")
    assert service.requests == []


def test_ctrl_c_during_detect_is_exit_status_130(service, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("facecrop_client.client.Client.detect", interrupted)
    ran = facecrop_here("detect", str(photo_file(tmp_path, "a.jpg", 1)), "--url", service.url)
    assert (ran.returncode, ran.stdout) == (130, b"")


def test_a_photo_from_standard_input_refused_is_one_line_naming_it(tmp_path):
    with scripted_service(lambda turn: refusal(415, "unsupported_image")) as service:
        ran = facecrop_here("anonymize", "-", "--out", "-", "--url", service.url, stdin=b"\x01not a photo")
    assert (ran.returncode, ran.stdout) == (1, b"")
    assert ran.stderr == "facecrop: -: 415 unsupported_image: the service's unsupported_image\n"


def test_a_batch_whose_output_is_inside_its_input_does_not_take_its_outputs_for_photos(service, tmp_path):
    photos = tmp_path / "photos"
    photo_file(photos, "a.jpg", 1)
    out = photos / "crops"
    for _ in range(2):
        ran = facecrop_here("batch", str(photos), str(out), "--mode", "crop", "-q", "--url", service.url)
        assert ran.returncode == 0, ran.stderr
    assert ran.stderr.startswith("done: 1 images, 1 already done, 0 processed, 0 failed")
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["a.jpg"]


def test_sigterm_ends_a_batch_as_ctrl_c_does(tmp_path):
    """A job scheduler's stop (Kubernetes, systemd, Slurm send SIGTERM): the batch in this process is
    told so by the service's stand-in on the third photo; the run ends interrupted, status 130."""
    photos = tmp_path / "photos"
    for n in range(8):
        photo_file(photos, f"{n}.jpg", 1)

    def answer_for(turn: int):
        if turn == 2:
            signal.raise_signal(signal.SIGTERM)  # runs in the main thread, the batch's handler
        return json_answer(200, faces_of(service.requests[turn][1]))

    with scripted_service(answer_for) as service:
        ran = facecrop_here("batch", str(photos), str(tmp_path / "faces.jsonl"), "--mode", "detect",
                            "--concurrency", "1", "-q", "--json", "--url", service.url)  # fmt: skip
    assert ran.returncode == 130, ran.stderr
    assert ran.stderr.startswith("interrupted (run again to continue): 8 images, 0 already done, ")
    summary = json.loads(ran.stdout)
    assert summary["interrupted"] and summary["succeeded"] < 8


@pytest.mark.parametrize("command", [["detect"], ["crop", "--out", "OUT"]])
def test_each_photos_line_reaches_a_pipe_while_the_next_photo_is_at_the_service(tmp_path, command):
    """Run as users run it (a Python of its own, its output a pipe): a photo's line is there to read
    while the service still holds the next photo, not when the command ends."""
    photos = [str(photo_file(tmp_path, f"{n}.jpg", 1)) for n in range(2)]
    command = [str(tmp_path / "out") if arg == "OUT" else arg for arg in command]
    line_read, second_answered = threading.Event(), threading.Event()
    with stand_in() as service:
        answer = service.answer_for

        def held_second(turn: int):
            if turn == 1:
                line_read.wait(20)
                second_answered.set()
            return answer(turn)

        service.answer_for = held_second
        buffered = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}  # as a shell's
        command = [*FACECROP, *command, *photos, "--url", service.url]
        running = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=buffered)
        first = running.stdout.readline()
        answered_before_the_line = second_answered.is_set()
        line_read.set()
        rest, _ = running.communicate(timeout=60)
    assert not answered_before_the_line
    assert running.returncode == 0 and first.startswith(("{", str(tmp_path / "out"))) and len(rest.splitlines()) == 1


STOPPING = "facecrop: stopping once the frames already sent are answered"


def sigterm_at(turn: int, answer: Callable) -> Callable:
    """`answer`, but at `turn` SIGTERM raised (its handler runs in the main thread) and that turn
    answered only once the command has said it is stopping (on facecrop_here's stderr)."""

    def answer_for(n: int):
        if n == turn:
            signal.raise_signal(signal.SIGTERM)
            deadline = time.monotonic() + 60
            while STOPPING not in sys.stderr.getvalue() and time.monotonic() < deadline:
                time.sleep(0.01)
        return answer(n)

    return answer_for


def test_sigterm_during_a_video_ends_it_as_ctrl_c_does_leaving_nothing(tmp_path):
    """`facecrop video` as the batch's videos below: SIGTERM at its first frame, status 130, no
    output or partial file; the next run does it."""
    source, out = clip_file(tmp_path / "in" / "clip.mp4"), tmp_path / "out"
    out.mkdir()
    with seeing_no_face() as service:
        answer = service.answer_for
        service.answer_for = sigterm_at(0, answer)
        ran = facecrop_here("video", str(source), str(out / "clip.mp4"), "-q", "--url", service.url)
        assert (ran.returncode, ran.stderr) == (130, STOPPING + "\n")
        assert list(out.iterdir()) == []
        service.answer_for = answer
        again = facecrop_here("video", str(source), str(out / "clip.mp4"), "-q", "--url", service.url)
    assert again.returncode == 0, again.stderr
    assert frames_in(out / "clip.mp4") == FRAMES


def test_sigterm_during_a_batchs_videos_ends_it_as_ctrl_c_does_leaving_no_partial_video(tmp_path):
    """SIGTERM as the video's first frame reaches the service, which answers it only once the command
    has said it is stopping: the video stops there (its partial file removed), status 130; the next
    run does it."""
    photos = tmp_path / "photos"
    photo_file(photos, "a.jpg", 0)
    clip_file(photos / "clip.mp4")
    out = tmp_path / "out"
    with seeing_no_face() as service:
        answer = service.answer_for
        service.answer_for = sigterm_at(1, answer)  # turn 0: a.jpg
        ran = facecrop_here("batch", str(photos), str(out), "--mode", "anonymize", "-q", "--url", service.url)
        assert ran.returncode == 130, ran.stderr
        assert STOPPING in ran.stderr and "Traceback" not in ran.stderr
        assert sorted(p.name for p in out.rglob("*") if p.is_file()) == ["a.jpg"]  # no partial video either
        service.answer_for = answer
        again = facecrop_here("batch", str(photos), str(out), "--mode", "anonymize", "-q", "--url", service.url)
    assert again.returncode == 0, again.stderr
    assert frames_in(out / "clip.mp4") == FRAMES


# `--ray` with Ray's own part stood in (on_ray's start, stop and its two Ray Data pipelines): the job's
# tasks (on_ray.photo_task, on_ray.video_task) run in this process, each on what reaches it pickled as
# Ray ships it, their rows read back as the driver reads Ray's; everything else is the command's own.
# tests/client/test_ray.py runs the same on real clusters; here a mutant of the driver is judged in
# a second, not in a cluster's minute.


ENGINES = ("local", "ray")


@dataclass
class RayHere:
    """What the stood-in Ray was asked: the address of each start, and how many stops."""

    joined: list[str | None] = field(default_factory=list)
    quiet: list[bool] = field(default_factory=list)  # each start's
    in_flight: list[int] = field(default_factory=list)  # each photo job's
    left: int = 0
    before_each_block: Callable[[int], None] = lambda n: None  # given each photo block's number


def rows_back(columns: dict[str, list]) -> list:
    """A task's columns as the driver gets them back from Ray Data, row by row."""
    from facecrop_client import on_ray

    return [on_ray.Done.of(dict(zip(columns, values))) for values in zip(*columns.values())]


@pytest.fixture
def ray_here(monkeypatch) -> Iterator[RayHere]:
    pytest.importorskip("ray")
    from facecrop_client import on_ray

    here = RayHere()

    def run_photos(job, todo):
        here.in_flight.append(job.in_flight)
        job = pickle.loads(pickle.dumps(job))  # as it travels to a node
        for n, first in enumerate(range(0, len(todo), on_ray.PHOTOS_PER_TASK)):
            here.before_each_block(n)
            block = todo[first : first + on_ray.PHOTOS_PER_TASK]
            yield from rows_back(
                on_ray.photo_task({"source": [i.name for i in block], "origin": [i.origin for i in block]}, job)
            )

    def run_videos(tasks):
        for task in pickle.loads(pickle.dumps(tasks)):
            yield from rows_back(on_ray.video_task({"task": [task]}))

    def start(address: str | None, quiet: bool) -> None:
        here.joined.append(address)
        here.quiet.append(quiet)

    monkeypatch.setattr(on_ray, "start", start)
    monkeypatch.setattr(on_ray, "stop", lambda: setattr(here, "left", here.left + 1))
    monkeypatch.setattr(on_ray, "run_photos", run_photos)
    monkeypatch.setattr(on_ray, "run_videos", run_videos)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    yield here
    assert here.quiet == [True] * len(here.joined)  # every command here is given -q


def facecrop_with(engine: str, *argv: str, address: str = "") -> Ran:
    """`facecrop ARGV -q` in this process, on the local engine or with `--ray [address]` (`ray_here`)."""
    return facecrop_here(*argv, *(["--ray", *filter(None, [address])] if engine == "ray" else []), "-q")


def without_times(text: str) -> list[str]:
    """A run's lines with its seconds and rates left out (all that differs between two runs)."""
    return [re.sub(r"[\d.]+ s( \([\d.]+ [a-z]+/s\)|, [\d.]+ fps)", "T", line) for line in text.splitlines()]


def manifest_rows(output: Path) -> list[tuple]:
    rows = [json.loads(line) for line in manifest_path(output).read_text().splitlines()]
    return sorted((row["source"], row["status"], row.get("faces"), Path(row.get("output") or "").name) for row in rows)


def photo_tree(folder: Path, count: int) -> Path:
    """`count` photos in a tree of two folders, each of its own number of faces (0 to 3)."""
    for n in range(count):
        photo_file(folder / ("b" if n % 2 else "a"), f"{n:02}.jpg", n % 4)
    return folder


@pytest.mark.parametrize("mode", ["detect", "crop", "anonymize"])
def test_a_batch_on_ray_answers_writes_and_tells_as_the_local_engine(ray_here, tmp_path, mode):
    """More photos than one task takes (the job split into tasks): each photo's answer, output and
    manifest row, the summary and the status as a run of the local engine gives them; the API key sent
    with each."""
    photos = photo_tree(tmp_path / "photos", 19)
    runs = {}
    for engine in ENGINES:
        output = tmp_path / engine / ("faces.jsonl" if mode == "detect" else "out")
        with stand_in() as service:
            started = time.monotonic()
            ran = facecrop_with(engine, "batch", str(photos), str(output), "--mode", mode, "--json", "--quality", "70",
                                "--concurrency", "3", "--url", service.url, "--api-key", "k")  # fmt: skip
            took = time.monotonic() - started
        assert ran.returncode == 0, (engine, ran.stderr)
        assert 0 < json.loads(ran.stdout)["seconds"] < took
        assert service.keys == {"Bearer k"}, engine  # the key reaches every task
        sorted_sent = sorted((path, tuple(sorted(options.items())), body) for path, options, body in sent(service))
        written = sorted(p.relative_to(output).as_posix() for p in output.rglob("*.jpg")) if mode != "detect" else []
        lines = (
            sorted(json.dumps(line, sort_keys=True) for line in Ran(0, output.read_bytes(), "").lines())
            if mode == "detect"
            else []
        )
        told = ran.stdout.decode().replace(str(tmp_path / engine), "RUN")  # the summary, naming the manifest
        summary = {k: v for k, v in json.loads(told).items() if k != "seconds"}
        runs[engine] = (sorted_sent, written, lines, manifest_rows(output), summary, without_times(ran.stderr))
    assert runs["ray"] == runs["local"]
    assert ray_here.joined == [""] and ray_here.left == 1 and ray_here.in_flight == [3]
    assert runs["ray"][4]["succeeded"] == 19 and len(runs["ray"][0]) == 19
    if mode != "detect":
        assert (tmp_path / "ray" / "out" / "b" / "03.jpg").read_bytes() == picture_of(
            (photos / "b" / "03.jpg").read_bytes()
        )


def refusing_three_faces(service, answer: Callable) -> Callable:
    """`answer`, but a photo of three faces refused (415)."""
    return lambda turn: refusal(415, "unsupported_image") if service.requests[turn][1][0] == 3 else answer(turn)


def test_a_batch_on_ray_records_each_photos_own_failure_as_the_local_engine(ray_here, tmp_path):
    """Photos refused (415) and those whose pictures cannot be written (a file where their folder
    goes): each a failure with its reason, in the failures file and the manifest, the others done;
    status 1, as the local engine's run."""
    photos = photo_tree(tmp_path / "photos", 9)
    runs = {}
    for engine in ENGINES:
        output = tmp_path / engine / "out"
        output.mkdir(parents=True)
        (output / "a").write_bytes(b"a file where folder a goes")
        with stand_in() as service:
            answer = refusing_three_faces(service, service.answer_for)
            service.answer_for = lambda turn, answer=answer: time.sleep(0.02) or answer(turn)
            ran = facecrop_with(engine, "batch", str(photos), str(output), "--mode", "crop", "--url", service.url)
        failures = output.with_name("out.failures.jsonl").read_text().replace(str(tmp_path / engine), "RUN")
        # each photo's milliseconds are its call's, its picture written or not
        assert all(row["duration_ms"] >= 20 for row in map(json.loads, manifest_path(output).open())), engine
        told = without_times(ran.stderr.replace(str(tmp_path / engine), "RUN"))
        runs[engine] = (ran.returncode, sorted(failures.splitlines()), manifest_rows(output), told)
    assert runs["ray"] == runs["local"]
    status, failed, rows, told = runs["ray"]
    assert status == 1 and told == [
        "done: 9 images, 0 already done, 2 processed, 7 failed, T",
        "failures and their reasons: RUN/out.failures.jsonl",
    ]
    assert [(json.loads(line)["path"], json.loads(line)["code"], json.loads(line)["message"]) for line in failed] == [
        *((f"a/0{n}.jpg", "write_error", "RUN/out/a: File exists") for n in (0, 2, 4, 6, 8)),
        ("b/03.jpg", "unsupported_image", "the service's unsupported_image"),
        ("b/07.jpg", "unsupported_image", "the service's unsupported_image"),
    ]
    assert [row[0] for row in rows if row[1] == "failed"] == [line.split('"')[3] for line in failed]


def test_a_refused_key_stops_a_batch_on_ray_and_the_next_run_does_the_rest(ray_here, tmp_path):
    """The service's own failure (401) ends the job at the first answer back, nothing counted as
    failed; the next run, the key right, does every photo once."""
    photos, output = photo_tree(tmp_path / "photos", 19), tmp_path / "faces.jsonl"
    with scripted_service(lambda turn: refusal(401, "unauthorized")) as service:
        ran = facecrop_here("batch", str(photos), str(output), "--mode", "detect", "--url", service.url, "--ray", "-q")
    assert ran.returncode == 1 and len(service.requests) <= 16  # the first task's photos, not the job's
    assert ran.stderr.startswith("stopped (run again to continue): 19 images, 0 already done, 0 processed, 0 failed")
    assert ran.stderr.rstrip().endswith("why: 401 unauthorized: the service's unauthorized")
    assert output.with_name("faces.jsonl.failures.jsonl").read_text() == "" and output.read_text() == ""
    with stand_in() as service:
        again = facecrop_here(
            "batch", str(photos), str(output), "--mode", "detect", "--url", service.url, "--ray", "-q"
        )
    assert again.returncode == 0 and len(service.requests) == 19
    assert sorted(line["path"] for line in Ran(0, output.read_bytes(), "").lines()) == sorted(
        p.relative_to(photos).as_posix() for p in photos.rglob("*.jpg")
    )
    with stand_in() as service:
        done = facecrop_here("batch", str(photos), str(output), "--mode", "detect", "--url", service.url, "--ray", "-q")
    assert done.stderr.startswith("done: 19 images, 19 already done, 0 processed, 0 failed") and not service.requests
    assert ray_here.joined == ["", "", ""] and ray_here.left == 3


@pytest.mark.parametrize("address, from_the_environment", [(None, False), ("10.0.0.1:6379", False), (None, True)])
def test_ray_embedded_checks_the_service_from_here_first_a_cluster_does_not(
    ray_here, tmp_path, monkeypatch, address, from_the_environment
):
    """Embedded, the service unreachable from here is one line before Ray starts; on a cluster
    (an address given, or RAY_ADDRESS's) its nodes may reach what this machine cannot: the job starts."""
    if from_the_environment:
        monkeypatch.setenv("RAY_ADDRESS", "10.0.0.2:6379")
    photos = photo_tree(tmp_path / "photos", 3)
    given = ["--ray", address] if address else ["--ray"]
    ran = facecrop_here(
        "batch", str(photos), str(tmp_path / "out"), "--mode", "crop", "--url", "http://127.0.0.1:9", *given, "-q"
    )
    assert ran.returncode == 1
    if address is None and not from_the_environment:
        said = "facecrop: cannot reach http://127.0.0.1:9: Connection refused (is the service running? set --url"
        assert ran.stderr.startswith(said) and len(ran.stderr.splitlines()) == 1
        assert ray_here.joined == [] and not (tmp_path / "out").exists()
    else:
        assert ray_here.joined == [address or ""] and ray_here.left == 1
        assert (
            "stopped (run again to continue): 3 images" in ran.stderr
            and "why: connection_error: cannot reach" in ran.stderr
        )


def test_a_ray_cluster_that_cannot_be_joined_is_one_line_and_nothing_written(ray_here, tmp_path, monkeypatch):
    from facecrop_client import on_ray

    def refused(address, quiet):
        raise on_ray.ClusterError(f"cannot reach the Ray cluster at {address}: refused")

    monkeypatch.setattr(on_ray, "start", refused)
    photos = photo_tree(tmp_path / "photos", 3)
    with stand_in() as service:
        batch = facecrop_here(
            "batch",
            str(photos),
            str(tmp_path / "out"),
            "--mode",
            "crop",
            "--url",
            service.url,
            "--ray",
            "10.0.0.1:1",
            "-q",
        )
        video = facecrop_here(
            "video",
            str(clip_file(tmp_path / "in.mp4")),
            str(tmp_path / "v.mp4"),
            "--url",
            service.url,
            "--ray",
            "10.0.0.1:1",
            "-q",
        )
    for ran in (batch, video):
        assert (ran.returncode, ran.stdout, ran.stderr) == (
            1,
            b"",
            "facecrop: cannot reach the Ray cluster at 10.0.0.1:1: refused\n",
        )
    assert service.requests == [] and sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "photos"]


def test_sigterm_ends_a_batch_on_ray_as_ctrl_c_does(ray_here, tmp_path):
    """SIGTERM as the second task's photos go out: Ray's handler replaced by the batch's (status 130,
    interrupted, the first task's photos kept), Ray left."""
    photos, output = photo_tree(tmp_path / "photos", 19), tmp_path / "faces.jsonl"
    ray_here.before_each_block = lambda n: signal.raise_signal(signal.SIGTERM) if n == 1 else None
    with stand_in() as service:
        ran = facecrop_here(
            "batch", str(photos), str(output), "--mode", "detect", "--json", "--url", service.url, "--ray", "-q"
        )
    assert ran.returncode == 130, ran.stderr
    assert ran.stderr.startswith(
        "interrupted (run again to continue): 19 images, 0 already done, 16 processed, 0 failed"
    )
    assert json.loads(ran.stdout)["interrupted"] and len(output.read_text().splitlines()) == 16
    assert ray_here.left == 1


def test_a_batch_on_ray_anonymizing_a_folder_hides_its_videos_as_the_local_engine(ray_here, tmp_path):
    photos = tmp_path / "photos"
    photo_file(photos, "a.jpg", 0)
    clip_file(photos / "clips" / "new" / "good.mp4")
    (photos / "bad.mp4").write_bytes(b"not a video")
    runs = {}
    for engine in ENGINES:
        out = tmp_path / engine
        with seeing_no_face() as service:
            started = time.monotonic()
            ran = facecrop_with(
                engine,
                "batch",
                str(photos),
                str(out),
                "--mode",
                "anonymize",
                "--min-confidence",
                "30",
                "--json",
                "--url",
                service.url,
            )
            took_ms = (time.monotonic() - started) * 1000
        assert all(0 <= row["duration_ms"] <= took_ms for row in map(json.loads, manifest_path(out).open())), engine
        told = ran.stderr.replace(str(tmp_path / engine), "RUN").replace(str(photos), "IN")
        failures = out.with_name(f"{engine}.failures.jsonl").read_text().replace(str(photos), "IN")
        summary = {k: v for k, v in json.loads(ran.stdout).items() if k not in ("seconds", "manifest")}
        runs[engine] = (
            ran.returncode,
            frame_options(service),
            frames_in(out / "clips" / "new" / "good.mp4"),
            failures,
            summary,
            without_times(told.replace(f"{engine}.failures", "OUT.failures")),
            manifest_rows(out),
        )
    assert runs["ray"] == runs["local"]
    status, options, frames, failures, summary, told, _ = runs["ray"]
    assert (status, frames, summary["succeeded"], summary["failed"]) == (1, FRAMES, 1, 1)
    assert options == every_second_tiled(SENT_FOR_VIDEOS | {"min_confidence": "30.0"})
    assert told[0] == "done: 1 images, 0 already done, 1 processed, 0 failed, T"
    assert (
        told[1].startswith(f"clips/new/good.mp4: {FRAMES} frames (0 skipped), 0 faces")
        and "IN/bad.mp4: not a video" in failures
    )


def test_a_video_on_ray_sends_tells_and_writes_as_the_local_engine(ray_here, tmp_path):
    source = clip_file(tmp_path / "in.mp4")
    runs = {}
    for engine in ENGINES:
        target = tmp_path / f"{engine}.mp4"
        with seeing_no_face() as service:
            ran = facecrop_with(
                engine, "video", str(source), str(target), "--json", "--min-confidence", "30", "--url", service.url
            )
        summary = {k: v for k, v in json.loads(ran.stdout).items() if k not in ("seconds", "output")}
        runs[engine] = (ran.returncode, frame_options(service), frames_in(target), summary, without_times(ran.stderr))
    assert runs["ray"] == runs["local"]
    assert runs["ray"][:3] == (0, every_second_tiled(SENT_FOR_VIDEOS | {"min_confidence": "30.0"}), FRAMES)
    assert ray_here.joined == [""] and ray_here.left == 1


def test_a_video_on_ray_refused_or_unreadable_is_the_local_engines_one_line(ray_here, tmp_path):
    source, unreadable = clip_file(tmp_path / "in.mp4"), tmp_path / "notes.mp4"
    unreadable.write_bytes(b"not a video")
    for video in (source, unreadable):
        told = {}
        for engine in ENGINES:
            with scripted_service(lambda turn: refusal(401, "unauthorized")) as service:
                ran = facecrop_with(
                    engine, "video", str(video), str(tmp_path / "out.mp4"), "--url", service.url, address="10.0.0.1:1"
                )
            told[engine] = (ran.returncode, ran.stdout, ran.stderr)
        assert told["ray"] == told["local"]
    assert told["ray"] == (1, b"", f"facecrop: {unreadable}: not a video\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4", "notes.mp4"]


def test_sigterm_ends_a_video_on_ray_as_ctrl_c_and_leaves_no_partial_file(ray_here, tmp_path, monkeypatch):
    """Stopped while its task writes (a partial file beside OUT, as a task killed on its node leaves
    one): status 130, nothing beside the source, Ray left."""
    from facecrop_client import on_ray
    from facecrop_client.video import partial_path

    def stopped_while_writing(tasks):
        partial_path(tasks[0].job.target).write_bytes(b"half a video")
        signal.raise_signal(signal.SIGTERM)
        yield from ()

    monkeypatch.setattr(on_ray, "run_videos", stopped_while_writing)
    source = clip_file(tmp_path / "in.mp4")
    with seeing_no_face() as service:
        ran = facecrop_here("video", str(source), str(tmp_path / "out.mp4"), "--url", service.url, "--ray", "-q")
    assert (ran.returncode, ran.stdout, ran.stderr) == (130, b"", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mp4"] and ray_here.left == 1


def test_a_batchs_video_the_service_refuses_is_a_failure_naming_it_on_either_engine(ray_here, tmp_path):
    """A frame refused (400): that video's failure, its line naming it and the service's words; the
    photos done, status 1."""
    photos = tmp_path / "photos"
    photo_file(photos, "a.jpg", 0)
    clip_file(photos / "clips" / "clip.mp4")
    for engine in ENGINES:
        with seeing_no_face() as service:
            answer = service.answer_for
            service.answer_for = lambda turn, answer=answer: answer(turn) if turn == 0 else refusal(400, "bad_frame")
            ran = facecrop_with(engine, "batch", str(photos), str(tmp_path / engine), "--mode", "anonymize",
                                "--url", service.url)  # fmt: skip
        assert ran.returncode == 1, (engine, ran.stderr)
        [failure] = map(json.loads, (tmp_path / f"{engine}.failures.jsonl").open())
        assert failure == {
            "path": "clips/clip.mp4",
            "status": 0,
            "code": "video_failed",
            "message": f"{photos / 'clips' / 'clip.mp4'}: 400 bad_frame: the service's bad_frame",
        }, engine


@pytest.mark.parametrize("mode", ["detect", "crop"])
def test_a_batch_on_ray_that_does_not_anonymize_leaves_a_folders_videos_alone(ray_here, tmp_path, mode):
    """Only `--mode anonymize` of a folder takes its videos: detect and crop send the photo alone and
    list it alone."""
    photos = tmp_path / "photos"
    photo_file(photos, "a.jpg", 1)
    clip_file(photos / "clip.mp4")
    output = tmp_path / ("faces.jsonl" if mode == "detect" else "out")
    with stand_in() as service:
        ran = facecrop_with("ray", "batch", str(photos), str(output), "--mode", mode, "--url", service.url)
    assert ran.returncode == 0, ran.stderr
    assert [path for path, _, _ in sent(service)] == [f"/v1/{mode}"]
    assert [row[0] for row in manifest_rows(output)] == ["a.jpg"]
