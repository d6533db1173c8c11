"""The `metrics` view (sql/metrics.sql) against tests/oracle.py's live writes.

The view applies its latest-write rule only to the (run, key) pairs the per-key summary
(`metric_keys`) says need it, and keeps every other pair's writes as they are. Whatever the
summary says, each (run, step, key) must come out once, with the value of its last write in
metrics.jsonl: checked on the demo and awkward trees, and on random histories (hypothesis) with
repeated steps, strings, NaN, step-less rows and `pre_resume` copies, ingested in one go or
appended to between ingests (so a run's summary has several reads, some that log steps again).
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oracle
from conftest import examples
from test_kl_steps import _jsonl  # metrics.jsonl text of (step, values) lines
import runstore

CASES = int(os.environ.get("METRICS_VIEW_CASES", examples(40)))


def shown(value: Any) -> tuple[str, Any]:
    """A metrics.jsonl value as the view holds it: ('n', number) or ('s', text)."""
    if isinstance(value, bool):
        return ("s", "true" if value else "false")
    if isinstance(value, (int, float)):
        return ("n", "nan" if math.isnan(value) else float(value))
    if isinstance(value, str):
        return ("s", value)
    return ("s", json.dumps(value, separators=(",", ":")))


def view_rows(store: runstore.Store) -> dict[tuple[str, int, str], tuple[str, Any]]:
    out: dict[tuple[str, int, str], tuple[str, Any]] = {}
    for r in store.arrow("select run_name, step, key, value, value_str from metrics").to_pylist():
        k = (r["run_name"], r["step"], r["key"])
        assert k not in out, f"{k} came out twice"
        v = r["value"]
        out[k] = ("n", "nan" if math.isnan(v) else v) if v is not None else ("s", r["value_str"])
    return out


def oracle_rows(root: Path, runs: list[str]) -> dict[tuple[str, int, str], tuple[str, Any]]:
    return {(name, step, key): shown(value) for name in runs
            for (step, key), value in oracle.live_metrics(root / name).items()}


def assert_live(store: runstore.Store, root: Path) -> None:
    got = view_rows(store)
    runs = [r["run_name"] for r in store.arrow("select run_name from runs").to_pylist()]
    want = oracle_rows(root, runs)
    assert got.keys() == want.keys()
    for k, v in want.items():
        if v[0] == "s" and v[1].startswith(("[", "{")):
            assert got[k][0] == "s", k  # nested values: stored as JSON text of their own form
            continue
        assert got[k] == v, (k, got[k], v)


@pytest.mark.parametrize("name", ["demo", "awkward"])
def test_metrics_view_is_the_last_write_of_each_step(request: pytest.FixtureRequest,
                                                     name: str) -> None:
    root = request.getfixturevalue(f"_{name}_template")
    store = runstore.open(request.getfixturevalue(f"shared_{name}_store"))
    # The trees hold pairs of both kinds: the rule has work to do and work to skip.
    merged = store.arrow(
        "select count(*) filter (where n > n_steps) as merged, count(*) as pairs from ("
        " select run_id, key, count(*) as n, count(distinct step) as n_steps from metrics_raw"
        " where step is not null and not coalesce(pre_resume, false) group by all)").to_pylist()
    assert 0 < merged[0]["merged"] < merged[0]["pairs"]
    assert_live(store, root)


KEYS = ["env/all/reward/total", "optim/lr", "optim/kl_sample_train_v1", "test/env/all/format"]
VALUES = st.one_of(st.sampled_from([0.0, 1.5, -2.0, math.nan, math.inf, -math.inf, "n/a", True,
                                    False, None, 7]),
                   st.floats(-10, 10, allow_nan=False))
LINES = st.lists(st.tuples(st.one_of(st.integers(0, 8), st.none()),
                           st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4)),
                 max_size=20)


@pytest.mark.slow
@settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(runs=st.lists(st.tuples(st.lists(LINES, min_size=1, max_size=3),
                               st.one_of(st.none(), LINES)), min_size=1, max_size=3))
def test_random_histories_live_values_match_the_oracle(
        tmp_path_factory: pytest.TempPathFactory, runs: list) -> None:
    base = tmp_path_factory.mktemp("metrics_view")
    root = base / "runs"
    store = runstore.open(base / "store")
    reads = max(len(parts) for parts, _ in runs)
    for i, (_, pre_resume) in enumerate(runs):
        (root / f"run_{i}").mkdir(parents=True)
        if pre_resume is not None:
            (root / f"run_{i}" / "metrics.jsonl.pre_resume_000005").write_text(_jsonl(pre_resume))
    for n in range(reads):  # each run's metrics.jsonl grows by one part between ingests
        for i, (parts, _) in enumerate(runs):
            if n < len(parts):
                with open(root / f"run_{i}" / "metrics.jsonl", "a") as f:
                    f.write(_jsonl(parts[n]))
        store.ingest([root], on_warning=lambda text: None)
        assert_live(store, root)
    shutil.rmtree(base)


def test_a_step_logged_again_in_a_later_read_is_merged(tmp_path: Path) -> None:
    # Each read logs every step once, so only `steps_exact` tells that step 1 was logged twice.
    run = tmp_path / "runs" / "resumed"
    run.mkdir(parents=True)
    store = runstore.open(tmp_path / "store")
    metrics = run / "metrics.jsonl"
    metrics.write_text(_jsonl([(0, {"optim/lr": 1.0}), (1, {"optim/lr": 2.0})]))
    store.ingest([tmp_path / "runs"], on_warning=lambda text: None)
    with open(metrics, "a") as f:
        f.write(_jsonl([(1, {"optim/lr": 3.0}), (2, {"optim/lr": 4.0})]))
    store.ingest([tmp_path / "runs"], on_warning=lambda text: None)
    assert store.arrow("select step, value from metrics order by step").to_pylist() == [
        {"step": 0, "value": 1.0}, {"step": 1, "value": 3.0}, {"step": 2, "value": 4.0}]
    assert_live(store, tmp_path / "runs")
