"""A no-op ingest told from `stat` alone (ingest/unchanged.py) answers as the whole path would.

The shortcut returns "nothing changed" without the lock, the ledger or any table when the
store's last complete ingest saw the same runs and files, no run's status can have changed
since, and no run the store knows went unseen. Its promise is that the whole path would
then change nothing either. So every test here runs two stores side by side over the same
tree and the same clock, one with the shortcut and one without it (the whole path), after
each change to the tree: their reports and every row must be equal, and whenever the
shortcut answered, the whole path must have published nothing. The changes are what makes
the shortcut unsafe if it misses them: an append, a file touched or rewritten to the same
size, a run added, removed or renamed, the clock passing a running run's window, a
compaction, each followed by an ingest of the whole tree or of one run (the others, then
unseen, may vanish meanwhile). A separate process shows the shortcut imports no
pyarrow and writes nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import runstore
import storekit
from runstore.ingest import run as run_mod
from runstore.ingest import unchanged
from runstore.errors import RunstoreError, StoreCorrupt, StoreLocked
from runstore.storage.location import location
from runstore.storage.lock import LOCK, Lock
from runstore.storage.manifest import read_manifest

CHANGES = ["nothing", "nothing", "append", "touch", "same_size", "add_run", "remove_run",
           "rename_run", "later", "much_later", "compact"]


def _write_run(run: Path, steps: int) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps({"model_name": "m", "learning_rate": 1e-4}))
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "env/all/reward/total": s / 10}) + "\n" for s in range(steps)))


def _write_eval_store(store: Path) -> None:
    """An eval store (runs.jsonl and runs/<id>/metadata.json): discovered beside the runs,
    reported apart from them (`eval_stores`), never a run."""
    (store / "runs" / "e1").mkdir(parents=True, exist_ok=True)
    (store / "runs.jsonl").write_text(json.dumps({"run_id": "e1"}) + "\n")
    (store / "runs" / "e1" / "metadata.json").write_text(json.dumps({"run_id": "e1"}))


def _report(r: Any) -> tuple:
    return (r.runs_new, r.runs_updated, r.runs_unchanged, r.runs_missing,
            {k: v for k, v in r.rows_added.items() if v}, len(r.warnings), r.snapshots,
            r.runs_total, r.eval_stores, r.complete)


class Pair:
    """Two stores ingesting the same tree at the same clock: `fast` may take the shortcut,
    `whole` never does."""

    def __init__(self, base: Path) -> None:
        self.fast, self.whole = base / "fast", base / "whole"
        self.shortcuts = 0

    def ingest(self, paths: list[Path], now: float, monkeypatch: pytest.MonkeyPatch) -> None:
        check = unchanged.check
        taken: list[Any] = []

        def counted(*a: Any, **k: Any) -> Any:
            out = check(*a, **k)
            taken.append(out)
            return out

        with monkeypatch.context() as m:
            m.setattr(unchanged, "check", counted)
            before = read_manifest(location(self.fast))
            fast = run_mod.ingest(location(self.fast), paths, now=now)
            after = read_manifest(location(self.fast))
            assert (before is not None and after.seq == before.seq) == (fast.snapshots == 0)
        with monkeypatch.context() as m:
            m.setattr(unchanged, "check", lambda *a, **k: None)
            whole = run_mod.ingest(location(self.whole), paths, now=now)
        shortcut = any(t is not None for t in taken)
        self.shortcuts += shortcut
        assert _report(fast) == _report(whole), (paths, shortcut)
        if shortcut:
            assert whole.snapshots == 0 and fast.snapshots == 0
        assert storekit.digest(self.fast) == storekit.digest(self.whole)


@pytest.mark.slow
@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.sampled_from(CHANGES), st.booleans()), min_size=3,
                        max_size=7))
def test_the_shortcut_answers_as_the_whole_path(tmp_path_factory: pytest.TempPathFactory,
                                                 changes: list[tuple[str, bool]]) -> None:
    """After each change, the tree (or, `part`, only its first run) is ingested twice."""
    base = tmp_path_factory.mktemp("unchanged")
    tree = base / "runs"
    for i in range(3):
        _write_run(tree / f"sweep/run{i}", 5 + i)
    _write_eval_store(tree / "evals")
    pair = Pair(base)
    with pytest.MonkeyPatch.context() as mp:
        clock = time.time()
        pair.ingest([tree], clock, mp)
        for n, (change, part) in enumerate(changes):
            runs = sorted(p for p in (tree / "sweep").iterdir())
            run = runs[n % len(runs)] if runs else None
            if change == "append" and run:
                with open(run / "metrics.jsonl", "a") as f:
                    f.write(json.dumps({"step": 100 + n, "env/all/reward/total": 1.0}) + "\n")
            elif change == "touch" and run:
                stat = (run / "metrics.jsonl").stat()
                os.utime(run / "metrics.jsonl", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
            elif change == "same_size" and run:
                text = (run / "config.json").read_text()
                (run / "config.json").write_text(text.replace("0.0001", "0.0002"))
            elif change == "add_run":
                _write_run(tree / f"sweep/new{n}", 3)
            elif change == "remove_run" and len(runs) > 1:
                shutil.rmtree(runs[-1])
            elif change == "rename_run" and run:
                run.rename(run.with_name(run.name + f"_r{n}"))
            elif change == "later":
                clock += 60
            elif change == "much_later":
                clock += 600  # past every running run's window: its status turns idle
            elif change == "compact":
                runstore.open(pair.fast).compact()
                runstore.open(pair.whole).compact()
            runs = sorted(p for p in (tree / "sweep").iterdir())
            paths = [runs[0]] if part else [tree]
            pair.ingest(paths, clock, mp)
            pair.ingest(paths, clock, mp)  # again at once: nothing changed since
        # Last, a change read by a whole ingest, which records what the next one compares:
        # that next one, with nothing changed, takes the shortcut.
        _write_run(tree / "sweep" / "last", 2)
        pair.ingest([tree], clock, mp)
        before = pair.shortcuts
        pair.ingest([tree], clock, mp)
        assert pair.shortcuts == before + 1


NO_OP = r"""
import sys
import runstore
report = runstore.open(sys.argv[1]).ingest([sys.argv[2]])
heavy = sorted(m for m in ("pyarrow", "deltalake", "duckdb", "numpy", "sqlglot", "polars")
               if m in sys.modules)
print(report.runs_unchanged, report.runs_total, report.snapshots, " ".join(heavy))
"""


def test_a_no_op_ingest_reads_no_table_and_writes_nothing(tmp_path: Path) -> None:
    """Once a tree is ingested, ingesting it again in a new process answers from the
    manifest and a `stat` of each source: no heavy library is even imported, no file of the
    store is written, and every run is reported unchanged."""
    tree = tmp_path / "runs"
    for i in range(3):
        _write_run(tree / f"run{i}", 4)
    store = tmp_path / "store"
    runstore.open(store).ingest([tree])
    files = sorted((p, p.stat().st_mtime_ns) for p in store.rglob("*") if p.is_file())
    proc = subprocess.run([sys.executable, "-c", NO_OP, str(store), str(tree)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3", "3", "0"]
    # Only the lock file is written: the shortcut holds the lock while it checks the store,
    # as any writer does (its holder line), and leaves it free.
    lock = store / LOCK
    assert sorted((p, p.stat().st_mtime_ns) for p in store.rglob("*")
                  if p.is_file() and p != lock) == [f for f in files if f[0] != lock]
    assert lock.read_bytes() == b""


# ---------------------------------------------------------------------------------------------
# A damaged or locked store: the shortcut never answers "unchanged"; the whole path reports it.


def _log(store: Path, table: str) -> Path:
    return sorted((store / "tables" / table / "_delta_log").glob("*.json"))[-1]


def _ledger(store: Path) -> Path:
    m = read_manifest(location(store))
    assert m is not None and m.ledger
    return store / m.ledger


def _ledger_wrong_columns(store: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(_ledger(store))
    pq.write_table(t.drop_columns(["offset"]).append_column("offset", pa.array(["x"] * len(t))),
                   _ledger(store))


def _unpublished_compaction_lost_a_file(store: Path) -> None:
    from deltalake import DeltaTable

    DeltaTable(str(store / "tables" / "metrics_raw")).optimize.compact()  # no snapshot covers it
    (store / sorted(read_manifest(location(store)).tables["metrics_raw"]["files"])[0]).unlink()


def _flip_ledger_keeping_its_times(store: Path) -> None:
    """Bit rot as a disk makes it: other bytes, the same size and mtime."""
    path = _ledger(store)
    st = path.stat()
    storekit.flip_silently(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size


def _lock_directory(store: Path) -> None:
    (store / LOCK).unlink()
    (store / LOCK).mkdir()


def _new_log_entry(store: Path) -> None:
    """A Delta version no snapshot covers, as a writer killed before publishing leaves."""
    last = _log(store, "runs")
    nxt = last.with_name(f"{int(last.name[:20]) + 1:020d}.json")
    nxt.write_text(last.read_text())


# damage -> the error the whole path reports (its class; a text it contains)
DAMAGES: dict[str, tuple[Any, type[RunstoreError], str]] = {
    "ledger-bit-rot": (_flip_ledger_keeping_its_times, StoreCorrupt, "ingest ledger"),
    "corrupt-ledger": (lambda s: _ledger(s).write_bytes(b"PAR1 not a parquet file"),
                       StoreCorrupt, "ingest ledger"),
    "delete-ledger": (lambda s: _ledger(s).unlink(), StoreCorrupt, "ingest ledger"),
    "ledger-wrong-columns": (_ledger_wrong_columns, StoreCorrupt, "wrong type"),
    "corrupt-delta-log": (lambda s: _log(s, "runs").write_text('{"add": {"path": "no'),
                          StoreCorrupt, "tables/runs"),
    "delete-delta-log-entry": (lambda s: _log(s, "metrics_raw").unlink(), StoreCorrupt,
                               "tables/metrics_raw"),
    "delete-delta-log": (lambda s: shutil.rmtree(s / "tables" / "runs" / "_delta_log"),
                         StoreCorrupt, "is missing"),
    "unpublished-version-needs-a-lost-file": (_unpublished_compaction_lost_a_file,
                                              StoreCorrupt, "is missing"),
    "lock-directory": (_lock_directory, StoreCorrupt, "is a directory"),
}


def _ingest(store: Path, tree: Path, shortcut: bool, monkeypatch: pytest.MonkeyPatch,
            **kw: Any) -> tuple[list[Any], BaseException | None]:
    """Ingest `tree` with the shortcut (its answers listed) or without it; the error raised."""
    check = unchanged.check
    taken: list[Any] = []

    def counted(*a: Any, **k: Any) -> Any:
        taken.append(check(*a, **k))
        return taken[-1]

    with monkeypatch.context() as m:
        m.setattr(unchanged, "check", counted if shortcut else (lambda *a, **k: None))
        try:
            run_mod.ingest(location(store), [tree], **kw)
        except RunstoreError as e:
            return taken, e
    return taken, None


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tree of three runs and a store holding it, compacted once (so logs have a
    checkpoint), whose last ingest recorded what the shortcut compares."""
    base = tmp_path_factory.mktemp("damaged")
    tree = base / "runs"
    for i in range(3):
        _write_run(tree / f"run{i}", 4 + i)
    store = base / "store"
    runstore.open(store).ingest([tree])
    runstore.open(store).compact()
    with open(tree / "run0" / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 50, "env/all/reward/total": 1.0}) + "\n")
    runstore.open(store).ingest([tree])
    return tree, store


def _copy(store: Path, to: Path) -> Path:
    shutil.copytree(store, to, symlinks=True)
    return to


def test_the_fixture_store_takes_the_shortcut(ingested: tuple[Path, Path], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The control for the cases below: undamaged, a copy of the store answers at once."""
    tree, store = ingested
    taken, error = _ingest(_copy(store, tmp_path / "store"), tree, True, monkeypatch)
    assert error is None and len(taken) == 1 and taken[0] is not None
    assert taken[0].runs_unchanged == 3


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_a_damaged_store_is_never_unchanged(case: str, ingested: tuple[Path, Path],
                                            tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Each damage the reliability suite makes, on two copies: with the shortcut and without
    it the ingest fails with the same error (the file named, `runstore repair`), and the
    shortcut did not answer."""
    tree, store = ingested
    damage, kind, needle = DAMAGES[case]
    errors = []
    for shortcut in (True, False):
        copy = _copy(store, tmp_path / f"store-{shortcut}")
        damage(copy)
        taken, error = _ingest(copy, tree, shortcut, monkeypatch)
        assert all(t is None for t in taken), case
        assert isinstance(error, kind), (case, error)
        assert needle in str(error) and "runstore repair" in str(error), str(error)
        errors.append(str(error).replace(str(copy), "STORE"))
    assert errors[0] == errors[1]


def test_an_unpublished_version_is_rolled_back_by_the_whole_path(
        ingested: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log entry no snapshot covers (a writer killed before publishing) is the whole path's
    to roll back: the shortcut does not answer over it."""
    tree, store = ingested
    copy = _copy(store, tmp_path / "store")
    _new_log_entry(copy)
    taken, error = _ingest(copy, tree, True, monkeypatch)
    assert taken == [None] and error is None
    assert storekit.digest(copy) == storekit.digest(store)


def test_a_compaction_after_damage_does_not_vouch_for_it(ingested: tuple[Path, Path],
                                                         tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction carries the recorded fingerprint forward only when it still holds: it does
    not read the ledger, so a ledger damaged before it stays found."""
    tree, store = ingested
    copy = _copy(store, tmp_path / "store")
    _flip_ledger_keeping_its_times(copy)
    runstore.open(copy).compact()
    taken, error = _ingest(copy, tree, True, monkeypatch)
    assert taken == [None] and isinstance(error, StoreCorrupt), error


def test_a_compaction_keeps_the_shortcut(ingested: tuple[Path, Path], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction changes no row and no ledger entry: the next no-op still answers at once."""
    tree, store = ingested
    copy = _copy(store, tmp_path / "store")
    before = read_manifest(location(copy)).seq
    runstore.open(copy).compact()
    assert read_manifest(location(copy)).seq == before + 1
    taken, error = _ingest(copy, tree, True, monkeypatch)
    assert error is None and taken and taken[0] is not None


def test_a_locked_store_waits_for_its_writer(ingested: tuple[Path, Path], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """While another writer holds the lock, an unchanged ingest waits for it as any ingest
    does, and gives up after the timeout naming the holder; once it is free, it answers."""
    tree, store = ingested
    copy = _copy(store, tmp_path / "store")
    other = Lock(location(copy))  # its own open file: the kernel's lock conflicts
    other.acquire(0)
    try:
        taken, error = _ingest(copy, tree, True, monkeypatch, lock_timeout=0.3)
        assert taken == [None] and isinstance(error, StoreLocked), error
        assert f"PID {os.getpid()}" in str(error)
    finally:
        other.release()
    taken, error = _ingest(copy, tree, True, monkeypatch)
    assert error is None and taken and taken[0] is not None
