"""A run's progress kept on its `runs` row at ingest: `final_checkpoint` and `done_frac`.

`run_status` (and through it `runstore check`, the Runs page) reads these columns instead of
scanning `checkpoints` and `metric_keys` per query, so they must say what the source files
say after any sequence of appends and rewrites. Each is compared three ways: with
tests/oracle.py's reading of the source files, with the statement `summaries.run_progress`
over the rows the store holds (the rule the migration and old snapshots use), and through
`run_status`. A ledger written before these states were kept is seeded from the stored rows
(else the next append would forget what earlier reads found), and the seeded ledger is
published once. The schema-version-1 fixture reads the same unmigrated and migrated.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oracle
from conftest import examples
import runstore
from runstore.ingest import progress
from runstore.storage import ledger as ledger_mod
from runstore.storage.location import location
from runstore.storage.manifest import manifest_paths
from runstore.storage.snapshot import table_files
from runstore.storage.writer import writer

FIXTURE = Path(__file__).parents[1] / "fixtures" / "store_v1"
DONE = "progress/done_frac"

# Checkpoint records as upstream writes them, and the odd spellings of `final` the
# normalizer coerces (1, "true", " TRUE ") or refuses (1.0, "yes", 2: null, not final).
RECORD = st.fixed_dictionaries(
    {"name": st.sampled_from(["000010", "000020", "final", "finally", 5])},
    optional={"final": st.sampled_from([True, False, 1, 0, "true", " TRUE ", "false", 1.0,
                                        "yes", 2, None]),
              "state_path": st.just("tinker://ckpt/x")})
DONE_VALUES = st.one_of(st.sampled_from([0.0, 0.25, 1.0, 1.5, math.nan, math.inf, -math.inf,
                                         "done", True]),
                        st.floats(0, 1, allow_nan=False))
# One read's worth of metric lines: a step and maybe a done_frac (or another key only).
METRIC_LINE = st.tuples(st.integers(0, 50),
                        st.one_of(st.none(), DONE_VALUES))
# What happens to a file between two ingests: lines appended, or the file written anew.
CHANGE = st.tuples(st.sampled_from(["append", "append", "rewrite"]),
                   st.lists(RECORD, max_size=3), st.lists(METRIC_LINE, max_size=4))


def _metric_line(step: int, done: Any) -> str:
    row: dict[str, Any] = {"step": step, "env/all/reward/total": 0.5}
    if done is not None:
        row[DONE] = done
    return json.dumps(row) + "\n"  # bare NaN / Infinity, as tinker-cookbook writes


def _write(path: Path, lines: list[str], mode: str) -> None:
    with open(path, "w" if mode == "rewrite" else "a") as f:
        f.write("".join(lines))


def expected_done_frac(run: Path) -> float | None:
    """The largest non-NaN number the live metrics file logs for progress/done_frac."""
    values = [float(v) for _, k, v, _ in oracle.metric_rows(run / "metrics.jsonl")
              if k == DONE and oracle._is_number(v) and not math.isnan(float(v))]
    return max(values) if values else None


def _same(a: Any, b: Any) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isclose(a, b))


def assert_progress(store: runstore.Store, root: Path) -> None:
    """runs, run_status and the statement over the stored rows against the oracle."""
    kept = {r["run_name"]: r for r in store.sql(
        "select run_id, run_name, status, final_checkpoint, done_frac from runs").to_dicts()}
    status = {r["run_name"]: r for r in store.sql(
        "select run_name, status, final_checkpoint, done_frac from run_status").to_dicts()}
    by_statement = progress.from_tables(store.arrow("select * from checkpoints"),
                                        store.arrow("select * from metric_keys"))
    runs = oracle.run_dirs(root)
    assert set(kept) == {oracle.run_name(root, r) for r in runs}
    for run in runs:
        name = oracle.run_name(root, run)
        final, done = oracle.has_final_checkpoint(run), expected_done_frac(run)
        row = kept[name]
        assert row["final_checkpoint"] is final, (name, row)
        assert _same(row["done_frac"], done), (name, row, done)
        assert by_statement.get(row["run_id"], (False, None))[0] is final
        assert _same(by_statement.get(row["run_id"], (False, None))[1], done)
        # The ingest's status and run_status's are one rule (the macro `run_status_at`):
        # completed once a final checkpoint was written or done_frac reached 1 (the files are
        # fresh, so otherwise running).
        completed = final or (done is not None and done >= 1)
        assert row["status"] == ("completed" if completed else "running"), (name, row)
        assert status[name]["status"] == ("completed" if completed else "running")
        assert status[name]["final_checkpoint"] is final
        assert _same(status[name]["done_frac"], done)


@pytest.mark.slow
@settings(max_examples=examples(30), deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(runs=st.lists(st.lists(CHANGE, min_size=1, max_size=4), min_size=1, max_size=3))
def test_progress_columns_say_what_the_files_say_after_every_change(
        tmp_path_factory: pytest.TempPathFactory, runs: list) -> None:
    base = tmp_path_factory.mktemp("progress")
    root = base / "runs"
    store = runstore.open(base / "store")
    for i in range(len(runs)):
        (root / f"run_{i}").mkdir(parents=True)
    for turn in range(max(len(changes) for changes in runs)):
        for i, changes in enumerate(runs):
            if turn >= len(changes):
                continue
            mode, records, lines = changes[turn]
            run = root / f"run_{i}"
            _write(run / "checkpoints.jsonl", [json.dumps(r) + "\n" for r in records], mode)
            _write(run / "metrics.jsonl", [_metric_line(*x) for x in lines], mode)
        store.ingest([root], on_warning=lambda text: None)
        assert_progress(store, root)
    shutil.rmtree(base)


def test_a_rewritten_file_starts_its_progress_afresh(tmp_path: Path) -> None:
    """A file written anew is read whole, its earlier rows replaced: a final checkpoint or a
    done_frac of 1 that the new file no longer holds is gone from the row too."""
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "checkpoints.jsonl").write_text(json.dumps({"name": "final", "final": True}) + "\n")
    (run / "metrics.jsonl").write_text(_metric_line(0, 0.5) + _metric_line(1, 1.0))
    store = runstore.open(tmp_path / "store")
    store.ingest([tmp_path / "runs"])
    assert store.sql("select final_checkpoint, done_frac from runs").rows() == [(True, 1.0)]
    (run / "checkpoints.jsonl").write_text(json.dumps({"name": "000010"}) + "\n")
    (run / "metrics.jsonl").write_text(_metric_line(0, 0.25))  # shorter: read whole again
    store.ingest([tmp_path / "runs"])
    assert store.sql("select final_checkpoint, done_frac from runs").rows() == [(False, 0.25)]
    assert_progress(store, tmp_path / "runs")


def _forget_progress_states(store_path: Path) -> None:
    """Publish the store's ledger without the progress states, as a runstore from before
    they were kept left it (the `runs` rows keep their columns, as migration 0006 fills them)."""
    root = location(store_path)
    with writer(root) as w:
        assert w.manifest is not None
        led = ledger_mod.read(root, w.manifest)
        for e in led.entries.values():
            e.state.pop(progress.FINAL, None)
            e.state.pop(progress.DONE_FRAC, None)
        w.commit(ledger=led.to_arrow())


def test_a_ledger_from_before_the_states_is_seeded_from_the_stored_rows(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = root / "r"
    run.mkdir(parents=True)
    (run / "checkpoints.jsonl").write_text(json.dumps({"name": "final", "final": True}) + "\n")
    (run / "metrics.jsonl").write_text(_metric_line(0, 0.9) + _metric_line(1, 0.2))
    store = runstore.open(tmp_path / "store")
    store.ingest([root])
    _forget_progress_states(tmp_path / "store")
    led = ledger_mod.read(tmp_path / "store", store.manifest())
    assert not any(progress.FINAL in e.state or progress.DONE_FRAC in e.state
                   for e in led.entries.values())
    # Appends below what earlier reads found: the row keeps the larger value and the final
    # checkpoint only if the ledger learnt them from the stored rows first.
    with open(run / "checkpoints.jsonl", "a") as f:
        f.write(json.dumps({"name": "000030"}) + "\n")
    with open(run / "metrics.jsonl", "a") as f:
        f.write(_metric_line(2, 0.3))
    store.ingest([root])
    assert store.sql("select final_checkpoint, done_frac from runs").rows() == [(True, 0.9)]
    assert_progress(store, root)


def test_a_seeded_ledger_is_published_once(tmp_path: Path) -> None:
    """An ingest that changes no run but seeds the ledger publishes it (one snapshot);
    the next no-op ingest then finds nothing to seed and writes nothing."""
    root = tmp_path / "runs"
    run = root / "r"
    run.mkdir(parents=True)
    (run / "checkpoints.jsonl").write_text(json.dumps({"name": "000010"}) + "\n")
    (run / "metrics.jsonl").write_text(_metric_line(0, 0.4))
    store = runstore.open(tmp_path / "store")
    store.ingest([root])
    _forget_progress_states(tmp_path / "store")
    before = len(manifest_paths(tmp_path / "store"))
    store.ingest([root])
    assert len(manifest_paths(tmp_path / "store")) == before + 1
    led = ledger_mod.read(tmp_path / "store", store.manifest())
    assert led.get(store.sql("select run_id from runs").item(), "metrics.jsonl"
                   ).state[progress.DONE_FRAC] == 0.4
    store.ingest([root])
    assert len(manifest_paths(tmp_path / "store")) == before + 1


def _stored_progress(store: runstore.Store) -> dict[str, tuple[bool, float | None]]:
    """Per run, from the stored rows alone, in Python: a checkpoint row named `final` or with
    `final` true; the largest non-NaN live progress/done_frac value of `metrics_raw`."""
    out: dict[str, tuple[bool, float | None]] = {}
    for r in store.arrow("select run_id from runs").to_pylist():
        out[r["run_id"]] = (False, None)
    for r in store.arrow("select run_id, name, final from checkpoints").to_pylist():
        if r["final"] is True or r["name"] == "final":
            out[r["run_id"]] = (True, out[r["run_id"]][1])
    for r in store.arrow("select run_id, value, pre_resume from metrics_raw "
                         f"where key = '{DONE}'").to_pylist():
        v = r["value"]
        if v is None or math.isnan(v) or r["pre_resume"]:
            continue
        final, done = out[r["run_id"]]
        out[r["run_id"]] = (final, v if done is None else max(done, v))
    return out


def test_old_snapshots_read_the_same_unmigrated_and_migrated(tmp_path: Path) -> None:
    """The schema-version-1 fixture: `runs` and `run_status` read the progress columns
    computed at query time before `migrate`, stored by migration 0006 after it, and both
    agree with the stored checkpoint and metric rows."""
    old = tmp_path / "store_v1"
    shutil.copytree(FIXTURE, old)
    before = runstore.open(old)
    query = ("select r.run_id, r.final_checkpoint, r.done_frac, s.status "
             "from runs as r join run_status as s using (run_id) order by run_id")
    unmigrated = before.sql(query)
    want = _stored_progress(before)
    assert {r[0]: (r[1], r[2]) for r in unmigrated.rows()} == want
    assert any(final for final, _ in want.values()) and any(
        done is not None for _, done in want.values())
    assert "0006_run_progress" in before.migrate()
    after = runstore.open(old)
    assert after.sql(query).equals(unmigrated)
    # Stored now, not computed: the runs files themselves hold the columns.
    files = table_files(old, after.manifest(), "runs")
    stored = pa.concat_tables([pq.read_table(f) for f in files])
    assert {"final_checkpoint", "done_frac"} <= set(stored.column_names)
    assert dict(zip(stored.column("run_id").to_pylist(),
                    zip(stored.column("final_checkpoint").to_pylist(),
                        stored.column("done_frac").to_pylist()))) == want
