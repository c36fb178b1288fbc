"""Which memory allocator a gateway runs with (FACECROP_MALLOC): jemalloc preloaded where Debian's
libjemalloc2 is installed (the gateway image's too: gateway/Dockerfile), else glibc's malloc as
gunicorn.conf.py tunes it; mimalloc (libmimalloc2.0) for comparison. A preloaded allocator
replaces malloc for the whole process, Python, numpy and OpenCV included.

Chosen with `make soak SOAK_ARGS="--allocators glibc,jemalloc,mimalloc"` (the same bursts to
each, side by side): jemalloc's workers end a mixed day with 70-90 MiB of heap and flat; glibc's
with 90-130 MiB, creeping up; mimalloc's with 100-165 MiB (bench/README.md)."""

from __future__ import annotations

import ctypes.util

ALLOCATORS = ("glibc", "jemalloc", "jemalloc-decay", "mimalloc")
LIBRARIES = {"jemalloc": "jemalloc", "jemalloc-decay": "jemalloc", "mimalloc": "mimalloc"}
SETTINGS = {
    # No decay: the worker's own thread purges once it is quiet or keeps over 32 MiB unused
    # (gateway/memory.py), so busy workers reuse their pages instead of faulting them in again;
    # large buffers in the same arena; one arena for the worker's threads rather than four per core.
    "jemalloc": {"MALLOC_CONF": "dirty_decay_ms:-1,muzzy_decay_ms:-1,oversize_threshold:0,narenas:1"},
    # Unused pages go back to the system within a second, by a background thread even while the
    # worker is busy (page faults on every large buffer).
    "jemalloc-decay": {"MALLOC_CONF": "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:1"},
    "mimalloc": {},
}


def preferred() -> str:
    """jemalloc where it is installed, else glibc."""
    return "jemalloc" if ctypes.util.find_library(LIBRARIES["jemalloc"]) else "glibc"


def allocator_env(name: str | None) -> dict[str, str]:
    """The environment that makes a process use allocator `name` (None: `preferred()`; glibc: no
    preload); LookupError where its library is not installed."""
    name = name or preferred()
    if name == "glibc":
        return {"LD_PRELOAD": ""}
    library = ctypes.util.find_library(LIBRARIES[name])
    if library is None:
        raise LookupError(f"{name} is not installed (Debian: libjemalloc2, libmimalloc2.0)")
    return {"LD_PRELOAD": library, **SETTINGS[name]}
