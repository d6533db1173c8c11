"""runstore.analysis.keys: one row per metric key, checked against the metrics.jsonl files.

Keys come from `metric_keys`, the summary the ingest keeps; chunked summaries must add up to
the whole file's and say so when they cannot know (a resume logging steps again); stores
ingested in steps (appends, resumes, rewrites: tests/analysis/test_analysis_keys_ingest.py) and v1
stores (before and after the migration) must give the oracle's answer.
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
from runstore.ingest import summaries
from runstore.query import keys as query_keys
from conftest import examples


@pytest.fixture(scope="module")
def demo(_demo_template: Path, shared_demo_store: Path) -> tuple[Path, runstore.Store]:
    return _demo_template, runstore.open(shared_demo_store)


@pytest.fixture(scope="module")
def awkward(_awkward_template: Path, shared_awkward_store: Path) -> tuple[Path, runstore.Store]:
    return _awkward_template, runstore.open(shared_awkward_store)


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
    assert result.attempted >= 3 and result.failed == 0


def test_logged_keys_and_keys_agree(tree: tuple[Path, runstore.Store]) -> None:
    # One summary answers both "which keys exist" (every command's check) and `keys`.
    store = tree[1]
    logged = query_keys.logged_keys(store)
    got = as_dict(keys_mod.keys(store))
    assert set(logged) == set(got)
    assert {k: len(v) for k, v in logged.items()} == {k: v[0] for k, v in got.items()}


# ---------------------------------------------------------------------------------------------
# The summary kept at ingest (ingest/summaries.py)


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
        "run_id": pa.array(["r"] * len(rows), pa.string()),
        "source_id": pa.array([7] * len(rows), pa.int64()),
        "pre_resume": pa.array([False] * len(rows), pa.bool_()),
        "step": pa.array([r["step"] for r in rows], pa.int64()),
        "key": pa.array([r["key"] for r in rows], pa.string()),
        "value": pa.array([1.5 if r["kind"] == "num" else None for r in rows], pa.float64()),
        "value_str": pa.array(["x" if r["kind"] == "str" else None for r in rows], pa.string()),
        "seq": pa.array(range(len(rows)), pa.int64())})


def added_up(parts: list[pa.Table]) -> dict[str, list]:
    """Per key: what a reader adds up from the chunk rows (n, first, last, numbers, strings,
    step-less, exact)."""
    out: dict[str, list] = {}
    for part in parts:
        for r in part.to_pylist():
            o = out.setdefault(r["key"], [0, None, None, 0, 0, 0, True])
            o[0] += r["n_points"]
            if r["first_step"] is not None:
                o[1] = r["first_step"] if o[1] is None else min(o[1], r["first_step"])
                o[2] = r["last_step"] if o[2] is None else max(o[2], r["last_step"])
            o[3] += r["n_numbers"]
            o[4] += r["n_strings"]
            o[5] += r["n_stepless"]
            o[6] = o[6] and r["steps_exact"]
    return out


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(row, max_size=60), st.lists(st.integers(0, 60), max_size=5),
       st.booleans())
def test_chunked_summary_adds_up_to_the_whole(rows: list[dict], cuts: list[int],
                                               read_before: bool) -> None:
    """Chunks summarised one after another (as appends are read) add up to the whole file's
    truth; distinct steps are exact unless a chunk went back to a step already passed (or
    the file was read before the summary existed: `read_before` drops the state)."""
    for r in rows:
        r["value"] = 1.5 if r["kind"] == "num" else None
        r["value_str"] = "x" if r["kind"] == "str" else None
    bounds = sorted({0, len(rows), *(c for c in cuts if c <= len(rows))})
    state: dict = {}
    parts = []
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        if read_before and i == 1:
            state.clear()  # the first chunk was read by a runstore without the summary
        found = summaries.of_read(to_table(rows[lo:hi]), state, fresh=lo == 0)
        assert found is not None  # no KL key: a chunk is never read again
        parts.append(found["metric_keys"])
    got = added_up(parts)
    want = truth(rows)
    assert set(got) == set(want)
    for key, (n, first, last, nums, strs, stepless, exact) in got.items():
        tn, tfirst, tlast, tnums, tstrs, tstepless = want[key]
        assert (first, last, nums, strs, stepless) == (tfirst, tlast, tnums, tstrs, tstepless)
        assert n >= tn
        if exact:
            assert n == tn
        steps_by_chunk = [[r["step"] for r in rows[lo:hi] if r["key"] == key
                           and r["step"] is not None] for lo, hi in zip(bounds, bounds[1:])]
        monotone, seen = True, None
        for steps in steps_by_chunk:
            if steps and seen is not None and min(steps) <= seen:
                monotone = False
            if steps:
                seen = max(steps) if seen is None else max(seen, max(steps))
        if monotone and not read_before:
            assert exact and n == tn


def test_migration_summary_equals_the_ingest_summary(demo: tuple[Path, runstore.Store]) -> None:
    """The statements of the migration that adds metric_keys to a v1 store (0002, its frozen
    copy of the summary) give, added up per (source, key), what the ingest kept."""
    from runstore.storage import arrow_sql, snapshot, versions

    store = demo[1]
    files = snapshot.table_files(store.path, store.manifest(), "metrics_raw")
    m = next(m for m in versions.available() if m.name == "0002_metric_keys").module()
    parts = [arrow_sql.run(m.METRIC_KEYS, {"metrics_raw": snapshot.open_parquet(p).read()})
             for p in files]
    built = arrow_sql.run(m.OVERLAPS, {"parts": pa.concat_tables(parts)})
    kept = store.arrow("select * from metric_keys")

    def per_source(t: pa.Table) -> dict:
        out: dict = {}
        for r in t.to_pylist():
            o = out.setdefault((r["source_id"], r["key"]), [0, 0, 0, 0, None, None])
            o[0] += r["n_points"]
            o[1] += r["n_numbers"]
            o[2] += r["n_strings"]
            o[3] += r["n_stepless"]
            o[4] = r["first_step"] if o[4] is None else min(o[4], r["first_step"] or o[4])
            o[5] = r["last_step"] if o[5] is None else max(o[5], r["last_step"] or o[5])
        return out

    a, b = per_source(built), per_source(kept)
    assert a.keys() == b.keys()
    for k in a:  # distinct steps may only be bounded where a file logged steps again
        assert a[k][1:] == b[k][1:], k


def test_a_v1_store_is_answered_from_metrics_raw_then_migrated(
        tmp_path: Path, demo: tuple[Path, runstore.Store]) -> None:
    """The shipped v1 fixture: read unmigrated, keys come from metrics_raw; after `migrate`
    (the 0002 migration fills metric_keys from the stored rows) the same answer from the
    summary."""
    import shutil

    fixture = Path(__file__).parents[1] / "fixtures" / "store_v1"
    shutil.copytree(fixture, tmp_path / "v1")
    store = runstore.open(tmp_path / "v1")
    assert not query_keys.summarised(store)
    before = keys_mod.keys(store)
    raw = store.arrow("select run_id, step, key, value, value_str, pre_resume from metrics_raw")
    assert before.height == len(set(raw.column("key").to_pylist())) > 0
    assert "0002_metric_keys" in store.migrate()
    assert query_keys.summarised(store)
    assert store.arrow("select count(*) as n from metric_keys").column("n")[0].as_py() > 0
    assert keys_mod.keys(store).equals(before)
