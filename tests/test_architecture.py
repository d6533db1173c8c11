"""The architecture's promises that a tool can check: imports go one way (import-linter's
contracts in pyproject.toml), no module outside `demo/` grows past ~550 lines, and every module
opens with a docstring (its contract)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MODULES = sorted((REPO / "runstore").rglob("*.py"))


def test_import_contracts_hold() -> None:
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.fail("lint-imports is missing: install the test extra (pip install -e '.[test]')")
    proc = subprocess.run([exe], cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": str(Path(sys.executable).parent)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout, proc.stdout[-3000:]


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
