"""runstore.analysis.keys: one row per metric key, checked against the metrics.jsonl files.

The scan path (today's stores) and the summary path (the `metric_keys` table the ingest will
keep) must both give the oracle's answer; the summary's incremental merge must equal the
summary of the whole file, and say so when it cannot know (a resume logging steps again).
"""

from __future__ import annotations

import doctest
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

import analysis_oracle as ao
import runstore
from runstore.analysis import keys as keys_mod
from runstore.errors import QueryError, UsageError


@pytest.fixture(scope="module")
def demo(_demo_template: Path, tmp_path_factory: pytest.TempPathFactory
         ) -> tuple[Path, runstore.Store]:
    store = runstore.open(tmp_path_factory.mktemp("keys_demo") / "store")
    store.ingest([_demo_template])
    return _demo_template, store


@pytest.fixture(scope="module")
def awkward(_awkward_template: Path, tmp_path_factory: pytest.TempPathFactory
            ) -> tuple[Path, runstore.Store]:
    store = runstore.open(tmp_path_factory.mktemp("keys_awkward") / "store")
    store.ingest([_awkward_template])
    return _awkward_template, store


@pytest.fixture(params=["demo", "awkward"])
def tree(request: pytest.FixtureRequest) -> tuple[Path, runstore.Store]:
    return request.getfixturevalue(request.param)


def as_dict(df) -> dict[str, tuple]:  # type: ignore[no-untyped-def]
    assert df.columns == list(keys_mod.COLUMNS)
    return {r[0]: tuple(r[1:]) for r in df.rows()}


def test_keys_match_the_files(tree: tuple[Path, runstore.Store]) -> None:
    root, store = tree
    got = as_dict(keys_mod.keys(store))
    want = ao.keys(root)
    assert got == want
    assert list(got) == sorted(got)


def test_awkward_values_are_typed(awkward: tuple[Path, runstore.Store]) -> None:
    got = as_dict(keys_mod.keys(awkward[1]))
    # DPO's state_path strings, and a key holding numbers in some runs and strings in others.
    assert got["state_path"][4] == "string"
    assert {t for *_, t in got.values()} >= {"number", "string"}


def test_runs_and_like_filter(demo: tuple[Path, runstore.Store]) -> None:
    root, store = demo
    scope = {n for n in ao.runs(root) if n.startswith("math_rl_sweep/")}
    got = as_dict(keys_mod.keys(store, runs="math_rl_sweep/*", like="REWARD"))
    want = {k: v for k, v in ao.keys(root, scope).items() if "reward" in k.lower()}
    assert got == want and got
    pattern = as_dict(keys_mod.keys(store, like="%/all/reward/total"))
    assert set(pattern) == {k for k in ao.keys(root) if k.endswith("/all/reward/total")
                            or k == "env/all/reward/total"}
    names = sorted(scope)[:2]
    assert as_dict(keys_mod.keys(store, runs=names)) == ao.keys(root, set(names))


def test_bad_scope_is_an_error_not_an_empty_answer(demo: tuple[Path, runstore.Store]) -> None:
    store = demo[1]
    with pytest.raises(QueryError, match="no run matches --runs 'nope/\\*'"):
        keys_mod.keys(store, runs="nope/*")
    with pytest.raises(QueryError, match="no run is named 'nope'"):
        keys_mod.keys(store, runs=["nope"])
    with pytest.raises(UsageError, match="like is some text"):
        keys_mod.keys(store, like="")
    assert keys_mod.keys(store, like="no such key").height == 0


def test_like_is_bound_not_pasted(demo: tuple[Path, runstore.Store]) -> None:
    # A quote in the text is just a character of it.
    assert keys_mod.keys(demo[1], like="'; drop table runs; --").height == 0
    assert demo[1].sql("select count(*) from runs").item() > 0


def test_doctests(demo: tuple[Path, runstore.Store]) -> None:
    result = doctest.testmod(keys_mod, extraglobs={"store": demo[1]})
    assert result.attempted >= 5 and result.failed == 0


# ---------------------------------------------------------------------------------------------
# The summary kept at ingest


def truth(rows: list[dict]) -> dict[str, list]:
    """Per key, from plain Python: distinct steps, min, max, numbers, strings, step-less."""
    out: dict[str, list] = {}
    for r in rows:
        s = out.setdefault(r["key"], [set(), 0, 0, 0])
        if r["step"] is None:
            s[3] += 1
        else:
            s[0].add(r["step"])
        s[1] += r["value"] is not None
        s[2] += r["value_str"] is not None
    return {k: [len(v[0]), min(v[0], default=None), max(v[0], default=None), v[1], v[2], v[3]]
            for k, v in out.items()}


row = st.fixed_dictionaries({
    "key": st.sampled_from(["a", "b", "c/d"]),
    "step": st.one_of(st.none(), st.integers(0, 30)),
    "kind": st.sampled_from(["num", "str"])})


def to_table(rows: list[dict]) -> pa.Table:
    return pa.table({
        "step": pa.array([r["step"] for r in rows], pa.int64()),
        "key": pa.array([r["key"] for r in rows], pa.string()),
        "value": pa.array([1.5 if r["kind"] == "num" else None for r in rows], pa.float64()),
        "value_str": pa.array(["x" if r["kind"] == "str" else None for r in rows], pa.string())})


@settings(max_examples=300, deadline=None)
@given(st.lists(row, max_size=60), st.lists(st.integers(0, 60), max_size=5))
def test_chunked_summary_equals_the_whole(rows: list[dict], cuts: list[int]) -> None:
    for r in rows:
        r["value"] = 1.5 if r["kind"] == "num" else None
        r["value_str"] = "x" if r["kind"] == "str" else None
    bounds = sorted({0, len(rows), *(c for c in cuts if c <= len(rows))})
    state: dict | None = None
    for lo, hi in zip(bounds, bounds[1:]):
        state = keys_mod.merge(state, keys_mod.summarize(to_table(rows[lo:hi])))
    state = state or {}
    want = truth(rows)
    assert set(state) == set(want)
    for key, (n, first, last, nums, strs, stepless, exact) in state.items():
        tn, tfirst, tlast, tnums, tstrs, tstepless = want[key]
        assert (first, last, nums, strs, stepless) == (tfirst, tlast, tnums, tstrs, tstepless)
        assert n >= tn
        if exact:
            assert n == tn
        # Exact is only given up when a later chunk logs the key at a step it already passed.
        steps_by_chunk = [[r["step"] for r in rows[lo:hi] if r["key"] == key
                           and r["step"] is not None] for lo, hi in zip(bounds, bounds[1:])]
        monotone, seen = True, None
        for steps in steps_by_chunk:
            if steps and seen is not None and min(steps) <= seen:
                monotone = False
            if steps:
                seen = max(steps) if seen is None else max(seen, max(steps))
        if monotone:
            assert exact and n == tn


def test_summary_path_gives_the_scan_answer(demo: tuple[Path, runstore.Store]) -> None:
    """Replays each metrics file in chunks through summarize/merge (as the ingest will), with
    a cut inside the pre-0.6 resume so one summary is inexact; keys over the summary table must
    equal the oracle's answer (the inexact pairs recounted from metrics_raw)."""
    root, store = demo
    raw = store.arrow("select run_id, source_id, step, key, value, value_str, seq, pre_resume "
                      "from metrics_raw order by run_id, source_id, seq")
    runs = store.arrow("select * from runs")
    parts = []
    inexact = 0
    by_source: dict[tuple, list[dict]] = {}
    for r in raw.to_pylist():
        by_source.setdefault((r["run_id"], r["source_id"], bool(r["pre_resume"])), []).append(r)
    for (run_id, source_id, pre), rows in by_source.items():
        table = pa.Table.from_pylist(rows)
        # Cut in thirds, and where the steps go back (the resume's second writes).
        cuts, top = {0, table.num_rows // 3, 2 * table.num_rows // 3, table.num_rows}, None
        for i, r in enumerate(rows):
            if r["step"] is not None:
                if top is not None and r["step"] < top:
                    cuts.add(i)
                top = r["step"] if top is None else max(top, r["step"])
        state: dict | None = None
        bounds = sorted(cuts)
        for lo, hi in zip(bounds, bounds[1:]):
            state = keys_mod.merge(state, keys_mod.summarize(table.slice(lo, hi - lo)))
        inexact += sum(not v[6] for v in (state or {}).values())
        parts.append(keys_mod.summary_table(run_id, source_id, pre, state or {}))
    assert inexact > 0  # math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5 logs steps 21.. twice
    fake = ao.SqlStore({"metric_keys": pa.concat_tables(parts), "runs": runs,
                        "metrics_raw": raw})
    assert as_dict(keys_mod.keys(fake)) == ao.keys(root)
    assert as_dict(keys_mod.keys(fake, runs="gsm8k_tool_rl/*", like="kl")) == {
        k: v for k, v in ao.keys(root, {n for n in ao.runs(root)
                                        if n.startswith("gsm8k_tool_rl/")}).items() if "kl" in k}


def test_scan_matches_the_summary_of_whole_files(demo: tuple[Path, runstore.Store]) -> None:
    # The SCAN statement (fallback and migration) and summarize() are one definition.
    store = demo[1]
    scan = {(r["source_id"], r["key"]): r for r in store.arrow(keys_mod.SCAN).to_pylist()}
    raw = store.arrow("select source_id, step, key, value, value_str from metrics_raw")
    for sid in {s for s, _ in scan}:
        rows = raw.filter(pa.compute.equal(raw.column("source_id"), sid))
        for key, stats in keys_mod.summarize(rows).items():
            r = scan[(sid, key)]
            assert stats == [r["n_points"], r["first_step"], r["last_step"], r["n_numbers"],
                             r["n_strings"], r["n_stepless"], True]
