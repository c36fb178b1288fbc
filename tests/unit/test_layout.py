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


GATEWAY = ROOT / "gateway"
ROOMS = sorted(path.name for path in GATEWAY.iterdir() if (path / "__init__.py").is_file())


def room_of(module: str) -> str | None:
    """The gateway folder (room) a module of the gateway is in; None for one at its root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS else None


def gateway_modules() -> dict[str, set[str]]:
    """Each gateway module's dotted name, and the gateway modules it imports from."""
    modules = {}
    for path in sorted(GATEWAY.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = {m for m in imported_modules(path) if m == "gateway" or m.startswith("gateway.")}
    return modules


def test_nothing_outside_detection_imports_past_its_door():
    """gateway/detection/__init__.py names what the rest of the gateway may use of the detection:
    its orchestrator, preprocessing, decoders, suppression and fusion are its own."""
    past = {
        name: sorted(m for m in imports if m.startswith("gateway.detection."))
        for name, imports in gateway_modules().items()
        if not name.startswith("gateway.detection")
    }
    assert not {name: found for name, found in past.items() if found}


def test_imaging_and_framing_import_nothing_of_the_web_wing_or_the_detection():
    """Pixels and framing stand below the front doors and the detection: they never reach up."""
    for name, imports in gateway_modules().items():
        if room_of(name) in ("imaging", "framing"):
            up = sorted(m for m in imports if room_of(m) in ("web", "detection", "processing"))
            assert not up, f"{name} imports {up}"


def test_no_two_gateway_folders_import_each_other():
    """Every tie between the gateway's rooms runs one way."""
    ties = {
        (room_of(name), room_of(m))
        for name, imports in gateway_modules().items()
        for m in imports
        if room_of(name) and room_of(m) and room_of(name) != room_of(m)
    }
    assert ties, "the check sees the ties"
    assert not {(a, b) for a, b in ties if (b, a) in ties}
