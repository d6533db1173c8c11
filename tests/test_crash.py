"""kill -9 during an ingest: the store still answers, and the next ingest completes it.

A real `runstore ingest` process is killed with SIGKILL at seeded random moments (between
0.05 s and the duration of an uninterrupted ingest of the same tree). `$RUNSTORE_BATCH_ROWS`
is set small so the process publishes many snapshots and most kills land between or inside
Delta commits. After each kill the store must answer a query (or not exist yet, when the kill
came before the first snapshot); a second process is then killed the same way while it
recovers, and a final ingest must leave exactly the row counts of an uninterrupted ingest,
which themselves equal the counts the oracle computes from the files.
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

import pytest

import oracle
import runstore
from runstore import demo
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
