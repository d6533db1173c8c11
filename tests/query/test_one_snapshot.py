"""A view that reads one snapshot: `Store.one_snapshot()`; the doctor reads through one.

An ingest that commits while a view is in use (from another Store, as another process would)
is not seen through the view: not by its queries, its `manifest()` and `snapshot()`, a query
with a database of its own (a setting overridden), a query from another thread, or a view of
the view. The Store it came from sees the commit at once.
The doctor, whose statements run one after another and in threads, answers exactly as the
snapshot it began on, even when an ingest commits between its first statement and the rest.
The run counts come from the trees (`oracle.run_dirs`), not from runstore.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import oracle
import runstore
from conftest import copy_store
from runstore.errors import StoreNotFound
from runstore.query.session import Session

RUNS = "select count(*) as n from runs"
# What a finding says, without its evidence's wording and facts (a stale run's minutes move on).
FOUND = ("run_id", "finding", "severity", "first_step", "last_step")


def count(store: runstore.Store, params: dict[str, Any] | None = None) -> int:
    return store.rows(RUNS + (" where $kl_threshold > 0" if params else ""), params).to_pylist()[0]["n"]


def test_a_view_reads_one_snapshot_while_an_ingest_commits(
        shared_small_store: Path, _small_template: Path, _demo_template: Path,
        tmp_path: Path) -> None:
    path = copy_store(shared_small_store, tmp_path / "store")
    small, demo = len(oracle.run_dirs(_small_template)), len(oracle.run_dirs(_demo_template))
    store = runstore.open(path)
    with store.one_snapshot() as snap:
        seq = snap.manifest().seq
        assert count(snap) == small
        report = runstore.open(path).ingest([_demo_template], on_warning=lambda text: None)
        assert report.snapshots >= 1  # it committed
        assert count(snap) == small
        assert snap.manifest().seq == snap.snapshot() == seq
        assert count(snap, {"kl_threshold": 0.5}) == small  # a database of its own
        with ThreadPoolExecutor(2) as pool:
            assert list(pool.map(lambda _: count(snap), range(4))) == [small] * 4
        with snap.one_snapshot() as inner:
            assert count(inner) == small
        assert count(snap) == small
        assert count(store) == small + demo  # the Store itself reads the newest
        assert store.snapshot() > seq
        assert count(snap) == small
    assert count(store) == small + demo


def test_a_view_begins_at_the_newest_snapshot(shared_small_store: Path, _small_template: Path,
                                               _demo_template: Path, tmp_path: Path) -> None:
    """A view of a Store that read before a commit reads the newest snapshot."""
    path = copy_store(shared_small_store, tmp_path / "store")
    small, demo = len(oracle.run_dirs(_small_template)), len(oracle.run_dirs(_demo_template))
    store = runstore.open(path)
    assert count(store) == small
    runstore.open(path).ingest([_demo_template], on_warning=lambda text: None)
    with store.one_snapshot() as snap:
        assert snap.manifest().seq == runstore.open(path).manifest().seq
        assert count(snap) == small + demo


def found(store: runstore.Store) -> list[tuple[Any, ...]]:
    return store.doctor().select(FOUND).rows()


def test_the_doctor_answers_from_one_snapshot_while_an_ingest_commits(
        shared_small_store: Path, _demo_template: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An ingest of the demo tree (whose runs the doctor finds fault with) commits right
    after the doctor's first statement: the doctor still answers as before it."""
    path = copy_store(shared_small_store, tmp_path / "store")
    before = found(runstore.open(path))
    store = runstore.open(path)
    fetch, committed = Session.fetch, []

    def fetch_then_commit(self: Session, *args: Any, **kwargs: Any) -> Any:
        out = fetch(self, *args, **kwargs)
        if not committed:  # the first statement runs alone, before the pool's
            committed.append(runstore.open(path).ingest([_demo_template],
                                                        on_warning=lambda text: None))
        return out

    monkeypatch.setattr(Session, "fetch", fetch_then_commit)
    during = found(store)
    assert committed and committed[0].snapshots >= 1
    assert during == before
    after = found(runstore.open(path))
    assert after != before  # the commit changed what the doctor finds
    assert found(store) == after  # the next call reads the newest


def test_a_view_before_the_first_ingest(_small_template: Path, tmp_path: Path) -> None:
    """Before there is a store, a view says so as the Store does (`snapshot()` None, a query
    `StoreNotFound`); once an ingest made it, the view reads it."""
    path = tmp_path / "store"
    store = runstore.open(path)
    with store.one_snapshot() as snap:
        assert snap.snapshot() is None and store.snapshot() is None
        with pytest.raises(StoreNotFound):
            count(snap)
        runstore.open(path).ingest([_small_template], on_warning=lambda text: None)
        assert count(snap) == len(oracle.run_dirs(_small_template))
        assert snap.snapshot() == store.snapshot() is not None
