"""Shared fixtures: realistic run trees written by runstore's own generator, the stores
ingested from them, fresh stores, and the UI's server and browser.

Built once per test run, shared by every xdist worker (the first to need one builds it under
an OS file lock, the others wait and reuse it): the three generated trees (`_demo_template`,
`_awkward_template`, `_small_template`) and the stores ingested from each
(`shared_demo_store`, `shared_awkward_store`, `shared_small_store`). They are read-only: a test
that changes a tree or a store takes a private copy (`demo_tree`, `small_tree`, ...,
`copy_store`). A digest of each is taken when it is built and compared after every module, so
a test that writes into one fails at once, naming what changed.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest
from hypothesis import settings

# The doc generators live in tools/ (outside the wheel); the tests that keep the generated
# docs current import them from there.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

import oracle
from runstore import demo
from runstore.demo import RunSpec

SHARED_SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "sample-runs"

# Hypothesis profiles. `ci` (chosen by CI=true, as .ci/run sets, or HYPOTHESIS_PROFILE=ci):
# every property test draws the number of examples it states. `dev` (the default elsewhere): a
# tenth of that, at least 10, for a quick local run. Tests state their counts as
# `max_examples=examples(N)`.
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or (
    "ci" if os.environ.get("CI", "").lower() in ("true", "1") else "dev")
settings.register_profile("ci", max_examples=100)
settings.register_profile("dev", max_examples=10)
settings.load_profile(PROFILE)


def examples(n: int) -> int:
    """How many examples a property test that states `n` draws under the loaded profile."""
    return n if PROFILE == "ci" else max(10, n // 10)

# A tree small enough to ingest in a fraction of a second: RL in both layouts (one with trace
# events and logtrees), and SL, nested 2 and 3 levels deep.
SMALL_SPECS = [
    RunSpec("a/rl_dirs", steps=12, eval_every=5, save_every=5, logtree_every=10, groups_to_log=1,
            trace=True),
    RunSpec("a/rl_flat", layout="flat", steps=12, eval_every=5, save_every=5, logtree=False),
    RunSpec("b/c/sl", kind="sl", steps=12, eval_every=5, save_every=5),
]


# Everything built once per run, by whichever worker needs it first: path -> its digest when
# built (what the module check compares with).
SHARED: dict[Path, dict] = {}


def _shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory every xdist worker of this run sees (the parent of the workers' own temp
    dirs), or this session's temp dir without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _digest(path: Path) -> dict:
    """oracle.tree_digest as it reads back from JSON (lists for tuples)."""
    return json.loads(json.dumps(oracle.tree_digest(path)))


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, leaf: str,
               build: Callable[[Path], None]) -> Path:
    """`<shared root>/shared/name/leaf`, made by `build(path)` by the first process of this run
    to get here; the others block on an fcntl lock until it is made, then use it as it is."""
    home = _shared_root(tmp_path_factory) / "shared" / name
    home.mkdir(parents=True, exist_ok=True)
    out, done = home / leaf, home / "digest.json"
    with open(home / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            if out.exists():  # a build that failed half-way in another worker
                shutil.rmtree(out)
            build(out)
            done.write_text(json.dumps(_digest(out)))
    SHARED[out] = json.loads(done.read_text())
    return out


@pytest.fixture(scope="module", autouse=True)
def _shared_stay_unchanged(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each module: every shared tree and store this process has used is as built."""
    yield
    for path, digest in SHARED.items():
        now = _digest(path)
        if now != digest:
            changed = sorted(k for k in {*now, *digest} if now.get(k) != digest.get(k))
            pytest.fail(f"the shared, read-only {path} changed: {changed[:10]} (seen after "
                        f"{request.module.__name__}; by it, a module before it in this process, or "
                        "one in another xdist worker); a test that writes takes a private copy "
                        "(the demo_tree/small_tree fixtures, copy_store)")


@pytest.fixture(scope="session")
def _demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo tree (`runstore demo`'s specs and seed), shared and read-only."""
    return built_once(tmp_path_factory, "demo-tree", "runs",
                      lambda out: demo.generate_tree(out, seed=demo.DEMO_SEED))


@pytest.fixture(scope="session")
def _awkward_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The awkward tree (`demo.awkward_specs()`: the KL and format edge cases), shared and
    read-only."""
    return built_once(tmp_path_factory, "awkward-tree", "runs",
                      lambda out: demo.generate_tree(out, demo.awkward_specs(), seed=11))


@pytest.fixture(scope="session")
def _small_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three-run SMALL_SPECS tree, shared and read-only."""
    return built_once(tmp_path_factory, "small-tree", "runs",
                      lambda out: demo.generate_tree(out, SMALL_SPECS, seed=3))


def _ingested(tmp_path_factory: pytest.TempPathFactory, name: str, tree: Path) -> Path:
    import runstore

    return built_once(tmp_path_factory, name, "store", lambda out: runstore.open(out).ingest(
        [tree], on_warning=lambda text: None))


@pytest.fixture(scope="session")
def shared_demo_store(_demo_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of `_demo_template` ingested once per run, read-only (copy_store to write)."""
    return _ingested(tmp_path_factory, "demo-store", _demo_template)


@pytest.fixture(scope="session")
def shared_awkward_store(_awkward_template: Path,
                         tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of `_awkward_template` ingested once per run, read-only (copy_store to write)."""
    return _ingested(tmp_path_factory, "awkward-store", _awkward_template)


@pytest.fixture(scope="session")
def shared_small_store(_small_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of `_small_template` ingested once per run, read-only (copy_store to write)."""
    return _ingested(tmp_path_factory, "small-store", _small_template)


def copy_store(shared: Path, dst: Path) -> Path:
    """A private, writable copy of a shared store at `dst` (cheaper than ingesting again)."""
    shutil.copytree(shared, dst, symlinks=True)
    return dst


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


@pytest.fixture
def small_tree(_small_template: Path, tmp_path: Path) -> Path:
    """A private copy of the three-run SMALL_SPECS tree (tests may change it)."""
    dst = tmp_path / "small"
    shutil.copytree(_small_template, dst, symlinks=True)
    return dst


@pytest.fixture(scope="session")
def ui_demo(_demo_template: Path, shared_demo_store: Path) -> tuple[Path, Path]:
    """(run tree, store) of the demo tree ingested once, for the web UI's tests (read-only:
    the UI never writes; tests that write make their own copy)."""
    return _demo_template, shared_demo_store


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
# tests/reliability/test_hostile.py generated): name -> value, printed by pytest_terminal_summary.
REPORT: dict[str, object] = {}


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In an xdist worker: hand REPORT to the controller, which prints the summary."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["report"] = {name: str(value) for name, value in REPORT.items()}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # type: ignore[no-untyped-def]
    """xdist's controller: a worker finished; keep the figures it reported."""
    REPORT.update(getattr(node, "workeroutput", {}).get("report", {}))


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    for name, value in REPORT.items():
        terminalreporter.write_line(f"{name}: {value}")
