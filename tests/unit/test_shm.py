"""Shared-memory regions on their own: naming, views, the sweep of dead processes' regions."""

import os
import subprocess
import sys

import numpy as np

from gateway.triton import shm


def test_a_region_is_a_file_in_the_directory_mapped_for_numpy_views(tmp_path):
    region = shm.Region(1 << 20, tmp_path)
    assert (tmp_path / region.name).stat().st_size == 1 << 20
    assert (tmp_path / region.name).stat().st_mode & 0o777 == 0o600
    assert shm.owner(region.name) == (shm.host_tag(), os.getpid()) and region.key == f"/{region.name}"
    view = region.array((4, 4), np.float32, offset=64)
    view[:] = 7
    assert (tmp_path / region.name).read_bytes()[64:68] == np.float32(7).tobytes()
    region.unlink()
    assert not (tmp_path / region.name).exists()


def test_sweep_removes_only_this_host_s_regions_of_dead_processes(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    host = shm.host_tag()
    names = {
        "dead": f"facecrop-{host}-{dead_pid}-0",
        "alive": f"facecrop-{host}-{os.getpid()}-3",
        "other host": f"facecrop-another-host-{dead_pid}-0",
        "metrics": "facecrop-metrics-abc123",
    }
    for name in names.values():
        (tmp_path / name).touch()
    assert shm.sweep_stale(tmp_path) == [names["dead"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n for k, n in names.items() if k != "dead")


def test_owner_reads_host_names_with_dashes():
    assert shm.owner("facecrop-web-7d9f-12-4") == ("web-7d9f", 12)
    assert shm.owner("facecrop-metrics-x1") is None


def test_a_discarded_region_gives_its_memory_back_and_keeps_its_size():
    region = shm.Region(4 << 20)  # in /dev/shm, as the gateway's
    region.array((4 << 20,), np.uint8)[:] = 7
    assert os.stat(region.path).st_blocks * 512 >= 4 << 20
    region.discard()
    assert os.stat(region.path).st_blocks == 0 and os.stat(region.path).st_size == 4 << 20
    assert not region.array((4 << 20,), np.uint8).any()
    region.unlink()
