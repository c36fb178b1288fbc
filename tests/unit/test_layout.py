"""The ties between top-level folders run one way: the server never imports the client, the
benchmarks never import the tests (what both need lives in hiding/ and evaluation/)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"gateway": "facecrop_client", "hiding": "facecrop_client", "bench": "tests", "evaluation": "tests"}


def imported(path: Path) -> set[str]:
    """The top-level packages a module imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_a_folder_never_imports_what_depends_on_it(folder):
    modules = sorted((ROOT / folder).rglob("*.py"))
    assert modules
    offending = [str(path.relative_to(ROOT)) for path in modules if FORBIDDEN[folder] in imported(path)]
    assert not offending, f"{folder}/ imports {FORBIDDEN[folder]}: {offending}"


def test_the_check_sees_an_import():
    assert imported(Path(__file__)) >= {"ast", "pytest", "pathlib"}


def imported_modules(path: Path) -> set[str]:
    """The full names of the modules a module imports from."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_the_triton_client_imports_nothing_of_the_gateway_above_it():
    """gateway/triton/ talks to Triton: the app factory hands it its settings, the detection reads
    its Batch; it imports only itself and the errors it answers with (issue #52: arrows pointed up)."""
    for path in sorted((ROOT / "gateway" / "triton").glob("*.py")):
        above = {
            name
            for name in imported_modules(path)
            if name.startswith("gateway") and not name.startswith(("gateway.triton", "gateway.errors"))
        }
        assert not above, f"{path.relative_to(ROOT)} imports {sorted(above)}"
