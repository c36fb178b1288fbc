"""facecrop_client.on_ray's way into Ray, unit by unit: which cluster a job joins (ray.init's
arguments recorded, Ray itself not started) and the check that a cluster's head answers before Ray
is asked to join it (real sockets). tests/client/test_ray.py joins real clusters."""

from __future__ import annotations

import logging
import os
import socket

import pytest

ray = pytest.importorskip("ray")
ray_data = pytest.importorskip("ray.data")

from facecrop_client import on_ray  # noqa: E402


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
