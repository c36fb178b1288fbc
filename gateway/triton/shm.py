"""POSIX shared memory regions that Triton reads model inputs from and writes outputs to.

A region is a file in /dev/shm (what `shm_open` opens on Linux) mapped into the gateway,
named `facecrop-HOST-PID-N`: the host name keeps the replicas that share one Triton's
/dev/shm apart (each container has its own), the pid lets a worker's successor remove the
regions of workers that died without cleaning up (`sweep_stale`). Files are created 0600:
Triton runs as the same user, or as root.

Written with `os` and `mmap` rather than `tritonclient.utils.shared_memory`, which goes through
`multiprocessing.shared_memory` and so starts a resource-tracker process in every worker.
"""

from __future__ import annotations

import itertools
import mmap
import os
import re
import socket
from pathlib import Path

import numpy as np

SHM_DIR = Path("/dev/shm")
NAME_PREFIX = "facecrop-"
ALIGNMENT = 64  # tensors start on cache-line boundaries within a region
_NAME = re.compile(r"^facecrop-(?P<host>[A-Za-z0-9.-]+)-(?P<pid>\d+)-\d+$")
_numbers = itertools.count()


def host_tag() -> str:
    """This host's (container's) name, made safe for region names."""
    return re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()) or "host"


def aligned(size: int) -> int:
    return -(-size // ALIGNMENT) * ALIGNMENT


class Region:
    """One mapped region; `key` is what Triton's register call opens (`/NAME`)."""

    def __init__(self, size: int, directory: Path = SHM_DIR):
        self.name = f"{NAME_PREFIX}{host_tag()}-{os.getpid()}-{next(_numbers)}"
        self.size = size
        self.path = directory / self.name
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, size)
            self._map = mmap.mmap(fd, size)
        except BaseException:
            os.unlink(self.path)
            raise
        finally:
            os.close(fd)

    @property
    def key(self) -> str:
        return f"/{self.name}"

    def array(self, shape: tuple[int, ...], dtype: type[np.generic] | np.dtype, offset: int = 0) -> np.ndarray:
        """A numpy view of the region's bytes from `offset` (no copy)."""
        return np.ndarray(shape, dtype, buffer=self._map, offset=offset)

    def discard(self) -> None:
        """Give the pages back (to the system: the file keeps its size and its registration with
        Triton, and reads zeros until written again)."""
        self._map.madvise(mmap.MADV_REMOVE)

    def unlink(self) -> None:
        """Remove the name; the memory goes once every mapping (views, Triton's) is gone."""
        self.path.unlink(missing_ok=True)


def _is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def owner(name: str) -> tuple[str, int] | None:
    """(host, pid) of the process that made region `name`; None for other files."""
    match = _NAME.match(name)
    return (match["host"], int(match["pid"])) if match else None


def sweep_stale(directory: Path = SHM_DIR) -> list[str]:
    """Remove this host's regions whose process is gone (a worker killed before it could clean
    up); return their names, which Triton may still have registered."""
    host = host_tag()
    removed = []
    for path in directory.glob(f"{NAME_PREFIX}*"):
        made_by = owner(path.name)
        if made_by and made_by[0] == host and not _is_alive(made_by[1]):
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return removed


def shared_memory_available(directory: Path = SHM_DIR) -> bool:
    return directory.is_dir() and os.access(directory, os.W_OK)
