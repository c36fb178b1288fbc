"""The documentation: the README short, every page's citation in the code real, the tables generated."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

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


@pytest.mark.parametrize("name", ["configuration", "detect", "crop", "anonymize", "url-options"])
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
