"""Fixtures: the real running stack for integration tests, and the Flask app with an
in-process model stand-in for unit tests (Flask tutorial style). Shared helpers are in
tests/support.py."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient
from playwright.sync_api import Browser, sync_playwright

from evaluation.images import MissingSharedData
from gateway.config import Settings
from gateway.web.app import create_app
from gateway.web.url.options import parse_url_options
from local_triton.processes import running_stack
from tests.support import CHROMIUM, CHROMIUM_ARGS, REPORT_LINES, NoFacesModel, missing_data


def pytest_terminal_summary(terminalreporter, config) -> None:
    for line in config.stash.get(REPORT_LINES, []):
        terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    """A fixture that needs the shared labeled data this checkout lacks: skipped saying so (CI: failed)."""
    try:
        return (yield)
    except MissingSharedData as missing:
        missing_data(missing)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """A test that needs the shared labeled data this checkout lacks: skipped saying so (CI: failed)."""
    try:
        return (yield)
    except MissingSharedData as missing:
        missing_data(missing)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests under tests/integration and every test of the real stack are integration tests:
    `pytest -m "not integration"` runs the fast suite."""
    for item in items:
        if "integration" in item.path.parts or "stack" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(autouse=True)
def empty_caches() -> None:
    """Each test starts with the gateway's memoised functions empty (the URL form's parse cache), so
    it runs the code it tests, not an answer an earlier test left: `make mutate` mutates those
    functions, and a cached answer would let a mutant survive unseen."""
    parse_url_options.cache_clear()


@pytest.fixture(autouse=True)
def runner_stays_ordinary() -> Iterator[None]:
    """A test that leaves this process's thread real-time fails, and the policy is put back: every
    process started later would inherit it (SVT-AV1 opened as root did that once, and the Docker
    CLI that the compose test started then spun at SCHED_FIFO 99 on both cores until CI's end)."""
    before = os.sched_getscheduler(0), os.sched_getparam(0)
    yield
    after = os.sched_getscheduler(0), os.sched_getparam(0)
    if after != before:
        os.sched_setscheduler(0, *before)
        pytest.fail(f"the test changed the runner's scheduling policy (policy, priority) from {before} to {after}")


@pytest.fixture(scope="session")
def stack():
    """One real Triton + gateway pair for the whole session, on free ports. The tests judge answers,
    not speed: a busy machine's queue in Triton (a crowd at detail=high is both models on up to 9
    tiles) must not turn an answer into a 504, so the inference deadline is a minute here and the request's
    five minutes; the inference deadline is tested on a gateway of its own (test_operations), the request's
    in tests/unit/test_processing.py."""
    generous = {"FACECROP_INFER_TIMEOUT_S": "60", "FACECROP_REQUEST_TIMEOUT_S": "300"}
    with running_stack("test", generous, intra_op_threads=2) as running:
        yield running


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Chromium (Debian's), driven by Playwright; one per test module."""
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def settings() -> Settings:
    """The settings `app` is built with; override it in a module or a test to change them."""
    return Settings()


@pytest.fixture
def app(settings: Settings) -> Flask:
    """The gateway with a model stand-in that finds no face (no Triton needed)."""
    return create_app(settings, NoFacesModel)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()
