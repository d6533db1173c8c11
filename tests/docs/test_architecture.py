"""The architecture's promises that a tool can check: imports go one way (import-linter's
contracts in pyproject.toml), no import cycle anywhere (import-linter's `acyclic_siblings`
contract between the modules of each package, and a search of grimp's module graph for any
cycle at all), no module outside `demo/` grows past ~550 lines, and every module opens with a
docstring (its contract)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULES = sorted((REPO / "runstore").rglob("*.py"))


def test_import_contracts_hold() -> None:
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.fail("lint-imports is missing: install the test extra (pip install -e '.[test]')")
    proc = subprocess.run([exe], cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": str(Path(sys.executable).parent)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout, proc.stdout[-3000:]


def cycles(graph: Any) -> list[list[str]]:
    """Every group of modules that import each other in a cycle (the strongly connected
    components of more than one module, and a module that imports itself), by Tarjan's
    algorithm over grimp's graph of direct imports (function-level ones included)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # recursive: the package has a few hundred modules
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.find_modules_directly_imported_by(v):
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycle_anywhere() -> None:
    """docs/architecture.md says there is no cycle: not between the modules of a package (the
    import-linter contract), and not through a package and its own modules either."""
    import grimp

    graph = grimp.build_graph("runstore", cache_dir=None)
    assert cycles(graph) == []
    # The search finds what it looks for: a cycle made by hand, through a package's
    # `__init__`, one the sibling contract does not look at.
    graph.add_import(importer="runstore.health", imported="runstore.health.watch")
    graph.add_import(importer="runstore.health.watch", imported="runstore.health")
    assert cycles(graph) == [["runstore.health", "runstore.health.watch"]]


def test_the_contract_names_every_package() -> None:
    """A new package left out of the layers would be checked by nothing."""
    text = (REPO / "pyproject.toml").read_text()
    packages = {p.parent.name for p in (REPO / "runstore").glob("*/__init__.py")}
    missing = {p for p in packages if f"runstore.{p}" not in text}
    assert not missing, f"packages outside the import-linter layers: {sorted(missing)}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_module_has_a_contract_and_a_size(path: Path) -> None:
    source = path.read_text()
    assert ast.get_docstring(ast.parse(source)), f"{path.name} opens with no docstring"
    if "demo" not in path.relative_to(REPO).parts:
        assert source.count("\n") <= 550, f"{path.relative_to(REPO)} is over 550 lines"


def test_no_store_method_is_defined_twice() -> None:
    """`Store` is put together from one part per group of methods: a name two parts define
    is one caller's method silently replaced by another's (the MRO picks one), as when a
    run's step timings and compare's step marks were both `step_times`."""
    from runstore.store import Store

    where: dict[str, list[str]] = {}
    for part in Store.__mro__[1:]:
        if part.__module__.startswith("runstore.store"):
            for name in vars(part):
                if not (name.startswith("__") and name.endswith("__")):
                    where.setdefault(name, []).append(part.__name__)
    twice = {name: parts for name, parts in where.items() if len(parts) > 1}
    assert not twice, twice
