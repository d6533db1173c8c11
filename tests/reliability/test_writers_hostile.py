"""The writing commands other than a plain ingest (`forget`, `compact`, `migrate`, `repair`,
`set_setting`), tried with hostile input and on a store damaged between two commands.

What must hold: a damaged store gives one `Error:` line naming the file and `runstore repair`,
exit 3 (never "a runstore bug", never a machine fault), and publishes nothing; a value handed
to the Python API's writing methods that no rule allows (a lock wait of NaN, of text) is a
`UsageError` at once, never an endless wait, a `TypeError` or a `StoreLocked`. Each check
compares with the store read back before the command (`storekit.digest`) or with the
manifests on disk. `runstore demo` stopped while writing its tree makes it whole when run
again (the runs it ingests are the demo tree's, `oracle.run_dirs`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

import oracle
import runstore
from runstore.demo import default_specs, generate_tree
from runstore.errors import StoreCorrupt, UsageError
from runstore.storage.manifest import manifest_paths, read_manifest
from conftest import copy_store
from storekit import assert_clear_error, cli, digest


def cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])  # the footer is gone


DAMAGES: dict[str, Callable[[Path], None]] = {"cut": cut, "deleted": Path.unlink}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_forget_on_a_damaged_file_names_it(damage: str, shared_small_store: Path,
                                           tmp_path: Path) -> None:
    store = copy_store(shared_small_store, tmp_path / "store")
    m = read_manifest(store)
    assert m is not None
    rel = m.tables["metrics_raw"]["files"][0]
    untouched = digest(store, ("runs", "config", "spans"))
    published = manifest_paths(store)
    DAMAGES[damage](store / rel)

    result = cli(store, "forget", "b/c/sl")
    assert result.exit_code == 3, result.output
    assert_clear_error(result.stderr, rel, "runstore repair")
    with pytest.raises(StoreCorrupt, match="runstore repair"):
        runstore.open(store).forget(["b/c/sl"])
    assert manifest_paths(store) == published  # nothing published
    assert digest(store, ("runs", "config", "spans")) == untouched


@pytest.fixture
def held(shared_small_store: Path, tmp_path: Path) -> Any:
    """A copy of the small store whose write lock another holder has, for the test's time."""
    store = copy_store(shared_small_store, tmp_path / "store")
    fd = os.open(store / "_runstore" / "lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    yield runstore.open(store)
    os.close(fd)


WRITES: dict[str, Callable[[runstore.Store, Any], Any]] = {
    "compact": lambda s, t: s.compact(lock_timeout=t),
    "forget": lambda s, t: s.forget(["b/c/sl"], lock_timeout=t),
    "migrate": lambda s, t: s.migrate(lock_timeout=t),
    "repair": lambda s, t: s.repair(lock_timeout=t),
    "set_setting": lambda s, t: s.set_setting("kl_threshold", 0.02, lock_timeout=t),
}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1, "5", None, True, 1e300],
                         ids=repr)
@pytest.mark.parametrize("method", sorted(WRITES))
def test_a_lock_wait_no_rule_allows_is_refused(method: str, value: Any,
                                               held: runstore.Store) -> None:
    before = manifest_paths(held.path)
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            WRITES[method](held, value)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - what the call raised is the answer
            outcome.append(e)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(30)  # not a speed limit: without the check, NaN and inf wait for ever
    assert outcome, f"{method}(lock_timeout={value!r}) is still waiting for the lock"
    assert isinstance(outcome[0], UsageError), repr(outcome[0])
    assert "lock_timeout" in str(outcome[0])
    assert manifest_paths(held.path) == before


def test_a_demo_stopped_while_writing_its_tree_is_whole_when_run_again(
        _demo_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`runstore demo` stopped (Ctrl-C, a kill) while it writes its run tree, then run again,
    ingests the whole demo tree, not the runs written before the stop."""
    from runstore.demo import showcase

    whole = generate_tree

    def stopped(root: Path, specs: Any = None, **kw: Any) -> None:
        whole(root, default_specs()[:3], **kw)  # the first runs, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(showcase, "generate_tree", stopped)
    with pytest.raises(KeyboardInterrupt):
        showcase.run_demo(tmp_path / "demo", echo=lambda text: None)
    monkeypatch.undo()
    showcase.run_demo(tmp_path / "demo", echo=lambda text: None)

    want = sorted(str(r.relative_to(_demo_template)) for r in oracle.run_dirs(_demo_template))
    runs = runstore.open(tmp_path / "demo" / "store").arrow("select run_path from runs")
    root = (tmp_path / "demo" / "runs").resolve()
    got = sorted(str(Path(p).relative_to(root)) for p in runs["run_path"].to_pylist())
    assert got == want


def test_the_demo_refuses_a_store_holding_other_runs_and_writes_nothing(
        shared_small_store: Path, _small_template: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`runstore demo` given a store of one's own (an exported RUNSTORE_STORE, `--store`), or
    its own store after its directory moved, refuses it naming a run from elsewhere: the
    store's rows stay as they were, and no demo tree is written."""
    mine = copy_store(shared_small_store, tmp_path / "mine")
    before = digest(mine)
    monkeypatch.setenv("RUNSTORE_STORE", str(mine))
    result = cli(None, "demo", str(tmp_path / "demo"))
    assert result.exit_code == 2
    assert_clear_error(result.output, str(mine), "not read from the demo's tree", "NEW_DIR")
    assert f"e.g. {_small_template.resolve()}/" in result.output
    assert not (tmp_path / "demo").exists()
    assert digest(mine) == before

    # The demo's own store, its directory moved: the runs were read from the old place.
    from runstore.demo import showcase

    shutil.copytree(_small_template, tmp_path / "old" / "runs")
    showcase.run_demo(tmp_path / "old", echo=lambda text: None)
    showcase.run_demo(tmp_path / "old", echo=lambda text: None)  # its own store: fine
    (tmp_path / "old").rename(tmp_path / "moved")
    kept = digest(tmp_path / "moved" / "store")
    with pytest.raises(UsageError, match="delete this store if an earlier demo wrote it"):
        showcase.run_demo(tmp_path / "moved", echo=lambda text: None)
    assert digest(tmp_path / "moved" / "store") == kept


def test_forget_prints_run_names_with_control_characters_shown(_small_template: Path,
                                                                tmp_path: Path) -> None:
    """A run's name and directory hold what its tree holds (an ANSI escape, a newline): forget
    lists them shown, not obeyed by the terminal, one line per run."""
    import shutil

    names = ["x/esc\x1b[31mred", "x/nl\nname", "x/tab\tbell\x07"]
    for name in names:
        shutil.copytree(_small_template / "a" / "rl_flat", tmp_path / "tree" / name)
    store = tmp_path / "store"
    runstore.open(store).ingest([tmp_path / "tree"])
    for dry in (["--dry-run"], []):
        result = cli(store, "forget", *dry, *names)
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert not any(ord(c) < 32 or c == "\x7f" for line in lines for c in line), lines
        assert sum(line.startswith("x/") for line in lines) == len(names), lines


@pytest.mark.parametrize("interval", [1e300, float("inf"), float("nan"), 0, -1, "5", True],
                         ids=repr)
def test_a_watch_interval_no_rule_allows_is_refused_before_a_pass(
        interval: Any, small_tree: Path, tmp_path: Path) -> None:
    store = runstore.open(tmp_path / "store")
    with pytest.raises(UsageError, match="--watch"):
        store.watch([small_tree], interval=interval)
    assert not (tmp_path / "store").exists()  # no pass ran


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e308"])
def test_a_vacuum_age_no_clock_can_reach_is_refused(value: str, shared_small_store: Path,
                                                    tmp_path: Path) -> None:
    # `inf` and 1e308 were taken ("more than inf h"); `nan` was refused naming vacuum_hours.
    store = copy_store(shared_small_store, tmp_path / "store")
    before = runstore.open(store).snapshot()
    r = cli(store, "compact", "--vacuum-hours", value)
    assert r.exit_code == 2, r.output
    assert "'--vacuum-hours'" in r.output and "finite number of hours" in r.output
    assert runstore.open(store).snapshot() == before
    for bad in (True, float(value), "5"):
        with pytest.raises(UsageError, match="vacuum_hours must be a finite number of hours"):
            runstore.open(store).compact(vacuum_hours=bad)
    assert runstore.open(store).snapshot() == before


@pytest.mark.parametrize("method", sorted(WRITES))
def test_a_held_lock_names_no_command_it_cannot_know(method: str, held: runstore.Store) -> None:
    # Every writing command holds the lock; the message said "an ingest in progress" whoever
    # held it (here, none: this test holds it, as a compact or forget would).
    with pytest.raises(runstore.RunstoreError) as err:
        WRITES[method](held, 0)
    text = str(err.value)
    assert "store is locked by PID" in text and "an ingest in progress" not in text
    assert "a runstore command writing to it" in text
