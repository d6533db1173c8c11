"""The summaries the ingest keeps beside `metrics_raw` (`metric_keys.max_value`,
`metric_keys.n_step_numbers`, `metric_steps`, `metric_kl`) and every answer read from them.

Each answer that now comes from a summary — `run_summary`'s steps, KL and reward columns, every
key's `last_steps`, `run_status.done_frac`, every `kl_steps` row (read from `metric_kl`: an
append that logs KL at steps an earlier read logged reads its file again), which runs `kl_health
where flagged` looks at and how many runs `runstore check` says it checked — is compared with
tests/oracle.py's recomputation from the source files, on random metric histories (hypothesis)
that arrive in several appends with an ingest after each (so the summaries are made of several
reads per file), with repeated and decreasing steps, step-less rows, strings, NaN, ±Infinity,
both KL spellings and `pre_resume` copies. A store migrated from before the summaries existed,
and one read without migrating (the summaries computed at query time), answer the same.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import oracle
from conftest import examples
import runstore
from runstore.health.evaluate import check

FIXTURE = Path(__file__).parents[1] / "fixtures" / "store_v1"
CASES = int(os.environ.get("SUMMARY_CASES", examples(40)))
REWARD = "env/all/reward/total"
DONE = "progress/done_frac"
KL = ["optim/kl_sample_train_v1", "kl_sample_train_v1", "optim/kl_sample_train_v2",
      "kl_sample_train_v2"]
KEYS = KL + [REWARD, DONE, "optim/entropy"]
VALUES = st.one_of(
    st.sampled_from([0.0, 0.005, 0.01, 0.0101, 0.02, 0.5, 1.0, 1.5, -0.01, math.nan, math.inf,
                     -math.inf, "n/a", True]),
    st.floats(-1, 2, allow_nan=False))
# Steps mostly rising, as a log grows, with repeats and steps below the largest mixed in:
# each line's step is the previous one moved by a small amount (or the line has none).
LINE = st.tuples(st.one_of(st.sampled_from([1, 1, 1, 0, -1, -4, 2]), st.none()),
                 st.dictionaries(st.sampled_from(KEYS), VALUES, min_size=1, max_size=4))
HISTORY = st.lists(LINE, max_size=30)


def _lines(lines: list[tuple[int | None, dict[str, Any]]]) -> list[str]:
    out = []
    at = 0
    for move, values in lines:
        step = None if move is None else max(0, at + move)
        at = at if step is None else step
        row: dict[str, Any] = {} if step is None else {"step": step}
        row.update(values)
        out.append(json.dumps(row) + "\n")  # bare NaN / Infinity, as tinker-cookbook writes
    return out


def _at(step: int, values: dict[str, Any]) -> str:
    return json.dumps({"step": step, **values}) + "\n"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9,
                                                                 abs_tol=1e-12)
    return a == b


SUMMARY_COLUMNS = ("n_steps", "last_step", "max_kl", "kl_flagged", "best_reward",
                   "last_reward_ma10")


def assert_summaries(store: runstore.Store, root: Path) -> None:
    """Every summary-fed answer against the oracle's recomputation from the files."""
    want = oracle.run_summary(root)
    got = {r["run_name"]: r for r in store.runs().to_dicts()}
    assert set(got) == set(want)
    for name, row in want.items():
        for c in SUMMARY_COLUMNS:
            assert _same(got[name][c], row[c]), (name, c, got[name][c], row[c])
    # run_status.done_frac: the largest non-NaN live progress/done_frac, any write counting.
    status = {r["run_name"]: r["done_frac"]
              for r in store.sql("select run_name, done_frac from run_status").to_dicts()}
    for run in oracle.run_dirs(root):
        values = [float(v) for _, k, v, _ in oracle.metric_rows(run / "metrics.jsonl")
                  if k == DONE and oracle._is_number(v) and not math.isnan(float(v))]
        assert _same(status[oracle.run_name(root, run)], max(values) if values else None)
    # Which runs check counts as checked: those with a numeric live KL write at a step.
    checked = sum(1 for run in oracle.run_dirs(root)
                  if any(s is not None and k in KL and oracle._is_number(v)
                         for s, k, v, _ in oracle.metric_rows(run / "metrics.jsonl")))
    result = check(store, config=False)
    assert result.checked == (checked,)
    flagged = {n for n, r in oracle.kl_health(root).items() if r["flagged"]}
    assert set(result.table.column("run_name").to_pylist()) == flagged
    # Every KL step, merged at ingest read by read, as the oracle merges the whole file.
    steps = {(r.pop("run_name"), r.pop("step")): r for r in store.arrow(
        "select r.run_name, k.step, k.v1, k.v2, k.is_nan, k.is_over "
        "from kl_steps as k join runs as r using (run_id)").to_pylist()}
    want_steps = oracle.kl_steps(root)
    assert sorted(steps, key=repr) == sorted(want_steps, key=repr)
    for at, row in want_steps.items():
        assert all(_same(steps[at][c], v) or (v is None and steps[at][c] is None)
                   for c, v in row.items()), (at, steps[at], row)
    assert set(store.sql("select run_name from kl_health where flagged")["run_name"]) == flagged
    assert_last_steps(store, root)


def assert_last_steps(store: runstore.Store, root: Path) -> None:
    """Every key's `last_steps` rows against the oracle's 10 last live numbers of each run."""
    got: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for r in store.sql("select r.run_name, l.key, l.step, l.value, l.nth_last "
                       "from last_steps as l join runs as r using (run_id) "
                       "order by r.run_name, l.key, l.nth_last").to_dicts():
        points = got.setdefault((r["run_name"], r["key"]), [])
        points.append((r["step"], r["value"]))
        assert r["nth_last"] == len(points), r
    want = oracle.last_steps(root)
    assert sorted(got) == sorted(want)
    for at, points in want.items():
        assert [s for s, _ in got[at]] == [s for s, _ in points], (at, got[at], points)
        assert all(_same(a, b) for (_, a), (_, b) in zip(got[at], points)), (at, got[at], points)


def _metric_keys_facts(store: runstore.Store) -> dict[tuple[str, str, bool], tuple]:
    rows = store.sql("""
        select r.run_name, k.key, k.pre_resume, max(k.max_value) as max_value,
               sum(k.n_step_numbers)::bigint as n_step_numbers
        from metric_keys as k join runs as r using (run_id)
        group by all""").to_dicts()
    return {(r["run_name"], r["key"], r["pre_resume"]): (r["max_value"], r["n_step_numbers"])
            for r in rows}


def _expected_key_facts(root: Path) -> dict[tuple[str, str, bool], tuple]:
    out: dict[tuple[str, str, bool], tuple] = {}
    for run in oracle.run_dirs(root):
        for f in sorted(run.iterdir()):
            pre = f.name.startswith("metrics.jsonl.pre_resume_")
            if f.name != "metrics.jsonl" and not pre:
                continue
            rows = oracle.metric_rows(f)
            for key in {k for _, k, _, _ in rows}:
                numbers = [float(v) for _, k, v, _ in rows if k == key and oracle._is_number(v)]
                finite = [v for v in numbers if not math.isnan(v)]
                out[(oracle.run_name(root, run), key, pre)] = (
                    max(finite) if finite else None,
                    sum(1 for s, k, v, _ in rows
                        if k == key and s is not None and oracle._is_number(v)))
    return out


@pytest.mark.slow
@settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(runs=st.lists(st.tuples(HISTORY, st.lists(st.integers(1, 29), max_size=2),
                               st.one_of(st.none(), HISTORY)), min_size=1, max_size=3))
def test_summaries_answer_what_the_files_say_after_every_append(
        tmp_path_factory: pytest.TempPathFactory, runs: list) -> None:
    base = tmp_path_factory.mktemp("summaries")
    root, store_path = base / "runs", base / "store"
    plans = []
    for i, (history, cuts, pre_resume) in enumerate(runs):
        run = root / f"run_{i}"
        run.mkdir(parents=True)
        lines = _lines(history)
        bounds = sorted({min(c, len(lines)) for c in cuts} | {len(lines)})
        plans.append((run, lines, bounds))
        (run / "metrics.jsonl").write_text("")
        if pre_resume is not None:
            (run / "metrics.jsonl.pre_resume_000005").write_text("".join(_lines(pre_resume)))
    store = runstore.open(store_path)
    for part in range(3):  # each run's lines in up to three appends, an ingest after each
        for run, lines, bounds in plans:
            start = 0 if part == 0 else bounds[min(part, len(bounds)) - 1]
            end = bounds[min(part, len(bounds) - 1)]
            if part < len(bounds) and end > start:
                with open(run / "metrics.jsonl", "a") as f:
                    f.write("".join(lines[start:end]))
        store.ingest([root], on_warning=lambda text: None)
        assert_summaries(store, root)
    assert _metric_keys_facts(store) == _expected_key_facts(root)
    shutil.rmtree(base)


# A plain reward history: each step once, rising by a random gap, the reward NaN or a string
# at some steps and absent at others (the line logs another key): `last_steps` (and so
# `run_summary`) reads a plain run's rewards only from a step its summary puts at or below
# the 10th-last number.
PLAIN_LINE = st.tuples(st.one_of(st.just(1), st.integers(1, 6)),
                       st.one_of(st.floats(-1, 2, allow_nan=False), st.just(math.nan),
                                 st.just("n/a"), st.none()))


@pytest.mark.slow
@settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(runs=st.lists(st.tuples(st.integers(0, 50), st.lists(PLAIN_LINE, max_size=40),
                               st.integers(0, 40)), min_size=1, max_size=3))
# Without gaps the 10th-last reward step is exactly `first + n - 10`: a bound one step too
# high leaves it out; nor do strings at the last steps count among the n.
@example(runs=[(3, [(1, float(i)) for i in range(12)], 5)])
@example(runs=[(0, [(1, float(i)) for i in range(12)] + [(1, "n/a")] * 3, 15)])
def test_a_plain_runs_latest_rewards_are_found_whatever_the_gaps(
        tmp_path_factory: pytest.TempPathFactory, runs: list) -> None:
    base = tmp_path_factory.mktemp("plain")
    root = base / "runs"
    plans = []
    for i, (first, history, cut) in enumerate(runs):
        lines, step = [], first
        for gap, reward in history:
            values = {"optim/entropy": 1.0} if reward is None else {REWARD: reward}
            lines.append(_at(step, values))
            step += gap
        run = root / f"run_{i}"
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_text("".join(lines[:cut]))
        plans.append((run, lines[cut:]))
    store = runstore.open(base / "store")
    store.ingest([root], on_warning=lambda text: None)
    for run, rest in plans:  # the rest as an append: two reads of one file
        with open(run / "metrics.jsonl", "a") as f:
            f.write("".join(rest))
    store.ingest([root], on_warning=lambda text: None)
    want = oracle.run_summary(root)
    got = {r["run_name"]: r for r in store.runs().to_dicts()}
    for name, row in want.items():
        for c in ("best_reward", "last_reward_ma10", "n_steps", "last_step"):
            assert _same(got[name][c], row[c]) or got[name][c] == row[c], (name, c, got[name][c],
                                                                           row[c])
    assert_last_steps(store, root)
    shutil.rmtree(base)


def test_a_step_logged_again_below_the_largest_is_recounted(tmp_path: Path) -> None:
    """An append that logs steps the file logged before (an old-style resume) is not added to
    the count: `metric_steps` marks the read inexact and `run_summary` recounts that run."""
    run = tmp_path / "runs" / "resumed"
    run.mkdir(parents=True)
    path = run / "metrics.jsonl"
    path.write_text("".join(_at(s, {REWARD: 0.1 * s}) for s in range(10)))
    store = runstore.open(tmp_path / "store")
    store.ingest([tmp_path / "runs"])
    with open(path, "a") as f:  # steps 5..12 again, then on: 13 distinct steps in all
        f.write("".join(_at(s, {REWARD: 1.0}) for s in range(5, 13)))
    store.ingest([tmp_path / "runs"])
    reads = store.sql("select n_steps, steps_exact from metric_steps order by first_step")
    assert reads.rows() == [(10, True), (8, False)]
    row = store.runs().row(0, named=True)
    assert (row["n_steps"], row["last_step"]) == (13, 12)
    # The line repeating the largest step (an eval line after its training line) is exact.
    with open(path, "a") as f:
        f.write(_at(12, {"test/x": 1.0}) + _at(13, {REWARD: 2.0}))
    store.ingest([tmp_path / "runs"])
    assert store.sql("select n_steps, steps_exact from metric_steps order by first_step "
                     "desc limit 1").rows() == [(1, True)]
    row = store.runs().row(0, named=True)
    assert (row["n_steps"], row["last_step"]) == (14, 13)


def test_old_snapshots_answer_the_same_unmigrated_and_migrated(tmp_path: Path) -> None:
    """A store written before the summaries existed (the schema-version-1 fixture) answers
    the same read as it is (the summaries computed from `metrics_raw` at query time) and after
    `migrate` has stored them; both agree with the counts taken from `metrics_raw` directly."""
    old = tmp_path / "store_v1"
    shutil.copytree(FIXTURE, old)
    before = runstore.open(old)
    assert before.manifest().schema_version == 1
    queries = ["select * exclude (status) from run_summary order by run_id",
               "select * from kl_health order by run_id",
               "select run_id, done_frac from run_status order by run_id",
               "select * exclude (steps_exact) from metric_keys order by all"]
    unmigrated = [before.sql(q) for q in queries]
    direct = before.sql("""
        select run_id, count(distinct step) as n_steps, max(step) as last_step
        from metrics_raw where step is not null and not coalesce(pre_resume, false)
        group by run_id order by run_id""")
    assert direct.height > 0
    assert unmigrated[0].select(["run_id", "n_steps", "last_step"]).filter(
        unmigrated[0]["n_steps"].is_not_null()).equals(direct)
    checked = check(before, config=False).checked
    assert "0004_kl_and_step_summaries" in runstore.open(old).migrate()
    after = runstore.open(old)
    assert "metric_steps" in after.manifest().tables
    assert after.sql("select count(*) as n from metric_steps")["n"][0] > 0
    for q, want in zip(queries, unmigrated):
        assert after.sql(q).equals(want), q
    assert check(after, config=False).checked == checked


def test_an_append_logging_kl_at_earlier_steps_reads_the_file_again(tmp_path: Path) -> None:
    """`metric_kl` merges each read alone, so a read that logs KL at a step an earlier read
    logged cannot be merged by itself: a later unprefixed write must not beat an earlier
    prefixed number. The ingest reads the whole file again instead, its earlier rows replaced
    (no row twice), and the next plain append is read as an append."""
    run = tmp_path / "runs" / "resumed"
    run.mkdir(parents=True)
    path = run / "metrics.jsonl"
    path.write_text("".join(_at(s, {KL[0]: 0.001, REWARD: 0.1}) for s in range(10)))
    store = runstore.open(tmp_path / "store")
    store.ingest([tmp_path / "runs"])
    with open(path, "a") as f:  # step 5 again, unprefixed and over; then step 10, prefixed
        f.write(_at(5, {KL[1]: 0.9}) + _at(10, {KL[0]: 0.002}))
    report = store.ingest([tmp_path / "runs"])
    kl = store.sql("select step, v1, is_over from kl_steps order by step").rows()
    assert kl == [(s, 0.001, False) for s in range(10)] + [(10, 0.002, False)]
    lines = path.read_text().splitlines()
    n_written = sum(len(json.loads(line)) - 1 for line in lines)  # keys besides `step`
    assert store.sql("select count(*) from metrics_raw").item() == n_written
    assert report.rows_added["metrics_raw"] == n_written  # the whole file, read again
    assert store.sql("select count(*) from metric_kl").item() == 11
    with open(path, "a") as f:
        f.write(_at(11, {KL[0]: 0.5}))
    report = store.ingest([tmp_path / "runs"])
    assert report.rows_added["metrics_raw"] == 1
    assert store.sql("select step from kl_steps where is_over").rows() == [(11,)]


def test_nan_in_a_parquet_chunk_without_nulls_is_nan(tmp_path: Path) -> None:
    """Parquet's min/max leave NaN out; DuckDB then takes a float column chunk with no null for
    NaN-free and folds `isnan(x)` to false (duckdb issues 7803, 25521). The store's tables are
    read with `can_have_nan`, so a NaN there is NaN to every query: never over the threshold."""
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(  # numbers only: `value`, `v1` have no null
        _at(0, {KL[0]: 0.5}) + _at(1, {KL[0]: math.nan}) + _at(2, {KL[0]: 0.001}))
    store = runstore.open(tmp_path / "store")
    store.ingest([tmp_path / "runs"])
    assert store.sql("select count(*) from metric_kl where v1 is null").item() == 0
    assert store.sql("select count(*) from metric_kl where isnan(v1)").item() == 1
    assert store.sql("select count(*) from metrics_raw where isnan(value)").item() == 1
    assert store.sql("select step, is_nan, is_over from kl_steps order by step").rows() == [
        (0, False, True), (1, True, False), (2, False, False)]
    assert store.sql("select nan_steps, steps_over from kl_health").rows() == [(1, 1)]
