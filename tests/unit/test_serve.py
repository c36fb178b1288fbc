"""`make serve` (local_triton/serve.py) where a port it needs is taken: told at once, before Triton
loads its models, one line a port naming the variable that moves it (it was a traceback, a minute
on); `make stop` stopping only the serve that wrote its pid file; what `stop` takes for running."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from local_triton import PROJECT_ROOT
from local_triton.compose import process_status
from local_triton.processes import free_port, running
from local_triton.serve import release


def test_ports_in_use_are_told_at_once_naming_the_variable_that_moves_each():
    with socket.socket() as gateway_side, socket.socket() as triton_side:
        gateway_side.bind(("127.0.0.1", 0))  # the gateway listens on loopback
        triton_side.bind(("127.0.0.2", 0))  # Triton on every address: a listener on any one is in its way
        for taken in (gateway_side, triton_side):
            taken.listen()
        gateway_port, grpc_port = gateway_side.getsockname()[1], triton_side.getsockname()[1]
        env = {
            **os.environ,
            "FACECROP_PORT": str(gateway_port),
            "TRITON_HTTP_PORT": str(free_port()),
            "TRITON_GRPC_PORT": str(grpc_port),
            "TRITON_METRICS_PORT": str(free_port()),
        }
        done = subprocess.run(
            [sys.executable, "-m", "local_triton.serve"],
            env=env,
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "facecrop: cannot start:",
        f"  port {gateway_port} is in use: stop what listens there, or set FACECROP_PORT=<another port>",
        f"  port {grpc_port} is in use: stop what listens there, or set TRITON_GRPC_PORT=<another port>",
    ]


def make_stop(folder: Path) -> str:
    """`make stop` run where `folder` is the checkout (its build/serve.pid)."""
    command = ["make", "-s", "-f", str(PROJECT_ROOT / "Makefile"), "-C", str(folder), "stop"]
    return subprocess.run(command, capture_output=True, text=True, timeout=30, check=True).stdout.strip()


def test_make_stop_stops_only_the_serve_that_wrote_the_pid_file(tmp_path):
    """A serve killed outright (out of memory) leaves build/serve.pid, and its pid may since be
    another process's: `make stop` stopped that one. Now it stops a serve and leaves the rest."""
    (tmp_path / "build").mkdir()
    pid_file = tmp_path / "build" / "serve.pid"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    serve = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "local_triton.serve"])
    try:
        pid_file.write_text(str(other.pid))
        assert make_stop(tmp_path) == "facecrop is not running"
        assert other.poll() is None and not pid_file.exists()
        pid_file.write_text(str(serve.pid))
        assert make_stop(tmp_path) == "stopping facecrop"
        assert serve.wait(timeout=10) == -signal.SIGTERM
    finally:
        for process in (other, serve):
            process.kill()
            process.wait()


# A serve's stand-in that takes a second to stop, as a serve does while Triton and the gateway stop.
SLOW_TO_STOP = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *_: (time.sleep(1), sys.exit(3)))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)"
)


def test_make_stop_returns_once_the_serve_has_exited(tmp_path):
    """`make stop && make serve`: stop returned while the serve was still stopping, the new one
    found its ports taken (or took them, and the old one then deleted its pid file)."""
    (tmp_path / "build").mkdir()
    serve = subprocess.Popen([sys.executable, "-c", SLOW_TO_STOP, "local_triton.serve"], stdout=subprocess.PIPE)
    try:
        assert serve.stdout is not None and serve.stdout.readline() == b"ready\n"  # its handler is in place
        (tmp_path / "build" / "serve.pid").write_text(str(serve.pid))
        assert make_stop(tmp_path) == "stopping facecrop"
        assert serve.poll() == 3  # exited by its handler before stop returned
    finally:
        serve.kill()
        serve.wait()


def test_a_stopping_serve_leaves_the_pid_file_a_restarted_one_wrote(tmp_path):
    pid_file = tmp_path / "serve.pid"
    pid_file.write_text("4242")  # the restarted serve's
    release(pid_file, 1234)  # the old one, done stopping
    assert pid_file.read_text() == "4242"
    release(pid_file, 4242)
    assert not pid_file.exists()
    release(pid_file, 4242)  # gone already: nothing to do


def test_a_process_runs_until_it_has_exited_a_zombie_included():
    """`running` (what stop() waits on for the stubs Triton left): a live process runs; one that has
    exited does not, unreaped (a zombie: in a container nobody may reap Triton's orphans) or gone."""
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    exited = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 30
        while process_status(exited.pid)[1] != "Z":  # the event: it has exited, and nobody reaped it yet
            assert time.monotonic() < deadline, "`true` did not exit"
            time.sleep(0.01)
        assert running(alive.pid) and not running(exited.pid)
    finally:
        alive.kill()
        for process in (alive, exited):
            process.wait()
    assert not running(exited.pid)  # reaped: gone
