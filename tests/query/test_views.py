"""The canned views (sql/*.sql) and the Python query API, checked against tests/oracle.py.

Every view's answer on generated run trees must equal an independent computation in plain
Python from the same source files (oracle.py never imports runstore). The KL edge cases of
`demo.awkward_specs()` — NaN, +Infinity, exactly 0.01, spikes overwritten by a resume (both
resume styles), unprefixed names — are checked one by one as well. Also here: every view and
column is documented, every view transpiles to Spark, and the generated docs are up to date.
"""

from __future__ import annotations

import doctest
import math
import re
from pathlib import Path
from typing import Any

import pytest

import oracle
from conftest import examples
import runstore
from runstore.query import catalog, dialects, guard
from runstore.query.connect import connect
from runstore.query.statements import frames
from runstore.query.views import views
import gen_docs as docs
from runstore import demo
from runstore.demo import RunSpec
from runstore.errors import QueryError, UnknownKey

REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------
# Fixtures: each template tree ingested once per module (ingest never writes to the sources).


@pytest.fixture(scope="module")
def demo_store(shared_demo_store: Path) -> runstore.Store:
    return runstore.open(shared_demo_store)


@pytest.fixture(scope="module")
def awkward_store(shared_awkward_store: Path) -> runstore.Store:
    return runstore.open(shared_awkward_store)


@pytest.fixture(params=["demo", "awkward"])
def tree(request: pytest.FixtureRequest) -> tuple[Path, runstore.Store]:
    """(source root, store ingested from it) for both generated trees."""
    name = request.param
    root = request.getfixturevalue(f"_{name}_template")
    return root, request.getfixturevalue(f"{name}_store")


def rows(store: runstore.Store, sql: str, params: dict[str, Any] | None = None) -> list[dict]:
    return store.arrow(sql, params).to_pylist()


def keyed(records: list[dict], *key: str) -> dict[Any, dict]:
    """Rows by their key column(s), without the key and without `run_id` (a path hash, which
    the oracle has no reason to reproduce; every row must have one)."""
    out: dict[Any, dict] = {}
    for r in records:
        assert r.pop("run_id", "absent") is not None
        k = tuple(r.pop(c) for c in key)
        out[k[0] if len(k) == 1 else k] = r
    return out


def same(a: Any, b: Any, rel: float = 1e-12) -> bool:
    """Equality for view values: NaN equals NaN, floats to a relative tolerance."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or math.isclose(a, b, rel_tol=rel, abs_tol=1e-15)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=rel)
    return a == b


def assert_rows_equal(got: dict[Any, dict[str, Any]], want: dict[Any, dict[str, Any]],
                      rel: float = 1e-12) -> None:
    assert sorted(got, key=repr) == sorted(want, key=repr)
    for key, expected in want.items():
        for col, value in expected.items():
            assert same(got[key][col], value, rel), (key, col, got[key][col], value)


# ---------------------------------------------------------------------------------------------
# kl_health


def kl_rows(store: runstore.Store, threshold: float | None = None) -> dict[str, dict]:
    params = {"kl_threshold": threshold} if threshold is not None else None
    return keyed(rows(store, "select * from kl_health", params), "run_name")


def test_kl_health_matches_oracle(tree: tuple[Path, runstore.Store]) -> None:
    root, store = tree
    assert_rows_equal(kl_rows(store), oracle.kl_health(root))


@pytest.mark.parametrize("threshold", [0.002, 0.02, 0.05])
def test_kl_threshold_param_matches_oracle(awkward_store: runstore.Store,
                                           _awkward_template: Path, threshold: float) -> None:
    assert_rows_equal(kl_rows(awkward_store, threshold),
                      oracle.kl_health(_awkward_template, threshold))


def test_kl_threshold_param_changes_the_answer(awkward_store: runstore.Store) -> None:
    default = kl_rows(awkward_store)
    stricter = kl_rows(awkward_store, 0.05)
    name = "awkward/kl/v2_only_spike"
    assert default[name]["flagged"] and default[name]["steps_over"] == 4
    assert not stricter[name]["flagged"] and stricter[name]["max_kl_v2"] < 0.05


def test_kl_store_setting_and_param_override(_awkward_template: Path, tmp_path: Path) -> None:
    store = runstore.open(tmp_path / "store")
    store.ingest([_awkward_template / "awkward" / "kl"])
    assert kl_rows(store)["v2_only_spike"]["steps_over"] == 4
    store.set_setting("kl_threshold", 1.0)
    assert store.settings()["kl_threshold"] == 1.0
    after = kl_rows(store)
    assert [n for n, r in after.items() if r["flagged"]] == ["infinity"]  # only +Infinity > 1
    assert kl_rows(store, 0.01)["v2_only_spike"]["steps_over"] == 4  # a param still wins
    with pytest.raises(QueryError, match="must be a number"):
        store.set_setting("kl_threshold", "high")
    with pytest.raises(QueryError, match="must be a number"):
        rows(store, "select 1", {"kl_threshold": "high"})
    for bad in (math.nan, math.inf, -math.inf, "nan", "-Infinity"):
        # The manifest holds only finite numbers: a NaN stored would make the store unreadable.
        with pytest.raises(QueryError, match=r"must be a number \(not NaN"):
            store.set_setting("kl_threshold", bad)
        with pytest.raises(QueryError, match=r"must be a number \(not NaN"):
            rows(store, "select 1", {"kl_threshold": bad})
    assert store.settings()["kl_threshold"] == 1.0


def test_kl_nan_never_flags(awkward_store: runstore.Store) -> None:
    row = kl_rows(awkward_store)["awkward/kl/nan_only"]
    assert row["nan_steps"] == 12 and row["steps_over"] == 0 and not row["flagged"]
    assert row["max_kl_v1"] is None and row["max_kl_v2"] is None
    assert math.isnan(row["last_kl_v1"]) and math.isnan(row["last_kl_v2"])
    # Even with a threshold below every number, NaN stays out.
    assert not kl_rows(awkward_store, -1e9)["awkward/kl/nan_only"]["flagged"]


def test_kl_infinity_flags(awkward_store: runstore.Store) -> None:
    row = kl_rows(awkward_store)["awkward/kl/infinity"]
    assert row["flagged"] and row["max_kl_v1"] == math.inf
    assert (row["steps_over"], row["first_step_over"], row["last_step_over"]) == (2, 4, 9)
    assert row["longest_streak_over"] == 1


def test_kl_exactly_threshold_does_not_flag(awkward_store: runstore.Store) -> None:
    row = kl_rows(awkward_store)["awkward/kl/exact_threshold"]
    assert row["max_kl_v1"] == 0.01 and not row["flagged"] and row["steps_over"] == 0
    assert kl_rows(awkward_store, 0.0099)["awkward/kl/exact_threshold"]["steps_over"] == 1


def test_kl_spellings_and_streaks_match_oracle(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "edge"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(oracle.KL_EDGE_METRICS)
    store = runstore.open(tmp_path / "store")
    store.ingest([tmp_path / "runs"])
    got, want = kl_rows(store), oracle.kl_health(tmp_path / "runs")
    assert_rows_equal(got, want)
    assert (want["edge"]["steps_over"], want["edge"]["longest_streak_over"]) == (10, 3)


@pytest.mark.parametrize("style", ["truncate", "duplicate"])
def test_kl_spike_overwritten_by_resume_does_not_flag(awkward_store: runstore.Store,
                                                      _awkward_template: Path, style: str) -> None:
    run = _awkward_template / "awkward" / "kl" / "spike_overwritten" / style
    # The spike is really in the files (superseded rows / the pre_resume copy) ...
    assert max(oracle.all_kl_writes(run)) > 0.01
    if style == "truncate":
        copies = list(run.glob("metrics.jsonl.pre_resume_*"))
        assert copies and any(k.endswith("kl_sample_train_v1") and v > 0.01
                              for _, k, v, _ in oracle.metric_rows(copies[0])
                              if isinstance(v, float))
    # ... but the live values do not cross the threshold.
    row = kl_rows(awkward_store)[f"awkward/kl/spike_overwritten/{style}"]
    assert not row["flagged"] and row["max_kl_v1"] < 0.01


def test_kl_pre_resume_rows_are_stored_but_not_live(awkward_store: runstore.Store) -> None:
    [r] = rows(awkward_store, """
        select count(*) filter (where m.pre_resume) as pre_resume_rows,
               max(m.value) filter (where m.pre_resume
                                    and m.key = 'optim/kl_sample_train_v1') as max_pre_resume_kl
        from metrics_raw as m join runs using (run_id)
        where run_name = 'awkward/kl/spike_overwritten/truncate'""")
    assert r["pre_resume_rows"] > 0 and r["max_pre_resume_kl"] > 0.01


def test_kl_prefixed_and_unprefixed_names(awkward_store: runstore.Store,
                                          _awkward_template: Path) -> None:
    run = _awkward_template / "awkward" / "kl" / "unprefixed_names"
    keys = {k for _, k in oracle.live_metrics(run)}
    assert "kl_sample_train_v1" in keys and "optim/kl_sample_train_v1" not in keys
    got = kl_rows(awkward_store)
    assert got["awkward/kl/unprefixed_names"]["max_kl_v1"] is not None
    assert got["awkward/kl/infinity"]["max_kl_v1"] is not None  # prefixed


def test_kl_prefixed_name_wins_when_both_are_logged(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "both"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(
        '{"step": 0, "optim/kl_sample_train_v1": 0.001, "kl_sample_train_v1": 0.5}\n'
        '{"step": 1, "kl_sample_train_v1": 0.02}\n'
        '{"step": 2, "optim/kl_sample_train_v2": NaN, "kl_sample_train_v2": 0.9}\n')
    store = runstore.open(tmp_path / "store")
    store.ingest([tmp_path / "runs"])
    row = kl_rows(store)["both"]
    assert (row["max_kl_v1"], row["steps_over"], row["first_step_over"]) == (0.02, 1, 1)
    assert row["nan_steps"] == 1 and row["max_kl_v2"] is None
    assert_rows_equal(kl_rows(store), oracle.kl_health(tmp_path / "runs"))


def test_kl_streak_counts_consecutive_logged_steps(tmp_path: Path) -> None:
    # Steps 3 and 5 are consecutive *logged* KL steps (4 logs no KL); NaN at 7 ends a streak.
    lines = [(0, 0.02), (1, 0.001), (2, 0.02), (3, 0.03), (5, 0.04), (6, 0.05), (7, "NaN"),
             (8, 0.02)]
    text = "".join(f'{{"step": {s}, "optim/kl_sample_train_v1": {v}}}\n' for s, v in lines)
    run = tmp_path / "runs" / "streaks"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(text + '{"step": 4, "env/all/reward/total": 1.0}\n')
    store = runstore.open(tmp_path / "store")
    store.ingest([tmp_path / "runs"])
    row = kl_rows(store)["streaks"]
    assert (row["longest_streak_over"], row["steps_over"], row["nan_steps"]) == (4, 6, 1)
    assert_rows_equal(kl_rows(store), oracle.kl_health(tmp_path / "runs"))


def test_kl_runs_without_kl_are_absent(tree: tuple[Path, runstore.Store]) -> None:
    root, store = tree
    with_kl = set(kl_rows(store))
    all_runs = {r["run_name"] for r in rows(store, "select run_name from runs")}
    without = all_runs - with_kl
    assert without  # SL, DPO, config-only and empty runs
    for name in without:
        live = oracle.live_metrics(root / name)
        assert not any("kl_sample_train" in k for _, k in live), name


# ---------------------------------------------------------------------------------------------
# The other views


def summary_rows(store: runstore.Store) -> dict[str, dict]:
    got = keyed(rows(store, "select * from run_summary"), "run_name")
    for r in got.values():
        r.pop("status")  # depends on file times and the clock; the oracle leaves it out
    return got


def test_run_summary_matches_oracle(tree: tuple[Path, runstore.Store]) -> None:
    root, store = tree
    assert_rows_equal(summary_rows(store), oracle.run_summary(root))


def test_run_summary_rewards_at_the_edges(tmp_path: Path) -> None:
    # The moving average at the last reward step is null when its 10 steps are all NaN (not
    # the average at an earlier step); the best reward ignores NaN and keeps +Infinity; a
    # step logged twice counts once, its later reward wins; steps without a reward count.
    def write(name: str, lines: list[str]) -> None:
        run = tmp_path / "runs" / name
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_text("".join(line + "\n" for line in lines))

    r = '"env/all/reward/total"'
    write("nan_tail", [f'{{"step": {s}, {r}: {0.5 if s < 5 else "NaN"}}}' for s in range(20)])
    write("all_nan", [f'{{"step": {s}, {r}: NaN}}' for s in range(3)])
    write("infinity", [f'{{"step": 0, {r}: 1.0}}', f'{{"step": 1, {r}: Infinity}}',
                       f'{{"step": 2, {r}: NaN}}'])
    write("rewritten", [f'{{"step": 0, {r}: 0.1}}', f'{{"step": 1, {r}: 0.9}}',
                        f'{{"step": 1, {r}: 0.2}}', '{"step": 2, "optim/entropy": 1.0}',
                        f'{{"step": 3, {r}: "oops"}}'])
    store = runstore.open(tmp_path / "store")
    store.ingest([tmp_path / "runs"], on_warning=lambda text: None)
    got = summary_rows(store)
    assert got["nan_tail"]["last_reward_ma10"] is None and got["nan_tail"]["best_reward"] == 0.5
    assert got["all_nan"]["best_reward"] is None and got["all_nan"]["n_steps"] == 3
    assert got["infinity"]["best_reward"] == math.inf
    assert got["infinity"]["last_reward_ma10"] == math.inf  # avg(1.0, inf) over steps 0-2
    assert (got["rewritten"]["n_steps"], got["rewritten"]["last_step"]) == (4, 3)
    assert got["rewritten"]["best_reward"] == 0.2
    assert_rows_equal(got, oracle.run_summary(tmp_path / "runs"))


def test_reward_trends_matches_oracle(tree: tuple[Path, runstore.Store]) -> None:
    root, store = tree
    got = {(r["run_name"], r["step"]): (r["reward"], r["reward_ma10"], r["best_so_far"])
           for r in rows(store, "select * from reward_trends")}
    want = oracle.reward_trends(root)
    assert sorted(got) == sorted(want)
    for key, values in want.items():
        assert all(same(a, b) for a, b in zip(got[key], values)), (key, got[key], values)


def test_slowest_spans_matches_oracle(tree: tuple[Path, runstore.Store]) -> None:
    root, store = tree
    got = keyed(rows(store, "select * from slowest_spans"), "run_name", "name")
    assert_rows_equal(got, oracle.slowest_spans(root), rel=1e-9)


def test_slowest_spans_share_falls_back_to_top_level_spans(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    demo.generate_tree(root, [RunSpec("sweep/rl", steps=6, eval_every=3, save_every=3,
                                      logtree=False),
                              RunSpec("sweep/sl", kind="sl", steps=6, eval_every=3,
                                      save_every=3)], seed=5)
    # Without `time/total` the run's share denominator is its top-level spans.
    metrics = root / "sweep" / "rl" / "metrics.jsonl"
    metrics.write_text(metrics.read_text().replace('"time/total"', '"time/total_renamed"'))
    store = runstore.open(tmp_path / "store")
    store.ingest([root])
    got = keyed(rows(store, "select * from slowest_spans"), "run_name", "name")
    want = oracle.slowest_spans(root)
    assert_rows_equal(got, want, rel=1e-9)
    # The fallback denominator: depth-0 spans. The step's outermost spans then share ~1.
    top = {k: v for k, v in got.items() if k[0] == "sweep/rl"}
    assert 0.99 < sum(v["share"] for (run, name), v in top.items()
                      if name in ("sampling", "do_train_step_and_get_sampling_client",
                                  "run_evals")) < 1.01


def _write_spans_run(run: Path, records: list[dict[str, Any]],
                     totals: dict[int, float]) -> None:
    import json

    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"step": step, "time/total": t}) + "\n" for step, t in totals.items()))
    (run / "timing_spans.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def _span(name: str, start: float | None, end: float | None) -> dict[str, Any]:
    duration = (end - start) if start is not None and end is not None else 1.0
    return {"name": name, "duration": duration, "wall_start": start, "wall_end": end}


def test_slowest_spans_wall_time_is_the_union_of_intervals(tmp_path: Path) -> None:
    """Hand-computed unions: overlapping, disjoint, touching, contained and identical spans,
    a step logged twice (only the later record counts), spans without wall times."""
    records = [
        {"step": 0, "spans": [
            _span("a", 0, 2), _span("a", 1, 3), _span("a", 5, 6),  # [0,3] + [5,6] = 4
            _span("b", 0, 1), _span("b", 1, 2),  # touching: 2
            _span("c", 1, 2), _span("c", 0, 4), _span("c", 0, 4),  # contained, twice: 4
            _span("d", 0, 0.5),  # alone: 0.5
            _span("e", None, None),  # no wall times: no wall_s
        ]},
        {"step": 1, "spans": [_span("a", 0, 100)]},  # superseded by the record below
        {"step": 1, "spans": [_span("a", 0, 1), _span("a", 0.25, 0.75), _span("e", None, 3)]},
    ]
    _write_spans_run(tmp_path / "runs" / "r", records, {0: 8.0, 1: 2.0})
    store = runstore.open(tmp_path / "store")
    store.ingest([tmp_path / "runs"])
    got = keyed(rows(store, "select * from slowest_spans"), "run_name", "name")
    want_wall = {"a": 4 + 1, "b": 2, "c": 4, "d": 0.5, "e": None}
    assert {n: v["wall_s"] for (_, n), v in got.items()} == pytest.approx(want_wall)
    assert got[("r", "a")]["total_s"] == pytest.approx(2 + 2 + 1 + 1 + 0.5)  # summed: 6.5
    assert got[("r", "a")]["wall_share"] == pytest.approx(5 / 10)
    assert got[("r", "c")]["share"] == pytest.approx(9 / 10)  # 1 + 4 + 4 over 10 s
    assert got[("r", "e")]["wall_share"] is None
    assert_rows_equal(got, oracle.slowest_spans(tmp_path / "runs"), rel=1e-12)


def test_slowest_spans_wall_share_never_exceeds_one_where_share_does(
        demo_store: runstore.Store) -> None:
    got = rows(demo_store, "select name, share, wall_s, total_s, wall_share from slowest_spans")
    assert max(r["share"] for r in got) > 1  # the demo has concurrent spans
    assert all(r["wall_share"] <= 1 + 1e-9 for r in got if r["wall_share"] is not None)
    # The union never exceeds the sum (up to the clocks of duration and wall times).
    assert all(r["wall_s"] <= r["total_s"] * (1 + 1e-3) + 1e-6 for r in got
               if r["wall_s"] is not None)


def test_slowest_spans_wall_time_is_a_plain_sum(demo_store: runstore.Store) -> None:
    """The union is computed at ingest (`spans.wall_add_s`): the view reads no wall times and
    runs one window only (rank over its per-name rows), not a sweep that sorts every span."""
    from runstore.storage.manifest import read_manifest

    con = connect(demo_store.path, read_manifest(demo_store.path))
    plan = lambda q: "\n".join(r[1] for r in con.execute(f"explain {q}").fetchall())  # noqa: E731
    got = plan("select * from slowest_spans")
    assert "wall_add_s" in got
    assert "wall_end_s" not in got and "wall_start_s" not in got
    # The `metrics` view it reads for time/total has windows of its own (the live value).
    windows = lambda text: text.count("─ Window ─")  # noqa: E731
    time_total = plan("select run_id, sum(value) from metrics where key = 'time/total' "
                      "and not isnan(value) group by run_id")
    assert windows(got) == windows(time_total) + 1, got


def _intervals() -> Any:
    from hypothesis import strategies as st

    point = st.integers(0, 40).map(lambda i: i / 4)  # exact ties and touching ends are common
    span = st.tuples(st.sampled_from("xyz"), point, point).map(
        lambda t: (t[0], min(t[1], t[2]), max(t[1], t[2])))
    return st.lists(st.tuples(st.integers(0, 3), span), max_size=30)


def test_slowest_spans_wall_s_matches_a_merge_of_intervals() -> None:
    """Ingest's per-span additions summed by the view against the oracle's island merge, on
    random intervals of a few names and steps, run on DuckDB over an Arrow `spans` table."""
    import json

    import duckdb
    import pyarrow as pa
    from hypothesis import given, settings

    from runstore.ingest.normalize import timing
    from runstore.ingest.normalize.base import Context
    from runstore.storage import schema

    body = next(v.body for v in views() if v.name == "slowest_spans")

    @settings(max_examples=examples(300), deadline=None)
    @given(_intervals())
    def check(spans: list[tuple[int, tuple[str, float, float]]]) -> None:
        con = duckdb.connect()
        # The spans as ingest stores them (one timing record per step, wall_add_s computed).
        text = "".join(json.dumps({"step": step, "spans": [
            {"name": n, "duration": b - a, "wall_start": a, "wall_end": b}
            for s, (n, a, b) in spans if s == step]}) + "\n" for step in {s for s, _ in spans})
        ctx = Context(run_id="r", source_id=1, rel_path="r/timing_spans.jsonl")
        con.register("spans", timing.normalize(text.encode(), 1, ctx)[0])
        con.register("runs", schema.empty("runs"))
        con.register("run_labels", pa.table({"run_id": pa.array([], pa.string()),
                                             "run_name": pa.array([], pa.string()),
                                             "run_label": pa.array([], pa.string())}))
        con.register("metrics", pa.table({"run_id": ["r"], "key": ["time/total"],
                                          "value": [100.0]}))
        got = {name: (wall_s, wall_share) for name, wall_s, wall_share in con.execute(
            f"select name, wall_s, wall_share from ({body})").fetchall()}
        want: dict[str, float] = {}
        for step in {s for s, _ in spans}:
            for name in "xyz":
                ivs = [(a, b) for s, (n, a, b) in spans if s == step and n == name]
                if ivs:
                    want[name] = want.get(name, 0.0) + oracle.union_length(ivs)
        assert {n: v[0] for n, v in got.items()} == pytest.approx(want, abs=1e-9)
        assert all(v[1] == pytest.approx(v[0] / 100) for v in got.values())

    check()


def test_eval_metrics_matches_oracle(tree: tuple[Path, runstore.Store]) -> None:
    root, store = tree
    got = {(r["run_name"], r["step"], r["evaluator"], r["metric"]): r["value"]
           for r in rows(store, "select * from eval_metrics")}
    want = oracle.eval_metrics(root)
    assert got and sorted(got) == sorted(want)
    assert all(same(got[k], v) for k, v in want.items())
    assert {k[2] for k in got} >= {"test"}


def test_latest_checkpoints_matches_oracle(tree: tuple[Path, runstore.Store]) -> None:
    root, store = tree
    got = keyed(rows(store, "select * from latest_checkpoints"), "run_name")
    assert_rows_equal(got, oracle.latest_checkpoints(root))


def test_latest_checkpoints_rolling_and_missing_final(awkward_store: runstore.Store) -> None:
    got = {r["run_name"]: r for r in rows(awkward_store, "select * from latest_checkpoints")}
    cut = got["awkward/cut_last_line"]  # crashed: no final checkpoint
    assert cut["final_name"] is None and cut["final_state_path"] is None
    sl = got["awkward/trace/unmatched_tail"]  # rolling saves every 2 steps
    assert sl["latest_sampler_path"] is not None


def test_run_summary_matches_oracle(tree: tuple[Path, runstore.Store]) -> None:
    root, store = tree
    got = keyed(rows(store, "select * from run_summary"), "run_name")
    assert {r.pop("status") for r in got.values()} <= {"running", "completed", "idle", "missing"}
    assert_rows_equal(got, oracle.run_summary(root))


def test_transcripts_messages_match_logtrees(tree: tuple[Path, runstore.Store]) -> None:
    root, store = tree
    got = sorted((r["run_name"], r["split"], r["iteration"],
                  int(r["conversation_id"].rsplit(":", 1)[1]), r["message_idx"], r["role"],
                  r["content"])
                 for r in rows(store, "select * from transcripts"))
    want = sorted((c["run_name"], c["split"], c["iteration"], c["index"], i, role, text)
                  for c in oracle.logtree_conversations(root)
                  for i, (role, text) in enumerate(c["messages"]))
    assert got and got == want


def test_transcripts_total_reward(tree: tuple[Path, runstore.Store]) -> None:
    """Where the view gives a total_reward, it is the rollout summary's value for the
    trajectory the view names, and the reward the logtree prints next to the conversation."""
    root, store = tree
    shown = {(c["run_name"], c["split"], c["iteration"], c["index"]): c["reward"]
             for c in oracle.logtree_conversations(root)}
    summaries = oracle.rollout_rewards(root)
    known = 0
    for r in rows(store, "select * from transcripts where traj_idx is not null"):
        key = (r["run_name"], r["split"], r["iteration"], r["group_idx"], r["traj_idx"])
        if key not in summaries:
            assert r["total_reward"] is None
            continue
        known += 1
        assert r["total_reward"] == summaries[key]
        k = int(r["conversation_id"].rsplit(":", 1)[1])
        assert f"{r['total_reward']:.3f}" == shown[(r["run_name"], r["split"], r["iteration"], k)]
    assert known > 0
    [n] = rows(store, "select count(*) as n from transcripts where traj_idx is null "
                      "and total_reward is not null")
    assert n["n"] == 0


# ---------------------------------------------------------------------------------------------
# Documentation and portability of the views


def test_every_view_and_column_is_documented(demo_store: runstore.Store) -> None:
    files = sorted(p.stem for p in (REPO / "sql").glob("*.sql"))
    all_views = views()
    assert sorted(v.name for v in all_views) == files
    assert {"metrics", "kl_health", "reward_trends", "slowest_spans", "run_summary",
            "eval_metrics", "latest_checkpoints", "transcripts"} <= set(files)
    con = demo_store.connect()
    try:
        for v in all_views:
            assert v.description, f"{v.name}: no purpose comment"
            documented = [c for c, _ in v.columns]
            actual = [d[0] for d in con.execute(f"select * from {guard.identifier(v.name)} "
                                                "limit 0").description]
            assert documented == actual, v.name
            assert all(comment for _, comment in v.columns), v.name
    finally:
        con.close()


def test_views_are_in_dependency_order() -> None:
    seen: set[str] = set()
    names = {v.name for v in views()}
    for v in views():
        assert set(v.depends) & names <= seen, v.name
        seen.add(v.name)


@pytest.mark.parametrize("view", [v.name for v in views()])
def test_view_transpiles_to_spark(view: str) -> None:
    import sqlglot

    body = next(v.body for v in views() if v.name == view)
    out = sqlglot.transpile(body, read="duckdb", write="spark")[0]
    assert sqlglot.parse_one(out, read="spark") is not None
    # What `runstore views --dialect spark` prints: also free of constructs that Spark lacks
    # or that change the answer there (DESIGN.md), approximate percentiles included.
    ours = dialects.transpile(body, "spark")
    assert sqlglot.parse_one(ours, read="spark") is not None
    assert not re.search(r"(?i)\b(quantile_cont|percentile_approx|approx_quantile|qualify|"
                         r"pivot|asof|columns\s*\(|list\s*\()", ours), ours
    assert "->" not in ours


def test_spark_percentiles_are_exact() -> None:
    body = next(v.body for v in views() if v.name == "slowest_spans")
    ours = dialects.transpile(body, "spark")
    # Both from one exact aggregate, read 0-based as Spark indexes arrays.
    assert "PERCENTILE(duration_s, ARRAY(0.5, 0.95)) AS percentiles" in ours
    assert "percentiles[0] AS p50_s" in ours and "percentiles[1] AS p95_s" in ours


@pytest.mark.parametrize("dialect", ["spark", "trino"])
def test_views_ddl_parses(dialect: str) -> None:
    import sqlglot

    ddl = dialects.views_ddl(dialect)
    statements_ = [s for s in sqlglot.parse(ddl, read=dialect) if s is not None]
    assert len(statements_) == len(views()) + 1  # + the settings view
    head = "CREATE OR REPLACE TEMP VIEW" if dialect == "spark" else "CREATE OR REPLACE VIEW"
    order = [m.group(1) for m in re.finditer(rf"(?m)^{head} (\w+) AS$", ddl)]
    assert order == ["settings"] + [v.name for v in views()]


def test_docs_views_md_is_generated() -> None:
    assert (REPO / "docs" / "views.md").read_text() == docs.views_markdown(), \
        "docs/views.md is stale: python tools/gen_docs.py views -o docs/views.md"


def test_sql_view_reads_json_is_generated() -> None:
    assert (REPO / "sql" / "view_reads.json").read_text() == docs.view_reads(), \
        "sql/view_reads.json is stale: python tools/gen_docs.py reads -o sql/view_reads.json"


def test_a_query_over_the_canned_views_parses_none_of_them(
        shared_demo_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What each view reads is recorded (sql/view_reads.json, checked above): a process that
    # queries the biggest view tree asks DuckDB's parser about none of its views.
    from runstore.query import parsetree
    from runstore.query import views as views_mod

    monkeypatch.setattr(views_mod, "_PARSED", {})
    calls: list[list[str]] = []
    each = parsetree.references_each
    monkeypatch.setattr(parsetree, "references_each",
                        lambda con, sqls: (calls.append(sqls), each(con, sqls))[1])
    store = runstore.open(shared_demo_store)
    try:
        assert store.sql("select count(*) as n from run_summary").item() >= 1
    finally:
        store.close()
    assert calls == []


@pytest.mark.parametrize("record", ["right", "other body", "damaged", "none"])
def test_recorded_reads_are_used_only_for_the_body_they_were_recorded_for(
        tmp_path: Path, record: str) -> None:
    # A view's reads come from the record only when the digest of the body it was recorded
    # for is that of the file's body: a view edited after the record was written, or a
    # damaged record, is parsed. (The record here lies about what `a` reads, so which answer
    # came back says where it came from.)
    import json

    from runstore.query import views as views_mod

    body = "select run_id from runs join (select run_id from checkpoints) using (run_id)"
    (tmp_path / "a.sql").write_text(f"-- A view.\n{body}\n")
    lie = {"a": {views_mod.digest(body if record == "right" else body + " "): ["spans"]}}
    if record == "damaged":
        (tmp_path / views_mod.READS).write_text(json.dumps(lie)[:-3])
    elif record != "none":
        (tmp_path / views_mod.READS).write_text(json.dumps(lie))
    [view] = views_mod._parse([tmp_path / "a.sql"], None)
    assert view.depends == (("spans",) if record == "right" else ("checkpoints", "runs"))


@pytest.mark.slow
def test_docs_cookbook_md_is_generated(tmp_path: Path) -> None:
    store = docs.build_demo_store(tmp_path)
    assert len(docs.QUESTIONS) >= 12
    assert (REPO / "docs" / "cookbook.md").read_text() == docs.cookbook_markdown(store), \
        "docs/cookbook.md is stale: python tools/gen_docs.py cookbook -o docs/cookbook.md"


# ---------------------------------------------------------------------------------------------
# The Python API


def test_metrics_long_matches_live_values(demo_store: runstore.Store,
                                          _demo_template: Path) -> None:
    keys = ["env/all/reward/total", "optim/kl_sample_train_v1"]
    df = demo_store.metrics(keys, runs="math_rl_sweep/*")
    assert df.columns == ["run_id", "run_name", "run_label", "step", "key", "value", "value_str"]
    want = {(oracle.run_name(_demo_template, run), s, k): v
            for run in oracle.run_dirs(_demo_template)
            if oracle.run_name(_demo_template, run).startswith("math_rl_sweep/")
            for (s, k), v in oracle.live_numbers(run).items() if k in keys}
    got = {(r["run_name"], r["step"], r["key"]): r["value"] for r in df.to_dicts()}
    assert got == want


def test_metrics_wide(demo_store: runstore.Store, _demo_template: Path) -> None:
    keys = ["env/all/reward/total", "optim/kl_sample_train_v1", "test/env/all/reward/total"]
    df = demo_store.metrics(keys, runs="gsm8k_tool_rl/sweep/lr_1e-4/*", wide=True)
    assert df.columns == ["run_id", "run_name", "run_label", "step", *keys]
    for r in df.to_dicts():
        live = oracle.live_numbers(_demo_template / r["run_name"])
        for k in keys:
            assert r[k] == live.get((r["step"], k)), (r["run_name"], r["step"], k)
    assert df.select("run_name", "step").is_unique().all()
    assert df["run_name"].n_unique() == 2


def test_metrics_values_are_bound(demo_store: runstore.Store) -> None:
    for key in ("it's", "x') or true --", 'a"b'):
        sql, params = frames.metrics_query([key])
        assert demo_store.arrow(sql, params).num_rows == 0 and key not in sql
        sql, params = frames.metrics_query([key], wide=True)
        assert demo_store.arrow(sql, params).column_names[-1] == key
        with pytest.raises(UnknownKey, match="no run in the store logs metric") as e:
            demo_store.metrics([key])  # logged by no run: an error, the key shown verbatim
        assert repr(key) in str(e.value)
    # A scope is resolved to run_ids with the pattern bound: one that matches no run is an
    # error naming it verbatim, not an empty answer (nor a broken statement).
    with pytest.raises(QueryError, match="no run matches --runs \"o'brien/\\*\""):
        demo_store.metrics(["env/all/reward/total"], runs="o'brien/*")
    with pytest.raises(QueryError, match="collide"):
        demo_store.metrics(["step"], wide=True)
    with pytest.raises(QueryError, match="at least one"):
        demo_store.metrics([])


def logged_by(root: Path) -> dict[str, set[str]]:
    """Each metric key in the tree's metrics files (any line), with the runs that log it."""
    found: dict[str, set[str]] = {}
    for run in oracle.run_dirs(root):
        files = [run / "metrics.jsonl", *run.glob("metrics.jsonl.pre_resume_*")]
        for f in files:
            if f.is_file():
                for _, key, _, _ in oracle.metric_rows(f):
                    found.setdefault(key, set()).add(oracle.run_name(root, run))
    return found


def test_a_key_in_another_case_is_the_first_suggestion(demo_store: runstore.Store,
                                                       _demo_template: Path) -> None:
    # Keys are case-sensitive; a key typed in another case is the likeliest slip, so the
    # logged spellings that equal it but for case are what the error suggests.
    from runstore.query import keys

    logged = logged_by(_demo_template)
    for typed, families in (("ENV/ALL/REWARD/TOTAL", False), ("Optim/Entropy", True)):
        same = sorted(k for k in logged if k.lower() == typed.lower()
                      or (families and k.lower() == typed.lower().removeprefix("optim/")))
        assert same and typed not in logged
        with pytest.raises(UnknownKey) as e:
            keys.require(demo_store, [typed], families=families)
        hint = str(e.value).split("did you mean ", 1)[1].split("?")[0].split(" or ")
        assert hint[0] in same, (typed, str(e.value))


def test_metrics_of_a_key_no_run_logs_is_an_error(demo_store: runstore.Store,
                                                  _demo_template: Path) -> None:
    from runstore.query import keys

    logged = logged_by(_demo_template)
    assert "env/all/reward/total" in logged and "env/all/rewrd/total" not in logged
    with pytest.raises(UnknownKey) as e:
        demo_store.metrics("env/all/rewrd/total")
    assert str(e.value) == (
        "no run in the store logs metric 'env/all/rewrd/total'; did you mean "
        "env/all/reward/total? (runstore sql \"select distinct key from metrics_raw order by 1\" "
        "lists every key)")
    with pytest.raises(UnknownKey, match="metric 'loss'"):  # one unknown key among good ones
        demo_store.metrics(["env/all/reward/total", "loss"], wide=True)
    # A key that only some runs log is no error: exactly those runs have rows.
    some = next(k for k, runs in sorted(logged.items())
                if 1 < len(runs) < len(oracle.run_dirs(_demo_template)))
    assert set(demo_store.metrics(some)["run_name"]) <= logged[some]
    keys.require(demo_store, [some, "env/all/reward/total"])  # no error
    coverage = keys.coverage(demo_store, [some, "env/all/reward/total"])
    assert coverage.runs == len(oracle.run_dirs(_demo_template))
    assert coverage.logging == {some: len(logged[some]),
                                "env/all/reward/total": len(logged["env/all/reward/total"])}
    assert coverage.notes()[0] == (f"note: {some} is logged by {len(logged[some])} of "
                                   f"{coverage.runs} runs")
    # Every logged key, with its runs, as the source files have them.
    names = dict(demo_store.sql("select run_id, run_name from runs").iter_rows())
    assert {k: {names[i] for i in ids}
            for k, ids in keys.logged_keys(demo_store).items()} == logged


def test_sql_params_are_bound_not_interpolated(demo_store: runstore.Store) -> None:
    df = demo_store.sql("select $v as v, length($v) as n", params={"v": "it's; drop table runs"})
    assert df.to_dicts() == [{"v": "it's; drop table runs", "n": 21}]
    assert demo_store.sql("select count(*) as n from runs where run_name = $name",
                          params={"name": "o'brien"}).item() == 0
    with pytest.raises(QueryError, match=r"uses \$missing"):
        demo_store.sql("select $missing")
    with pytest.raises(QueryError, match="neither used"):
        demo_store.sql("select 1", params={"kl_treshold": 0.02})


def test_sql_lazy_and_table(demo_store: runstore.Store) -> None:
    import polars as pl

    lf = demo_store.sql("select run_name, kind from runs", lazy=True)
    assert isinstance(lf, pl.LazyFrame) and lf.collect().height == 13
    assert isinstance(demo_store.table("metrics_raw"), pl.LazyFrame)
    # In any case, as SQL reads it.
    assert demo_store.table("RUNS").collect().equals(demo_store.table("runs").collect())


def test_runs_api(demo_store: runstore.Store) -> None:
    all_runs = demo_store.runs()
    assert all_runs["run_name"].to_list() == sorted(all_runs["run_name"].to_list())
    assert all_runs.height == 13
    rl = demo_store.runs(kind="rl", name="math_rl_sweep/qwen3-8b/*", where="n_steps > 10")
    assert rl["run_name"].to_list() == [f"math_rl_sweep/qwen3-8b/lr_{lr}"
                                        for lr in ("1e-4", "1e-5", "3e-5")]
    with pytest.raises(QueryError, match="no run matches --name \"it's\\*\""):
        demo_store.runs(name="it's*")
    for bad in ("1; drop table runs", "run_id in (select run_id from runs)", "kind = $k",
                "select 1", "query('select 1') is not null"):
        with pytest.raises(QueryError, match="--where takes one SQL condition"):
            demo_store.runs(where=bad)


def test_views_api(demo_store: runstore.Store) -> None:
    views = demo_store.views()
    names = [v.name for v in views]
    assert {"metrics", "kl_health", "last_steps", "run_summary"} <= set(names)
    for i, v in enumerate(views):  # in dependency order: what a view reads comes before it
        assert set(v.depends) & set(names) <= set(names[:i]), (v.name, v.depends)
    assert names[:2] == ["run_labels", "metrics"]


def test_statement_builders_quote_identifiers() -> None:
    sql, params = frames.metrics_query(['we"ird/key'], wide=True)
    assert '"we""ird/key"' in sql and params == {"k0": 'we"ird/key'}
    assert "we" not in sql.replace('"we""ird/key"', "")


def test_docstring_examples(demo_store: runstore.Store) -> None:
    import runstore.query.statements.bands
    import runstore.query.statements.frames
    import runstore.store
    from runstore.store import base, checks, doctor, pictures, questions, writing

    for module in (runstore.store, base, writing, questions, checks, doctor, pictures,
                   runstore.query.statements.frames, runstore.query.statements.bands):
        result = doctest.testmod(module, extraglobs={"store": demo_store},
                                 optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_docs_python_md_examples(demo_store: runstore.Store) -> None:
    import polars as pl

    text = re.sub(r"(?m)^```.*$", "", (REPO / "docs" / "python.md").read_text())
    test = doctest.DocTestParser().get_doctest(text, {"store": demo_store, "pl": pl, "runstore": runstore},
                                               "python.md", "docs/python.md", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted > 10


@pytest.mark.parametrize("view", ["run_summary", "slowest_spans", "kl_health"])
def test_a_query_parses_the_views_it_reads_a_level_at_a_time(
        shared_demo_store: Path, monkeypatch: pytest.MonkeyPatch, view: str) -> None:
    # One call of DuckDB's parser for a view, one for all it reads, one for all those read,
    # ...: not one per view. The tree is found from the views' own `depends`.
    from runstore.query import parsetree
    from runstore.query import views as views_mod

    deps = {v.name: set(v.depends) for v in views()}
    closure, level, depth = set(), {view}, 0
    while level:
        closure |= level
        depth += 1
        level = {d for n in level for d in deps[n] if d in deps} - closure

    monkeypatch.setattr(views_mod, "_PARSED", {})
    monkeypatch.setattr(views_mod, "recorded_reads", lambda directory: {})  # every view parsed
    calls: list[int] = []
    each = parsetree.references_each
    monkeypatch.setattr(parsetree, "references_each",
                        lambda con, sqls: (calls.append(len(sqls)), each(con, sqls))[1])
    store = runstore.open(shared_demo_store)
    try:
        assert store.sql(f"select count(*) as n from {view}").item() >= 1
    finally:
        store.close()
    assert depth >= 2 and len(calls) == depth and sum(calls) == len(closure), calls


def test_suggestions_are_the_keys_difflib_finds_and_skip_what_cannot_match(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`keys.closest` suggests what difflib's ratio (case ignored, the whole key or its last
    `/` part) puts at 0.6 or more, and diffs no pair whose lengths keep it below: a pasted
    blob as a metric name costs a length check a key, not a diff of the blob."""
    import difflib

    from runstore.query import keys

    known = ["env/all/reward/total", "optim/entropy", "train/loss", "Optim/LR"]
    for typed in ("env/all/rewrd/total", "LOSS", "optim/lr", "entropyy", "zzz"):
        ratio = {k: max(difflib.SequenceMatcher(None, typed.lower(), c.lower()).ratio()
                        for c in (k, k.rsplit("/", 1)[-1])) for k in known}
        good = {k: r for k, r in ratio.items() if r >= 0.6}
        want = sorted((k for k in good if good[k] >= max(good.values()) - 0.1),
                      key=lambda k: (-good[k], k))[:3] if good else []
        assert keys.closest(typed, [typed], known) == want, typed
    diffed = []
    real = difflib.SequenceMatcher.ratio
    monkeypatch.setattr(difflib.SequenceMatcher, "ratio",
                        lambda self: diffed.append(len(self.a)) or real(self))
    assert keys.closest("x" * 1_000_000, ["x" * 1_000_000], known) == []
    assert diffed == []
