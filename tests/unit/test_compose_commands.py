"""local_triton.compose's commands are bounded: a Docker CLI whose plugin hangs, or a daemon stuck
in the kernel, fails `make up-cpu` and the compose test instead of hanging them (a CI run was
lost that way). Real processes, no Docker needed."""

from __future__ import annotations

import subprocess
import time

import pytest

from local_triton.compose import sh, stuck, succeeds
from local_triton.processes import running

# A command that exits at once but leaves a child holding its output pipe, as `docker info`'s
# plugin did: the child writes its pid first.
LEAVES_A_CHILD = 'sleep 300 & echo $! > "$0"; wait'


def test_a_timeout_kills_the_whole_group_and_says_so(tmp_path):
    pid_file = tmp_path / "child.pid"
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"`sh -c .*` did not finish within 1 s"):
        sh("sh", "-c", LEAVES_A_CHILD, str(pid_file), timeout=1, capture=True)
    # Before: subprocess.run(timeout=) killed only `sh`, then waited for the pipe the child held.
    assert time.monotonic() - started < 60
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 30  # SIGKILL is sent; its delivery is the kernel's, not a race
    while running(child):  # a zombie has ended: nobody here reaps the group's orphans
        assert time.monotonic() < deadline, f"child {child} still runs"
        time.sleep(0.05)


def test_a_command_that_outlives_its_bound_does_not_succeed(tmp_path):
    assert succeeds("sh", "-c", LEAVES_A_CHILD, str(tmp_path / "child.pid"), timeout=1) is False
    assert succeeds("true", timeout=30) is True
    assert succeeds("false", timeout=30) is False
    assert succeeds("/nonexistent/docker", timeout=30) is False


def test_a_failure_raises_with_its_output_unless_unchecked():
    with pytest.raises(RuntimeError, match=r"(?s)exited with 3\n.*out.*err"):
        sh("sh", "-c", "echo out; echo err >&2; exit 3", timeout=30, capture=True)
    result = sh("sh", "-c", "echo out; exit 3", timeout=30, capture=True, check=False)
    assert (result.returncode, result.stdout) == (3, "out\n")


def real_time_named(pid: int) -> bool:
    said = stuck()
    clause = said.partition("processes at a real-time policy: ")[2].split(";")[0]
    return f"{pid} sleep" in clause.split(", ")


@pytest.mark.parametrize("policy", ["--fifo", "--rr"])
def test_a_timeout_names_the_processes_at_a_real_time_policy(policy):
    """What starved the last hung run: processes at SCHED_FIFO 99 (an SVT-AV1 encoder's legacy)."""
    fifo = subprocess.Popen(["chrt", policy, "1", "sleep", "60"], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30  # until chrt has become sleep
        while not real_time_named(fifo.pid):
            if fifo.poll() is not None:
                pytest.skip(f"cannot run real-time here: {fifo.stderr.read().decode().strip()}")
            assert time.monotonic() < deadline, stuck()
            time.sleep(0.05)
    finally:
        fifo.kill()
        fifo.wait()
    assert not real_time_named(fifo.pid)
