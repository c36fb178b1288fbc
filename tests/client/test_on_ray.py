"""facecrop_client.on_ray's way into Ray, unit by unit: which cluster a job joins (ray.init's
arguments recorded, Ray itself not started) and the check that a cluster's head answers before Ray
is asked to join it (real sockets). tests/client/test_ray.py joins real clusters."""

from __future__ import annotations

import logging
import os
import socket
import threading

import pytest

ray = pytest.importorskip("ray")
ray_data = pytest.importorskip("ray.data")

from facecrop_client import on_ray  # noqa: E402
from tests.support import ONE_FACE, json_answer, scripted_service  # noqa: E402

WAIT_S = 10.0  # what a stand-in waits for a condition the code under test may never meet


@pytest.fixture
def listening() -> str:
    """host:port of a socket that takes connections."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


@pytest.fixture
def closed() -> str:
    """host:port where nothing listens."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
    return f"127.0.0.1:{port}"


def test_a_head_that_answers_is_reachable_with_or_without_rays_scheme(listening):
    port = listening.rpartition(":")[2]
    for address in (listening, f"ray://{listening}", f":{port}"):
        on_ray._reachable(address)


@pytest.mark.parametrize("address", ["CLOSED", "ray://CLOSED", "127.0.0.1", "127.0.0.1:port"])
def test_a_head_that_does_not_answer_is_a_cluster_error_naming_it(closed, address):
    address = address.replace("CLOSED", closed)
    with pytest.raises(on_ray.ClusterError, match=f"^cannot reach the Ray cluster at {address}: "):
        on_ray._reachable(address)


@pytest.fixture
def joined(monkeypatch) -> list[dict]:
    """ray.init's keyword arguments, each call's (Ray not started); Ray Data's settings and logger
    put back after the test."""
    calls: list[dict] = []
    monkeypatch.setattr(ray, "init", lambda **kwargs: calls.append(kwargs))
    context = ray_data.DataContext.get_current()
    for setting in ("enable_progress_bars", "print_on_execution_start"):
        monkeypatch.setattr(context, setting, getattr(context, setting))
    logger = logging.getLogger("ray.data")
    monkeypatch.setattr(logger, "level", logger.level)
    for name in [name for name in os.environ if name.startswith("AWS_")] + ["RAY_ADDRESS"]:
        monkeypatch.delenv(name, raising=False)
    return calls


def test_ray_alone_is_a_ray_of_its_own_or_the_cluster_ray_address_names(joined, monkeypatch):
    on_ray.start("", quiet=False)
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.2:6379")
    on_ray.start("", quiet=False)
    on_ray.start("auto", quiet=False)  # not checked first: Ray finds the cluster
    assert [call["address"] for call in joined] == ["local", "10.0.0.2:6379", "auto"]
    assert all(call["runtime_env"] is None and call["include_dashboard"] is False for call in joined)


def test_a_cluster_given_is_checked_before_ray_joins_it(joined, listening, closed):
    on_ray.start(listening, quiet=False)
    with pytest.raises(on_ray.ClusterError, match=f"cannot reach the Ray cluster at {closed}"):
        on_ray.start(closed, quiet=False)
    assert [call["address"] for call in joined] == [listening]


def test_the_object_stores_settings_reach_every_task_and_nothing_else_does(joined, monkeypatch):
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key")
    monkeypatch.setenv("FACECROP_API_KEY", "not for the tasks' environment")
    on_ray.start("", quiet=False)
    [call] = joined
    assert call["runtime_env"] == {"env_vars": {"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "key"}}


@pytest.mark.parametrize("quiet", [True, False])
def test_quiet_leaves_the_summary_line_alone(joined, quiet):
    on_ray.start("", quiet=quiet)
    [call] = joined
    assert (call["log_to_driver"], call["logging_level"]) == (
        (False, logging.ERROR) if quiet else (True, logging.WARNING)
    )
    context = ray_data.DataContext.get_current()
    assert context.enable_progress_bars is context.print_on_execution_start is (not quiet)
    assert (logging.getLogger("ray.data").level == logging.ERROR) is quiet


@pytest.mark.parametrize("error", [ConnectionError("refused"), RuntimeError("version mismatch"), ValueError("bad")])
def test_ray_refusing_to_start_is_a_cluster_error_in_one_line(monkeypatch, joined, error):
    def refusing(**kwargs):
        raise error

    monkeypatch.setattr(ray, "init", refusing)
    with pytest.raises(on_ray.ClusterError, match=f"^cannot use the Ray cluster at RAY_ADDRESS: {error}$"):
        on_ray.start("", quiet=True)


class Dataset:
    """Ray Data's part that run_photos and run_videos use, run in this process: blocks made from
    the rows, each batch given to the task function, the rows back; what each call was given kept."""

    def __init__(self, rows: list[dict], blocks: int, calls: list[dict]):
        self.rows, self.blocks, self.calls = rows, blocks, calls

    def map_batches(self, fn, *, batch_size: int, batch_format: str, fn_kwargs=None, **options):
        self.calls.append({"blocks": self.blocks, "batch_size": batch_size, "batch_format": batch_format, **options})
        done, batches = [], []
        for block in (self.rows[n :: self.blocks] for n in range(self.blocks)):
            for start in range(0, len(block), batch_size):
                batch = block[start : start + batch_size]
                batches.append(len(batch))
                columns = fn({key: [row[key] for row in batch] for key in batch[0]}, **(fn_kwargs or {}))
                done += [dict(zip(columns, values)) for values in zip(*columns.values())]
        self.calls[-1]["batches"] = batches
        return Dataset(done, 1, self.calls)

    def iter_rows(self):
        return iter(self.rows)


@pytest.fixture
def ray_data_here(monkeypatch) -> list[dict]:
    """ray.data's from_items and TaskPoolStrategy in this process (`Dataset`); each map_batches' options."""
    calls: list[dict] = []
    monkeypatch.setattr(
        ray_data, "from_items", lambda rows, override_num_blocks: Dataset(rows, override_num_blocks, calls)
    )
    monkeypatch.setattr(ray_data, "TaskPoolStrategy", lambda size: ("tasks", size))
    return calls


def photo_job(tmp_path, count: int, urls: str = "http://127.0.0.1:9", in_flight: int = 8):
    from facecrop_client.batch import DetectSink
    from facecrop_client.sources import Folder, Item

    folder = tmp_path / "photos"
    folder.mkdir()
    for n in range(count):
        (folder / f"{n:03}.jpg").write_bytes(b"photo")
    job = on_ray.PhotoJob(Folder(folder), DetectSink(tmp_path / "faces.jsonl"), {}, on_ray.Service(urls), in_flight)
    return job, [Item(f"{n:03}.jpg", str(folder / f"{n:03}.jpg")) for n in range(count)]


@pytest.mark.parametrize(
    "count, urls, in_flight, per_task, blocks",
    [
        (8, "http://127.0.0.1:9", 8, 4, 2),  # a small job still uses every task: 8 in flight, 4 per task
        (40, "http://127.0.0.1:9", 8, 16, 3),  # at most PHOTOS_PER_TASK per task
        (40, "http://127.0.0.1:9,http://127.0.0.1:10", 8, 10, 4),  # in flight per URL
        (100, "http://127.0.0.1:9", 32, 13, 8),
        (3, "http://127.0.0.1:9", 1, 3, 1),  # one task at least
        (1, "http://127.0.0.1:9", 8, 1, 1),  # one photo: one task of one
    ],
)
def test_a_jobs_photos_are_cut_into_tasks_each_photo_once(
    ray_data_here, tmp_path, count, urls, in_flight, per_task, blocks
):
    """Each photo through one task (the service unreachable: each its own failure, all recorded), as
    many tasks as `in_flight` per URL allows (REQUESTS_PER_TASK each), a quarter CPU each, spread."""
    job, todo = photo_job(tmp_path, count, urls, in_flight)
    done = list(on_ray.run_photos(job, todo))
    assert sorted(item.source for item in done) == [item.name for item in todo]
    assert all(item.error["code"] == "connection_error" for item in done)
    [call] = ray_data_here
    tasks = max(1, in_flight * len(urls.split(",")) // on_ray.REQUESTS_PER_TASK)
    assert (call["batch_size"], call["blocks"], call["compute"]) == (per_task, blocks, ("tasks", tasks))
    assert max(call["batches"]) <= per_task and len(call["batches"]) == blocks
    assert (call["num_cpus"], call["scheduling_strategy"], call["batch_format"]) == (0.25, "SPREAD", "default")


def test_no_photo_to_do_starts_no_pipeline(ray_data_here, tmp_path):
    job, _ = photo_job(tmp_path, 0)
    assert list(on_ray.run_photos(job, [])) == [] and list(on_ray.run_videos([])) == []
    assert ray_data_here == []


def test_each_video_is_a_task_of_one_cpu(ray_data_here, tmp_path):
    """Two videos, the service unreachable: each through a task of its own, one CPU each, each
    failure back naming its video."""
    from facecrop_client.video import VideoJob

    tasks = []
    for name in ("a.mp4", "b.mp4"):
        (tmp_path / name).write_bytes(b"not a video")
        job = VideoJob(tmp_path / name, tmp_path / f"out-{name}")
        tasks.append(on_ray.VideoTask(name, job, on_ray.Service("http://127.0.0.1:9")))
    done = list(on_ray.run_videos(tasks))
    assert [(item.source, item.error["code"]) for item in done] == [
        ("a.mp4", "video_failed"),
        ("b.mp4", "video_failed"),
    ]
    for item in done:
        assert item.error["message"].startswith(
            f"{tmp_path / item.source}: connection_error: cannot reach http://127.0.0.1:9"
        )
    [call] = ray_data_here
    assert (call["batches"], call["batch_size"], call["num_cpus"], call["batch_format"]) == ([1, 1], 1, 1, "default")


def test_a_head_that_takes_no_connection_is_given_up_on_after_the_connect_timeout(monkeypatch):
    """An address that drops the handshake (a firewall) fails after CONNECT_TIMEOUT_S, not the OS's
    minutes: the timeout each connection is tried with."""
    tried = []

    def dropped(address, timeout=None):
        tried.append((address, timeout))
        raise TimeoutError("timed out")

    monkeypatch.setattr(on_ray.socket, "create_connection", dropped)
    with pytest.raises(on_ray.ClusterError) as error:
        on_ray._reachable("ray://10.0.0.9:6379")
    assert str(error.value) == "cannot reach the Ray cluster at ray://10.0.0.9:6379: timed out"
    assert tried == [(("10.0.0.9", 6379), on_ray.CONNECT_TIMEOUT_S)] and 0 < on_ray.CONNECT_TIMEOUT_S <= 10


def test_a_task_has_requests_per_task_photos_at_the_service_at_once(tmp_path):
    """A task of 12 photos against a stand-in that holds each until REQUESTS_PER_TASK are there, then
    a moment more for one too many to show: never more than REQUESTS_PER_TASK at once, every one answered."""
    lock, at_once, most = threading.Lock(), [0], [0]
    full, over = threading.Event(), threading.Event()

    def answer_for(turn: int):
        with lock:
            at_once[0] += 1
            most[0] = max(most[0], at_once[0])
            if at_once[0] >= on_ray.REQUESTS_PER_TASK:
                full.set()
            if at_once[0] > on_ray.REQUESTS_PER_TASK:
                over.set()
        full.wait(WAIT_S)  # the task's first REQUESTS_PER_TASK photos all at the service
        over.wait(0.2)  # time for one more to arrive where the task sends more (the check's only wait)
        with lock:
            at_once[0] -= 1
        return json_answer(200, ONE_FACE)

    with scripted_service(answer_for) as service:
        job, todo = photo_job(tmp_path, 12, service.url)
        rows = on_ray.photo_task({"source": [i.name for i in todo], "origin": [i.origin for i in todo]}, job)
    assert rows["error"] == [""] * 12 and most[0] == on_ray.REQUESTS_PER_TASK == 4
