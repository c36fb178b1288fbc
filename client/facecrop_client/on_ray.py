"""`facecrop batch --ray` and `facecrop video --ray`: the same job as a Ray Data pipeline, embedded
(a local Ray inside this process) or on a cluster (`ray start`, KubeRay): `run_batch`, `run_video`
(the command line only parses and dispatches to them). Needs the ray extra.

Photos go to Ray tasks PHOTOS_PER_TASK at a time: each task reads its photos, sends them to the
service and writes what comes back, on whichever node runs it, REQUESTS_PER_TASK at once; tasks run
`in_flight` requests at most per service URL together (backpressure: Ray Data holds the rest back). Each video is one
task, its decode, hiding and encode on the node that runs it. A task whose node dies is run again
on another (Ray Data retries a task lost with its node, without limit): outputs are named from the
source and the options, as the local path names them, and appear whole (a name of their own, then
a rename), so a task run twice writes the same bytes to the same place once. The driver writes the
manifest, detect's JSON Lines and the summary (batch.Ledger, as the local path does); the outputs
must be on storage every node sees.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from facecrop_client.batch import (
    DetectSink,
    Failed,
    PictureSink,
    Summary,
    ledger_of,
    progress_bar,
    reason,
    stop_on_sigterm,
    sweep_partials,
    timed_call,
    todo_of,
    video_failure,
)
from facecrop_client.client import AnyClient, FacecropError, connect
from facecrop_client.sources import Item, Source

COLUMNS = ("source", "output", "faces", "error", "seconds", "result")
# A photo task sends REQUESTS_PER_TASK of its photos at once (threads: it mostly waits on the service);
# PHOTOS_PER_TASK each, so a node lost costs at most that many photos redone per task it ran.
PHOTOS_PER_TASK = 16
REQUESTS_PER_TASK = 4
TASK_CPUS = 0.25
CONNECT_TIMEOUT_S = 5.0


class ClusterError(Exception):
    """The Ray cluster cannot be reached: told in one line, exit status 1."""


@dataclass(frozen=True)
class Service:
    """How every task reaches the service (it travels to each node, so settings, not a client)."""

    urls: str  # one URL, or several comma-separated (a task's calls spread over them, failing over)
    timeout: float = 60.0
    api_key: str | None = None

    def client(self) -> AnyClient:
        """This worker process's client (one connection pool, reused by its tasks)."""
        key = (self.urls, self.timeout, self.api_key)
        if key not in _CLIENTS:
            _CLIENTS[key] = connect(self.urls, self.timeout, self.api_key)
        return _CLIENTS[key]

    @property
    def count(self) -> int:
        return sum(1 for url in self.urls.split(",") if url.strip())


_CLIENTS: dict[tuple, AnyClient] = {}


@dataclass(frozen=True)
class PhotoJob:
    """What each photo task needs: the source it reads, the sink that names and writes the outputs,
    the endpoint's parameters and the service."""

    source: Source
    sink: DetectSink | PictureSink
    params: dict
    service: Service
    in_flight: int = 8  # tasks at once per service URL


@dataclass(frozen=True)
class Done:
    """An item as a task finished it: the driver's Ledger records it."""

    source: str
    output: str
    faces: int
    error: dict | None
    seconds: float
    result: Any = None  # detect's answer, which the driver writes; a video's VideoSummary as a dict

    def row(self) -> dict:
        """As a row of Ray Data's blocks (Arrow columns: the nested parts as JSON)."""
        return {
            "source": self.source,
            "output": self.output,
            "faces": self.faces,
            "error": json.dumps(self.error) if self.error else "",
            "seconds": self.seconds,
            "result": json.dumps(self.result) if self.result is not None else "",
        }

    @classmethod
    def of(cls, row: dict) -> Done:
        error, result = row["error"], row["result"]
        return cls(
            row["source"],
            row["output"],
            int(row["faces"]),
            json.loads(error) if error else None,
            float(row["seconds"]),
            json.loads(result) if result else None,
        )


@contextmanager
def session(address: str | None, quiet: bool, reachable: Callable[[], None]) -> Iterator[float]:
    """Ray started in this process or joined (`start`), the service first found reachable from
    here where Ray runs embedded; SIGTERM ending the job as Ctrl-C again (Ray's start puts in its
    own handler: a crash trace, status 15); left (`stop`) on exit. Yields when the job started."""
    reachable()
    start(address, quiet)
    stop_on_sigterm()
    try:
        yield time.monotonic()
    finally:
        stop()


def run_batch(
    source: Source,
    sink: DetectSink | PictureSink,
    params: dict,
    service: Service,
    in_flight: int,
    failures: Path,
    videos: Callable[[], list[VideoTask]] | None,
    address: str | None,
    quiet: bool,
    reachable: Callable[[], None],
    tell: Callable[[str], None],
) -> Summary:
    """`batch --ray`: the photos of `source` not yet in the sink's output as Ray tasks, then (anonymizing
    a folder) the `videos`; the manifest, the failures and detect's lines written here as they come
    back, the run stopped at the service's failure (the ledger's judgement) and by Ctrl-C or
    SIGTERM; each video's line and the summary's told as they come."""
    images, todo = todo_of(source, sink)
    summary = Summary(total=len(images), skipped=len(images) - len(todo))
    job = PhotoJob(source, sink, params, service, in_flight)
    with session(address, quiet, reachable) as started_at:  # the cluster refused: nothing opened yet
        try:
            with ledger_of(sink, images, todo, summary, failures, progress_bar(len(todo), quiet=True)) as ledger:
                for done in run_photos(job, todo):
                    if done.result is not None:  # detect: its answer, for the one JSON Lines file
                        sink.write(done.source, done.result)
                    ledger.settle(done.source, done.output, done.faces, done.error, done.seconds)
                    if summary.stopped:  # the service's failure, not a photo's
                        break
                if videos is not None and not summary.stopped:
                    tell(summary.line())
                    tasks = videos()
                    for task in tasks:
                        task.job.target.parent.mkdir(parents=True, exist_ok=True)
                    for done in run_videos(tasks):
                        ledger.record(done.source, done.output, done.faces, done.error, done.seconds, image=False)
                        if not done.error:  # a failure is the failures file's, as on the local engine
                            tell(f"{done.source}: {video_line(done)}")
        except KeyboardInterrupt:
            summary.interrupted = True
        finally:
            sink.close()
            sweep_partials(sink.output)
            summary.seconds = time.monotonic() - started_at
    if videos is None or summary.ended_early:
        tell(summary.line())
    return summary


def video_line(done: Done) -> str:
    """A video's summary line."""
    from facecrop_client.video import VideoSummary

    return VideoSummary(**done.result).line()


def run_video(task: VideoTask, address: str | None, quiet: bool, reachable: Callable[[], None]) -> Done | None:
    """`video --ray`: the video as one Ray task, on the node Ray places it; None where Ctrl-C or
    SIGTERM stopped it (a partial file a killed task left removed)."""
    from facecrop_client.video import partials_of

    try:
        with session(address, quiet, reachable):
            [done] = list(run_videos([task]))
        return done
    except KeyboardInterrupt:
        return None
    finally:
        for partial_file in partials_of(task.job.target):
            partial_file.unlink(missing_ok=True)  # a task killed mid-write (its own run removes its own)


def start(address: str | None, quiet: bool) -> None:
    """Ray in this process: embedded where `address` is empty (or the cluster RAY_ADDRESS names),
    else the cluster at `address` (its head's host:port, or `auto`); ClusterError at once where
    nothing answers there."""
    import ray
    import ray.data

    if address and address != "auto":
        _reachable(address)
    credentials = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    try:
        ray.init(
            # "local": a Ray of its own, not a cluster `ray start` left running on this machine
            address=address or os.environ.get("RAY_ADDRESS") or "local",
            # the object store's settings (AWS_*: credentials, region, endpoint) reach every task
            runtime_env={"env_vars": credentials} if credentials else None,
            include_dashboard=False,
            log_to_driver=not quiet,
            logging_level=logging.ERROR if quiet else logging.WARNING,  # -q: the summary line alone
        )
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise ClusterError(f"cannot use the Ray cluster at {address or 'RAY_ADDRESS'}: {error}") from error
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = not quiet
    context.print_on_execution_start = not quiet
    if quiet:  # the summary line alone, as on the local path
        logging.getLogger("ray.data").setLevel(logging.ERROR)


def _reachable(address: str) -> None:
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as error:
        raise ClusterError(f"cannot reach the Ray cluster at {address}: {error}") from error


def stop() -> None:
    """Leave the cluster (embedded: stop it); the job's tasks still running are cancelled."""
    import ray

    ray.shutdown()


def photo_task(batch: dict[str, Any], job: PhotoJob) -> dict[str, list]:
    """A task's photos, REQUESTS_PER_TASK at a time, each sent and its picture written here."""
    with ThreadPoolExecutor(REQUESTS_PER_TASK) as pool:
        done = list(pool.map(partial(one_photo, job), map(Item, batch["source"], batch["origin"])))
    rows = [item.row() for item in done]
    return {field: [row[field] for row in rows] for field in COLUMNS}


def one_photo(job: PhotoJob, item: Item) -> Done:
    """One photo read, sent (`batch.timed_call`, as the local path does) and its picture written here;
    its seconds are the call's, whether or not its picture could be written (as the local path's)."""
    try:
        answer, seconds = timed_call(job.sink, job.service.client(), job.source, item, job.params)
    except Failed as failure:
        return Done(item.name, "", 0, reason(failure.error), failure.seconds)
    if not isinstance(job.sink, PictureSink):
        output = str(job.sink.output_of(item.name))
        return Done(item.name, output, job.sink.faces(answer), None, seconds, answer)  # the driver writes it
    try:
        output = str(job.sink.write(item.name, answer))
    except OSError as error:  # the picture could not be written
        return Done(item.name, "", 0, reason(error, "write_error"), seconds)
    return Done(item.name, output, job.sink.faces(answer), None, seconds)


def run_photos(job: PhotoJob, todo: list[Item]) -> Iterable[Done]:
    """Every photo of `todo` through Ray, each as it is done."""
    import ray.data

    if not todo:
        return
    tasks = max(1, job.in_flight * job.service.count // REQUESTS_PER_TASK)
    per_task = max(1, min(PHOTOS_PER_TASK, -(-len(todo) // tasks)))  # a small job still uses every task
    rows = [{"source": item.name, "origin": item.origin} for item in todo]
    dataset = ray.data.from_items(rows, override_num_blocks=-(-len(todo) // per_task))  # one block per task
    done = dataset.map_batches(
        photo_task,  # type: ignore[arg-type]  # Ray's stubs know no keyword arguments (fn_kwargs)
        fn_kwargs={"job": job},
        batch_size=per_task,
        batch_format="default",
        compute=ray.data.TaskPoolStrategy(size=tasks),
        num_cpus=TASK_CPUS,
        scheduling_strategy="SPREAD",  # over the nodes (and their services), whatever a block weighs
    )
    for row in done.iter_rows():
        yield Done.of(row)


@dataclass(frozen=True)
class VideoTask:
    """One video of the job (its facecrop_client.video.VideoJob) and the service it uses."""

    name: str
    job: Any
    service: Service


def video_task(batch: dict[str, Any]) -> dict[str, list]:
    """A task's video: decoded, hidden and encoded here."""
    from facecrop_client import video as videos
    from facecrop_client.batch import progress_bar

    done = []
    for task in batch["task"]:
        started = time.monotonic()
        try:
            summary = videos.run_video(task.service.client(), task.job, lambda total: progress_bar(total, quiet=True))
            seconds = time.monotonic() - started
            done.append(Done(task.name, str(task.job.target), summary.faces, None, seconds, vars(summary)))
        except (videos.VideoError, FacecropError, OSError) as failure:
            error = video_failure(task.job.source, failure)
            done.append(Done(task.name, "", 0, error, time.monotonic() - started))
    rows = [item.row() for item in done]
    return {field: [row[field] for row in rows] for field in COLUMNS}


def run_videos(tasks: list[VideoTask]) -> Iterable[Done]:
    """Each video as one Ray task of one CPU (its decode and encode), each as it is done."""
    import ray.data

    if not tasks:
        return
    dataset = ray.data.from_items([{"task": task} for task in tasks], override_num_blocks=len(tasks))
    done = dataset.map_batches(video_task, batch_size=1, batch_format="default", num_cpus=1)
    for row in done.iter_rows():
        yield Done.of(row)
