"""Shared fixtures: realistic run trees written by runstore's own generator, fresh stores."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

# The doc generators live in tools/ (outside the wheel); the tests that keep the generated
# docs current import them from there.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from runstore import demo
from runstore.demo import RunSpec

SHARED_SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "sample-runs"

# A tree small enough to ingest in a fraction of a second: RL in both layouts (one with trace
# events and logtrees), and SL, nested 2 and 3 levels deep.
SMALL_SPECS = [
    RunSpec("a/rl_dirs", steps=12, eval_every=5, save_every=5, logtree_every=10, groups_to_log=1,
            trace=True),
    RunSpec("a/rl_flat", layout="flat", steps=12, eval_every=5, save_every=5, logtree=False),
    RunSpec("b/c/sl", kind="sl", steps=12, eval_every=5, save_every=5),
]


@pytest.fixture(scope="session")
def _demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template") / "runs"
    demo.generate_tree(root, seed=demo.DEMO_SEED)
    return root


@pytest.fixture(scope="session")
def _awkward_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("awkward") / "runs"
    demo.generate_tree(root, demo.awkward_specs(), seed=11)
    return root


@pytest.fixture
def demo_tree(_demo_template: Path, tmp_path: Path) -> Path:
    """A private copy of the demo tree (tests may change it)."""
    dst = tmp_path / "runs"
    shutil.copytree(_demo_template, dst, symlinks=True)
    return dst


@pytest.fixture
def awkward_tree(_awkward_template: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "awkward"
    shutil.copytree(_awkward_template, dst, symlinks=True)
    return dst


@pytest.fixture(scope="session")
def _small_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small") / "runs"
    demo.generate_tree(root, SMALL_SPECS, seed=3)
    return root


@pytest.fixture
def small_tree(_small_template: Path, tmp_path: Path) -> Path:
    """A private copy of the three-run SMALL_SPECS tree (tests may change it)."""
    dst = tmp_path / "small"
    shutil.copytree(_small_template, dst, symlinks=True)
    return dst


@pytest.fixture(scope="session")
def ui_demo(_demo_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(run tree, store) of the demo tree ingested once, for the web UI's tests (read-only:
    the UI never writes; tests that write make their own copy)."""
    import runstore

    base = tmp_path_factory.mktemp("ui_demo")
    tree = base / "runs"
    shutil.copytree(_demo_template, tree, symlinks=True)
    runstore.open(base / "store").ingest([tree])
    return tree, base / "store"


@pytest.fixture(scope="module")
def ui_server(ui_demo: tuple[Path, Path]):  # type: ignore[no-untyped-def]
    """A `runstore ui` process over the `ui_demo` store, one per test module."""
    from ui_harness import UiServer

    with UiServer(ui_demo[1]) as server:
        yield server


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A headless Chromium (a Playwright context, tests/ui_harness.py) per test module;
    skips the test where Playwright or Debian's chromium is missing."""
    from ui_harness import chromium_context, have_chromium

    if not have_chromium():
        pytest.skip("needs Playwright (the test extra) and Debian's chromium at /usr/bin/chromium "
                    "(tests/run.sh installs both as root)")
    with chromium_context(tmp_path_factory.mktemp("chromium")) as ctx:
        yield ctx


@pytest.fixture(scope="module")
def ui_tree(ui_demo: tuple[Path, Path]) -> Path:
    """The run tree the `ui_demo` store was ingested from (the oracle reads it)."""
    return ui_demo[0]


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


# Figures a test wants shown at the end of the run (e.g. how many hypothesis cases
# tests/test_hostile.py generated): name -> value, printed by pytest_terminal_summary.
REPORT: dict[str, object] = {}


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    for name, value in REPORT.items():
        terminalreporter.write_line(f"{name}: {value}")
