"""Which memory allocator a gateway runs with: glibc's malloc (gunicorn.conf.py tunes it in each
worker), or jemalloc / mimalloc preloaded (Debian's libjemalloc2 / libmimalloc2.0) with their
settings. A preloaded allocator replaces malloc for the whole process, Python, numpy and
OpenCV included; mallopt then tunes nothing that is used."""

from __future__ import annotations

import ctypes.util

ALLOCATORS = ("glibc", "jemalloc", "mimalloc")
LIBRARIES = {"jemalloc": "jemalloc", "mimalloc": "mimalloc"}
SETTINGS = {
    # Unused pages go back to the system within a second, by a background thread even while the
    # worker is idle; one arena for the worker's threads rather than four per core.
    "jemalloc": {"MALLOC_CONF": "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:1"},
    "mimalloc": {},
}


def allocator_env(name: str | None) -> dict[str, str]:
    """The environment that makes a process use allocator `name` (None or glibc: nothing to add);
    LookupError where its library is not installed."""
    if name in (None, "glibc"):
        return {}
    library = ctypes.util.find_library(LIBRARIES[name])
    if library is None:
        raise LookupError(f"{name} is not installed (Debian: libjemalloc2, libmimalloc2.0)")
    return {"LD_PRELOAD": library, **SETTINGS[name]}
