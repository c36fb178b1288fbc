"""The documentation: the README short, every page's citation in the code real, the tables generated."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# A citation in code or configuration: (docs/<page>.md, "<heading>"), or a page alone.
CITATION = re.compile(r"""docs/([\w/-]+\.md)(?:, ["']([^"']+)["'])?""")
CITED_IN = ("gateway", "client", "bench", "local_triton", "model_repository", "deploy", "scripts", "tests")
NOT_SCANNED = {Path(__file__).resolve()}  # this file names the patterns it refuses


def headings(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    return {line.lstrip("#").strip() for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def cited_files() -> list[Path]:
    return [
        path
        for folder in CITED_IN
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".py", ".pbtxt", ".yml", ".yaml", ".conf", ".js", ".mjs")
        and "node_modules" not in path.parts
        and path.resolve() not in NOT_SCANNED
    ] + [ROOT / "docker-compose.yml", ROOT / "docker-compose.cpu.yml", ROOT / "Makefile"]


def test_every_citation_names_a_real_page_and_heading():
    citations = [
        (path, match.group(1), match.group(2))
        for path in cited_files()
        for match in CITATION.finditer(path.read_text(errors="replace"))
    ]
    assert len(citations) >= 10, "the citations are found"
    for path, page, heading in citations:
        assert (DOCS / page).is_file(), f"{path.relative_to(ROOT)} cites docs/{page}, which does not exist"
        if heading:
            assert heading in headings(DOCS / page), f"{path.relative_to(ROOT)}: docs/{page} has no heading {heading!r}"


def test_no_citation_of_the_readme_sections():
    for path in cited_files():
        text = path.read_text(errors="replace")
        cites_readme = re.search(r"\(README, |README's \w+ section|README \"", text)
        assert not cites_readme, f"{path.relative_to(ROOT)} cites the README"


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text().splitlines()) < 200


@pytest.mark.parametrize("name", ["configuration", "detect", "crop", "anonymize", "url-options", "errors"])
def test_reference_tables_come_from_the_code(name):
    hooks = runpy.run_path(str(DOCS / "hooks.py"))
    table = hooks["TABLES"][name]()
    assert table.count("\n") >= 4 and f"<!-- table: {name} -->" in "".join(p.read_text() for p in DOCS.rglob("*.md"))


def test_the_configuration_table_lists_every_setting():
    from dataclasses import fields

    from gateway.config import Settings, variable

    table = runpy.run_path(str(DOCS / "hooks.py"))["configuration_table"]()
    for item in fields(Settings):
        assert f"| `{variable(item)}` |" in table
    assert "| `FACECROP_THREADS` | `32` |" in table and "| `FACECROP_API_KEYS_FILE` | none |" in table


def stated_facts() -> list[tuple[str, str, object]]:
    """(page, phrase, the code's value): each phrase, with the value written in, must be on its page."""
    from gateway.config import Settings
    from gateway.detection.fusion import MATCH_IOU
    from gateway.detection.passes import AUTO_MIN_SCORE, AUTO_SMALL_FACE, FAST_SIZE
    from gateway.detection.postprocess import NMS_IOU_THRESHOLD
    from gateway.detection.preprocess import TILE_MIN_OVERLAP
    from gateway.imaging.animation import MAX_ANIMATION_PIXELS
    from gateway.imaging.decode import MAX_SIDE
    from gateway.params import MAX_CROP_SIDE

    settings = Settings()
    return [
        ("detectors.md", "best overlap at IoU {}", MATCH_IOU),
        ("detectors.md", "suppressed on their own (NMS {})", NMS_IOU_THRESHOLD),
        ("architecture.md", "`FACECROP_TARGET_SIZE` ({}; 640 at", settings.target_size),
        ("architecture.md", "1024; {} at\n`detail=fast`", FAST_SIZE),
        ("architecture.md", "overlap by at least {}\npixels", TILE_MIN_OVERLAP),
        ("architecture.md", "(scoring {} % or more)", round(AUTO_MIN_SCORE * 100)),
        ("architecture.md", "is under {} pixels", AUTO_SMALL_FACE),
        ("api/detect.md", "runs the standard pass at {} pixels", FAST_SIZE),
        ("operating.md", "Bodies up to {} MiB", settings.max_upload_bytes // 2**20),
        ("operating.md", "images up to {} megapixels", settings.max_pixels // 10**6),
        ("operating.md", "and {:,}\npixels a side", MAX_SIDE),
        ("operating.md", "crops enlarged to at most {} a side", MAX_CROP_SIDE),
        ("operating.md", "`FACECROP_MAX_IN_FLIGHT` ({})", settings.max_in_flight),
        ("operating.md", "`FACECROP_INFER_TIMEOUT_S` ({} s)", round(settings.infer_timeout_s)),
        ("operating.md", "`FACECROP_REQUEST_TIMEOUT_S` ({} s)", round(settings.request_timeout_s)),
        ("operating.md", "its output is enlarged to at most {} a side", MAX_CROP_SIDE),
        ("operating.md", "up to {:,} px a side", MAX_SIDE),
        ("formats.md", "Cloudflare's limits: {:,} pixels a side", MAX_SIDE),
        ("formats.md", "and {} megapixels (`FACECROP_MAX_PIXELS`)", settings.max_pixels // 10**6),
        ("formats.md", "`FACECROP_MAX_ANIMATION_FRAMES` frames ({:,})", settings.max_animation_frames),
        ("formats.md", "frames times area over {} megapixels", MAX_ANIMATION_PIXELS // 10**6),
        ("api/url.md", "a\nsource has {} s to connect", round(settings.source_connect_timeout_s)),
        ("api/url.md", "and {} s in all on the wall", round(settings.source_timeout_s)),
        ("api/url.md", "`FACECROP_SOURCE_BREAKER_COOL_DOWN_S` ({} s)", round(settings.source_breaker_cool_down_s)),
    ]


@pytest.mark.parametrize("page,phrase,value", stated_facts())
def test_a_fact_the_docs_state_is_the_codes(page, phrase, value):
    """Facts written in prose, where a table cannot carry them: the page says the code's value."""
    assert phrase.format(value) in (DOCS / page).read_text(), f"docs/{page} no longer says {phrase.format(value)!r}"


def test_the_fusion_rule_the_docs_state_is_the_codes():
    from gateway.detection.fusion import either

    assert "the chance that either model is right, 1 - (1 - a)(1 - b)" in (DOCS / "detectors.md").read_text()
    assert either(np.array([0.5, 0.9]), np.array([0.5, 0.2])).tolist() == pytest.approx([0.75, 0.92])


def test_the_errors_page_lists_every_error_with_its_limits_written_out():
    from gateway.config import Settings
    from gateway.errors import documented_errors

    table = runpy.run_path(str(DOCS / "hooks.py"))["errors_table"]()
    for error in documented_errors(by_url=True):
        assert f"| {error.status} | `{error.code}` |" in table
    assert "| 500 | `internal_error` |" in table and "{" not in table  # every {limit} written out
    assert f"`FACECROP_MAX_PIXELS` = {Settings().max_pixels:,}" in table
