"""kill -9 during an ingest: the store still answers, and the next ingest completes it.

Two ways of choosing the moment, both seeded:

* `test_sigkill_at_every_phase`: 20 points drawn over the four phases of an ingest
  (discovery, parsing, writing Delta versions, committing: compaction, ledger, manifest). The
  library's test-only hook (`pause_point`, docs/reliability.md) makes the process stop
  at the N-th time it reaches a phase and say so; the test SIGKILLs it there. Some recovering
  ingests are killed again in the middle of their rollback.
* `test_sigkill_at_random_moments`: SIGKILL after a random delay (between 0.05 s and the
  duration of an uninterrupted ingest), wherever that lands.

`$RUNSTORE_BATCH_ROWS` is set small so a process publishes many snapshots, and
`$RUNSTORE_COMPACT_FILES` small so commits also compact. After each kill the store must answer
a query with a consistent snapshot (or not exist yet, when the kill came before the first
snapshot), and a final ingest must leave exactly the row counts of an uninterrupted ingest,
which themselves equal the counts the oracle computes from the files.

The commands killed, and the uninterrupted runs their kill points are counted from, are
`python -m runstore` processes: a kill needs a process of its own. The command run again after
a kill, to complete or repeat it, runs in this process through the CLI (`storekit.cli`: the
same `main`, arguments and environment variables), as the library calls beside it do; a fresh
interpreter for it would only add its start-up and imports.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

import oracle
import runstore
import storekit
from conftest import copy_store
from runstore import demo
from runstore.crashpoints import pause_point
from runstore.storage.manifest import read_manifest
from runstore.storage.vacuum import KEEP_MANIFESTS
from runstore.errors import StoreCorrupt, StoreNotFound

TABLES = ("runs", "config", "metrics_raw", "checkpoints", "trajectories", "rollout_steps",
          "conversations", "messages", "spans", "trace_slices", "samples", "capture_events",
          "run_logs", "eval_runs", "eval_results", "eval_trajectories")
# An eval store's tables are keyed by the store, not by a run (no orphan check for them).
EVAL_TABLES = ("eval_runs", "eval_results", "eval_trajectories")
KILLS = 6
BATCH = {"RUNSTORE_BATCH_ROWS": "20000"}
ENV = {**os.environ, **BATCH}


def counts(store: runstore.Store) -> dict[str, int]:
    q = " union all ".join(f"select '{t}' as t, count(*) as n from {t}" for t in TABLES)
    return {r["t"]: r["n"] for r in store.arrow(q).to_pylist()}


def command(store: Path, tree: Path) -> list[str]:
    return [sys.executable, "-m", "runstore", "--store", str(store), "ingest", "-q", str(tree)]


def succeeds(store: Path, *args: str, env: dict[str, str] | None = None) -> None:
    """`runstore --store STORE ARGS` in this process (with `env` set for its duration)
    exits 0."""
    r = storekit.cli(store, *args, env=env)
    assert r.exit_code == 0, r.output


def kill_after(store: Path, tree: Path, delay: float) -> int | None:
    """Start an ingest, SIGKILL it after `delay` s; its exit code (None if it was killed).

    Whether a given kill lands mid-ingest depends on the machine's speed, so nothing asserts
    on it; the delays span the whole duration of an uninterrupted ingest."""
    with subprocess.Popen(command(store, tree), env=ENV, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE) as proc:
        try:
            _, err = proc.communicate(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            return None
    assert proc.returncode == 0, err.decode()
    return 0


def assert_answers(store_path: Path) -> int | None:
    """The store answers `select count(*) from runs`, or does not exist yet."""
    store = runstore.open(store_path)
    try:
        return store.sql("select count(*) as n from runs")["n"][0]
    except StoreNotFound:
        return None


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("crash") / "runs"
    demo.generate_tree(root, demo.default_specs() + demo.bench_specs(4, 300), seed=5)
    return root


@pytest.mark.slow
def test_sigkill_at_random_moments(big_tree: Path, tmp_path: Path) -> None:
    before = oracle.fingerprint(big_tree)
    want = oracle.expected_counts_of(big_tree, TABLES)

    reference = tmp_path / "reference"
    started = time.monotonic()
    p = subprocess.run(command(reference, big_tree), env=ENV, capture_output=True, text=True,
                       timeout=300)
    duration = time.monotonic() - started
    assert p.returncode == 0, p.stderr
    ref_counts = counts(runstore.open(reference))
    assert ref_counts == want
    n_snapshots = len(os.listdir(reference / "_runstore" / "manifests"))
    assert n_snapshots >= 4  # the small batch really splits the ingest

    rng = random.Random(20240611)
    delays = sorted(rng.uniform(0.05, duration) for _ in range(KILLS))
    for i, delay in enumerate(delays):
        store = tmp_path / f"store{i}"
        kill_after(store, big_tree, delay)
        n = assert_answers(store)
        assert n is None or 0 <= n <= want["runs"]
        # Kill the recovering ingest too, then let one finish.
        kill_after(store, big_tree, rng.uniform(0.05, duration))
        assert_answers(store)
        succeeds(store, "ingest", "-q", str(big_tree), env=BATCH)
        s = runstore.open(store)
        assert counts(s) == ref_counts, f"after a kill at {delay:.2f} s"
        again = s.ingest([big_tree])
        assert not any(again.rows_added.values()) and again.runs_unchanged == want["runs"]
        shutil.rmtree(store)
    assert oracle.fingerprint(big_tree) == before


# ---------------------------------------------------------------------------------------------
# Kills at chosen phases

POINTS = 20
# The four phases of an ingest and the hook names inside each (see pause_point).
PHASES = {
    "discovery": ("migrate", "discover"),
    "parsing": ("parse",),
    "writing": ("write",),
    "committing": ("compact", "ledger", "publish"),
}
PHASE_ENV = {**ENV, "RUNSTORE_BATCH_ROWS": "8000", "RUNSTORE_COMPACT_FILES": "4"}


@pytest.fixture(scope="module")
def phase_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("phases") / "runs"
    demo.generate_tree(root, demo.default_specs() + demo.bench_specs(2, 200), seed=5)
    return root


def kill_at(store: Path, tree: Path, point: str, timeout: float = 120) -> bool:
    """Run an ingest that pauses at `point` ("phase:N"), SIGKILL it there; True if it got
    there, False if it finished first (it must then have succeeded)."""
    return storekit.kill_at(command(store, tree), PHASE_ENV, point, timeout)


def consistent_counts(store_path: Path, most: dict[str, int]) -> dict[str, int] | None:
    """Counts of a store after a kill: none above the uninterrupted ingest's, and no row whose
    run is missing from `runs` (a snapshot is whole or absent). None when there is no store."""
    store = runstore.open(store_path)
    try:
        got = counts(store)
    except StoreNotFound:
        return None
    assert all(got[t] <= most[t] for t in TABLES), (got, most)
    orphans = store.sql(" union all ".join(
        f"select count(*) as n from {t} where run_id not in (select run_id from runs)"
        for t in TABLES if t != "runs" and t not in EVAL_TABLES))["n"].sum()
    assert orphans == 0
    return got


def choose_points(reached: dict[str, int], rng: random.Random) -> list[str]:
    """POINTS seeded "phase:N" points, spread evenly over the four phases of PHASES."""
    points = []
    groups = list(PHASES.values())
    for i in range(POINTS):
        hooks = [h for h in groups[i % len(groups)] if reached.get(h)]
        hook = hooks[(i // len(groups)) % len(hooks)]  # every hook of the phase in turn
        points.append(f"{hook}:{rng.randint(1, reached[hook])}")
    return points


@pytest.mark.slow
def test_sigkill_at_every_phase(phase_tree: Path, tmp_path: Path) -> None:
    before = oracle.fingerprint(phase_tree)
    want = oracle.expected_counts_of(phase_tree, TABLES)

    # An uninterrupted ingest, logging every phase it reaches (how many times each).
    reference = tmp_path / "reference"
    log = tmp_path / "points.log"
    p = subprocess.run(command(reference, phase_tree), capture_output=True, text=True,
                       env={**PHASE_ENV, "RUNSTORE_TEST_POINTS": str(log)}, timeout=300)
    assert p.returncode == 0, p.stderr
    assert counts(runstore.open(reference)) == want
    reached: dict[str, int] = {}
    for name in log.read_text().split():
        reached[name] = reached.get(name, 0) + 1
    assert all(any(reached.get(h) for h in hooks) for hooks in PHASES.values()), reached
    assert reached.get("compact"), "RUNSTORE_COMPACT_FILES should make commits compact"

    rng = random.Random(20240612)
    points = choose_points(reached, rng)
    recovered = 0
    for i, point in enumerate(points):
        store = tmp_path / f"store{i}"
        assert kill_at(store, phase_tree, point), f"never reached {point}"
        consistent_counts(store, want)
        if i % 3 == 0:
            # Kill the next ingest too, in the middle of rolling back what the first left.
            if kill_at(store, phase_tree, "recover:1"):
                recovered += 1
                consistent_counts(store, want)
        s = runstore.open(store)
        s.ingest([phase_tree])
        assert counts(s) == want, f"after a kill at {point}"
        storekit.delta_matches_manifest(store)
        again = s.ingest([phase_tree])
        assert not any(again.rows_added.values()) and again.runs_unchanged == want["runs"]
        assert again.snapshots == 0
        shutil.rmtree(store)
    print(f"killed at {', '.join(points)}; {recovered} rollbacks killed too")
    assert recovered >= 1
    assert oracle.fingerprint(phase_tree) == before


# ---------------------------------------------------------------------------------------------
# Kills during the other writing commands: compact (with and without vacuum), migrate, repair,
# and a settings commit. After each kill the store answers with exactly the rows it had (a
# digest of every row of every table), and the command run again, then an ingest, succeed and
# change no row.

MANY_VARS = {"RUNSTORE_BATCH_ROWS": "300", "RUNSTORE_COMPACT_FILES": "100000",
             # no grace for readers: the vacuum deletes what it replaced at once
             "RUNSTORE_READER_GRACE_SECONDS": "0"}
MANY_FILES = {**os.environ, **MANY_VARS}
MOST_POINTS = 14  # per command: every hook it reaches, each at up to this many spread counts


def spread_points(reached: dict[str, int], hooks: tuple[str, ...]) -> list[str]:
    """Every hook of `hooks` the command reached, each at its first and last count and at
    counts spread evenly between (about MOST_POINTS in all)."""
    present = [h for h in hooks if reached.get(h)]
    per = max(2, MOST_POINTS // max(1, len(present)))
    points = []
    for h in present:
        n = reached[h]
        points += [f"{h}:{k}" for k in sorted({1 + (n - 1) * i // (per - 1) for i in range(per)})]
    return points


@pytest.fixture(scope="module")
def history(_small_template: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(store, tree): a copy of the small tree, ingested in several snapshots, compacted,
    grown and ingested again, then given more than KEEP_MANIFESTS snapshots in all (settings
    commits), so each later commit prunes and the files the compaction replaced are unlisted
    by every manifest left."""
    base = tmp_path_factory.mktemp("history")
    tree = base / "runs"
    shutil.copytree(_small_template, tree)
    store = base / "store"
    p = subprocess.run(command(store, tree), env=MANY_FILES, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    s = runstore.open(store)
    s.compact()
    with open(tree / "a" / "rl_flat" / "metrics.jsonl", "a") as f:
        for step in range(100, 130):
            f.write(f'{{"step": {step}, "env/all/reward/total": {step / 1000}}}\n')
    s.ingest([tree])
    for i in range(KEEP_MANIFESTS):
        s.set_setting("kl_threshold", 0.02 + i / 1000)
    return store, tree


def copy_of(template: Path, tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(template, dst)
    return dst


def runstore_cmd(store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "runstore", "--store", str(store), *args]


def then_all_is_well(store: Path, tree: Path | None, want: dict[str, list[str]],
                     again: Callable[[], None]) -> None:
    """The store answers with `want`; `again()` (the command killed, run again: it raises
    unless it succeeds) then succeeds, and so does an ingest of `tree` (the one the store
    holds), neither changing a row; the full check finds nothing."""
    assert storekit.digest(store) == want
    again()
    assert storekit.digest(store) == want
    if tree is not None:
        report = runstore.open(store).ingest([tree])
        assert not any(report.rows_added.values())
        assert storekit.digest(store) == want
    storekit.delta_matches_manifest(store)
    assert runstore.open(store).repair(check=True).problems == []


@pytest.mark.slow
@pytest.mark.parametrize("vacuum", [True, False], ids=["vacuum", "no-vacuum"])
def test_sigkill_at_every_phase_of_compact(vacuum: bool, history: tuple[Path, Path],
                                           tmp_path: Path) -> None:
    history_store, tree = history
    want = storekit.digest(history_store)
    args = ("compact", "--vacuum-hours", "0") if vacuum else ("compact",)
    reached = storekit.points_reached(runstore_cmd(copy_of(history_store, tmp_path, "ref"),
                                                   *args), MANY_FILES, tmp_path / "points")
    hooks = ("locked", "compact", "publish", "prune", "vacuum")
    assert reached.get("compact") and reached.get("publish") and reached.get("prune"), reached
    assert bool(reached.get("vacuum")) == vacuum, reached
    points = spread_points(reached, hooks)
    for i, point in enumerate(points):
        store = copy_of(history_store, tmp_path, f"store{i}")
        assert storekit.kill_at(runstore_cmd(store, *args), MANY_FILES, point), point
        then_all_is_well(store, tree, want, lambda: succeeds(store, *args, env=MANY_VARS))
        shutil.rmtree(store)
    print(f"compact {' '.join(args[1:])}: killed at {', '.join(points)}")


SUMMARIES = ("metric_keys", "metric_steps", "metric_kl")


@pytest.mark.slow
def test_sigkill_at_every_phase_of_forget(history: tuple[Path, Path], tmp_path: Path) -> None:
    """A forget killed anywhere leaves the store before it or after it, whole (every table,
    summaries included, with or without the run: never some of each); forgetting again then
    ends where an uninterrupted forget ends, and an ingest brings the run's rows back."""
    history_store, tree = history
    every = storekit.TABLES + SUMMARIES
    before = storekit.digest(history_store, every)
    args = ("forget", str(tree / "a" / "rl_flat"))
    ref = copy_of(history_store, tmp_path, "ref")
    reached = storekit.points_reached(runstore_cmd(ref, *args), MANY_FILES, tmp_path / "points")
    after = storekit.digest(ref, every)
    gone = runstore.open(history_store).resolve([args[1]])[0].run_id
    assert all(gone not in row for rows in after.values() for row in rows)
    assert any(gone in row for rows in before.values() for row in rows)
    hooks = ("locked", "forget", "write", "ledger", "publish", "prune")
    assert reached.get("forget") and reached.get("publish"), reached
    points = spread_points(reached, hooks)
    for i, point in enumerate(points):
        store = copy_of(history_store, tmp_path, f"store{i}")
        assert storekit.kill_at(runstore_cmd(store, *args), MANY_FILES, point), point
        got = storekit.digest(store, every)
        assert got in (before, after), point
        if got == before:  # not published: the forget is still to do, and does it
            succeeds(store, *args, env=MANY_VARS)
        assert storekit.digest(store, every) == after, point
        storekit.delta_matches_manifest(store)
        assert runstore.open(store).repair(check=True).problems == []
        # The ledger forgot the run too: the next ingest reads it afresh, row for row.
        assert runstore.open(store).ingest([tree]).runs_new == 1
        assert storekit.digest(store) == {t: before[t] for t in storekit.TABLES}, point
        shutil.rmtree(store)
    print(f"forget: killed at {', '.join(points)}")


@pytest.mark.slow
def test_sigkill_at_every_phase_of_forgetting_an_eval_store(
        shared_demo_store: Path, _demo_template: Path, tmp_path: Path) -> None:
    """Forgetting an eval store killed anywhere leaves the store before it or after it,
    whole; forgetting again ends where an uninterrupted forget ends, and an ingest of the
    tree brings the eval store's rows back, row for row."""
    (evals,) = oracle.eval_stores(_demo_template)
    before = storekit.digest(shared_demo_store)
    args = ("forget", "--eval-store", evals.relative_to(_demo_template).as_posix())
    ref = copy_store(shared_demo_store, tmp_path / "ref")
    reached = storekit.points_reached(runstore_cmd(ref, *args), MANY_FILES, tmp_path / "points")
    after = storekit.digest(ref)
    assert all(not after[t] and before[t] for t in EVAL_TABLES)
    assert {t: after[t] for t in after if t not in EVAL_TABLES} == \
        {t: before[t] for t in before if t not in EVAL_TABLES}
    hooks = ("locked", "forget", "write", "ledger", "publish", "prune")
    assert reached.get("forget") and reached.get("publish"), reached
    points = spread_points(reached, hooks)
    for i, point in enumerate(points):
        store = copy_store(shared_demo_store, tmp_path / f"store{i}")
        assert storekit.kill_at(runstore_cmd(store, *args), MANY_FILES, point), point
        got = storekit.digest(store)
        assert got in (before, after), point
        if got == before:  # not published: the forget is still to do, and does it
            succeeds(store, *args, env=MANY_VARS)
        assert storekit.digest(store) == after, point
        storekit.delta_matches_manifest(store)
        assert runstore.open(store).repair(check=True).problems == []
        report = runstore.open(store).ingest([_demo_template])
        assert report.runs_new == 0 and report.eval_stores == 1
        assert storekit.digest(store) == before, point
        shutil.rmtree(store)
    print(f"forget --eval-store: killed at {', '.join(points)}")


SET_SETTING = ("import runstore, sys; "
               "runstore.open(sys.argv[1]).set_setting('kl_threshold', 0.05)")


@pytest.mark.slow
def test_sigkill_at_every_phase_of_a_settings_commit(history: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    history_store, tree = history
    want = storekit.digest(history_store)
    was = runstore.open(history_store).settings()["kl_threshold"]

    def cmd(store: Path) -> list[str]:
        return [sys.executable, "-c", SET_SETTING, str(store)]

    reached = storekit.points_reached(cmd(copy_of(history_store, tmp_path, "ref")), MANY_FILES,
                                      tmp_path / "points")
    assert reached.get("prune"), reached  # the store holds more than KEEP_MANIFESTS snapshots
    points = spread_points(reached, ("locked", "publish", "prune"))
    for i, point in enumerate(points):
        store = copy_of(history_store, tmp_path, f"store{i}")
        assert storekit.kill_at(cmd(store), MANY_FILES, point), point
        assert runstore.open(store).settings()["kl_threshold"] in (was, 0.05)

        def again() -> None:  # SET_SETTING, in this process
            with pytest.MonkeyPatch.context() as env:
                for name, value in MANY_VARS.items():
                    env.setenv(name, value)
                runstore.open(store).set_setting("kl_threshold", 0.05)

        then_all_is_well(store, tree, want, again)
        assert runstore.open(store).settings()["kl_threshold"] == 0.05
        shutil.rmtree(store)


MIGRATE = '''
import sys
from pathlib import Path
from runstore.storage import versions
from runstore.cli import main
versions.migrations_dir = lambda: Path(sys.argv[2])
main(["--store", sys.argv[1], "migrate"])
'''
LATER_MIGRATION = '''"""Add `runs.note` and `spans.note` (test-only migration)."""


def migrate(ctx):
    ctx.add_columns("runs", [("note", "string")])
    ctx.add_columns("spans", [("note", "string")])
'''


@pytest.mark.slow
def test_sigkill_at_every_phase_of_migrate(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The v1 fixture store (its sources are gone: an ingest would only mark its runs
    missing) upgraded by a test migration that alters two tables."""
    from deltalake import DeltaTable

    from runstore import resources
    from runstore.storage import versions

    fixture = Path(__file__).parents[1] / "fixtures" / "store_v1"
    later = tmp_path / "migrations"
    shutil.copytree(resources.migrations_dir(), later)
    shipped = [m.name for m in versions.available()][1:]  # those after 0001_initial
    last = versions.latest_version() + 1
    notes = f"{last:04d}_notes"
    (later / f"{notes}.py").write_text(LATER_MIGRATION)
    monkeypatch.setattr(versions, "migrations_dir", lambda: later)  # this process reads v2 too
    before = storekit.digest(fixture)

    def cmd(store: Path) -> list[str]:
        return [sys.executable, "-c", MIGRATE, str(store), str(later)]

    ref = copy_of(fixture, tmp_path, "ref")
    reached = storekit.points_reached(cmd(ref), dict(os.environ), tmp_path / "points")
    # A shipped migration fills a column for the stored rows (0003: spans.wall_add_s): the
    # rows after an uninterrupted migrate are what every killed one must end with.
    want = storekit.digest(ref)
    # Every pause inside the migrations (each one's table writes, one after another), the
    # lock and the publish at their first and last.
    points = spread_points(reached, ("locked", "publish"))
    points += [f"migrate:{k}" for k in range(1, reached.get("migrate", 0) + 1)]
    assert reached.get("migrate", 0) >= 2 * len(shipped), reached
    for i, point in enumerate(points):
        store = copy_of(fixture, tmp_path, f"store{i}")
        assert storekit.kill_at(cmd(store), dict(os.environ), point), point
        assert runstore.open(store).manifest().schema_version in (1, last)
        assert storekit.digest(store) in (before, want), point  # all or nothing
        # MIGRATE, in this process (which reads the migrations from `later` too).
        succeeds(store, "migrate")
        then_all_is_well(store, None, want, lambda: succeeds(store, "migrate"))
        m = runstore.open(store).manifest()
        assert m.schema_version == last
        assert [x["name"] for x in m.migrations] == ["0001_initial", *shipped, notes]
        for t in ("runs", "spans"):
            assert "note" in DeltaTable(str(store / "tables" / t)).schema().to_arrow().names
        shutil.rmtree(store)


def test_a_new_table_left_by_a_killed_writer_is_invisible_then_removed(tmp_path: Path) -> None:
    """What a writer killed before publishing leaves of a table no snapshot lists yet (the
    store_v6 fixture: 0008 creates `samples` and `run_logs`): a log without a commit (killed
    inside the create), an empty table (killed after it). Readers do not see it, the next
    writer deletes it and `migrate` completes. A table holding rows that no snapshot lists is
    a lost snapshot entry: an error naming `runstore repair`, and the table is kept."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    fixture = Path(__file__).parents[1] / "fixtures" / "store_v6"
    count = "select count(*) as n from runs"
    runs = runstore.open(fixture).arrow(count).to_pylist()

    store = copy_of(fixture, tmp_path, "killed")
    log = store / "tables" / "samples" / "_delta_log"
    log.mkdir(parents=True)
    (log / "_commit_0a1b.json.tmp").write_text('{"protocol"')
    DeltaTable.create(str(store / "tables" / "run_logs"), schema=pa.schema([("run_id", pa.string())]))
    assert runstore.open(store).arrow(count).to_pylist() == runs
    p = subprocess.run(runstore_cmd(store, "migrate"), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    migrated = runstore.open(store)
    assert {"samples", "run_logs"} <= set(migrated.manifest().tables)
    assert migrated.arrow("select (select count(*) from samples) + (select count(*) from "
                          "run_logs) as n").to_pylist() == [{"n": 0}]

    lost = copy_of(fixture, tmp_path, "lost")
    write_deltalake(str(lost / "tables" / "samples"), pa.table({"run_id": ["a run"]}))
    with pytest.raises(StoreCorrupt, match="does not list table samples"):
        runstore.open(lost).arrow(count)
    p = subprocess.run(runstore_cmd(lost, "migrate"), capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and "runstore repair" in p.stderr, p.stderr
    assert DeltaTable(str(lost / "tables" / "samples")).file_uris()


@pytest.mark.slow
def test_sigkill_at_every_phase_of_repair(_small_template: Path, shared_small_store: Path,
                                          tmp_path: Path) -> None:
    """A store with three kinds of damage (a bit-rotten data file, a lost Delta log entry, a
    corrupt ledger), repaired by a process killed at each of its steps; the next repair ends
    exactly where an uninterrupted one does, and the next ingest restores every row."""
    template = copy_store(shared_small_store, tmp_path / "template")  # _small_template, ingested
    whole = storekit.digest(template)
    m = read_manifest(template)
    storekit.flip_silently(template / m.tables["spans"]["files"][0])
    sorted((template / "tables" / "trajectories" / "_delta_log").glob("*.json"))[-1].unlink()
    (template / m.ledger).write_bytes(b"PAR1 not a parquet file")
    damaged = storekit.digest(template)  # it still answers: bit rot is silent to queries

    reference = copy_of(template, tmp_path, "reference")
    assert runstore.open(reference).repair().snapshot is not None
    repaired = storekit.digest(reference)
    assert repaired != damaged
    reached = storekit.points_reached(runstore_cmd(copy_of(template, tmp_path, "ref2"),
                                                   "repair"), dict(os.environ),
                                      tmp_path / "points")
    points = spread_points(reached, ("repair", "publish"))
    assert len(points) >= 4, reached
    for i, point in enumerate(points):
        store = copy_of(template, tmp_path, f"store{i}")
        assert storekit.kill_at(runstore_cmd(store, "repair"), dict(os.environ), point), point
        try:  # as before the repair, or as after it; or refused, cleanly, by name
            assert storekit.digest(store) in (damaged, repaired), point
        except StoreCorrupt as e:
            assert "runstore repair" in str(e)
        succeeds(store, "repair")
        assert storekit.digest(store) == repaired, point
        assert runstore.open(store).repair(check=True).problems == []
        runstore.open(store).ingest([_small_template])
        assert storekit.digest(store) == whole, point
        storekit.delta_matches_manifest(store)
        shutil.rmtree(store)


# ---------------------------------------------------------------------------------------------
# Kills during the ingest of a large token-level capture file (issue 32): the file is read and
# normalized for seconds, in chunks, before its rows are staged and committed.

CAPTURE_VARS = {"RUNSTORE_BATCH_ROWS": "2000"}
CAPTURE_ENV = {**ENV, **CAPTURE_VARS}


def capture_fingerprint(store: runstore.Store) -> dict[str, tuple[int, int]]:
    """Rows and an order-free hash of every row of the capture tables."""
    return {t: store.sql(f"select count(*) as n, bit_xor(hash(x)) as h from {t} as x").row(0)
            for t in ("samples", "capture_events")}


@pytest.fixture(scope="module")
def capture_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with a ~40 MB capture file, then a small run after it (in discovery order)."""
    root = tmp_path_factory.mktemp("capture") / "runs"
    for name in ("a_capture", "b_after"):
        (root / name).mkdir(parents=True)
        (root / name / "config.json").write_text('{"loss_fn": "ppo"}\n')
        (root / name / "metrics.jsonl").write_text('{"step": 0, "env/all/reward/total": 0.5}\n')
    (root / "a_capture" / "capture").mkdir()
    demo.write_capture(root / "a_capture" / "capture" / "sample.jsonl", 40_000_000, seed=3)
    # Written now, the runs would be `running` for two minutes and then `idle`: an ingest
    # after that rewrites their rows, which is not what the last check looks for.
    storekit.age_tree(root)
    return root


@pytest.mark.slow
def test_sigkill_during_the_ingest_of_a_large_capture_file(capture_tree: Path,
                                                           tmp_path: Path) -> None:
    before = oracle.fingerprint(capture_tree)
    want = oracle.expected_counts_of(capture_tree, TABLES)
    reference = tmp_path / "reference"
    started = time.monotonic()
    p = subprocess.run(command(reference, capture_tree), env=CAPTURE_ENV, capture_output=True,
                       text=True, timeout=600)
    duration = time.monotonic() - started
    assert p.returncode == 0, p.stderr
    assert counts(runstore.open(reference)) == want and want["samples"] > 1000
    ref_print = capture_fingerprint(runstore.open(reference))

    rng = random.Random(20260926)
    delays = sorted(rng.uniform(0.2, duration) for _ in range(4))
    points = ["parse:1", "write:1", "ledger:1", "publish:1"]
    for i, moment in enumerate([*delays, *points]):
        store = tmp_path / f"store{i}"
        if isinstance(moment, float):
            kill_after(store, capture_tree, moment)
        else:
            assert storekit.kill_at(command(store, capture_tree), CAPTURE_ENV, moment, 600), moment
        consistent_counts(store, want)
        succeeds(store, "ingest", "-q", str(capture_tree), env=CAPTURE_VARS)
        s = runstore.open(store)
        assert counts(s) == want, f"after a kill at {moment}"
        assert capture_fingerprint(s) == ref_print, f"after a kill at {moment}"
        again = s.ingest([capture_tree])
        assert not any(again.rows_added.values())
        shutil.rmtree(store)
    assert oracle.fingerprint(capture_tree) == before
