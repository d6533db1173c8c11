"""runstore.health.trends: drop / rise / stale rules, against an independent computation.

The expected rows come from the run files themselves: metrics.jsonl read with plain json (the
last write of a step wins; `optim/X` preferred to `X`), the EMA and the running median written
from their definitions in plain Python, file modification times from os.stat.
"""

from __future__ import annotations

import json
import math
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

import analysis_oracle as ao
import oracle
from conftest import examples
import runstore
from runstore import demo
from runstore.health import evaluate as checks
from runstore.demo import RunSpec
from runstore.errors import UsageError
from runstore.health import trends
from runstore.health.rules import Rule
from runstore.health.trends import TrendRule, parse_trend

REWARD = "env/all/reward/total"
NAN, INF = float("nan"), float("inf")


from trend_oracle import expected


def got(store: runstore.Store, rules: list[TrendRule], **kw: Any) -> dict[tuple[str, str], dict]:
    result = trends.evaluate(store, rules, **kw)
    rows = result.table.to_pylist()
    assert result.table.column_names == ["run_id", *checks.COLUMNS, "rule_idx"]
    assert [(r["run_name"], r["rule_idx"]) for r in rows] == sorted(
        (r["run_name"], r["rule_idx"]) for r in rows)
    return {(r["run_name"], r["rule"]): r for r in rows}


def assert_rule(store: runstore.Store, root: Path, rule: TrendRule, **kw: Any) -> dict:
    rows = {n: r for (n, rule_name), r in got(store, [rule], **kw).items()}
    want = expected(root, rule, kw.get("since_step"))
    assert set(rows) == set(want), rule.name
    for name, w in want.items():
        for k, v in w.items():
            assert ao.close(rows[name][k], v), (rule.name, name, k, rows[name][k], v)
    return rows


# ---------------------------------------------------------------------------------------------
# Trees


def write_metrics(run: Path, lines: list[dict[str, Any]], name: str = "metrics.jsonl") -> None:
    run.mkdir(parents=True, exist_ok=True)
    with open(run / name, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runstore.Store]:
    """Hand-made runs for each behaviour the definitions name."""
    base = tmp_path_factory.mktemp("trends")
    root = base / "runs"
    # A reward that climbs to 0.8 and collapses, with a NaN and an Infinity on the way, a
    # step logged twice (the later write wins) and a pre-resume copy with a spike (not live).
    climb = [{"step": s, REWARD: min(0.8, 0.1 + s * 0.03), "time/total": 10.0}
             for s in range(30)]
    fall = [{"step": s, REWARD: max(0.1, 0.8 - (s - 30) * 0.07), "time/total": 10.0}
            for s in range(30, 50)]
    lines = climb + fall
    lines[12][REWARD] = NAN
    lines[35][REWARD] = INF
    lines.insert(20, {"step": 19, REWARD: 5.0})  # superseded by the next write of step 19
    lines.insert(21, {"step": 19, REWARD: 0.67})
    write_metrics(root / "collapse", lines)
    write_metrics(root / "collapse", [{"step": 3, REWARD: 99.0}], "metrics.jsonl.pre_resume_000003")
    # A steady run: never drops far.
    write_metrics(root / "steady", [{"step": s, REWARD: 0.5 + 0.02 * math.sin(s),
                                     "time/total": 10 + math.cos(s)} for s in range(60)])
    # Step time doubles from step 40; a NaN step inside the slow stretch ends a streak.
    slow = [{"step": s, "time/total": 10.0 + 0.1 * (s % 3) if s < 40 else 25.0}
            for s in range(70)]
    slow[55]["time/total"] = NAN
    write_metrics(root / "slowdown", slow)
    # Older spelling (entropy) beside the newer one at some steps: optim/ wins where both.
    ent = []
    for s in range(40):
        line: dict[str, Any] = {"step": s, "entropy": 1.0 - s * 0.02}
        if s % 4 == 0:
            line["optim/entropy"] = 1.0 - s * 0.01
        ent.append(line)
    write_metrics(root / "spellings", ent)
    # Zero and negative step times: the ratio is undefined there.
    write_metrics(root / "zeros", [{"step": s, "time/total": 0.0 if s < 20 else 5.0}
                                   for s in range(30)])
    for run in root.iterdir():
        (run / "config.json").write_text(json.dumps({"learning_rate": 1e-4}))
    store = runstore.open(base / "store")
    store.ingest([root])
    return root, store


@pytest.fixture(scope="module")
def demo_store(_demo_template: Path, shared_demo_store: Path) -> tuple[Path, runstore.Store]:
    return _demo_template, runstore.open(shared_demo_store)


RULES = ["drop(env/all/reward/total) > 0.3", "drop(env/all/reward/total, 0.5) >= 0.1",
         "drop(env/all/reward/total, 0) > 0.05", "rise(time/total) > 2",
         "rise(time/total, 0.6) >= 1.5", "rise(time/total, 0) > 1.1",
         "drop(entropy) > 0.2", "drop(optim/entropy, 0.3) > 0.1", "rise(entropy) > 0.9"]


@pytest.mark.parametrize("text", RULES)
def test_made_runs_match_the_definitions(made: tuple[Path, runstore.Store], text: str) -> None:
    root, store = made
    assert_rule(store, root, parse_trend(text))


@pytest.mark.parametrize("text", RULES + ["drop(optim/kl_sample_train_v1) > 0.001",
                                          "rise(optim/kl_sample_train_v2, 0.8) > 1.5"])
def test_demo_runs_match_the_definitions(demo_store: tuple[Path, runstore.Store],
                                         text: str) -> None:
    root, store = demo_store
    assert_rule(store, root, parse_trend(text))


def test_what_the_made_runs_show(made: tuple[Path, runstore.Store]) -> None:
    root, store = made
    rows = got(store, [parse_trend("drop(env/all/reward/total) > 0.3"),
                       parse_trend("rise(time/total) > 2")])
    collapse = rows[("collapse", "drop(env/all/reward/total) > 0.3")]
    assert 30 < collapse["first_step"] < 50 and collapse["last_step"] == 49
    assert ("steady", "drop(env/all/reward/total) > 0.3") not in rows
    slow = rows[("slowdown", "rise(time/total) > 2")]
    assert slow["first_step"] > 40 and slow["status"] in ("running", "idle")
    # The NaN step at 55 is a rule step that is not over: the streak breaks there.
    assert slow["longest_streak"] < slow["steps_over"]
    assert not any(k[0] == "zeros" for k in rows)  # 0 s steps: no ratio, no firing
    assert ("collapse", "rise(time/total) > 2") not in rows  # steady 10 s steps


def test_nan_latest_and_superseded_writes(made: tuple[Path, runstore.Store],
                                          tmp_path: Path) -> None:
    root, store = made
    # The pre-resume copy's 99.0 at step 3 and the superseded 5.0 at step 19 would set the best
    # far above anything live; the live best is 0.8 smoothed, so the drop peak stays below it.
    row = got(store, [parse_trend("drop(env/all/reward/total, 0) > 0.3")])[
        ("collapse", "drop(env/all/reward/total, 0) > 0.3")]
    assert row["peak"] < 0.8
    # A run whose last step is NaN reports NaN as latest.
    run = tmp_path / "runs" / "nan_last"
    write_metrics(run, [{"step": s, REWARD: 1.0 if s < 10 else 0.1} for s in range(20)]
                  + [{"step": 20, REWARD: NAN}])
    s2 = runstore.open(tmp_path / "store")
    s2.ingest([tmp_path / "runs"])
    r = got(s2, [parse_trend("drop(env/all/reward/total) > 0.5")])[
        ("nan_last", "drop(env/all/reward/total) > 0.5")]
    assert math.isnan(r["latest"]) and r["last_step"] == 19


@pytest.mark.parametrize("since", [0, 25, 41, 1000])
def test_since_step_ignores_earlier_steps(made: tuple[Path, runstore.Store], since: int) -> None:
    root, store = made
    for text in ("drop(env/all/reward/total) > 0.3", "rise(time/total) > 2"):
        assert_rule(store, root, parse_trend(text), since_step=since)


def test_runs_scope_and_counts(made: tuple[Path, runstore.Store]) -> None:
    root, store = made
    rules = [parse_trend("drop(env/all/reward/total) > 0.3"), parse_trend("rise(time/total) > 2")]
    result = trends.evaluate(store, rules, runs="s*")
    names = {r["run_name"] for r in result.table.to_pylist()}
    assert names == {"slowdown"}
    # Checked: runs in scope with a number of the metric (steady, slowdown; spellings has none).
    assert result.checked == (1, 2) and result.fired == (0, 1)


# ---------------------------------------------------------------------------------------------
# stale


@pytest.fixture(scope="module")
def stale_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runstore.Store, datetime]:
    base = tmp_path_factory.mktemp("stale")
    root = base / "runs"
    specs = [RunSpec("done", steps=5, eval_every=0, save_every=0, logtree=False),
             RunSpec("crashed_long_ago", steps=5, eval_every=0, save_every=0, logtree=False,
                     final_checkpoint=False),
             RunSpec("crashed_recently", steps=5, eval_every=0, save_every=0, logtree=False,
                     final_checkpoint=False),
             RunSpec("done_by_progress", steps=5, eval_every=0, save_every=0, logtree=False,
                     final_checkpoint=False)]
    demo.generate_tree(root, specs, seed=2)
    # The crashed runs stopped half way: no done_frac of 1 (the generator logs the schedule's).
    for name in ("crashed_long_ago", "crashed_recently", "done_by_progress"):
        path = root / name / "metrics.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for row in rows:
            if "progress/done_frac" in row:
                row["progress/done_frac"] = min(row["progress/done_frac"], 0.5)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with open(root / "done_by_progress" / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 5, "progress/done_frac": 1.0}) + "\n")
    # `now` is the real time: run_status calls a run `running` when its files changed in the
    # last 120 s of the clock, so file times are set in the past of the real clock.
    now = datetime.now(timezone.utc).replace(microsecond=0)
    ages = {"done": 500, "crashed_long_ago": 90, "crashed_recently": 10,
            "done_by_progress": 300}
    for name, minutes in ages.items():
        t = (now - timedelta(minutes=minutes)).timestamp()
        for dirpath, _, files in os.walk(root / name):
            for f in files:
                os.utime(Path(dirpath) / f, (t, t))
    store = runstore.open(base / "store")
    store.ingest([root])
    return root, store, now


def newest_mtime(run: Path) -> float:
    return max(p.stat().st_mtime for p in run.rglob("*") if p.is_file())


@pytest.mark.parametrize("minutes", [0, 5, 30, 89.5, 95, 600])
def test_stale_matches_file_times(stale_tree: tuple[Path, runstore.Store, datetime],
                                  minutes: float) -> None:
    root, store, now = stale_tree
    rule = TrendRule("stale", None, ">", minutes)
    rows = {n: r for (n, _), r in got(store, [rule], now=now).items()}
    want = {}
    for name, run in ao.runs(root).items():
        age = (now.timestamp() - newest_mtime(run)) / 60
        done = oracle.has_final_checkpoint(run) or any(
            k == "progress/done_frac" and ao.is_number(v) and v >= 1
            for (_, k), v in oracle.live_metrics(run).items())
        if not done and age > minutes:
            want[name] = age
    assert set(rows) == set(want)
    assert ("crashed_long_ago" in want) == (minutes < 90)
    assert ("crashed_recently" in want) == (minutes < 10)
    for name, age in want.items():
        r = rows[name]
        assert math.isclose(r["peak"], age, abs_tol=1e-3) and r["latest"] == r["peak"]
        assert r["first_step"] == r["last_step"] == 4
        assert r["steps_over"] is None and r["longest_streak"] is None
        assert r["status"] == "idle"


def test_stale_counts_every_run_with_a_source_time(
        stale_tree: tuple[Path, runstore.Store, datetime]) -> None:
    _, store, now = stale_tree
    result = trends.evaluate(store, [parse_trend("stale > 60")], now=now)
    assert result.checked == (4,) and result.fired == (1,)
    naive = trends.evaluate(store, [parse_trend("stale > 60")], now=now.replace(tzinfo=None))
    assert naive.fired == (1,)


# ---------------------------------------------------------------------------------------------
# Parsing


@pytest.mark.parametrize("text, kind, metric, weight, op, value", [
    ("drop(env/all/reward/total) > 0.2", "drop", "env/all/reward/total", None, ">", 0.2),
    ("  DROP( env/all/reward/total ,0.8 )>=1e-1", "drop", "env/all/reward/total", 0.8, ">=", 0.1),
    ('rise("time/a b", 0) > 2', "rise", "time/a b", 0.0, ">", 2.0),
    ("rise('time/sample_async:total') > (3)", "rise", "time/sample_async:total", None, ">", 3.0),
    ("stale > 30", "stale", None, None, ">", 30.0),
    ("stale >= 0", "stale", None, None, ">=", 0.0),
])
def test_parse(text: str, kind: str, metric: str | None, weight: float | None, op: str,
               value: float) -> None:
    r = parse_trend(text)
    assert r is not None
    assert (r.kind, r.metric, r.weight, r.op, r.value) == (kind, metric, weight, op, value)
    assert parse_trend(r.name) == r


@pytest.mark.parametrize("text", ["optim/entropy < 0.05", '"stale" > 3', "drop > 3",
                                  "stale", "stale_runs > 3", "rise_time > 2", ""])
def test_not_trend_rules(text: str) -> None:
    assert parse_trend(text) is None


@pytest.mark.parametrize("text, message", [
    ("drop(x) < 0.2", "trend rules fire above a value, so they take > or >="),
    ("stale < 5", "take > or >="),
    ("drop(x > 0.2", "has no closing parenthesis"),
    ("drop() > 1", "is not a metric name"),
    ("drop(a b) > 1", r"'a b' is not a metric name \(quote"),
    ("drop(x, 1.5) > 0.1", r"smoothing weight in \[0, 1\)"),
    ("drop(x, w) > 0.1", "the second argument is the smoothing weight"),
    ("rise(x) > 0", "above 0"),
    ("drop(x) > -1", "at least 0"),
    ("stale > -1", "at least 0"),
    ("drop(x) > abc", "'abc' is not a number"),
    ("rise(x)", "must be followed by > or >="),
])
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as e:
        parse_trend(text)
    assert "trend rules are drop(METRIC) > X" in str(e.value)


metrics = st.one_of(st.sampled_from(["env/all/reward/total", "time/total", "entropy"]),
                    st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1,
                            max_size=12).filter(lambda s: s.strip() and '"' not in s))


@settings(max_examples=examples(200), deadline=None)
@given(st.sampled_from(["drop", "rise"]), metrics,
       st.one_of(st.none(), st.floats(0, 1, exclude_max=True)), st.sampled_from([">", ">="]),
       st.floats(0.001, 1e6))
def test_written_rules_read_back(kind: str, metric: str, weight: float | None, op: str,
                                 value: float) -> None:
    rule = TrendRule(kind, metric, op, value, weight=weight)  # type: ignore[arg-type]
    back = parse_trend(rule.text())
    assert back == rule and back.name == rule.name


def test_toml_entries() -> None:
    from runstore.health.config import toml_rule

    r = toml_rule("f: rule 1", {"trend": "drop", "metric": "env/all/reward/total",
                                        "op": ">", "value": 0.2, "smooth": 0.8,
                                        "name": "reward collapse"})
    assert r == TrendRule("drop", "env/all/reward/total", ">", 0.2, weight=0.8,
                          name="reward collapse")
    assert toml_rule("f", {"trend": "stale", "op": ">", "value": 30}).name == "stale > 30"
    assert not isinstance(toml_rule("f", {"metric": "x", "op": "<", "value": 1}), TrendRule)
    for entry, message in [
            ({"trend": "drop", "op": ">", "value": 1}, "f: rule 2 has no 'metric'"),
            ({"trend": "rise", "metric": "x", "op": ">", "value": 2, "window": 3},
             "unknown key 'window'"),
            ({"trend": "stale", "metric": "x", "op": ">", "value": 2}, "stale takes no metric"),
            ({"trend": "fall", "metric": "x", "op": ">", "value": 2}, "one of drop, rise, stale"),
            ({"trend": "drop", "metric": ["a", "b"], "op": ">", "value": 2}, "is one name")]:
        with pytest.raises(UsageError, match=message):
            toml_rule("f: rule 2", entry)


# ---------------------------------------------------------------------------------------------
# `optim/X` and `X`: one family in both directions, a `/` inside X included (issue 29)

# Key shapes as trainers write them: one to three `/`-separated parts (`loss`, `a/b`,
# `time/sample_async:total`, `env/all/reward/total`), the first never `optim` itself.
_part = st.text(st.sampled_from("abeimnoprtx_019:.-"), min_size=1, max_size=7)
key_shapes = st.lists(_part, min_size=1, max_size=3).map("/".join).filter(
    lambda k: not k.startswith("optim/"))


@settings(max_examples=300, deadline=None)
@given(key_shapes)
def test_family_is_one_rule_both_ways(x: str) -> None:
    from runstore.query.keys import family

    assert family(x) == family("optim/" + x) == ("optim/" + x, x)
    assert family(x) == oracle.rule_family(x) == oracle.rule_family("optim/" + x)
    for name in family(x):
        assert name in family(name)  # a name always reads its own key


@settings(max_examples=8, deadline=None)
@given(key=key_shapes, drop=st.floats(0.05, 0.6))
def test_both_spellings_give_the_same_rows(key: str, drop: float, tmp_path_factory: Any) -> None:
    """Runs logging `X`, `optim/X`, or both (the `optim/` write wins at a step with both):
    `drop(X, 0)` and `drop(optim/X, 0)`, and `X < v` and `optim/X < v`, give the same rows,
    and the rows the files say."""
    base = tmp_path_factory.mktemp("families")
    root = base / "runs"
    values = [1.0 - 0.03 * s for s in range(30)]
    write_metrics(root / "bare", [{"step": s, key: v} for s, v in enumerate(values)])
    write_metrics(root / "prefixed", [{"step": s, "optim/" + key: v - 0.1}
                                      for s, v in enumerate(values)])
    write_metrics(root / "both", [{"step": s, key: 5.0, **({"optim/" + key: v} if s % 2 else {})}
                                  for s, v in enumerate(values)])
    store = runstore.open(base / "store")
    store.ingest([root])
    answers = []
    for metric in (key, "optim/" + key):
        rule = TrendRule("drop", metric, ">", drop, weight=0.0)
        trend = {n: {k: v for k, v in r.items() if k not in ("rule", "run_id")}
                 for (n, _), r in got(store, [rule]).items()}
        assert_rule(store, root, rule)
        threshold = checks.check(store, rules=[Rule(metric, "<", 0.5)], default_rules=False,
                                 config=False).table.to_pylist()
        want = oracle.check_rule(root, metric, "<", 0.5)
        assert sorted(r["run_name"] for r in threshold) == sorted(want)
        answers.append((trend, [{k: v for k, v in r.items() if k != "rule"} for r in threshold]))
    assert answers[0] == answers[1]
    assert {"bare", "prefixed", "both"} <= {r["run_name"] for r in answers[0][1]}


def test_bad_since_step(made: tuple[Path, runstore.Store]) -> None:
    with pytest.raises(UsageError, match="since_step"):
        trends.evaluate(made[1], [parse_trend("stale > 1")], since_step=1.5)  # type: ignore[arg-type]


def test_doctests() -> None:
    import doctest

    result = doctest.testmod(trends)
    assert result.attempted >= 4 and result.failed == 0
