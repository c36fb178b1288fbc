"""gunicorn settings for the gateway, from the environment variables in VARIABLES (this file
imports nothing of the gateway: the master stays small; docs/configuration.md lists them)."""

import os
import secrets
import shutil
import tempfile

METRICS_DIR_PREFIX = "facecrop-metrics-"

# name: (default, meaning)
VARIABLES = {
    "FACECROP_BIND": ("127.0.0.1:8080", "gunicorn's listen address (the gateway image sets 0.0.0.0:8080)"),
    "FACECROP_WORKERS": ("2", "gunicorn worker processes"),
    "FACECROP_THREADS": (
        "32",
        "threads per worker (gthread); keep above `FACECROP_MAX_IN_FLIGHT` + `FACECROP_FETCH_CONCURRENCY`, so "
        "that requests over either limit (429, 503), and health checks, are answered at once",
    ),
}


def variable(name: str) -> str:
    return os.environ.get(name, VARIABLES[name][0])


wsgi_app = "gateway.web.wsgi:app"
bind = variable("FACECROP_BIND")
workers = int(variable("FACECROP_WORKERS"))
worker_class = "gthread"
threads = int(variable("FACECROP_THREADS"))
timeout = 30
graceful_timeout = 10
# The gateway writes its own JSON line per request (gateway/web/observe.py).
accesslog = None
# Worker heartbeat files in memory: nothing on disk, and a read-only root filesystem works.
worker_tmp_dir = "/dev/shm"
# gunicorn's runtime control socket is not used; it would be a file under $HOME.
control_socket_disable = True


# glibc malloc in each worker (mallopt parameters; measured with `make bench` and bench/cpu.py).
MALLOC_SETTINGS = {
    -3: 16 * 1024 * 1024,  # M_MMAP_THRESHOLD: buffers up to 16 MiB come from the heap
    -1: 24 * 1024 * 1024,  # M_TRIM_THRESHOLD: the heap keeps up to 24 MiB free for the next request
    -8: 1,  # M_ARENA_MAX: one heap shared by the threads, not eight per core
}


def post_fork(server, worker):
    """With jemalloc without decay (the gateway image's and the local default), start the worker's
    idle purge (gateway/memory.py); with glibc's malloc, tune it; and keep OpenCV on the calling
    thread.

    A worker's large buffers (the request body, the decoded photo: 9 MB for a 12 MP JPEG
    decoded at 1/2) are allocated and freed on every request. Served by fresh mmaps, each
    4 KiB page faults on first touch: ~5,300 faults and ~17 ms of CPU per 12 MP photo on a
    2-core VM, more than half the decode. Served from a heap that keeps up to 24 MiB free
    they fault once; a fixed mmap threshold (glibc would otherwise raise it after each large
    free) still sends the rare huge buffer to its own mmap, and one arena rather than one
    per thread keeps fragmentation, and RSS, bounded (bench/README.md).

    Requests already run in parallel on the workers' threads; OpenCV's own thread pool would
    split each resize and rotation over every core again, spending CPU on coordination.
    """
    import contextlib
    import ctypes
    import ctypes.util

    import cv2

    from gateway.memory import start_idle_purge

    cv2.setNumThreads(1)
    if start_idle_purge(lambda: worker.nr):  # jemalloc: it purges when the worker goes quiet
        return

    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to tune
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        for parameter, value in MALLOC_SETTINGS.items():
            libc.mallopt(parameter, value)


def _models(worker) -> tuple:
    """The worker's served models (gateway/web/app.py's Services), if its app is loaded."""
    app = getattr(worker, "wsgi", None)
    services = app.extensions.get("facecrop") if app is not None else None
    return services.detectors.models if services is not None else ()


def post_worker_init(worker):
    """Settle how tensors travel to Triton (shared memory or bytes) now, so the log says which."""
    for model in _models(worker):
        if hasattr(model, "prepare"):
            model.prepare()


def worker_exit(server, worker):
    """Give back this worker's Triton shared-memory regions (also on max-requests recycling);
    a worker killed outright has its regions swept by the next one (gateway/triton/shm.py)."""
    for model in _models(worker):
        if hasattr(model, "close"):
            model.close()


def malloc_in_use() -> str:
    """jemalloc or mimalloc where preloaded (LD_PRELOAD: the gateway image's default), else glibc."""
    maps = open("/proc/self/maps").read()  # noqa: SIM115 - read at once
    return next((name for name in ("jemalloc", "mimalloc") if f"lib{name}" in maps), "glibc (tuned in each worker)")


def on_starting(server):
    """Say which malloc the gateway runs with; give the workers a fresh directory in memory for
    Prometheus' multiprocess metrics, and one secret for the URL form's ETags where none is set
    (gateway/web/url/caching.py), so that every worker answers 304 to the others' ETags."""
    server.log.info("malloc: %s", malloc_in_use())
    if not (os.environ.get("FACECROP_ETAG_SECRET") or os.environ.get("FACECROP_URL_KEY")):
        os.environ["FACECROP_ETAG_SECRET"] = secrets.token_hex(32)
    if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix=METRICS_DIR_PREFIX, dir="/dev/shm")


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    """Remove the metrics directory if on_starting made it (never one the operator gave)."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if os.path.basename(directory).startswith(METRICS_DIR_PREFIX):
        shutil.rmtree(directory, ignore_errors=True)
