"""The client and the `facecrop` command line against the real service."""

import io
import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageSequence

from evaluation.hidden import DETAIL_KEPT, detail_kept
from evaluation.images import ASTRONAUT, CROWD, encoded, moving_face_frames, photo
from evaluation.origins import OriginState, photo_origin
from facecrop_client import Client, Face, FacecropError
from local_triton.processes import SHARED_FACES
from tests.support import FACECROP, Gate, gated, restore_ctrl_c


def test_detect_accepts_paths_bytes_and_files_and_returns_typed_faces(stack):
    client = Client(stack.gateway)
    path = photo(ASTRONAUT)
    results = [client.detect(path), client.detect(path.read_bytes()), client.detect(io.BytesIO(path.read_bytes()))]
    for detection in results:
        assert (detection.width, detection.height) == (512, 512)
        [face] = detection.faces
        assert isinstance(face, Face) and face.confidence > 99
        assert face.landmarks.left_eye[0] < face.landmarks.right_eye[0]


def test_crop_and_errors(stack):
    client = Client(stack.gateway)
    result = client.crop(photo(CROWD), width=200, height=100, format="png")
    assert Image.open(io.BytesIO(result.content)).size == (200, 100)
    assert result.content_type == "image/png" and result.face_count >= 10 and result.region.width > 0
    with pytest.raises(FacecropError) as raised:
        client.crop(photo(CROWD), zoom=7)
    assert raised.value.status == 400 and raised.value.code == "invalid_parameter"


def test_one_client_shared_by_threads(stack):
    client = Client(stack.gateway)
    with ThreadPoolExecutor(8) as pool:
        counts = list(pool.map(lambda _: len(client.detect(photo(ASTRONAUT)).faces), range(16)))
    assert counts == [1] * 16


def run_cli(stack, *args, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "FACECROP_URL": stack.gateway}
    return subprocess.run([*FACECROP, *args], capture_output=True, text=True, env=env, timeout=300, **kwargs)


def test_cli_detect_and_crop(stack, tmp_path):
    detected = run_cli(stack, "detect", str(photo(ASTRONAUT)), str(photo(CROWD)), "--min-confidence", "80")
    assert detected.returncode == 0, detected.stderr
    lines = [json.loads(line) for line in detected.stdout.splitlines()]
    assert next(len(line["faces"]) for line in lines) == 1 and lines[1]["path"].endswith(CROWD.split("/")[-1])
    cropped = run_cli(
        stack, "crop", str(photo(ASTRONAUT)), "--width", "64", "--height", "64", "--zoom", "0.8", "--out", str(tmp_path)
    )
    assert cropped.returncode == 0, cropped.stderr
    assert Image.open(tmp_path / "skimage_astronaut.jpg").size == (64, 64)


def test_cli_goes_on_past_a_photo_it_cannot_use(stack, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"not a photo")
    detected = run_cli(stack, "detect", str(bad), str(tmp_path / "gone.jpg"), str(photo(ASTRONAUT)))
    assert detected.returncode == 1  # something failed; what could be done was done
    [line] = [json.loads(line) for line in detected.stdout.splitlines()]
    assert line["path"] == str(photo(ASTRONAUT)) and len(line["faces"]) == 1
    assert detected.stderr.splitlines() == [
        f"facecrop: {bad}: 415 unsupported_image: the image is not readable as "
        "AVIF, BMP, GIF, HEIF, JPEG, PNG, TIFF, WEBP",
        f"facecrop: {tmp_path / 'gone.jpg'}: No such file or directory",
    ]


def run_piped(stack, *args, stdin: bytes, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The command line with `stdin` as its standard input, its output as bytes."""
    env = {**os.environ, "FACECROP_URL": stack.gateway}
    return subprocess.run([*FACECROP, *args], input=stdin, capture_output=True, env=env, cwd=cwd, timeout=300)


def test_cli_reads_a_photo_from_stdin_and_writes_its_picture_to_stdout(stack, tmp_path):
    crowd = photo(CROWD)
    detected = run_piped(stack, "detect", "-", "--min-confidence", "80", stdin=crowd.read_bytes())
    from_file = run_cli(stack, "detect", str(crowd), "--min-confidence", "80")
    assert detected.returncode == 0, detected.stderr
    [piped] = [json.loads(line) for line in detected.stdout.splitlines()]
    filed = json.loads(from_file.stdout)
    assert piped.pop("path") == "-" and len(piped["faces"]) >= 10
    assert piped == {key: value for key, value in filed.items() if key != "path"}
    # `--out -`: the same picture as written into a folder, and only it, on stdout.
    hidden = run_piped(stack, "anonymize", "-", "--out", "-", "--method", "fill", stdin=crowd.read_bytes())
    assert hidden.returncode == 0 and hidden.stderr == b"", hidden.stderr
    assert run_cli(stack, "anonymize", str(crowd), "--out", str(tmp_path), "--method", "fill").returncode == 0
    assert hidden.stdout == (tmp_path / crowd.name).read_bytes()
    # A named photo to stdout, its format from --format; a file named `-` is ./-.
    shutil.copy(photo(ASTRONAUT), tmp_path / "-")
    cropped = run_piped(stack, "crop", "./-", "--out", "-", "--width", "64", "--height", "48", "--format", "webp",
                        stdin=b"", cwd=tmp_path)  # fmt: skip
    assert cropped.returncode == 0, cropped.stderr
    picture = Image.open(io.BytesIO(cropped.stdout))
    assert (picture.format, picture.size) == ("WEBP", (64, 48))


def test_cli_a_piped_photo_the_service_cannot_read_is_one_line_and_writes_nothing(stack, tmp_path):
    """The gateway's own refusal; the misuses of standard input and output the command line refuses
    itself are tests/client/test_cli_in_process.py's."""
    result = run_piped(stack, "anonymize", "-", "--out", "-", stdin=b"not a photo")
    assert result.returncode == 1 and result.stdout == b""
    [line] = result.stderr.decode().splitlines()
    assert line.startswith("facecrop: -: 415 unsupported_image: the image is not readable as "), line
    assert list(tmp_path.iterdir()) == []


def test_an_address_without_a_scheme_and_one_that_is_not_the_gateway(stack):
    bare = Client(stack.gateway.removeprefix("http://"))
    assert bare.base_url == stack.gateway and len(bare.detect(photo(ASTRONAUT)).faces) == 1
    with pytest.raises(FacecropError, match="is the address the gateway's, not Triton's"):
        Client(stack.triton_http).detect(photo(ASTRONAUT))


def photo_tree(root: Path, count: int) -> list[str]:
    """`count` real photos in nested folders (their paths are returned), plus two that fail: a
    file that is not an image, and a link to a file that is gone (it cannot be read)."""
    sources = sorted(SHARED_FACES.glob("wider_val_416sq/images/*.jpg"))
    names = []
    for index in range(count):
        relative = f"set{index % 3}/sub{index % 2}/{index:03d}.jpg"
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(sources[index % len(sources)], root / relative)
        names.append(relative)
    (root / "set0").mkdir(exist_ok=True)
    (root / "set0" / "broken.jpg").write_bytes(b"this is no jpeg")
    (root / "set0" / "gone.jpg").symlink_to(root / "deleted.jpg")
    return names


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_batch_detect_records_failures_and_resumes_without_duplicates(stack, tmp_path):
    names = photo_tree(tmp_path / "in", 24)
    output = tmp_path / "out" / "faces.jsonl"
    first = run_cli(stack, "batch", str(tmp_path / "in"), str(output), "--mode", "detect", "--concurrency", "4")
    assert first.returncode == 1  # the two bad files failed, the batch went on
    assert "2 failed" in first.stderr and "24 processed" in first.stderr
    assert "\r" not in first.stderr and first.stderr.startswith("0/26 images (0%)")  # not a terminal: lines
    assert sorted(d["path"] for d in read_jsonl(output)) == sorted(names)
    failures = {f["path"]: f for f in read_jsonl(output.with_name("faces.jsonl.failures.jsonl"))}
    assert failures["set0/broken.jpg"]["code"] == "unsupported_image"
    assert failures["set0/gone.jpg"]["code"] == "read_error"
    assert failures["set0/gone.jpg"]["message"].endswith("gone.jpg: No such file or directory")

    # a crash: the last line half-written, the three before it lost
    text = output.read_text().splitlines(keepends=True)
    output.write_text("".join(text[:-4]) + text[-1][: len(text[-1]) // 2])
    second = run_cli(stack, "batch", str(tmp_path / "in"), str(output), "--mode", "detect")
    assert "20 already done" in second.stderr and "4 processed" in second.stderr
    paths = [d["path"] for d in read_jsonl(output)]
    assert sorted(paths) == sorted(names)  # nothing lost, nothing twice


def test_batch_takes_the_address_after_the_command_and_quiet_shows_only_the_summary(stack, tmp_path):
    photo_tree(tmp_path / "in", 3)
    output = tmp_path / "faces.jsonl"
    command = [*FACECROP, "batch", str(tmp_path / "in"), str(output), "--mode", "detect", "--url", stack.gateway, "-q"]
    env = {**os.environ, "FACECROP_URL": "http://127.0.0.1:9"}  # --url must win over it
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 1  # the two bad files
    summary, failures = result.stderr.splitlines()
    assert summary.startswith("done: 5 images, 0 already done, 3 processed, 2 failed")
    assert failures == f"failures and their reasons: {output}.failures.jsonl"


def test_batch_crop_mirrors_the_tree_and_skips_what_is_done(stack, tmp_path):
    names = photo_tree(tmp_path / "in", 6)
    out = tmp_path / "crops"
    arguments = ["batch", str(tmp_path / "in"), str(out), "--mode", "crop", "--width", "96", "--height", "96"]
    run = run_cli(stack, *arguments, "--format", "webp")
    assert run.returncode == 1
    for name in names:
        assert Image.open((out / name).with_suffix(".webp")).size == (96, 96)
    again = run_cli(stack, *arguments, "--format", "webp")
    assert "6 already done" in again.stderr and "0 processed" in again.stderr


def test_a_picture_the_service_answers_in_another_format_than_asked_is_named_for_what_it_is(stack, tmp_path):
    """AVIF asked for, a whole photo over AVIF's 1,600 pixels comes back a WebP: written as .webp
    (it was a WebP named .avif), a small crop as .avif; a second run finds both done; the command
    for one photo says where it wrote, and refuses a folder where the WebP would overwrite it."""
    photos = tmp_path / "in"
    photos.mkdir()
    large = Image.open(photo(CROWD)).convert("RGB").resize((1800, 1200))
    large.save(photos / "large.jpg")
    Image.open(photo(ASTRONAUT)).save(photos / "small.jpg")
    out = tmp_path / "out"
    arguments = ["batch", str(photos), str(out), "--mode", "anonymize", "--format", "avif"]
    assert run_cli(stack, *arguments).returncode == 0
    assert sorted(path.name for path in out.iterdir()) == ["large.webp", "small.avif"]
    assert [Image.open(out / name).format for name in ("large.webp", "small.avif")] == ["WEBP", "AVIF"]
    listed = {row["source"]: row["output"] for row in read_jsonl(tmp_path / "out.manifest.jsonl")}
    assert listed == {"large.jpg": str(out / "large.webp"), "small.jpg": str(out / "small.avif")}
    again = run_cli(stack, *arguments)
    assert "2 already done" in again.stderr and "0 processed" in again.stderr, again.stderr
    one = run_cli(stack, "anonymize", str(photos / "large.jpg"), "--format", "avif", "--out", str(tmp_path))
    assert one.stdout.strip() == str(tmp_path / "large.webp") and Image.open(tmp_path / "large.webp").format == "WEBP"
    Image.open(photo(CROWD)).convert("RGB").resize((1800, 1200)).save(photos / "mine.webp")
    mine = run_cli(stack, "anonymize", str(photos / "mine.webp"), "--format", "avif", "--out", str(photos))
    assert "would overwrite it" in mine.stderr and Image.open(photos / "mine.webp").size == (1800, 1200)


def test_a_batch_output_inside_its_input_is_not_read_as_photos_to_do(stack, tmp_path):
    """`facecrop batch photos photos/crops`: the second run finds every photo done, none of its own
    crops to crop again (they were read as new photos, and nested a folder deeper each run)."""
    names = photo_tree(tmp_path / "in", 6)
    out = tmp_path / "in" / "crops"
    arguments = ["batch", str(tmp_path / "in"), str(out), "--mode", "crop", "--width", "96", "--height", "96"]
    first = run_cli(stack, *arguments)
    assert "done: 8 images, 0 already done" in first.stderr, first.stderr
    again = run_cli(stack, *arguments)
    assert "done: 8 images, 6 already done, 0 processed, 2 failed" in again.stderr, again.stderr
    assert sorted(path.relative_to(out).as_posix() for path in out.rglob("*.jpg")) == sorted(names)


def test_photos_that_would_share_an_output_or_overwrite_their_input_are_refused(stack, tmp_path):
    """x.jpeg's and x.jpg's outputs are both x.jpg: the first by name (x.jpeg) writes it, the other
    fails (same_output), on every run, instead of overwriting it or passing for done. A batch into its
    own input folder, or a photo anonymized into its own folder, is refused (the photos were counted
    as done, nothing hidden; the photo overwritten)."""
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(photo(ASTRONAUT), folder / "x.jpg")
    shutil.copy(photo(CROWD), folder / "x.jpeg")
    Image.open(photo(ASTRONAUT)).save(folder / "x.png")
    out = tmp_path / "out"
    for run in range(2):
        done = run_cli(stack, "batch", str(folder), str(out), "--mode", "anonymize", "-q")
        assert done.returncode == 1, done.stderr
        assert f"3 images, {2 * run} already done, {2 - 2 * run} processed, 1 failed" in done.stderr, done.stderr
        [failure] = [json.loads(line) for line in out.with_name("out.failures.jsonl").read_text().splitlines()]
        assert (failure["path"], failure["code"]) == ("x.jpg", "same_output")
        assert f"its output, {out / 'x.jpg'}, is x.jpeg's" in failure["message"]
    assert sorted(path.name for path in out.iterdir()) == ["x.jpg", "x.png"]
    assert Image.open(out / "x.jpg").size == Image.open(photo(CROWD)).size  # x.jpeg's, the crowd

    into_itself = run_cli(stack, "batch", str(folder), str(folder), "--mode", "anonymize")
    assert into_itself.returncode == 1
    assert "the input folder is the output folder" in into_itself.stderr
    before = (folder / "x.png").read_bytes()
    over = run_cli(stack, "anonymize", str(folder / "x.png"), "--out", str(folder))
    assert over.returncode == 1 and "its output would overwrite it" in over.stderr
    assert (folder / "x.png").read_bytes() == before
    (tmp_path / "b").mkdir()
    shutil.copy(photo(CROWD), tmp_path / "b" / "x.jpg")
    second, out = tmp_path / "b" / "x.jpg", tmp_path / "c"
    twice = run_cli(stack, "anonymize", str(folder / "x.jpg"), str(second), "--out", str(out))
    assert twice.returncode == 1 and f"its output, {out / 'x.jpg'}, is {folder / 'x.jpg'}'s" in twice.stderr
    assert Image.open(out / "x.jpg").size == Image.open(photo(ASTRONAUT)).size


@contextmanager
def origin_of(tmp_path: Path, photos: dict[str, str]) -> Iterator[tuple[str, OriginState]]:
    """An origin on loopback serving `photos` (a file name: the shared photo it is), its base URL
    and what it has seen."""
    (tmp_path / "origin").mkdir()
    for name, shared in photos.items():
        shutil.copy(photo(shared), tmp_path / "origin" / name)
    with photo_origin(tmp_path / "origin") as served:
        yield served


def crop_list(stack, tmp_path: Path, name: str, urls: list[str], *arguments: str) -> subprocess.CompletedProcess:
    """`facecrop batch NAME.txt NAME --mode crop`, the list of `urls` written in `tmp_path`."""
    (tmp_path / f"{name}.txt").write_text("".join(f"{url}\n" for url in urls))
    return run_cli(stack, "batch", str(tmp_path / f"{name}.txt"), str(tmp_path / name), "--mode", "crop", *arguments)


def test_a_listed_photo_whose_output_is_taken_is_refused_before_it_is_fetched(stack, tmp_path):
    """x.jpeg's and x.jpg's outputs are both <host>/x.jpg: x.jpg fails (same_output) without its
    URL being fetched (a wasted download per clash, from an origin or an object store, before)."""
    with origin_of(tmp_path, {"x.jpg": ASTRONAUT, "x.jpeg": CROWD}) as (base, origin):
        done = crop_list(stack, tmp_path, "out", [f"{base}x.jpeg", f"{base}x.jpg"], "-q")
    assert done.returncode == 1, done.stderr
    assert "2 images, 0 already done, 1 processed, 1 failed" in done.stderr, done.stderr
    [failure] = read_jsonl(tmp_path / "out.failures.jsonl")
    assert (failure["path"].rsplit("/", 1)[-1], failure["code"]) == ("x.jpg", "same_output")
    assert (origin.seen["/x.jpeg"], origin.seen["/x.jpg"]) == (1, 0)


def test_listed_urls_whose_query_picks_the_photo_are_each_done_and_a_list_naming_one_output_twice_is_refused(
    stack, tmp_path
):
    """`/photo?id=1` and `/photo?id=2` (no photo's suffix) were left out of the batch without a word:
    each is cropped into a file of its own. A list two of whose URLs would be one output is one line
    before any photo is sent (the second was dropped silently)."""
    with origin_of(tmp_path, {"photo": ASTRONAUT}) as (base, origin):
        done = crop_list(stack, tmp_path, "out", [f"{base}photo?id=1", f"{base}photo?id=2"], "-q")
        assert done.returncode == 0, done.stderr
        assert "2 images, 0 already done, 2 processed, 0 failed" in done.stderr, done.stderr
        crops = sorted(path.relative_to(tmp_path / "out").as_posix() for path in (tmp_path / "out").rglob("*.jpg"))
        assert crops == ["127.0.0.1/photo/id=1.jpg", "127.0.0.1/photo/id=2.jpg"]
        twice = crop_list(stack, tmp_path, "twice", [f"{base}photo.jpg?w=1", f"{base}photo.jpg?w=2"])
        assert origin.seen["/photo"] == 2 and origin.seen["/photo.jpg"] == 0
    assert twice.returncode == 1
    assert twice.stderr == (
        f"facecrop: {tmp_path / 'twice.txt'}: lines 1 and 2 would both be written as 127.0.0.1/photo.jpg "
        f"({base}photo.jpg?w=1, {base}photo.jpg?w=2): list one of them\n"
    )
    assert not (tmp_path / "twice").exists()


def test_batch_stops_cleanly_on_ctrl_c_and_a_rerun_finishes(stack, tmp_path):
    names = photo_tree(tmp_path / "in", 60)
    output = tmp_path / "faces.jsonl"
    # The service is reached through a gate that answers 8 photos and holds the next: Ctrl-C comes
    # mid-way, and the batch cannot have finished first.
    gate = Gate("/v1/detect", let_through=8)
    with gated(stack.gateway, gate) as url:
        command = [*FACECROP, "batch", str(tmp_path / "in"), str(output), "--mode", "detect", "--concurrency", "2"]
        env = {**os.environ, "FACECROP_URL": url}
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=restore_ctrl_c)
        assert gate.held.wait(60), process.poll()
        process.send_signal(signal.SIGINT)
        gate.released.set()
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    partial = read_jsonl(output)
    assert 5 <= len(partial) < 60
    rerun = run_cli(stack, "batch", str(tmp_path / "in"), str(output), "--mode", "detect")
    assert f"{len(partial)} already done" in rerun.stderr
    assert sorted(d["path"] for d in read_jsonl(output)) == sorted(names)


def test_detail_high_from_the_client_and_the_command_line(stack):
    crowd = SHARED_FACES / "wider_val_native" / "images" / "0_Parade_marchingband_1_410.jpg"
    client = Client(stack.gateway)
    standard = client.detect(crowd, max_faces=1000)
    high = client.detect(crowd, max_faces=1000, detail="high")
    assert len(high.faces) > len(standard.faces)
    detected = run_cli(stack, "detect", str(crowd), "--max-faces", "1000", "--detail", "high")
    assert detected.returncode == 0, detected.stderr
    assert len(json.loads(detected.stdout)["faces"]) == len(high.faces)


def test_anonymize_from_the_client_the_command_line_and_batch(stack, tmp_path):
    crowd = photo(CROWD)
    result = Client(stack.gateway).anonymize(crowd, method="pixelate", format="png")
    assert result.content_type == "image/png" and result.face_count >= 10
    assert Image.open(io.BytesIO(result.content)).size == Image.open(crowd).size
    single = run_cli(stack, "anonymize", str(crowd), "--out", str(tmp_path / "one"), "--method", "fill")
    assert single.returncode == 0, single.stderr
    assert Image.open(tmp_path / "one" / crowd.name).size == Image.open(crowd).size
    names = photo_tree(tmp_path / "in", 4)
    run = run_cli(stack, "batch", str(tmp_path / "in"), str(tmp_path / "hidden"), "--mode", "anonymize", "-q")
    assert run.returncode == 1  # the tree holds two files that cannot be anonymized
    for name in names:
        assert Image.open(tmp_path / "hidden" / name).size == Image.open(tmp_path / "in" / name).size
    again = run_cli(stack, "batch", str(tmp_path / "in"), str(tmp_path / "hidden"), "--mode", "anonymize", "-q")
    assert f"{len(names)} already done" in again.stderr


def test_a_batch_keeps_an_animated_gif_animated_with_each_frames_face_hidden(stack, tmp_path):
    """A GIF in a photo tree comes out a GIF of as many frames (it came out a JPEG of its first
    frame), each frame's moving face hidden against the source frame Pillow decodes; `crop` of
    the same file writes an animated GIF too."""
    frames, faces = moving_face_frames()
    (tmp_path / "in").mkdir()
    source = tmp_path / "in" / "moving.gif"
    source.write_bytes(encoded(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0))
    run = run_cli(stack, "batch", str(tmp_path / "in"), str(tmp_path / "hidden"), "--mode", "anonymize", "-q")
    assert run.returncode == 0, run.stderr

    def frames_of(path: Path) -> list[np.ndarray]:
        with Image.open(path) as image:
            assert image.format == "GIF"
            return [np.asarray(frame.convert("RGB")) for frame in ImageSequence.Iterator(image)]

    before, after = frames_of(source), frames_of(tmp_path / "hidden" / "moving.gif")
    assert len(after) == len(before) == len(frames)
    for index, (was, now, face) in enumerate(zip(before, after, faces, strict=True)):
        assert detail_kept(was, now, face) < DETAIL_KEPT, index
    cropped = run_cli(stack, "crop", str(source), "--width", "128", "--height", "128", "--out", str(tmp_path / "crops"))
    assert cropped.returncode == 0, cropped.stderr
    assert len(frames_of(tmp_path / "crops" / "moving.gif")) == len(frames)
