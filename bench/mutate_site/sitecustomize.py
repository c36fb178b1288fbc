"""Loaded by every Python that a test starts under `make mutate` (bench/mutate_subprocesses.py puts
this folder on PYTHONPATH): while mutmut maps which tests reach which function, the functions this
process reaches are written down at once, a line each, for the test that started it."""

import os

HITS = os.environ.get("FACECROP_MUTATE_HITS")

if HITS and os.environ.get("MUTANT_UNDER_TEST") == "stats":
    import mutmut.stats

    seen: set[str] = set()

    def record_hit(name: str, caller: str | None = None) -> None:
        """mutmut's record of a function reached, kept in a file the test's process reads."""
        if name not in seen:
            seen.add(name)
            with open(os.path.join(HITS, str(os.getpid())), "a") as hits:
                hits.write(name + "\n")

    mutmut.stats.record_trampoline_hit = record_hit  # before the trampolines import it
