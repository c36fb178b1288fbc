"""`facecrop batch --ray` and `facecrop video --ray` on a real Ray cluster of three nodes on this
machine (ray.cluster_utils.Cluster: a head and two workers, each a real raylet), against the real
service: the outputs equal a single-machine run's byte for byte (videos frame for frame), a worker
node killed mid-job loses nothing, and a re-run writes nothing new."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import av
import numpy as np
import pytest
from PIL import Image

from evaluation.clips import build_clip
from evaluation.images import labeled_set
from evaluation.origins import photo_origin
from tests.support import FACECROP, Gate, gated, json_answer, refusal, restore_ctrl_c, scripted_service

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

pytestmark = pytest.mark.cluster

PHOTOS = 10
HEAD_NODE = {"num_cpus": 0, "include_dashboard": False}  # the clusters' head: it runs no task


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A head that runs no task (num_cpus 0: the job's driver joins it) and two worker nodes of one
    CPU each, so every task runs on a worker node and killing one always stops tasks."""
    cluster = Cluster(initialize_head=True, head_node_args=HEAD_NODE)
    cluster.workers = [cluster.add_node(num_cpus=1) for _ in range(2)]  # type: ignore[attr-defined]
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        cluster.shutdown()


# `cluster`'s nodes, made by a Python of its own that prints the head's address and shuts them down
# once its standard input ends.
CLUSTER_ELSEWHERE = f"""
import sys
from ray.cluster_utils import Cluster
cluster = Cluster(initialize_head=True, head_node_args={HEAD_NODE!r})
for _ in range(2):
    cluster.add_node(num_cpus=1)
cluster.wait_for_nodes()
print(cluster.address, flush=True)
sys.stdin.read()
cluster.shutdown()
"""


@pytest.fixture(scope="module")
def cluster_elsewhere() -> Iterator[str]:
    """The address of a cluster as `cluster`'s, made by a Python of its own: where the tests run in a
    forked process (make mutate's), Ray's gRPC client cannot start in it once the parent has used one."""
    maker = subprocess.Popen(
        [sys.executable, "-c", CLUSTER_ELSEWHERE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        yield maker.stdout.readline().strip()
    finally:
        maker.stdin.close()
        maker.wait(120)


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """Shared photos in a tree of two folders, and two short clips."""
    folder = tmp_path_factory.mktemp("ray-tree")
    for name, count in (("facemask", 6), ("wider_val_native", PHOTOS - 6)):
        images, truths = labeled_set(name)
        (folder / name).mkdir()
        for truth in truths[:count]:
            (folder / name / Path(truth["image"]).name).write_bytes((images / truth["image"]).read_bytes())
    (folder / "clips").mkdir()
    build_clip(folder / "clips" / "street.mp4", frames=16)
    build_clip(folder / "clips" / "turned.mp4", frames=12, variable_rate=True, rotation=90, stored_turned=True)
    for truth in (folder / "clips").glob("*.json"):
        truth.unlink()
    return folder


def facecrop(url: str, *args: str, ray_address: str | None = None) -> subprocess.CompletedProcess:
    engine = [] if ray_address is None else ["--ray", ray_address]
    command = [*FACECROP, "--url", url, *args, *engine, "-q"]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


# A pixel counts as different between two runs' videos where it moved by more than this many levels:
# the encoder spreads a small difference over the frames after it by a level or two (see below).
VISIBLE_LEVELS = 20


def assert_same_video(first: Path, second: Path) -> None:
    """The same video but for a face hidden a little differently: as many frames, each with at most
    1 % of its pixels more than VISIBLE_LEVELS apart. Seen about once in 16 runs of the anonymize
    test alone: the turned clip's first frame differed at its edge (4 pixels over 20 levels, a strip
    at the right edge), and x264 carried the difference over every later frame as noise of 0.2-1.5
    levels on average (8-39 % of the pixels by a level or more, at most 341 pixels over 20 levels
    in a frame). Not reproduced by the same clip alone, beside other jobs, or with --ray, 20 times
    each (nor do Triton's batches of 1 to 16 change onnxruntime's outputs); a Ray run that hid
    nothing, or other frames, differs in far more."""
    ours, theirs = frames(first), frames(second)
    assert len(ours) == len(theirs)
    shares = [float((np.abs(a.astype(int) - b) > VISIBLE_LEVELS).any(axis=2).mean()) for a, b in zip(ours, theirs)]
    assert max(shares) <= 0.01, [round(share, 4) for share in shares]


def manifest(output: Path) -> list[dict]:
    path = output.with_name(output.name + ".manifest.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_worker_node_killed_mid_job_loses_nothing_and_doubles_nothing(stack, cluster, tree, tmp_path):
    crop = ["batch", str(tree), "--mode", "crop", "--width", "160", "--height", "160", "--concurrency", "8"]
    single = facecrop(stack.gateway, *crop[:2], str(tmp_path / "single"), *crop[2:])
    assert single.returncode == 0, single.stderr
    expected = files(tmp_path / "single")
    assert len(expected) == PHOTOS

    # Through a gate that answers 3 crops and holds the rest: the job is mid-way, with tasks waiting
    # on both worker nodes, when one node is killed.
    gate = Gate("/v1/crop", let_through=3)
    output = tmp_path / "cluster"
    with gated(stack.gateway, gate) as url:
        command = [*FACECROP, "--url", url, *crop[:2], str(output), *crop[2:], "--ray", cluster.address, "-q"]
        running = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        assert gate.held.wait(120), running.poll()
        cluster.remove_node(cluster.workers[0], allow_graceful=False)
        gate.released.set()
        _, stderr = running.communicate(timeout=240)
    assert running.returncode == 0, stderr
    assert files(output) == expected  # every crop once, byte for byte, and nothing else (no partial file)
    rows = manifest(output)
    assert sorted(row["source"] for row in rows) == sorted(expected)  # each photo listed once
    assert all(row["status"] == "done" and row["faces"] >= 0 and row["error"] is None for row in rows)
    assert {row["output"] for row in rows} == {str(output / name) for name in expected}

    again = facecrop(stack.gateway, *crop[:2], str(output), *crop[2:], ray_address=cluster.address)
    assert again.returncode == 0, again.stderr
    assert f"{PHOTOS} already done, 0 processed" in again.stderr
    assert files(output) == expected and len(manifest(output)) == PHOTOS  # nothing written, nothing listed


@pytest.fixture
def object_store(tree, monkeypatch) -> Iterator[str]:
    """A local S3-compatible server (moto's, standing in for the user's store) holding the tree's
    photos under s3://photos/batch/, reached as AWS tools reach one (AWS_ENDPOINT_URL and keys in
    the environment, which the command passes on to its tasks)."""
    from moto.server import ThreadedMotoServer
    from pyarrow import fs

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for key, value in {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "facecrop-test",
        "AWS_SECRET_ACCESS_KEY": "facecrop-test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    store, _ = fs.FileSystem.from_uri("s3://photos?allow_bucket_creation=true")
    store.create_dir("photos")
    for path in sorted(tree.rglob("*.jpg")):
        with store.open_output_stream(f"photos/batch/{path.relative_to(tree).as_posix()}") as stream:
            stream.write(path.read_bytes())
    try:
        yield "s3://photos/batch"
    finally:
        server.stop()


def test_photos_from_an_object_store_on_the_cluster_with_a_node_killed(stack, cluster, tree, object_store, tmp_path):
    crop = ["--mode", "crop", "--width", "96", "--height", "128", "--concurrency", "8"]
    single = facecrop(stack.gateway, "batch", str(tree), str(tmp_path / "single"), *crop)
    assert single.returncode == 0, single.stderr
    expected = {name: data for name, data in files(tmp_path / "single").items() if name.endswith(".jpg")}
    fresh = cluster.add_node(num_cpus=1)  # two worker nodes, whatever an earlier test killed
    cluster.wait_for_nodes()
    gate = Gate("/v1/crop", let_through=3)
    output = tmp_path / "from-s3"
    with gated(stack.gateway, gate) as url:
        command = [*FACECROP, "--url", url, "batch", object_store, str(output), *crop, "--ray", cluster.address, "-q"]
        running = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        assert gate.held.wait(120), running.poll()
        cluster.remove_node(fresh, allow_graceful=False)
        gate.released.set()
        _, stderr = running.communicate(timeout=240)
    assert running.returncode == 0, stderr
    assert files(output) == expected  # from the store, on the cluster: the folder's crops, byte for byte
    assert sorted(row["source"] for row in manifest(output)) == sorted(expected)
    again = facecrop(stack.gateway, "batch", object_store, str(output), *crop, ray_address=cluster.address)
    assert again.returncode == 0 and f"{PHOTOS} already done, 0 processed" in again.stderr, again.stderr


def test_a_list_of_paths_and_urls_is_read_as_the_folder_is(stack, tree, tmp_path):
    """A text file naming photos by path (absolute, or relative to the list) and by URL: each
    detected as from the folder, named by its place under the list's folder, its whole path, or
    its URL's host and path; a line that cannot be read fails alone."""
    photos = sorted(tree.rglob("*.jpg"))[:3]
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / photos[1].name).write_bytes(photos[1].read_bytes())
    with photo_origin(tree) as (base, _):
        relative = photos[2].relative_to(tree).as_posix()
        lines = ["# three photos and a missing one", str(photos[0]), f"here/{photos[1].name}", f"{base}{relative}"]
        (tmp_path / "photos.txt").write_text("\n".join([*lines, f"{base}missing.jpg", ""]))
        on_ray = facecrop(
            stack.gateway,
            "batch",
            str(tmp_path / "photos.txt"),
            str(tmp_path / "ray.jsonl"),
            "--mode",
            "detect",
            "--json",
            ray_address="",
        )
        listed = facecrop(
            stack.gateway,
            "batch",
            str(tmp_path / "photos.txt"),
            str(tmp_path / "list.jsonl"),
            "--mode",
            "detect",
            "--json",
        )
    assert listed.returncode == 1, listed.stderr  # the missing URL
    assert (json.loads(listed.stdout)["succeeded"], json.loads(listed.stdout)["failed"]) == (3, 1)
    assert on_ray.returncode == 1 and json.loads(on_ray.stdout)["failed"] == 1, on_ray.stderr
    lines = (tmp_path / "list.jsonl").read_text().splitlines()
    assert sorted((tmp_path / "ray.jsonl").read_text().splitlines()) == sorted(lines)  # detect on Ray: the same
    folder = facecrop(stack.gateway, "batch", str(tree), str(tmp_path / "folder.jsonl"), "--mode", "detect")
    assert folder.returncode == 0, folder.stderr
    by_path = {
        json.loads(line)["path"]: json.loads(line) for line in (tmp_path / "folder.jsonl").read_text().splitlines()
    }
    answers = {
        json.loads(line)["path"]: json.loads(line) for line in (tmp_path / "list.jsonl").read_text().splitlines()
    }
    names = [str(photos[0]).lstrip("/"), f"here/{photos[1].name}", f"{urlsplit(base).hostname}/{relative}"]
    assert sorted(answers) == sorted(names)
    for name, photo in zip(names, photos):
        assert answers[name]["faces"] == by_path[photo.relative_to(tree).as_posix()]["faces"], name


def test_anonymize_photos_and_videos_on_the_cluster_equal_one_machine(stack, cluster, tree, tmp_path):
    anonymize = ["batch", str(tree), "--mode", "anonymize", "--json"]
    single = facecrop(stack.gateway, *anonymize[:2], str(tmp_path / "single"), *anonymize[2:])
    assert single.returncode == 0, single.stderr
    on_ray = facecrop(stack.gateway, *anonymize[:2], str(tmp_path / "ray"), *anonymize[2:], ray_address=cluster.address)
    assert on_ray.returncode == 0, on_ray.stderr
    assert json.loads(on_ray.stdout)["succeeded"] == json.loads(single.stdout)["succeeded"] == PHOTOS
    alone, spread = files(tmp_path / "single"), files(tmp_path / "ray")
    assert sorted(alone) == sorted(spread) and len(alone) == PHOTOS + 2
    for name in alone:
        if name.endswith(".mp4"):
            assert_same_video(tmp_path / "single" / name, tmp_path / "ray" / name)
            assert len(frames(tmp_path / "ray" / name)) == len(frames(tree / name))
        else:
            assert spread[name] == alone[name], name
    videos = [row for row in manifest(tmp_path / "ray") if row["source"].endswith(".mp4")]
    assert sorted(row["source"] for row in videos) == ["clips/street.mp4", "clips/turned.mp4"]


def test_video_on_the_cluster_answers_as_on_one_machine(stack, cluster, tree, tmp_path):
    clip = tree / "clips" / "turned.mp4"
    alone = facecrop(stack.gateway, "video", str(clip), str(tmp_path / "alone.mp4"), "--json")
    spread = facecrop(
        stack.gateway, "video", str(clip), str(tmp_path / "ray.mp4"), "--json", ray_address=cluster.address
    )
    assert alone.returncode == spread.returncode == 0, spread.stderr
    told = [json.loads(done.stdout) for done in (alone, spread)]
    assert [sorted(answer) for answer in told] == [sorted(told[0])] * 2  # the same fields
    for answer, output in zip(told, ("alone.mp4", "ray.mp4")):
        assert (answer.pop("source"), answer.pop("output")) == (str(clip), str(tmp_path / output))
        assert 0 < answer.pop("seconds") < 300
    assert told[0] == told[1] and told[0]["frames"] == len(frames(clip)) and told[0]["faces"] > 0
    assert [done.stderr.split(" s, ")[0].rsplit(", ", 1)[0] for done in (alone, spread)] == [
        alone.stderr.split(" s, ")[0].rsplit(", ", 1)[0]
    ] * 2  # the same summary line, but its time
    assert_same_video(tmp_path / "alone.mp4", tmp_path / "ray.mp4")


def test_an_unreachable_cluster_is_one_line_at_once(stack, tree, tmp_path):
    done = facecrop(
        stack.gateway, "batch", str(tree), str(tmp_path / "out"), "--mode", "detect", ray_address="127.0.0.1:9"
    )
    assert done.returncode == 1
    assert (
        done.stderr.startswith("facecrop: cannot reach the Ray cluster at 127.0.0.1:9") and done.stderr.count("\n") == 1
    )
    assert not (tmp_path / "out").exists()


def test_a_refused_key_stops_the_job_on_the_cluster(cluster_elsewhere, tree, tmp_path):
    """Every task's photos refused (401): the job stops at the first answer back, which is the
    service's failure, not a photo's (no failure line; the next run does them all)."""
    output = tmp_path / "faces.jsonl"
    with scripted_service(lambda n: refusal(401, "unauthorized")) as service:
        done = facecrop(service.url, "batch", str(tree), str(output), "--mode", "detect", ray_address=cluster_elsewhere)
    assert done.returncode == 1, done.stderr
    assert "stopped (run again to continue)" in done.stderr and "why: 401 unauthorized" in done.stderr
    assert not output.with_name("faces.jsonl.failures.jsonl").read_text()
    assert not [row for row in manifest(output) if row["status"] == "failed"]


@pytest.mark.parametrize("stop, on_cluster", [(signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGTERM, True)])
def test_ctrl_c_or_sigterm_stops_a_job_and_leaves_no_partial_file(stack, cluster, tree, tmp_path, stop, on_cluster):
    """Embedded (`--ray` alone: a Ray inside the command) or on the cluster, through a gate that
    answers 2 photos and holds the next: the job is mid-way when Ctrl-C comes, or SIGTERM (a job
    scheduler's stop: Kubernetes, systemd and Slurm send it), which ends it the same way: Ray's own
    handler had it exit with status 15 and a crash trace."""
    gate = Gate("/v1/anonymize", let_through=2)
    output = tmp_path / "out"
    with gated(stack.gateway, gate) as url:
        command = [*FACECROP, "--url", url, "batch", str(tree), str(output), "--mode", "anonymize"]
        command += ["--ray", *([cluster.address] if on_cluster else []), "-q"]
        running = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, preexec_fn=restore_ctrl_c)
        assert gate.held.wait(120), running.poll()
        running.send_signal(stop)
        gate.released.set()
        _, stderr = running.communicate(timeout=120)
    assert running.returncode == 130, stderr
    assert "interrupted (run again to continue)" in stderr and "SIGTERM" not in stderr and "Traceback" not in stderr
    written = [p for p in output.rglob("*") if p.is_file()]
    assert len(written) < PHOTOS and all(p.suffix == ".jpg" for p in written)  # whole pictures only
    assert all(Image.open(p).load() is not None for p in written)
    assert {row["output"] for row in manifest(output)} <= {str(p) for p in written}
    # the re-run does the rest, and the manifest then names every output once
    again = facecrop(stack.gateway, "batch", str(tree), str(output), "--mode", "anonymize", ray_address="")
    assert again.returncode == 0, again.stderr
    rows = [row for row in manifest(output) if row["status"] == "done"]
    assert sorted(row["output"] for row in rows) == sorted(str(p) for p in output.rglob("*") if p.is_file())


@pytest.mark.parametrize("on_cluster", [False, True])
def test_sigterm_stops_a_video_on_ray_as_ctrl_c_and_leaves_no_partial_file(stack, cluster, tree, tmp_path, on_cluster):
    """`video --ray` mid-way (a gate holds its frames past the twelfth) told SIGTERM: status 130, no
    crash trace, no partial file beside OUT, as with Ctrl-C."""
    gate = Gate("/v1/detect", let_through=12)
    target = tmp_path / "out.mp4"
    with gated(stack.gateway, gate) as url:
        command = [*FACECROP, "--url", url, "video", str(tree / "clips" / "street.mp4"), str(target)]
        command += ["--ray", *([cluster.address] if on_cluster else []), "-q"]
        running = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, preexec_fn=restore_ctrl_c)
        assert gate.held.wait(120), running.poll()
        running.send_signal(signal.SIGTERM)
        gate.released.set()
        _, stderr = running.communicate(timeout=120)
    assert running.returncode == 130, stderr
    assert "SIGTERM" not in stderr and "Traceback" not in stderr
    assert not list(tmp_path.iterdir())


def test_anonymize_from_a_list_on_ray_ends_as_on_one_machine(stack, tree, tmp_path):
    """`batch --ray --mode anonymize` from a list of photos (not a folder: no videos to do after the
    photos): every picture written and listed once, one summary line at the end and the same
    counts, exit 0, as the local engine's run of the same list."""
    photos = sorted(tree.rglob("*.jpg"))[:4]
    (tmp_path / "photos.txt").write_text("\n".join(str(p) for p in photos) + "\n")
    runs = {
        engine: facecrop(
            stack.gateway,
            "batch",
            str(tmp_path / "photos.txt"),
            str(tmp_path / engine),
            "--mode",
            "anonymize",
            "--json",
            ray_address="" if engine == "ray" else None,
        )
        for engine in ("ray", "local")
    }
    for engine, done in runs.items():
        assert done.returncode == 0, (engine, done.stderr)
        assert [line for line in done.stderr.splitlines() if line.startswith("done: ")] == [
            line for line in done.stderr.splitlines() if line
        ][-1:], (engine, done.stderr)  # the summary once, last
        summary = json.loads(done.stdout)
        assert (summary["succeeded"], summary["failed"], summary["interrupted"]) == (4, 0, False), engine
        written = sorted(p.relative_to(tmp_path / engine) for p in (tmp_path / engine).rglob("*.jpg"))
        assert len(written) == 4 and len(manifest(tmp_path / engine)) == 4, engine
    assert sorted(files(tmp_path / "ray")) == sorted(files(tmp_path / "local"))


@contextmanager
def finding_no_face() -> Iterator:
    """A stand-in for the service that finds no face in a frame (/v1/detect) and answers a photo's
    picture (/v1/anonymize) with the photo's own bytes."""
    with scripted_service(None) as service:

        def answer_for(turn: int):
            path, body = service.requests[turn]
            if path.startswith("/v1/detect"):
                width, height = Image.open(io.BytesIO(body)).size
                return json_answer(200, {"image": {"width": width, "height": height}, "faces": []})
            return 200, {"Content-Type": "image/jpeg", "X-Face-Count": "0"}, body

        service.answer_for = answer_for
        yield service


def test_a_video_on_the_cluster_sends_every_frame_with_its_options_and_tells_its_summary(
    cluster_elsewhere, tree, tmp_path
):
    """`video --ray` against a stand-in for the service that finds no face: every frame sent once, with
    the options given, the video written whole and its summary told as on one machine."""
    clip, output = tree / "clips" / "street.mp4", tmp_path / "out.mp4"
    with finding_no_face() as service:
        done = facecrop(service.url, "video", str(clip), str(output), "--json", "--min-confidence", "30",
                        ray_address=cluster_elsewhere)  # fmt: skip
    count = len(frames(clip))
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["source"], summary["output"], summary["frames"], summary["faces"]) == (
        str(clip),
        str(output),
        count,
        0,
    )
    assert done.stderr.startswith(f"{count} frames (0 skipped), 0 faces")
    sent = [dict(parse_qsl(urlsplit(path).query)) for path, _ in service.requests]
    assert len(sent) == count and all(options["min_confidence"] == "30.0" for options in sent)
    assert len(frames(output)) == count


def test_a_batch_anonymizing_a_tree_on_the_cluster_hides_its_videos_too(cluster_elsewhere, tree, tmp_path):
    """`batch --mode anonymize --ray` on a folder, against a stand-in that answers each photo with its
    own bytes and finds no face in a frame: every photo written, and each video too, whole, its frames
    sent with the options given."""
    output = tmp_path / "out"
    with finding_no_face() as service:
        done = facecrop(service.url, "batch", str(tree), str(output), "--mode", "anonymize", "--json",
                        "--min-confidence", "30", ray_address=cluster_elsewhere)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["succeeded"], json.loads(done.stdout)["failed"]) == (PHOTOS, 0)
    written = files(output)
    photos = [name for name in written if not name.endswith(".mp4")]
    assert len(photos) == PHOTOS and all(written[name] == (tree / name).read_bytes() for name in photos)
    for clip in ("clips/street.mp4", "clips/turned.mp4"):
        assert len(frames(output / clip)) == len(frames(tree / clip)), clip
    frame_calls = [
        dict(parse_qsl(urlsplit(path).query)) for path, _ in service.requests if path.startswith("/v1/detect")
    ]
    assert len(frame_calls) == sum(len(frames(tree / clip)) for clip in ("clips/street.mp4", "clips/turned.mp4"))
    assert all(options["min_confidence"] == "30.0" for options in frame_calls)
    videos = [row for row in manifest(output) if row["source"].endswith(".mp4")]
    assert sorted(row["source"] for row in videos) == ["clips/street.mp4", "clips/turned.mp4"]
