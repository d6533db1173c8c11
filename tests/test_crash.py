"""kill -9 during an ingest: the store still answers, and the next ingest completes it.

Two ways of choosing the moment, both seeded:

* `test_sigkill_at_every_phase`: 20 points drawn over the four phases of an ingest
  (discovery, parsing, writing Delta versions, committing: compaction, ledger, manifest). The
  library's test-only hook (`tables.pause_point`, docs/reliability.md) makes the process stop
  at the N-th time it reaches a phase and say so; the test SIGKILLs it there. Some recovering
  ingests are killed again in the middle of their rollback.
* `test_sigkill_at_random_moments`: SIGKILL after a random delay (between 0.05 s and the
  duration of an uninterrupted ingest), wherever that lands.

`$RUNSTORE_BATCH_ROWS` is set small so a process publishes many snapshots, and
`$RUNSTORE_COMPACT_FILES` small so commits also compact. After each kill the store must answer
a query with a consistent snapshot (or not exist yet, when the kill came before the first
snapshot), and a final ingest must leave exactly the row counts of an uninterrupted ingest,
which themselves equal the counts the oracle computes from the files.
"""

from __future__ import annotations

import os
import random
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import oracle
import runstore
from runstore import demo, tables
from runstore.errors import StoreNotFound

TABLES = ("runs", "config", "metrics_raw", "checkpoints", "trajectories", "rollout_steps",
          "conversations", "messages", "spans", "trace_slices")
KILLS = 6
ENV = {**os.environ, "RUNSTORE_BATCH_ROWS": "20000"}


def counts(store: runstore.Store) -> dict[str, int]:
    q = " union all ".join(f"select '{t}' as t, count(*) as n from {t}" for t in TABLES)
    return {r["t"]: r["n"] for r in store.arrow(q).to_pylist()}


def command(store: Path, tree: Path) -> list[str]:
    return [sys.executable, "-m", "runstore", "--store", str(store), "ingest", "-q", str(tree)]


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
    want = {t: oracle.expected_counts(big_tree).get(t, 0) for t in TABLES}

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
        p = subprocess.run(command(store, big_tree), env=ENV, capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0, p.stderr
        s = runstore.open(store)
        assert counts(s) == ref_counts, f"after a kill at {delay:.2f} s"
        again = s.ingest([big_tree])
        assert not any(again.rows_added.values()) and again.runs_unchanged == want["runs"]
        shutil.rmtree(store)
    assert oracle.fingerprint(big_tree) == before


# ---------------------------------------------------------------------------------------------
# Kills at chosen phases

POINTS = 20
# The four phases of an ingest and the hook names inside each (see tables.pause_point).
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
    env = {**PHASE_ENV, "RUNSTORE_TEST_PAUSE": point}
    with subprocess.Popen(command(store, tree), env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], timeout)
        line = proc.stderr.readline() if ready else ""
        if line.strip() == f"paused at {point}":
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        if not ready:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            pytest.fail(f"ingest neither paused at {point} nor finished in {timeout} s")
        rest = proc.stderr.read()
        proc.wait()
    assert proc.returncode == 0, line + rest
    return False


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
        for t in TABLES if t != "runs"))["n"].sum()
    assert orphans == 0
    return got


def delta_matches_manifest(store_path: Path) -> None:
    """After a completed ingest every Delta table is at the state its manifest lists."""
    from deltalake import DeltaTable

    m = tables.read_manifest(store_path)
    assert m is not None
    for name, entry in m.tables.items():
        dt = DeltaTable(str(store_path / "tables" / name))
        live = sorted(os.path.relpath(u.removeprefix("file://"), store_path.resolve())
                      for u in dt.file_uris())
        assert live == sorted(entry["files"]), name


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
    want = {t: oracle.expected_counts(phase_tree).get(t, 0) for t in TABLES}

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
        delta_matches_manifest(store)
        again = s.ingest([phase_tree])
        assert not any(again.rows_added.values()) and again.runs_unchanged == want["runs"]
        assert again.snapshots == 0
        shutil.rmtree(store)
    print(f"killed at {', '.join(points)}; {recovered} rollbacks killed too")
    assert recovered >= 1
    assert oracle.fingerprint(phase_tree) == before
