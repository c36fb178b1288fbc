"""Shared fixtures: the labeled photo sets in ../shared/faces and the real running stack."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from local_triton.processes import BUILD_DIR, running_stack

FACES = Path(__file__).resolve().parent.parent.parent / "shared" / "faces"
LOGS = BUILD_DIR / "logs"
REPORT_LINES = pytest.StashKey[list[str]]()  # lines for the end of the terminal report


def pytest_terminal_summary(terminalreporter, config) -> None:
    for line in config.stash.get(REPORT_LINES, []):
        terminalreporter.write_line(line)


def photo(relative: str) -> Path:
    path = FACES / relative
    if not path.is_file():
        pytest.fail(f"missing shared test photo {path}: the checkout needs ../shared/faces beside it")
    return path


def labeled_set(name: str) -> tuple[Path, list[dict]]:
    root = FACES / name
    return root / "images", json.loads((root / "gt.json").read_text())


@pytest.fixture(scope="session")
def stack():
    """One real Triton + gateway pair for the whole session, on free ports."""
    with running_stack("test", intra_op_threads=2) as running:
        yield running
