"""`kl_steps` (the KL values `summaries.metric_kl` merged at ingest) and the fast paths.

`kl_steps` must equal tests/oracle.py's independent recomputation from the source files. The
fast paths must answer what the slow ones answer: `kl_health where flagged` against the whole
view filtered afterwards, and `runstore check`'s KL rules read for the runs with a KL write at
or above the rules' floor alone (`check.kl_over_floor`) against all runs — on generated trees
and on random KL histories (hypothesis) with both spellings, repeated steps, strings, NaN,
±Infinity, step-less rows and `pre_resume` copies; `check` against tests/oracle.py for
rules of each op, of one KL family, and of KL and another metric at once; and the KL chart's
series (its values and the runs it flags) against the oracle's `kl_steps` and `kl_health`. No
statement compares against a threshold after setting NaN aside itself: that is the macro
`over_threshold`'s alone.
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
import runstore
from runstore.health import evaluate
from runstore.health.rules import KL_METRICS, Rule, kl_rule, parse_rule
from runstore.present import charts

KL_SQL = "select r.run_name, k.* from kl_steps as k join runs as r using (run_id)"
CASES = int(os.environ.get("KL_STEPS_CASES", examples(40)))


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and (math.isnan(a) or math.isnan(b)):
        return math.isnan(a) and math.isnan(b)
    return a == b


def assert_same_rows(got: dict[Any, dict[str, Any]], want: dict[Any, dict[str, Any]]) -> None:
    assert sorted(got, key=repr) == sorted(want, key=repr)
    for key, expected in want.items():
        for col, value in expected.items():
            assert same(got[key][col], value), (key, col, got[key][col], value)


def assert_same_lists(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert [sorted(r) for r in got] == [sorted(r) for r in want]
    for g, w in zip(got, want):
        assert all(same(g[c], w[c]) for c in w), (g, w)


def step_rows(store: runstore.Store, threshold: float | None = None) -> dict[Any, dict]:
    params = None if threshold is None else {"kl_threshold": threshold}
    out = {}
    for r in store.arrow(KL_SQL, params).to_pylist():
        assert r.pop("run_id") is not None
        out[(r.pop("run_name"), r.pop("step"))] = r
    return out


def health(store: runstore.Store, sql: str, threshold: float) -> dict[str, dict]:
    out = {}
    for r in store.arrow(sql, {"kl_threshold": threshold}).to_pylist():
        r.pop("run_id")
        out[r.pop("run_name")] = r
    return out


def check_paths(store: runstore.Store,
                rules: list[Rule]) -> tuple[list[dict], list[dict]]:
    """`check`'s fired rows read for the runs with a KL write at or above the rules' floor
    alone, and for all runs (their per-rule counts must be equal)."""
    fast_sql, fast_params = evaluate.check_query(rules)
    slow_sql, slow_params = evaluate.check_query(rules, every_run=True)
    assert fast_sql != slow_sql or evaluate.kl_floor(rules) is None
    # Both parts of the answer: the fired rows and the per-rule counts (the fast path counts
    # the runs it checked from `kl_logged`, the slow one from the merged steps).
    fast = store.arrow(fast_sql, fast_params).to_pylist()
    slow = store.arrow(slow_sql, slow_params).to_pylist()
    counts = [[r for r in rows if r["run_id"] is None] for rows in (fast, slow)]
    assert counts[0] == counts[1]
    return ([r for r in fast if r["run_id"] is not None],
            [r for r in slow if r["run_id"] is not None])


# ---------------------------------------------------------------------------------------------
# Generated trees


@pytest.fixture(scope="module")
def stores(_demo_template: Path, _awkward_template: Path, shared_demo_store: Path,
           shared_awkward_store: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> dict[str, tuple[Path, runstore.Store]]:
    edge = tmp_path_factory.mktemp("kl_edge") / "runs"
    (edge / "edge").mkdir(parents=True)
    (edge / "edge" / "metrics.jsonl").write_text(oracle.KL_EDGE_METRICS)
    store = runstore.open(tmp_path_factory.mktemp("kl_edge") / "store")
    store.ingest([edge], on_warning=lambda text: None)
    return {"demo": (_demo_template, runstore.open(shared_demo_store)),
            "awkward": (_awkward_template, runstore.open(shared_awkward_store)),
            "edge": (edge, store)}


@pytest.mark.parametrize("tree", ["demo", "awkward", "edge"])
@pytest.mark.parametrize("threshold", [None, 0.0099, 0.002, 0.05])
def test_kl_steps_matches_oracle(stores: dict, tree: str, threshold: float | None) -> None:
    root, store = stores[tree]
    want = oracle.kl_steps(root, 0.01 if threshold is None else threshold)
    assert want  # every tree logs KL
    assert_same_rows(step_rows(store, threshold), want)


def test_kl_steps_edge_cases(stores: dict) -> None:
    rows = step_rows(stores["edge"][1])
    # Step 3: the prefixed spelling wins over a larger unprefixed value.
    assert rows[("edge", 3)]["v1"] == 0.001 and not rows[("edge", 3)]["is_over"]
    # Step 14: a later string supersedes the prefixed number; the unprefixed one counts.
    assert rows[("edge", 14)]["v1"] == 0.002
    # Step 16: a string written after a spike leaves the step without a v1: no row.
    assert ("edge", 16) not in rows
    # NaN is never over, and marks the step.
    assert rows[("edge", 8)]["is_nan"] and not rows[("edge", 8)]["is_over"]


def test_check_over_floor_counts_superseded_writes(stores: dict) -> None:
    """A spike that a resume overwrote (logged twice, or kept in a pre_resume copy) is a write
    over the threshold, so `check`'s fast path reads the run (statement `check.kl_over_floor`),
    yet no step of the run is over; a run whose KL never reaches the floor is not read."""
    from runstore.query.statements import named

    store = stores["awkward"][1]

    def over(floor: float) -> set[str]:
        keys = ("with keys as (select * from metric_keys where list_contains($kl_keys, key)) ")
        return set(store.sql("select r.run_name from runs r where r.run_id in ("
                             + keys + named("check.kl_over_floor") + ")",
                             {"kl_keys": list(KL_METRICS) + [k.removeprefix("optim/")
                                                             for k in KL_METRICS],
                              "kl_floor": floor})["run_name"])

    rows = step_rows(store)
    for style in ("truncate", "duplicate"):
        name = f"awkward/kl/spike_overwritten/{style}"
        mine = [r for (run, _), r in rows.items() if run == name]
        assert mine and not any(r["is_over"] for r in mine)
        assert name in over(0.01)
    # A write at the floor is read (a `>=` rule at it can fire), one just above it is not.
    assert "awkward/kl/exact_threshold" in over(0.01)
    assert "awkward/kl/exact_threshold" not in over(math.nextafter(0.01, 1.0))


@pytest.mark.parametrize("tree", ["demo", "awkward", "edge"])
@pytest.mark.parametrize("threshold", [0.01, 0.0099, 0.002, 0.05, 1e9])
def test_kl_health_where_flagged_is_the_whole_view_filtered(stores: dict, tree: str,
                                                            threshold: float) -> None:
    root, store = stores[tree]
    whole = {k: v for k, v in health(store, "select * from kl_health", threshold).items()
             if v["flagged"]}
    fast = health(store, "select * from kl_health where flagged", threshold)
    assert_same_rows(fast, whole)
    want = {k: v for k, v in oracle.kl_health(root, threshold).items() if v["flagged"]}
    assert_same_rows(fast, want)


@pytest.mark.parametrize("tree", ["demo", "awkward", "edge"])
@pytest.mark.parametrize("rule", [kl_rule(0.01), kl_rule(0.05),
                                  Rule("kl_sample_train_v2", ">=", 0.02),
                                  Rule("optim/kl_sample_train_v1", ">", 1e9)])
def test_check_reads_only_runs_over_and_answers_the_same(stores: dict, tree: str,
                                                         rule: Rule) -> None:
    root, store = stores[tree]
    assert evaluate.kl_floor([rule]) == rule.value
    fast, slow = check_paths(store, [rule])
    assert_same_lists(fast, slow)
    want = oracle.check_rule(root, rule.metrics, rule.op, rule.value)
    assert sorted(r["run_name"] for r in fast) == sorted(want)


def test_kl_floor_only_where_no_run_below_it_can_fire() -> None:
    t = 0.01
    assert evaluate.kl_floor([kl_rule(0.005)]) == 0.005
    assert evaluate.kl_floor([Rule(KL_METRICS, ">=", t)]) == t
    assert evaluate.kl_floor([kl_rule(0.05), Rule(KL_METRICS[1:], ">=", 0.02)]) == 0.02
    assert evaluate.kl_floor([Rule(KL_METRICS, "<", 1.0)]) is None  # fires below a value
    assert evaluate.kl_floor([kl_rule(0.05), Rule(KL_METRICS, "<=", 1.0)]) is None
    assert evaluate.kl_floor(  # KL or entropy: entropy alone can fire it
        [Rule(("optim/kl_sample_train_v1", "optim/entropy"), ">", 0.5)]) is None
    assert evaluate.kl_floor([parse_rule("optim/entropy < 1")]) is None  # no KL rule
    # A rule without KL does not matter; the KL rule alone decides.
    assert evaluate.kl_floor([kl_rule(t), parse_rule("optim/entropy < 1")]) == t


# ---------------------------------------------------------------------------------------------
# Random KL histories

KEYS = ["optim/kl_sample_train_v1", "kl_sample_train_v1", "optim/kl_sample_train_v2",
        "kl_sample_train_v2", "optim/entropy"]
# Values on both sides of each threshold the test uses (0.0099, 0.01, 0.02 and twice those).
VALUES = st.one_of(
    st.sampled_from([0.0, 0.001, 0.0099, 0.01, 0.0101, 0.015, 0.0198, 0.02, 0.0201, 0.03,
                     0.04, 0.0401, 0.5, -0.01, math.nan, math.inf, -math.inf, "n/a", True,
                     None]),
    st.floats(-0.05, 0.1, allow_nan=False))
LINES = st.lists(st.tuples(st.one_of(st.integers(0, 12), st.none()),
                           st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4)),
                 max_size=25)


def _jsonl(lines: list[tuple[int | None, dict[str, Any]]]) -> str:
    out = []
    for step, values in lines:
        row: dict[str, Any] = {} if step is None else {"step": step}
        row.update(values)
        out.append(json.dumps(row) + "\n")  # bare NaN / Infinity, as tinker-cookbook writes
    return "".join(out)


@pytest.mark.slow
@settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(runs=st.lists(st.tuples(LINES, st.one_of(st.none(), LINES)), min_size=1, max_size=3),
       threshold=st.sampled_from([0.01, 0.0099, 0.02]))
def test_random_histories_fast_paths_match_the_oracle(tmp_path_factory: pytest.TempPathFactory,
                                                      runs: list, threshold: float) -> None:
    base = tmp_path_factory.mktemp("kl_random")
    root = base / "runs"
    for i, (lines, pre_resume) in enumerate(runs):
        run = root / f"run_{i}"
        run.mkdir(parents=True)
        (run / "metrics.jsonl").write_text(_jsonl(lines))
        if pre_resume is not None:
            (run / "metrics.jsonl.pre_resume_000005").write_text(_jsonl(pre_resume))
    store = runstore.open(base / "store")
    store.ingest([root], on_warning=lambda text: None)
    assert_same_rows(step_rows(store, threshold), oracle.kl_steps(root, threshold))
    fast = health(store, "select * from kl_health where flagged", threshold)
    assert_same_rows(fast, {k: v for k, v in oracle.kl_health(root, threshold).items()
                            if v["flagged"]})
    # The KL chart flags runs itself (IEEE `>` over its values): as kl_health does, with every
    # step's values as kl_steps has them.
    chart = charts.kl_series(store, threshold=threshold).to_pylist()
    assert {r["run_label"]: r["flagged"] for r in chart} == {
        k: v["flagged"] for k, v in oracle.kl_health(root, threshold).items()}
    assert_same_rows({(r["run_label"], r["step"]): {"v1": r["v1"], "v2": r["v2"]} for r in chart},
                     {k: {"v1": v["v1"], "v2": v["v2"]}
                      for k, v in oracle.kl_steps(root, threshold).items()})
    store.set_setting("kl_threshold", threshold)
    # The default rule alone at two thresholds; then one family, the other ops, KL and
    # another metric in one rule, several rules at once: each rule's fired rows against the
    # oracle.
    mixed = [Rule((KL_METRICS[1],), ">=", threshold), Rule((KL_METRICS[0],), "<", threshold),
             Rule(KL_METRICS, "<=", threshold / 2), kl_rule(threshold),
             Rule((KL_METRICS[0], "optim/entropy"), ">", threshold * 2)]
    for rules in ([kl_rule(threshold)], [kl_rule(threshold * 2)], mixed):
        got, slow = check_paths(store, rules)
        assert_same_lists(got, slow)
        for i, rule in enumerate(rules):
            want = oracle.check_rule(root, rule.metrics, rule.op, rule.value)
            assert {r["run_name"]: (r["first_step"], r["last_step"], r["steps_over"],
                                    r["longest_streak"]) for r in got if r["rule_idx"] == i} == \
                {k: (v["first_step"], v["last_step"], v["steps_over"], v["longest_streak"])
                 for k, v in want.items()}, rule
    shutil.rmtree(base)


def _restatements(sql: str) -> list[str]:
    """The places in `sql` that compare a value after setting NaN aside (`not isnan(x) and
    x > y`, in either order, any comparison, bare or within a CASE): "over the threshold"
    written again."""
    import sqlglot
    from sqlglot import exp

    found = []
    for conj in sqlglot.parse_one(sql, read="duckdb").find_all(exp.And):
        sides = [conj.left, conj.right]
        nan_checked = {s.this.this.sql() for s in sides
                       if isinstance(s, exp.Not) and isinstance(s.this, exp.IsNan)}
        if any({c.left.sql(), c.right.sql()} & nan_checked
               for side in sides for c in side.find_all(exp.GT, exp.GTE, exp.LT, exp.LTE)):
            found.append(conj.sql())
    return found


def test_over_the_threshold_is_written_only_in_its_macro() -> None:
    """Every statement runstore runs (the views, the statements, the doctor's findings and
    evidence, the web UI's) reads "over the threshold" from the macro `over_threshold`: none
    compares a value it has set NaN aside for itself. The probe finds the macro's own body (so
    it can fail)."""
    from sqlprobes import statement_texts

    texts = statement_texts()
    macro = texts.pop("statements/macros.sql:over_threshold")
    assert _restatements(macro.split(" as", 1)[1]), "the probe no longer finds the rule"
    assert len(texts) > 40
    assert {name: found for name, text in texts.items() if (found := _restatements(text))} == {}
