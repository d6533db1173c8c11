"""Several processes on one store: concurrent writers, readers during writes, live sources.

* Writers: two, then four `runstore ingest` processes started together over overlapping trees.
  Each either finishes or stops with "store is locked by PID N" (N one of the others) after its
  lock timeout; the store is never corrupted and holds no duplicate row (every run present has
  exactly the oracle's rows); a final ingest completes the union.
* Readers: one process ingests a large tree in many snapshots while this one queries in a loop;
  every query succeeds, counts never go down, and every snapshot is whole: no row without its
  `runs` row, and every table agrees with the ingest ledger of the same snapshot.
* Live sources: a writer process appends to metrics.jsonl, timing_spans.jsonl and
  trace_events.jsonl (flushing half a line, then the rest) while `runstore ingest --watch 0.3`
  runs; samples taken meanwhile never show half a row, and at the end the store equals an
  ingest of the final files into a fresh store.

Expected values come from `oracle` (reading the files) or from what the writer wrote.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import oracle
import runstore
from runstore import demo
from runstore.query.connect import connect
from runstore.storage.manifest import read_manifest
from runstore.demo import RunSpec
from runstore.errors import StoreNotFound

TABLES = ("runs", "config", "metrics_raw", "checkpoints", "trajectories", "rollout_steps",
          "conversations", "messages", "spans", "trace_slices")
LOCKED = re.compile(r"^Error: store is locked by PID (\d+) ")


def counts(store: runstore.Store) -> dict[str, int]:
    q = " union all ".join(f"select '{t}' as t, count(*) as n from {t}" for t in TABLES)
    return {r["t"]: r["n"] for r in store.arrow(q).to_pylist()}


def ingest_cmd(store: Path, *paths: Path, timeout: float = 60, quiet: bool = True) -> list[str]:
    return [sys.executable, "-m", "runstore", "--store", str(store), "ingest",
            *(["-q"] if quiet else []), "--lock-timeout", str(timeout), *map(str, paths)]


# ---------------------------------------------------------------------------------------------
# Concurrent writers

GROUP_SPECS = [
    RunSpec(f"g{g}/{name}", **kw)
    for g in range(1, 5)
    for name, kw in (
        ("rl", dict(steps=40, eval_every=10, save_every=10, logtree_every=20, groups_to_log=1,
                    trace=g % 2 == 0, layout="iteration_dirs" if g % 2 else "flat")),
        ("sl", dict(kind="sl", steps=40, eval_every=10, save_every=10)),
    )
]


@pytest.fixture(scope="module")
def group_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("groups") / "runs"
    demo.generate_tree(root, GROUP_SPECS, seed=13)
    return root


def run_counts_match_oracle(store: runstore.Store, root: Path) -> set[str]:
    """Every run in the store holds exactly the oracle's rows (none missing, none twice);
    returns the run paths present."""
    by_run: dict[str, dict[str, int]] = {}
    q = " union all ".join(
        f"select r.run_path, '{t}' as t, count(x.run_id) as n from runs r "
        f"left join {t} x on x.run_id = r.run_id group by all" for t in TABLES if t != "runs")
    for row in store.arrow(q).to_pylist():
        by_run.setdefault(row["run_path"], {})[row["t"]] = row["n"]
    assert store.sql("select count(*) = count(distinct run_id) as ok from runs")["ok"][0]
    for run_path, got in by_run.items():
        want = oracle.expected_counts(Path(run_path))
        # metric_keys is derived (its row count depends on how many reads a file took):
        # the source tables are compared here, and keys() against the files below.
        assert {t: n for t, n in got.items() if n} == {t: n for t, n in want.items()
                                                       if t in TABLES and t != "runs" and n}, \
            run_path
    return set(by_run)


def start_together(cmds: list[list[str]]) -> list[tuple[int, int, str]]:
    """Start every command at once; (pid, exit code, stderr) of each."""
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    out = []
    for p in procs:
        _, err = p.communicate(timeout=300)
        out.append((p.pid, p.returncode, err))
    return out


def check_outcomes(results: list[tuple[int, int, str]]) -> int:
    """Each process finished, or stopped on the lock naming another one's PID; the number
    that finished."""
    pids = {pid for pid, _, _ in results}
    finished = 0
    for pid, code, err in results:
        assert "Traceback" not in err, err
        if code == 0:
            assert err == ""
            finished += 1
            continue
        assert code == 4, err  # the store is locked (errors.BUSY)
        m = LOCKED.match(err)
        assert m, err
        assert int(m.group(1)) in pids - {pid}, (m.group(1), pids)
    return finished


@pytest.mark.slow
def test_concurrent_writers(group_tree: Path, tmp_path: Path) -> None:
    g = [group_tree / f"g{i}" for i in range(1, 5)]
    store_path = tmp_path / "store"

    # Two processes over overlapping trees (g2 in both), patient enough to both finish.
    results = start_together([ingest_cmd(store_path, g[0], g[1]),
                              ingest_cmd(store_path, g[1], g[2])])
    assert check_outcomes(results) == 2
    store = runstore.open(store_path)
    present = run_counts_match_oracle(store, group_tree)
    assert present == {str(p) for p in map(Path.resolve, oracle.run_dirs(group_tree))
                       if p.parent.name in ("g1", "g2", "g3")}

    # Four processes: two patient, two that give up after 0.2 s (a 0 s timeout still
    # gets the lock when nobody holds it); g4 and the whole tree are new to the store.
    results = start_together([
        ingest_cmd(store_path, g[3], g[0], timeout=60),
        ingest_cmd(store_path, group_tree, timeout=0.2),
        ingest_cmd(store_path, g[2], g[3], timeout=60),
        ingest_cmd(store_path, g[3], group_tree, timeout=0.2),
    ])
    finished = check_outcomes(results)
    assert finished >= 2
    print(f"four writers: {finished} finished, {len(results) - finished} locked out")
    run_counts_match_oracle(store, group_tree)

    # A final ingest completes the union; every table holds exactly the oracle's rows.
    report = store.ingest([group_tree])
    assert counts(store) == oracle.expected_counts_of(group_tree, TABLES)
    assert len(run_counts_match_oracle(store, group_tree)) == len(oracle.run_dirs(group_tree))
    assert report.warnings == []
    # The per-key summary agrees with the rows it summarises, whichever writer read a file.
    summary = store.keys().select("key", "n_runs").sort("key").rows()
    scanned = store.sql("select key, count(distinct run_id) as n_runs from metrics_raw "
                        "group by key order by key").rows()
    assert summary == scanned
    again = store.ingest([group_tree])
    assert not any(again.rows_added.values())


# ---------------------------------------------------------------------------------------------
# Readers during writes

SNAPSHOT_QUERY = """
select
  (select count(*) from runs) as runs,
  (select count(*) from metrics_raw) as metrics_raw,
  (select count(*) from spans) as spans,
  (select count(*) from trajectories) as trajectories,
  (select count(*) from rollout_steps) as rollout_steps,
  (select count(*) from trace_slices) as trace_slices,
  (select count(*) from messages) as messages,
  (select count(*) from metrics_raw m where m.run_id not in (select run_id from runs))
      + (select count(*) from spans s where s.run_id not in (select run_id from runs))
      + (select count(*) from rollout_steps s where s.run_id not in (select run_id from runs))
      as orphans,
  (select count(*) from runs r join (select run_id, max(step) as top from metrics_raw
                                      where not pre_resume group by run_id) m using (run_id)
   where r.last_step is distinct from m.top) as stale_runs
"""

# Against the ledger of the same snapshot: every run there is in `runs` and the other way
# round, and no metrics source has more lines stored than the ledger says were read.
LEDGER_QUERY = """
with led as (select * from read_parquet($ledger)),
ledger_runs as (select run_id from led where kind = 'run'),
metric_sources as (select source_id, lines from led where kind = 'metrics')
select
  (select count(*) from runs where run_id not in (select run_id from ledger_runs))
      as runs_not_in_ledger,
  (select count(*) from ledger_runs where run_id not in (select run_id from runs))
      as ledger_not_in_runs,
  (select count(*) from (select source_id, max(seq) as top from metrics_raw where not pre_resume
                        group by source_id) m
   left join metric_sources l using (source_id)
   where l.lines is null or m.top > l.lines) as metrics_beyond_ledger
"""


@pytest.fixture(scope="module")
def large_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("large") / "runs"
    demo.generate_tree(root, demo.default_specs() + demo.bench_specs(4, 300), seed=21)
    return root


def ledger_check(store_path: Path) -> dict[str, int] | None:
    """LEDGER_QUERY over one snapshot and its own ledger (None before the first data commit)."""
    m = read_manifest(store_path)
    if m is None or m.ledger is None:
        return None
    con = connect(store_path, m, allow_read=[str(store_path / m.ledger)])
    try:
        row = con.execute(LEDGER_QUERY, {"ledger": str(store_path / m.ledger)}).fetchone()
    finally:
        con.close()
    return dict(zip(("runs_not_in_ledger", "ledger_not_in_runs", "metrics_beyond_ledger"), row))


@pytest.mark.slow
def test_readers_during_writes(large_tree: Path, tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    env = {**os.environ, "RUNSTORE_BATCH_ROWS": "10000"}
    proc = subprocess.Popen(ingest_cmd(store_path, large_tree), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    store = runstore.open(store_path)
    seen: list[dict[str, int]] = []
    ledger_checks = 0
    try:
        while proc.poll() is None:
            try:
                row = store.arrow(SNAPSHOT_QUERY).to_pylist()[0]
            except StoreNotFound:
                continue  # the first snapshot is not published yet
            assert row.pop("orphans") == 0, row
            assert row.pop("stale_runs") == 0, row
            if seen:
                assert all(row[k] >= seen[-1][k] for k in row), (seen[-1], row)
            if not seen or row != seen[-1]:
                seen.append(row)
            led = ledger_check(store_path)
            if led is not None:
                assert led == dict.fromkeys(led, 0), led
                ledger_checks += 1
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate()
    assert proc.returncode == 0, err
    final = store.arrow(SNAPSHOT_QUERY).to_pylist()[0]
    want = oracle.expected_counts(large_tree)
    assert {k: final[k] for k in seen[-1]} == {k: want.get(k, 0) for k in seen[-1]}
    # The reader really watched the ingest advance through several snapshots.
    assert len(seen) >= 3, seen
    assert ledger_checks >= 3


# ---------------------------------------------------------------------------------------------
# Live sources under `ingest --watch`

WRITER = textwrap.dedent('''
    """Append like a training job: metrics, timing spans and trace events, step by step."""
    import json, os, sys, time
    run, steps, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    files = {k: open(os.path.join(run, k), "ab", buffering=0)
             for k in ("metrics.jsonl", "timing_spans.jsonl", "trace_events.jsonl")}

    def put(name, obj, split):
        line = (json.dumps(obj) + "\\n").encode()
        if split:  # half a line, flushed, then the rest (a reader may look in between)
            cut = len(line) // 2
            files[name].write(line[:cut])
            time.sleep(pause)
            files[name].write(line[cut:])
        else:
            files[name].write(line)

    ts = 1000.0
    def step(s, split):
        global ts
        # On a split step one of the three files (in turn) gets its line in two writes.
        which = (s // 4) % 3 if split else -1
        put("metrics.jsonl", {"step": s, **{f"k{i}": s * 10 + i for i in range(5)},
                              "nan": float("nan") if s % 7 == 0 else s}, which == 0)
        spans = [{"name": n, "duration": 0.5 + i, "wall_start": float(i),
                  "wall_end": 1.5 + 2 * i} for i, n in enumerate(("a", "b", "c"))]
        put("timing_spans.jsonl", {"step": s, "spans": spans}, which == 1)
        for ph, name in (("B", "train_step"), ("B", "sample"), ("E", "sample"),
                         ("E", "train_step")):
            ts += 10.0
            args = {"track": "Task-1", "thread": "MainThread"}
            if ph == "E" and name == "train_step":
                args["step"] = s
            put("trace_events.jsonl", {"name": name, "ph": ph, "pid": 0, "tid": 7, "ts": ts,
                                       "cat": "async", "args": args},
                which == 2 and ph == "E" and name == "train_step")

    for s in range(steps):
        step(s, split=s % 4 == 1)
        time.sleep(0.03)
    # A resumed job logs its last two timing steps again (the file is never truncated).
    for s in (steps - 2, steps - 1):
        spans = [{"name": "a", "duration": 9.0, "wall_start": 0.0, "wall_end": 9.0}]
        put("timing_spans.jsonl", {"step": s, "spans": spans}, s == steps - 1)
''')


def table_rows(store: runstore.Store, table: str) -> list[tuple[Any, ...]]:
    """Every row of a table in a canonical order (floats as text: NaN equals NaN)."""
    cols = [c for c in store.sql(f"select * from {table} limit 0").columns
            if c not in ("ingested_at",)]
    rows = store.arrow(f"select {', '.join(cols)} from {table}").to_pylist()
    return sorted((tuple(repr(r[c]) for c in cols) for r in rows))


def sample_is_whole(store: runstore.Store, steps: int) -> int:
    """No half row in a sample taken during the watch: every stored metrics line has all its
    keys with the values written, every stored timing step its spans; returns metric steps."""
    m = store.sql("select step, key, value, value_str from metrics_raw order by step, key")
    by_step: dict[int, dict[str, float]] = {}
    for step, key, value, _ in m.rows():
        by_step.setdefault(step, {})[key] = value
    for step, values in by_step.items():
        want = {f"k{i}": float(step * 10 + i) for i in range(5)}
        want["nan"] = math.nan if step % 7 == 0 else float(step)
        assert values.keys() == want.keys(), (step, values)
        for k, v in want.items():
            assert v == values[k] or (math.isnan(v) and math.isnan(values[k])), (step, k)
    spans = store.sql("select step, count(*) as n from spans group by step")
    for step, n in spans.rows():
        assert n in (3, 1), (step, n)  # 3 spans, or 1 once the resumed record replaced them
    slices = store.sql("select name, count(*) as n from trace_slices group by name")
    assert set(slices["name"].to_list()) <= {"train_step", "sample"}
    assert all(s in range(steps) for s in by_step)
    return len(by_step)


@pytest.mark.slow
def test_live_sources_under_watch(tmp_path: Path) -> None:
    tree = tmp_path / "runs"
    run = tree / "live"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"model_name": "m", "learning_rate": 1e-4,
                                                 "loss_fn": "importance_sampling"}, indent=2))
    writer_py = tmp_path / "writer.py"
    writer_py.write_text(WRITER)
    store_path = tmp_path / "store"
    steps = 36

    watch = subprocess.Popen([sys.executable, "-m", "runstore", "--store", str(store_path),
                              "ingest", "-q", "--watch", "0.3", str(tree)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer = subprocess.Popen([sys.executable, str(writer_py), str(run), str(steps), "0.4"])
    store = runstore.open(store_path)
    samples = []
    try:
        while writer.poll() is None:
            try:
                samples.append(sample_is_whole(store, steps))
            except StoreNotFound:
                pass
            time.sleep(0.1)
        assert writer.returncode == 0

        # The final files, ingested into a fresh store, are what the watch must converge to.
        fresh = runstore.open(tmp_path / "fresh")
        fresh.ingest([tree])
        want = {t: table_rows(fresh, t) for t in TABLES}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got = {t: table_rows(store, t) for t in TABLES}
            if got == want:
                break
            time.sleep(0.2)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        watch.send_signal(signal.SIGINT)
        out, err = watch.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert watch.returncode in (0, 130), err
    sample_is_whole(store, steps)
    assert {t: table_rows(store, t) for t in TABLES} == want
    assert len(want["metrics_raw"]) == steps * 6
    # The reader saw the store grow while the job wrote (not only the end state).
    assert len(set(samples)) >= 3, samples
