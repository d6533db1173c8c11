"""`runstore forget` / `Store.forget` (issue 29 item 2): runs can be removed, whole, at once.

What must hold, each tried here against the store read back table by table: every row of the
forgotten runs leaves every table (summaries included) in exactly one new snapshot; no row of
another run changes; the ledger forgets them, so ingesting the same directory again reads it
afresh and gives back exactly the rows it had; `check`'s totals no longer count them; the
files stay on disk (an older snapshot still reads whole); `--missing` takes the runs whose
directories are gone; `--dry-run` changes nothing. Kills at every phase: tests/reliability/test_crash.py.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import oracle
import runstore
from runstore import demo
from runstore.demo import RunSpec
from runstore.errors import QueryError, UsageError
from runstore.storage import ledger
from runstore.storage.manifest import read_manifest
from runstore.storage.schema import TABLES
from conftest import copy_store
from storekit import cli, digest

SPECS = [
    RunSpec("sweep/rl_dirs", steps=10, eval_every=5, save_every=5, logtree_every=5,
            groups_to_log=1, trace=True),
    RunSpec("sweep/rl_flat", layout="flat", steps=12, eval_every=5, save_every=5, logtree=False),
    RunSpec("sl/run", kind="sl", steps=8, eval_every=4, save_every=4),
]
# An eval store's tables belong to the eval store (its `eval_store_id`), not to the runs whose
# checkpoints it evaluated: forgetting a run leaves them whole. Every other table is a run's.
EVAL_TABLES = ("eval_runs", "eval_results", "eval_trajectories")
EVERY = tuple(t for t in TABLES if t not in EVAL_TABLES)  # each carries run_id


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, Path, runstore.Store]:
    a, b = tmp_path / "a" / "runs", tmp_path / "b" / "runs"
    demo.generate_tree(a, SPECS, seed=7)
    demo.generate_tree(b, SPECS, seed=8)
    store = runstore.open(tmp_path / "store")
    store.ingest([a])
    store.ingest([b], on_warning=lambda text: None)
    return a, b, store


def ids_of(tree: Path) -> list[str]:
    return sorted(ledger.run_id_for(str(r.resolve())) for r in oracle.run_dirs(tree))


def rows_of(store: runstore.Store, ids: list[str]) -> dict[str, int]:
    return {t: store.arrow(f"select count(*) as n from {t} where list_contains($ids, run_id)",
                           {"ids": ids})["n"][0].as_py() for t in EVERY}


def only(d: dict[str, list[str]], ids: list[str]) -> dict[str, list[str]]:
    """A digest's rows of the runs `ids` (each row's text holds its run_id)."""
    return {t: [r for r in rows if any(i in r for i in ids)] for t, rows in d.items()}


def test_forget_removes_every_row_in_one_snapshot_and_nothing_else(
        two: tuple[Path, Path, runstore.Store]) -> None:
    a, b, store = two
    gone, kept = ids_of(a), ids_of(b)
    before = digest(store.path, EVERY)
    had = rows_of(store, gone)
    assert had["runs"] == 3 and had["metrics_raw"] > 0 and had["metric_keys"] > 0
    seq = store.snapshot()
    old = read_manifest(store.path)
    from runstore.health.evaluate import check

    total_before = check(store, threshold=0.0, config=False).runs
    # Named three ways: a directory, a run_id prefix, a label.
    label = next(r["run_label"] for r in store.runs().to_dicts()
                 if r["run_id"] == ledger.run_id_for(str((a / "sl" / "run").resolve())))
    flat = ledger.run_id_for(str((a / "sweep" / "rl_flat").resolve()))
    report = store.forget([str(a / "sweep" / "rl_dirs"), flat[:8], label])
    assert store.snapshot() == seq + 1 == report.snapshot
    assert sorted(r["run_id"] for r in report.runs) == gone
    assert report.rows == {t: n for t, n in had.items() if n}
    assert rows_of(store, gone) == {t: 0 for t in EVERY}
    after = digest(store.path, EVERY)
    assert only(after, kept) == only(before, kept)  # no row of another run changed
    led = ledger.read(store.path, read_manifest(store.path))
    assert not {e.run_id for e in led.entries.values()} & set(gone)
    assert check(store, threshold=0.0, config=False).runs == total_before - 3
    # The files stay: the snapshot before still lists them, and they are all there.
    assert old is not None
    for entry in old.tables.values():
        assert all((store.path / f).exists() for f in entry["files"])
    # Shared names are gone with them: the other tree's runs are shown by their names again.
    assert sorted(store.runs()["run_label"].to_list()) == sorted(s.name for s in SPECS)

    # Ingesting the same directories again reads them afresh: the same rows come back.
    report = store.ingest([a])
    assert report.runs_new == 3
    again = digest(store.path, EVERY)
    data = tuple(t for t in EVERY if t not in ("metric_keys", "metric_steps", "metric_kl"))
    assert {t: again[t] for t in data} == {t: before[t] for t in data}
    assert rows_of(store, gone) == had


def test_dry_run_changes_nothing_and_says_what_would_go(
        two: tuple[Path, Path, runstore.Store]) -> None:
    a, _, store = two
    seq, before = store.snapshot(), digest(store.path, EVERY)
    run = str(a / "sweep" / "rl_flat")
    r = cli(store.path, "forget", run, "--dry-run")
    assert r.exit_code == 0, r.output
    assert "would forget 1 run" in r.output and run in r.output
    assert store.snapshot() == seq and digest(store.path, EVERY) == before
    report = store.forget([run], dry_run=True)
    assert report.rows == {t: n for t, n in
                           rows_of(store, [ledger.run_id_for(run)]).items() if n}
    assert report.rows["metrics_raw"] > 0 and report.snapshot is None


def test_forget_missing_takes_the_runs_whose_directory_is_gone(
        two: tuple[Path, Path, runstore.Store], tmp_path: Path) -> None:
    _, b, store = two
    moved = tmp_path / "elsewhere"
    shutil.move(str(b / "sweep" / "rl_flat"), moved)
    store.ingest([b], on_warning=lambda text: None)
    old = ledger.run_id_for(str((b / "sweep" / "rl_flat").resolve()))
    status = {r["run_id"]: r["status"]
              for r in store.arrow("select run_id, status from runs").to_pylist()}
    assert status[old] == "missing" and list(status.values()).count("missing") == 1
    r = cli(store.path, "forget", "--missing")
    assert r.exit_code == 0, r.output
    assert "forgot 1 run" in r.output and "missing" in r.output
    assert rows_of(store, [old]) == {t: 0 for t in EVERY}
    # The moved directory is a run of its own, ingested as new.
    assert store.ingest([moved]).runs_new == 1
    # Nothing missing left: --missing alone forgets nothing and publishes nothing.
    seq = store.snapshot()
    assert store.forget(missing=True).runs == [] and store.snapshot() == seq


def test_forget_in_a_store_with_every_artifact_and_an_eval_store(
        shared_demo_store: Path, tmp_path: Path) -> None:
    """The demo store holds what 0.6.1 writes (capture, logs, an eval store of the async
    sweep's checkpoints): forgetting one of the sweep's runs removes its rows from every table
    of runs, and leaves every other row, the eval store's included, as it was."""

    path = copy_store(shared_demo_store, tmp_path / "store")
    store = runstore.open(path)
    run = store.resolve(["tool_rl_async/learning_rate=8e-05"])[0].run_id
    before = digest(path, tuple(TABLES))
    before_eval = store.arrow("select eval_store_id, eval_run_id, benchmarks, scores from "
                              "eval_runs order by eval_store_id, eval_run_id").to_pylist()
    assert store.arrow("select count(*) as n from eval_runs where run_id = $r",
                       {"r": run})["n"][0].as_py() > 0  # the eval store evaluated this run
    had = rows_of(store, [run])
    assert had["runs"] == 1 and had["samples"] > 0 and had["run_logs"] > 0, had
    r = cli(path, "forget", run)
    assert r.exit_code == 0, r.output
    assert rows_of(store, [run]) == {t: 0 for t in EVERY}
    after = digest(path, tuple(TABLES))
    for t in EVERY:
        assert [x for x in after[t] if run not in x] == [x for x in before[t] if run not in x], t
    # The eval store's rows stay; an eval run of the forgotten run's checkpoints no longer
    # links to it (`eval_runs.run_id` is resolved through `checkpoints` when queried).
    for t in EVAL_TABLES:
        assert len(after[t]) == len(before[t]) and before[t], t
    linked = "select count(*) as n from eval_runs where run_id = $r"
    assert store.arrow(linked, {"r": run})["n"][0].as_py() == 0
    unlinked = ("select eval_store_id, eval_run_id, benchmarks, scores from eval_runs "
                "order by eval_store_id, eval_run_id")
    assert store.arrow(unlinked).to_pylist() == before_eval


def test_forget_errors_are_plain(two: tuple[Path, Path, runstore.Store]) -> None:
    _, _, store = two
    r = cli(store.path, "forget")
    assert r.exit_code == 2 and "--missing" in r.output
    r = cli(store.path, "forget", "sweep/rl_flat")  # held by two runs: which one?
    assert r.exit_code == 2 and "matches 2 runs" in r.output and "Traceback" not in r.output
    with pytest.raises(QueryError, match="no run is named or matches 'nope'"):
        store.forget(["nope"])
    with pytest.raises(UsageError):
        store.forget([])


@pytest.mark.parametrize("runs", [None, 123, b"sweep/*", [b"sweep/*"]], ids=repr)
def test_forget_of_what_names_no_run_is_refused_naming_it(
        two: tuple[Path, Path, runstore.Store], runs: object) -> None:
    # None and 123 raised TypeError from list(); bytes were iterated as numbers.
    _, _, store = two
    before = store.snapshot()
    with pytest.raises(QueryError, match=f"got {re.escape(repr(runs))}"):
        store.forget(runs)  # type: ignore[arg-type]
    assert store.snapshot() == before


def eval_counts(store: runstore.Store) -> dict[str, int]:
    return {t: store.arrow(f"select count(*) as n from {t}")["n"][0].as_py()
            for t in EVAL_TABLES}


def expected_eval_counts(*dirs: Path) -> dict[str, int]:
    """Rows each eval table holds for the eval stores `dirs`, counted from their files."""
    rows = [oracle.eval_store_rows(d) for d in dirs]
    return {t: sum(len(r[t]) for r in rows) for t in EVAL_TABLES}


def test_forget_an_eval_store_removes_its_rows_alone_and_an_ingest_brings_them_back(
        demo_tree: Path, tmp_path: Path) -> None:
    """An eval store is forgotten by its name, id, id prefix, directory or a GLOB: its rows
    leave the eval tables in one snapshot, every other row stays, the ledger forgets it (the
    next ingest reads it afresh, row for row), and a dry run changes nothing."""
    (evals,) = oracle.eval_stores(demo_tree)
    store = runstore.open(tmp_path / "store")
    store.ingest([demo_tree])
    want = expected_eval_counts(evals)
    assert all(want.values()) and eval_counts(store) == want
    before, seq = digest(store.path, tuple(TABLES)), store.snapshot()
    eid = ledger.run_id_for(str(evals.resolve()))
    name = evals.relative_to(demo_tree).as_posix()
    for given in (name, eid, eid[:6], str(evals), str(evals.parent / "." / evals.name),
                  "*_async/eval*"):
        r = cli(store.path, "forget", "--eval-store", given, "--dry-run")
        assert r.exit_code == 0, r.output
        assert r.output.splitlines()[0] == f"eval store {name}  {eid}  {evals.resolve()}"
        said = {t: int(n) for t, n in re.findall(r"^(\w+): (\d+) rows?$", r.output, re.M)}
        assert said == want, given
        assert "would forget 1 eval store (dry run" in r.output
    assert store.snapshot() == seq and digest(store.path, tuple(TABLES)) == before

    report = store.forget(eval_stores=name)
    assert report.runs == [] and [e["eval_store_id"] for e in report.eval_stores] == [eid]
    assert report.rows == want and report.snapshot == seq + 1
    assert report.summary().startswith(f"forgot 1 eval store: {sum(want.values())} rows")
    assert eval_counts(store) == {t: 0 for t in EVAL_TABLES}
    after = digest(store.path, tuple(TABLES))
    assert {t: after[t] for t in EVERY} == {t: before[t] for t in EVERY}
    assert not [e for e in ledger.read(store.path, store.manifest()).entries.values()
                if e.run_id == eid]
    rep = store.ingest([demo_tree])
    assert rep.runs_new == 0 and rep.eval_stores == 1
    assert {t: rep.rows_added.get(t, 0) for t in EVAL_TABLES} == want
    assert digest(store.path, tuple(TABLES)) == before


def test_a_moved_eval_store_is_counted_once_after_forget_missing(
        demo_tree: Path, tmp_path: Path) -> None:
    """An eval store moved to another directory is ingested again under its new id, so its
    rows are there twice; `forget --missing` forgets the copy whose directory is gone (and no
    run), leaving each row once."""
    (evals,) = oracle.eval_stores(demo_tree)
    store = runstore.open(tmp_path / "store")
    store.ingest([demo_tree])
    want = expected_eval_counts(evals)
    old = ledger.run_id_for(str(evals.resolve()))
    moved = evals.parent.parent / "evals_moved"
    evals.rename(moved)
    store.ingest([demo_tree])
    assert eval_counts(store) == {t: 2 * n for t, n in want.items()}  # the old copy stays
    with pytest.raises(QueryError, match="matches 2 eval stores"):
        store.forget(eval_stores=["*"])
    runs = store.sql("select count(*) as n from runs").rows()
    dry = store.forget(missing=True, dry_run=True)
    assert dry.runs == [] and [e["eval_store_id"] for e in dry.eval_stores] == [old]
    assert dry.summary() == "would forget 1 eval store (dry run: nothing changed)"
    r = cli(store.path, "forget", "--missing")
    assert r.exit_code == 0, r.output
    assert eval_counts(store) == want == expected_eval_counts(moved)
    assert store.sql("select count(*) as n from runs").rows() == runs
    new = ledger.run_id_for(str(moved.resolve()))
    assert store.arrow("select distinct eval_store_id from eval_runs")["eval_store_id"] \
        .to_pylist() == [new]
    seq = store.snapshot()  # nothing gone is left: --missing forgets nothing more
    assert store.forget(missing=True).eval_stores == [] and store.snapshot() == seq


@pytest.mark.parametrize("given", [None, 123, b"evals", [b"evals"], [""]], ids=repr)
def test_forget_of_what_names_no_eval_store_is_refused_naming_it(
        shared_demo_store: Path, tmp_path: Path, given: object) -> None:
    store = runstore.open(copy_store(shared_demo_store, tmp_path / "store"))
    before = store.snapshot()
    with pytest.raises(QueryError, match=re.escape(repr(given if isinstance(given, list)
                                                        else given))):
        store.forget(eval_stores=given)  # type: ignore[arg-type]
    r = cli(store.path, "forget", "--eval-store", "nope")
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "no eval store is named or matches 'nope'" in r.output
    assert "tool_rl_async/evals" in r.output  # the eval stores there are, to pick from
    assert store.snapshot() == before
