"""A pytest plugin for `make mutate` (pyproject.toml's [tool.mutmut] pytest_add_cli_args): the
command line, Ray's workers and an allocator's probe run as users run them, in a Python of their
own, which mutmut neither mutates nor sees. Under this plugin a Python that a test starts imports the
mutated tree (mutmut's mutants/ and its src/ first on PYTHONPATH), so it runs the mutant under test
(MUTANT_UNDER_TEST, inherited); and while mutmut maps which tests reach which function, what such a
Python reaches (mutate_site/sitecustomize.py writes it down) counts for the test that started it."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

SITE = Path(__file__).resolve().parent / "mutate_site"
HITS = "FACECROP_MUTATE_HITS"
SAVED = pytest.StashKey[dict[str, str | None]]()  # what the two variables were before


def pytest_configure(config: pytest.Config) -> None:
    """A folder for the hits, and the mutated tree first for every Python the tests start; a
    progress bars' lock of this process's own (see own_progress_lock)."""
    own_progress_lock()
    mutants = Path.cwd()  # mutmut runs the tests in its mutants/
    paths = [str(SITE), str(mutants), str(mutants / "src"), os.environ.get("PYTHONPATH", "")]
    config.stash[SAVED] = {name: os.environ.get(name) for name in (HITS, "PYTHONPATH")}
    os.environ[HITS] = tempfile.mkdtemp(prefix="mutmut-hits-")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, paths))


def own_progress_lock() -> None:
    """tqdm's lock for its bars is a semaphore shared by every process forked from the one that made
    it: mutmut runs each mutant in a fork of one, and stops one past its time with a signal, which may
    come while it holds that lock; every later fork then waited for it, for good (its mutant counted
    as caught, by the clock). Each test process gets a lock of its own."""
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ[HITS], ignore_errors=True)
    for name, value in config.stash[SAVED].items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """What the test's own Pythons reached, added to mutmut's record before it files it under the test."""
    if os.environ.get("MUTANT_UNDER_TEST") != "stats":
        return
    from mutmut.state import state

    for written in Path(os.environ[HITS]).iterdir():
        state()._stats.update(written.read_text().split())
        written.unlink()
