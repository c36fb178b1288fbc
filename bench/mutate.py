"""`make mutate`: mutation testing of the modules that decide what a user gets (pyproject.toml's
[tool.mutmut] `only_mutate`), with mutmut: each mutant is judged by the fast tests that cover its
function (`pytest -m "not integration and not cluster" tests/unit tests/client`, mutmut picks them
per function: the tests that start real Ray clusters, a minute each, are make test's; Ray's driver and
tasks are judged in process, Ray's own part stood in).
Per module it prints the mutants killed (a timeout counts as killed), those that survived, those in
functions no fast test reaches, and the score: killed / (all run, less those bench/mutants.toml lists
as equivalent, each with why, and those that change only the wording of an error's message); a
survivor it does not list is a test to write, and so is a function no fast test reaches. What the
tests run in a Python of its own (the command line, Ray's workers, an allocator's probe) counts too:
bench/mutate_subprocesses.py gives such a Python the mutated tree and tells mutmut what it reached.
`make mutate MODULE=gateway/web/url/signing.py` (a file or a folder) runs one.

It runs mutmut in build/mutate, the tree staged as links, with the installed packages (hiding's
facecrop_hiding, the client's facecrop_client) under src/: mutmut names a mutant by its file's path
(src/ left out) and the tests import those packages by name, so both must agree. mutmut keeps its
results in build/mutate/mutants/ and would run again only the functions whose code changed, keeping
a verdict the tests written since may change, and its map of which tests reach which function
(mutmut-stats.json) forgets a module whose mutants are made again: so each run forgets the modules
it mutates (their results and that map) and judges them afresh.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import tomllib
from mutmut.stats import status_by_exit_code

from local_triton.processes import SHARED

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / "build" / "mutate"
MUTANTS = STAGE / "mutants"
PACKAGES = {
    "facecrop_hiding": ROOT / "hiding" / "facecrop_hiding",
    "facecrop_client": ROOT / "client" / "facecrop_client",
}
UNSTAGED = frozenset({".git", ".venv", "build", "mutants", "test-artifacts", "originals"})
EQUIVALENT = Path(__file__).resolve().parent / "mutants.toml"
TARGET = 0.9  # the share of non-equivalent mutants each module's tests kill (issue #53)
CAUGHT = ("killed", "timeout", "caught by type check")  # mutmut's words for a mutant the checks stop


def mutant_prefix(module: str) -> str:
    """mutmut's name prefix for a module path (a file or a folder): gateway/web/url/signing.py ->
    gateway.web.url.signing.; hiding/facecrop_hiding/ -> facecrop_hiding."""
    return staged_path(module).removeprefix("src/").removesuffix(".py").strip("/").replace("/", ".") + "."


def stage() -> None:
    """build/mutate: a link to each top-level entry of the tree, and src/ with the packages."""
    (STAGE / "src").mkdir(parents=True, exist_ok=True)
    links = {STAGE / entry.name: entry for entry in ROOT.iterdir() if entry.name not in UNSTAGED}
    links |= {STAGE / "src" / package: path for package, path in PACKAGES.items()}
    for link, target in links.items():
        if not link.is_symlink():
            link.symlink_to(target)


def forget(modules: list[str]) -> None:
    """mutmut's earlier results for `modules` (every one where empty) and its map of the tests."""
    if not modules:
        shutil.rmtree(MUTANTS, ignore_errors=True)
        return
    (MUTANTS / "mutmut-stats.json").unlink(missing_ok=True)
    for module in modules:
        staged = MUTANTS / staged_path(module)
        files = staged.rglob("*") if staged.is_dir() else staged.parent.glob(staged.name + "*")
        for path in list(files):
            if path.is_file():
                path.unlink()


def staged_path(module: str) -> str:
    """Where mutmut keeps a module's mutants: its path in the staged tree (packages under src/)."""
    module = module.strip("/")
    for package, path in PACKAGES.items():
        folder = str(path.relative_to(ROOT))
        if module.startswith(folder):
            return "src/" + package + module[len(folder) :]
    return module


def module_of(mutant: str) -> str:
    """The module a mutant's name belongs to: the part before its function (x_...) or class (xǁ...)."""
    return mutant.split(".x_")[0].split(".xǁ")[0]


def run_mutmut(modules: list[str]) -> None:
    """mutmut on `modules` (all of only_mutate where empty), in the staged tree, with the shared
    photos where the tests find them: first each function's first mutant (mutmut makes every mutant
    and maps which tests reach which function as it starts), then every other one but those that
    change only wording (`wording_only`: no test is to catch them, and each would run every test
    that reaches its function, a command line's parser reaches them all)."""
    stage()
    env = dict(os.environ)
    env["FACECROP_SHARED"] = str(SHARED)
    prefixes = [mutant_prefix(module) for module in modules] or [""]
    mutmut = str(Path(sys.executable).parent / "mutmut")
    subprocess.run([mutmut, "run", *(prefix + "*__mutmut_1" for prefix in prefixes)], cwd=STAGE, env=env, check=False)
    rest = [
        name
        for name, status in statuses().items()
        if status == "not checked" and name.startswith(tuple(prefixes)) and not message_only(name)
    ]
    if rest:
        subprocess.run([mutmut, "run", *rest], cwd=STAGE, env=env, check=False)


STRING = re.compile(r"""[rbuf]*("[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*')""")


@functools.cache
def functions_in(path: Path) -> dict[str, ast.FunctionDef]:
    """A mutated file's functions by name (read once: a module's mutated file runs to megabytes)."""
    return {node.name: node for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.FunctionDef)}


def changed_lines(mutant: str) -> tuple[list[str], list[str]]:
    """The lines a survivor changes, before and after, read from mutmut's mutated file (the
    function's original and the mutant side by side in it)."""
    module, _, function = mutant.rpartition(".")
    parts = module.split(".")
    base = parts[0] if parts[0] in ("gateway", "bench") else "src/" + parts[0]
    path = MUTANTS / base / Path(*parts[1:]).with_suffix(".py") if len(parts) > 1 else MUTANTS / f"{base}/__init__.py"
    if len(parts) > 1 and not path.is_file():
        path = MUTANTS / base / Path(*parts[1:]) / "__init__.py"
    tree = functions_in(path) if path.is_file() else {}  # a module whose mutants were never made
    original, mutated = tree.get(function.rsplit("__mutmut_", 1)[0] + "__mutmut_orig"), tree.get(function)
    if original is None or mutated is None:
        return [], []
    before, after = ast.unparse(original).splitlines()[1:], ast.unparse(mutated).splitlines()[1:]
    removed = [line for line in before if line not in after]
    added = [line for line in after if line not in before]
    return removed, added


def message_only(mutant: str) -> bool:
    """Whether a survivor changes only wording: an error's message or a command line's help."""
    return wording_only(*changed_lines(mutant))


# What a command line's options and commands say in its --help, and nothing else reads.
HELP_KEYWORDS = frozenset({"help", "description", "metavar"})


def wording_only(removed: list[str], added: list[str]) -> bool:
    """Whether the lines a mutant changes (`changed_lines`) differ only in wording: they raise the
    same error but for the text of their string literals (or None for it), or they make the same
    calls but for their help text (HELP_KEYWORDS' arguments, changed or left out)."""

    def wordless(line: str) -> str:
        return STRING.sub("S", line).replace("(None)", "(S)").replace(", None)", ", S)")

    if not removed or len(removed) != len(added):
        return False
    if all("raise " in line for line in removed + added):
        return [wordless(line) for line in removed] == [wordless(line) for line in added]
    return all(without_help(before) == without_help(after) is not None for before, after in zip(removed, added))


def without_help(line: str) -> str | None:
    """A statement without its calls' help text (HELP_KEYWORDS' arguments); None where the line is
    not a statement of its own (a loop's or a block's first line)."""
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            node.keywords = [keyword for keyword in node.keywords if keyword.arg not in HELP_KEYWORDS]
    return ast.unparse(tree)


def statuses() -> dict[str, str]:
    """Every mutant's status, from mutmut's results beside the mutated files."""
    found = {}
    for meta in MUTANTS.rglob("*.py.meta"):
        for name, code in json.loads(meta.read_text()).get("exit_code_by_key", {}).items():
            found[name] = status_by_exit_code[code]  # mutmut's own reading (a CPU-time limit, -24, is a timeout)
    return found


def equivalents() -> dict[str, str]:
    """The surviving mutants that change no answer, each with why (bench/mutants.toml)."""
    return tomllib.loads(EQUIVALENT.read_text()).get("equivalent", {}) if EQUIVALENT.is_file() else {}


def selected(mutant: str, modules: list[str]) -> bool:
    """Whether `mutant` is one of `modules`' (every module's where none is named)."""
    return not modules or any(mutant.startswith(mutant_prefix(module)) for module in modules)


def stale(found: dict[str, str], modules: list[str], known: dict[str, str]) -> list[str]:
    """The mutants of `modules` listed as equivalent that this run caught (or did not judge): the
    list is wrong about them. Other modules' mutants were not run, whatever their status says."""
    return sorted(name for name in known if selected(name, modules) and found.get(name) not in (None, "survived"))


def report(found: dict[str, str], modules: list[str], known: dict[str, str]) -> tuple[list[str], bool]:
    """The per-module table (markdown) and whether every module reaches TARGET."""
    lines = [
        "| module | mutants | killed | survived | no test reaches it | equivalent | message wording | not run "
        "| score |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    every = True
    by_module: dict[str, Counter] = {}
    for name, status in found.items():
        if not selected(name, modules):
            continue
        if status == "survived" and name in known:
            status = "equivalent"
        elif status in ("survived", "not checked") and message_only(name):  # wording is not run
            status = "message"
        by_module.setdefault(module_of(name), Counter())[status] += 1
    for module, counts in sorted(by_module.items()):
        caught = sum(counts[status] for status in CAUGHT)
        judged = sum(counts.values()) - counts["equivalent"] - counts["message"] - counts["not checked"]
        score = caught / judged if judged else 1.0
        every &= score >= TARGET and not counts["not checked"]
        lines.append(
            f"| {module} | {sum(counts.values())} | {caught} | {counts['survived']} | {counts['no tests']} "
            f"| {counts['equivalent']} | {counts['message']} | {counts['not checked']} "
            f"| {f'{score:.1%}' if judged or not counts['not checked'] else 'none judged'}"
            f"{'' if score >= TARGET else ' **below 90 %**'} |"
        )
    return lines, every


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="files or folders to mutate (default: every one configured)")
    parser.add_argument("--survivors", action="store_true", help="list the survivors not known to be equivalent")
    parser.add_argument("--results", type=Path, default=ROOT / "build" / "mutate.md", help="the table, as markdown")
    args = parser.parse_args()
    forget(args.modules)
    run_mutmut(args.modules)
    found, known = statuses(), equivalents()
    lines, every = report(found, args.modules, known)
    listed_wrongly = stale(found, args.modules, known)
    if listed_wrongly:
        lines.append(
            f"\nListed as equivalent but no longer surviving (remove from bench/mutants.toml): {listed_wrongly}"
        )
    survivors = sorted(
        name
        for name, status in found.items()
        if selected(name, args.modules) and status == "survived" and name not in known and not message_only(name)
    )
    if args.survivors:
        lines += ["", "Survivors:", *survivors]
    print("\n".join(lines))
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text("\n".join(lines) + "\n")
    sys.exit(0 if every else 1)


if __name__ == "__main__":
    main()
