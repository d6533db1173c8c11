"""Health checks (`runstore check`, `store.check`, `ingest --watch`) against known answers.

Expected rows come from `oracle.check_rule`, a plain-Python reading of the run files, and from
the generator's specs (which runs were built with which KL edge case); never from runstore.
The watch tests run a real `python -m runstore ingest --watch` process, feed it a live run
(half a line first), and stop it with SIGINT / SIGTERM, each bounded by a deadline.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import given, settings, strategies as st

import oracle
import runstore
from runstore.health import config, evaluate
from runstore import demo
from runstore.health import rules as rules_mod
from runstore.query import keys
from runstore.query.rows import Rows
from runstore.health.grammar import quoted
from runstore.health.rules import KL_METRICS, Rule, parse_rule
from runstore.demo import RunSpec
from runstore.errors import QueryError, RunstoreError, UsageError
from runstore.health.watch import Watcher, watch
from storekit import cli as run_cli

KL = KL_METRICS
COLUMNS = list(evaluate.COLUMNS)
NUMBERS = ("first_step", "last_step", "steps_over", "longest_streak", "peak", "latest")


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def awkward_store(shared_awkward_store: Path) -> runstore.Store:
    return runstore.open(shared_awkward_store)


@pytest.fixture(scope="module")
def demo_store(shared_demo_store: Path) -> runstore.Store:
    return runstore.open(shared_demo_store)


# Prefixed and unprefixed spellings with the same spike, and a run that logs both spellings
# with a spike only in the unprefixed one (the prefixed write wins, so it must not fire).
SPELLING_SPECS = [
    RunSpec("spelling/prefixed", layout="flat", steps=12, eval_every=5, save_every=5,
            logtree=False, kl_spike_at=7),
    RunSpec("spelling/unprefixed", layout="flat", steps=12, eval_every=5, save_every=5,
            logtree=False, kl_spike_at=7, unprefixed_kl=True),
    RunSpec("spelling/both", layout="flat", steps=12, eval_every=5, save_every=5,
            logtree=False),
]


@pytest.fixture(scope="module")
def spelling(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runstore.Store]:
    base = tmp_path_factory.mktemp("checks_spelling")
    root = base / "runs"
    demo.generate_tree(root, SPELLING_SPECS, seed=5)
    # `both`: every step also logs the unprefixed names, far above the threshold.
    path = root / "spelling" / "both" / "metrics.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "optim/kl_sample_train_v1" in row:
            row["kl_sample_train_v1"] = 0.9
            row["kl_sample_train_v2"] = 0.9
        lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")
    store = runstore.open(base / "store")
    store.ingest([root], on_warning=lambda text: None)
    return root, store


def rows_by_run(table: Any, rule: str | None = None) -> dict[str, dict[str, Any]]:
    """run_name → row (of one rule) from a polars frame or a pyarrow table."""
    data = table.to_dicts() if hasattr(table, "to_dicts") else table.to_pylist()
    out = {}
    for r in data:
        if rule is None or r["rule"] == rule:
            assert r["run_name"] not in out, f"two rows for {r['run_name']} / {r['rule']}"
            out[r["run_name"]] = r
    return out


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def assert_matches_oracle(got: dict[str, dict[str, Any]],
                          want: dict[str, dict[str, Any]]) -> None:
    assert sorted(got) == sorted(want)
    for name, row in want.items():
        for col in NUMBERS:
            assert same(got[name][col], row[col]), (name, col, got[name][col], row[col])


# ---------------------------------------------------------------------------------------------
# The default KL rule: known answers


def test_default_rule_fires_for_exactly_the_runs_over_threshold(
        awkward_store: runstore.Store, demo_store: runstore.Store, _awkward_template: Path,
        _demo_template: Path) -> None:
    awkward = rows_by_run(awkward_store.check(config=False))
    # The generator put KL above 0.01 (live) in exactly these runs.
    assert sorted(awkward) == ["awkward/kl/infinity", "awkward/kl/v2_only_spike"]
    assert_matches_oracle(awkward, oracle.check_rule(_awkward_template, KL, ">", 0.01))
    shown = rows_by_run(demo_store.check(config=False))
    assert sorted(shown) == ["gsm8k_tool_rl/sweep/lr_1e-3/seed_0"]
    assert_matches_oracle(shown, oracle.check_rule(_demo_template, KL, ">", 0.01))
    row = shown["gsm8k_tool_rl/sweep/lr_1e-3/seed_0"]
    assert row["rule"] == "kl_sample_train_v1|v2 > 0.01" and row["first_step"] == 22
    assert row["status"] == "completed"


def test_exactly_the_threshold_does_not_fire(awkward_store: runstore.Store,
                                             _awkward_template: Path) -> None:
    run = _awkward_template / "awkward" / "kl" / "exact_threshold"
    assert 0.01 in [v for (_, k), v in oracle.live_numbers(run).items()
                    if k == "optim/kl_sample_train_v1"]
    assert "awkward/kl/exact_threshold" not in rows_by_run(awkward_store.check(config=False))
    lower = rows_by_run(awkward_store.check(threshold=0.0099, config=False))
    assert lower["awkward/kl/exact_threshold"]["first_step"] == 6
    at = rows_by_run(awkward_store.check(rules=["optim/kl_sample_train_v1 >= 0.01"],
                                         default_rules=False, config=False))
    assert at["awkward/kl/exact_threshold"]["first_step"] == 6


def test_nan_never_fires_for_any_op(awkward_store: runstore.Store) -> None:
    rules = [f"{name} {op} {value}" for name in ("optim/kl_sample_train_v1", "kl_sample_train_v2")
             for op, value in ((">", -1e9), (">=", -1e9), ("<", 1e9), ("<=", 1e9))]
    got = awkward_store.check(rules=rules, threshold=-1e9, runs="awkward/kl/nan_only",
                              config=False)
    assert got.height == 0


def test_infinity_fires(awkward_store: runstore.Store) -> None:
    row = rows_by_run(awkward_store.check(config=False))["awkward/kl/infinity"]
    assert row["peak"] == math.inf and (row["first_step"], row["last_step"]) == (4, 9)
    assert row["steps_over"] == 2 and row["longest_streak"] == 1
    assert row["latest"] < 0.01  # the run recovered


@pytest.mark.parametrize("style", ["truncate", "duplicate"])
def test_spike_overwritten_by_a_resume_does_not_fire(awkward_store: runstore.Store,
                                                     _awkward_template: Path,
                                                     style: str) -> None:
    run = _awkward_template / "awkward" / "kl" / "spike_overwritten" / style
    assert max(oracle.all_kl_writes(run)) > 0.01  # the spike is in the files ...
    got = awkward_store.check(config=False, runs=f"awkward/kl/spike_overwritten/{style}")
    assert got.height == 0  # ... but no live value is over
    assert awkward_store.check(threshold=0.0001, config=False,
                               runs=f"awkward/kl/spike_overwritten/{style}").height == 1


def test_v2_only_spike_fires(awkward_store: runstore.Store, _awkward_template: Path) -> None:
    row = rows_by_run(awkward_store.check(config=False))["awkward/kl/v2_only_spike"]
    assert (row["first_step"], row["steps_over"], row["longest_streak"]) == (8, 4, 4)
    v1_only = awkward_store.check(rules=["optim/kl_sample_train_v1 > 0.01"],
                                  default_rules=False, config=False,
                                  runs="awkward/kl/v2_only_spike")
    assert v1_only.height == 0


def test_unprefixed_names_fire_like_prefixed(spelling: tuple[Path, runstore.Store]) -> None:
    root, store = spelling
    got = rows_by_run(store.check(config=False))
    assert sorted(got) == ["spelling/prefixed", "spelling/unprefixed"]
    assert_matches_oracle(got, oracle.check_rule(root, KL, ">", 0.01))
    assert got["spelling/prefixed"]["first_step"] == got["spelling/unprefixed"]["first_step"] == 7
    # A rule written either way covers both spellings.
    for text in ("kl_sample_train_v1 > 0.01", "optim/kl_sample_train_v1 > 0.01"):
        rule_rows = rows_by_run(store.check(rules=[text], default_rules=False, config=False))
        assert sorted(rule_rows) == ["spelling/prefixed", "spelling/unprefixed"], text


def test_prefixed_write_wins_over_unprefixed_at_one_step(
        spelling: tuple[Path, runstore.Store]) -> None:
    root, store = spelling
    # `both` logs 0.9 under the bare names, a normal value under optim/: not a spike.
    assert "spelling/both" not in rows_by_run(store.check(config=False))
    assert "spelling/both" not in oracle.check_rule(root, KL, ">", 0.01)


@pytest.mark.parametrize("threshold", [0.01, 0.0099, 0.002, 0.03, 1.0, -1e9])
def test_default_rule_agrees_with_kl_health(awkward_store: runstore.Store,
                                            demo_store: runstore.Store,
                                            spelling: tuple[Path, runstore.Store],
                                            threshold: float) -> None:
    for store in (awkward_store, demo_store, spelling[1]):
        fired = rows_by_run(store.check(threshold=threshold, config=False))
        health = {r["run_name"]: r for r in store.sql(
            "select * from kl_health where flagged",
            params={"kl_threshold": threshold}).to_dicts()}
        assert sorted(fired) == sorted(health)
        for name, h in health.items():
            row = fired[name]
            assert (row["first_step"], row["last_step"], row["steps_over"],
                    row["longest_streak"]) == (h["first_step_over"], h["last_step_over"],
                                               h["steps_over"], h["longest_streak_over"])
            assert row["peak"] == max(v for v in (h["max_kl_v1"], h["max_kl_v2"])
                                      if v is not None)


def test_store_kl_threshold_setting_is_the_default(_awkward_template: Path,
                                                   tmp_path: Path) -> None:
    store = runstore.open(tmp_path / "store")
    store.ingest([_awkward_template / "awkward" / "kl"], on_warning=lambda text: None)
    assert sorted(rows_by_run(store.check(config=False))) == ["infinity", "v2_only_spike"]
    store.set_setting("kl_threshold", 0.05)
    got = rows_by_run(store.check(config=False))
    assert list(got) == ["infinity"] and got["infinity"]["rule"].endswith("> 0.05")
    assert len(store.check(threshold=0.01, config=False)) == 2  # an argument still wins


# ---------------------------------------------------------------------------------------------
# Custom rules


CUSTOM = [
    ("optim/entropy < 0.3", "optim/entropy", "<", 0.3),
    ("entropy <= 0.31", "entropy", "<=", 0.31),
    ("env/all/reward/total >= 0.875", "env/all/reward/total", ">=", 0.875),
    ('"optim/kl_sample_train_v2" > 0.02', "optim/kl_sample_train_v2", ">", 0.02),
    ("0.5 > env/all/reward/total", "env/all/reward/total", "<", 0.5),
]


@pytest.mark.parametrize("text,metric,op,value", CUSTOM, ids=[c[0] for c in CUSTOM])
def test_custom_rules_match_oracle(awkward_store: runstore.Store, _awkward_template: Path,
                                   text: str, metric: str, op: str, value: float) -> None:
    got = awkward_store.check(rules=[text], default_rules=False, config=False)
    assert set(got["rule"].to_list()) <= {parse_rule(text).name}
    want = oracle.check_rule(_awkward_template, metric, op, value)
    assert want, "the rule should fire somewhere, or the test proves little"
    assert_matches_oracle(rows_by_run(got), want)


def test_several_rules_in_one_call(awkward_store: runstore.Store, _awkward_template: Path) -> None:
    texts = ["optim/entropy < 0.3", "env/all/reward/total >= 0.875"]
    got = awkward_store.check(rules=texts, config=False)
    names = got["rule"].to_list()
    assert set(names) == {"kl_sample_train_v1|v2 > 0.01", *texts}
    # Sorted by run, then in rule order.
    keys = [(r, ["kl_sample_train_v1|v2 > 0.01", *texts].index(n))
            for r, n in zip(got["run_name"].to_list(), names)]
    assert keys == sorted(keys)
    for text, (metric, op, value) in zip(texts, [("optim/entropy", "<", 0.3),
                                                 ("env/all/reward/total", ">=", 0.875)]):
        assert_matches_oracle(rows_by_run(got, text),
                              oracle.check_rule(_awkward_template, metric, op, value))


def test_rule_objects_and_several_metrics(awkward_store: runstore.Store,
                                          _awkward_template: Path) -> None:
    rule = Rule(("optim/kl_sample_train_v1", "optim/kl_sample_train_v2"), ">", 0.01,
                name="my kl")
    got = rows_by_run(awkward_store.check(rules=[rule], default_rules=False, config=False))
    assert {r["rule"] for r in got.values()} == {"my kl"}
    assert_matches_oracle(got, oracle.check_rule(_awkward_template, KL, ">", 0.01))


def test_runs_glob_and_since_step(awkward_store: runstore.Store, _awkward_template: Path) -> None:
    got = rows_by_run(awkward_store.check(runs="*infinity", config=False))
    assert list(got) == ["awkward/kl/infinity"]
    assert awkward_store.check(runs="awkward/values/*", config=False).height == 0
    for since in (0, 5, 9, 10, 12):
        got = rows_by_run(awkward_store.check(since_step=since, config=False))
        assert_matches_oracle(got, oracle.check_rule(_awkward_template, KL, ">", 0.01,
                                                     since_step=since))
    got = rows_by_run(awkward_store.check(since_step=5, config=False))
    assert got["awkward/kl/infinity"]["first_step"] == 9
    assert got["awkward/kl/infinity"]["steps_over"] == 1
    got = rows_by_run(awkward_store.check(rules=["optim/entropy < 0.3"], since_step=6,
                                          runs="awkward/kl/*", default_rules=False,
                                          config=False))
    assert_matches_oracle(got, oracle.check_rule(_awkward_template, "optim/entropy", "<", 0.3,
                                                 since_step=6, runs="awkward/kl/*"))


def test_columns_and_types(awkward_store: runstore.Store) -> None:
    df = awkward_store.check(config=False)
    assert df.columns == COLUMNS
    assert [str(t) for t in df.dtypes] == ["String", "String", "Int64", "Int64", "Int64",
                                           "Int64", "Float64", "Float64", "String"]
    empty = awkward_store.check(config=False, since_step=10 ** 12)  # no step that late
    assert empty.columns == COLUMNS and empty.height == 0
    # A scope that matches no run is an error naming it (a typo must not look like "no data").
    with pytest.raises(QueryError, match="no run matches --runs 'no such run'"):
        awkward_store.check(config=False, runs="no such run")


GOOD_RULES = [
    ("optim/entropy < 0.05", ("optim/entropy",), "<", 0.05),
    ("optim/entropy<0.05", ("optim/entropy",), "<", 0.05),
    ('"optim/entropy" >= 1e-3', ("optim/entropy",), ">=", 0.001),
    ("'optim/entropy' <= -2", ("optim/entropy",), "<=", -2.0),
    ("time/sample_async:total > 30", ("time/sample_async:total",), ">", 30.0),
    ("env/all/reward/total > .5", ("env/all/reward/total",), ">", 0.5),
    ('"a metric with spaces" > 1', ("a metric with spaces",), ">", 1.0),
    ("0.05 > entropy", ("entropy",), "<", 0.05),
    ("x > -(2)", ("x",), ">", -2.0),
]


@pytest.mark.parametrize("text,metrics,op,value", GOOD_RULES, ids=[g[0] for g in GOOD_RULES])
def test_parse_rule(text: str, metrics: tuple[str, ...], op: str, value: float) -> None:
    rule = parse_rule(text)
    assert (rule.metrics, rule.op, rule.value) == (metrics, op, value)
    # A rule's name is rule text that reads back as the rule (`'my metric > 1'` did not).
    again = parse_rule(rule.name)
    assert (again.metrics, again.op, again.value, again.name) == \
        (metrics, op, value, rule.name)


BAD_RULES = [
    ("", "empty rule"),
    ("optim/entropy", "there is no comparison"),
    ("optim/entropy = 0.05", "'=' is not one of > >= < <="),
    ("stale", "; trend rules are drop(METRIC) > X"),  # both hints: it may be either kind
    ("drop env/all/reward/total", "trend rules are"),
    ("optim/entropy != 0.05", "is not one of > >= < <="),
    ("a > 1 and b < 2", "there are 2 comparisons"),
    ("optim/entropy > high", "'high' is not a number"),
    ("optim/entropy > nan", "'nan' is not a number"),
    # Python reads other scripts' digits as numbers (float("١") is 1.0); a rule does not.
    ("optim/entropy > \u0661", "'\u0661' is not a number"),
    ("optim/entropy > \uff11.5", "is not a number"),
    ("optim/entropy > 1e999", "finite number"),
    ("abs(x) > 1", "'abs(x)' is not a metric name"),
    ("my metric > 1", "'my metric' is not a metric name"),
    ("1 < 2", "both sides are numbers"),
    ("x > 1; drop table runs", "without ';'"),
    ('"unterminated > 1', "unterminated string"),
    ("> 1", "needs a metric on one side"),
]


@pytest.mark.parametrize("text,message", BAD_RULES, ids=[b[0] or "empty" for b in BAD_RULES])
def test_parse_rule_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=None) as err:
        parse_rule(text)
    assert message in str(err.value)
    assert "METRIC OP NUMBER" in str(err.value)  # and says what a rule looks like


@pytest.mark.parametrize("text,column", [
    ("optim/entropy = 0.05", 15), ("a > 1 and b < 2", 13), ("x > 1; drop table runs", 6),
    ('x > 1 and "unterminated', 11), ("abs(x) > 1", 1), ("optim/entropy >  high", 18),
    ("drop(x > 0.2", 5), ("drop( a b ) > 1", 7), ("rise(x) 2", 9), ("drop(x) < 0.2", 9),
    ("drop(x, w) > 1", 8), ("stale >", 8), ("> 1", 1),
])
def test_rule_errors_say_where(text: str, column: int) -> None:
    """One grammar for both kinds of rule, and each mistake is placed: the column (1-based)
    of the character where it starts."""
    with pytest.raises(UsageError) as err:
        parse_rule(text)
    assert f"cannot read rule {text!r} at column {column}: " in str(err.value)


@settings(max_examples=500, deadline=None)
@given(st.text(st.sampled_from("ab/:. _-0123456789e()\"',;<>=!dropisetaRIS\t")))
def test_any_text_is_a_rule_or_a_usage_error(text: str) -> None:
    """Whatever the text, reading it gives a rule or says why not (never another error)."""
    try:
        rule = parse_rule(text)
    except UsageError as e:
        assert str(e).startswith(("cannot read rule", "empty rule"))
    else:
        assert parse_rule(rule.name if not isinstance(rule, Rule) else
                          f"{quoted(rule.metrics[0])} {rule.op} {rule.value!r}") == rule


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=12)
       .filter(str.strip), st.sampled_from([">", ">=", "<", "<="]),
       st.floats(allow_nan=False, allow_infinity=False))
def test_written_threshold_rules_read_back(metric: str, op: str, value: float) -> None:
    rule = Rule(metric, op, value)  # type: ignore[arg-type]
    assert parse_rule(f"{quoted(metric)} {op} {value!r}") == rule
    assert parse_rule(f"{value!r} {dict(zip('<>', '><')).get(op[0])}{op[1:]} "
                      f"{quoted(metric)}") == rule


def test_rule_values_never_reach_sql_text() -> None:
    sql, params = evaluate.check_query([parse_rule('"we\'ird/na""me" > 0.123456789')],
                                     runs="x'y*", since_step=7)
    assert "we'ird" not in sql and "0.123456789" not in sql and "x'y" not in sql
    assert "$since_step" in sql and "$runs" in sql
    # The name and its `optim/` spelling (one family, issue 29), as bound values.
    assert params["key_name"] == ['optim/we\'ird/na"me', 'we\'ird/na"me']
    assert params["rule_value"] == [0.123456789]


def test_rule_validation() -> None:
    with pytest.raises(UsageError, match="op must be one of"):
        Rule("x", "==", 1)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="finite"):
        Rule("x", ">", math.nan)
    with pytest.raises(UsageError, match="no rules to check"):
        config.resolve_rules(default_rules=False)
    with pytest.raises(UsageError, match="two different rules are named"):
        config.resolve_rules(rules=[Rule("a", ">", 1, name="n"), Rule("b", ">", 1, name="n")])
    with pytest.raises(UsageError, match="--threshold"):
        config.resolve_rules(threshold=0.1, default_rules=False, rules=["x > 1"])
    # The same rule twice is one rule.
    assert len(config.resolve_rules(rules=["x > 1", "x > 1"], default_rules=False)) == 1


# ---------------------------------------------------------------------------------------------
# runstore.toml


@pytest.fixture
def kl_store(_awkward_template: Path, tmp_path: Path) -> Path:
    """A store (tmp_path/work/store) of the awkward KL runs; tmp_path/work is 'beside'."""
    path = tmp_path / "work" / "store"
    runstore.open(path).ingest([_awkward_template / "awkward" / "kl"],
                               on_warning=lambda text: None)
    return path


TOML = """\
[check]
threshold = 0.03

[[check.rule]]
metric = "optim/entropy"
op = "<"
value = 0.3

[[check.rule]]
metric = ["optim/kl_sample_train_v2", "optim/kl_sample_train_v1"]
op = ">="
value = 0.01
name = "any kl at or over 0.01"
"""


def test_toml_saved_with_a_bom_and_crlf_reads_as_without(tmp_path: Path) -> None:
    """Windows editors save UTF-8 with a BOM (and CRLF endings): it was refused as "not
    valid TOML", so `check` ran none of the file's rules."""
    import tomllib

    path = tmp_path / "runstore.toml"
    path.write_bytes(b"\xef\xbb\xbf" + TOML.replace("\n", "\r\n").encode())
    assert config.read_toml(path) == tomllib.loads(TOML)
    assert [r.name for r in config.load_config(path).rules] == \
        ["optim/entropy < 0.3", "any kl at or over 0.01"]


def test_toml_beside_the_store(kl_store: Path, _awkward_template: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(kl_store.parent.parent)  # a working directory without a runstore.toml
    (kl_store.parent / "runstore.toml").write_text(TOML)
    result = run_cli(kl_store, "check", "-F", "json")
    assert result.exit_code == 1, result.output
    rows = json.loads(result.stdout)
    root = _awkward_template / "awkward" / "kl"
    by_rule: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by_rule.setdefault(r["rule"], {})[r["run_name"]] = r
    assert set(by_rule) == {"kl_sample_train_v1|v2 > 0.03", "optim/entropy < 0.3",
                            "any kl at or over 0.01"}
    assert_matches_oracle(by_rule["kl_sample_train_v1|v2 > 0.03"],
                          oracle.check_rule(root, KL, ">", 0.03))
    assert_matches_oracle(by_rule["optim/entropy < 0.3"],
                          oracle.check_rule(root, "optim/entropy", "<", 0.3))
    assert_matches_oracle(by_rule["any kl at or over 0.01"],
                          oracle.check_rule(root, KL, ">=", 0.01))
    assert "exact_threshold" in by_rule["any kl at or over 0.01"]  # >= fires at 0.01
    # Arguments beat the file; --no-default-rules keeps the file's own rules.
    result = run_cli(kl_store, "check", "-F", "json", "--threshold", "0.01")
    assert "kl_sample_train_v1|v2 > 0.01" in {r["rule"] for r in json.loads(result.stdout)}
    result = run_cli(kl_store, "check", "-F", "json", "--no-default-rules")
    assert {r["rule"] for r in json.loads(result.stdout)} == {"optim/entropy < 0.3",
                                                              "any kl at or over 0.01"}


def test_toml_in_the_working_directory(kl_store: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    (cwd / "runstore.toml").write_text("[check]\ndefault_rules = false\n\n[[check.rule]]\n"
                                       'metric = "optim/entropy"\nop = "<"\nvalue = 0.3\n'
                                       'name = "entropy collapse"\n')
    monkeypatch.chdir(cwd)
    result = run_cli(kl_store, "check", "-F", "jsonl")
    assert result.exit_code == 1
    assert {json.loads(line)["rule"] for line in result.stdout.splitlines()} == {
        "entropy collapse"}
    # The file beside the store wins over the working directory's.
    (kl_store.parent / "runstore.toml").write_text(
        "[check]\ndefault_rules = false\n\n[[check.rule]]\n"
        'metric = "optim/entropy"\nop = "<"\nvalue = -1\n')
    result = run_cli(kl_store, "check", "-F", "csv")
    assert result.exit_code == 0 and result.stdout.splitlines() == [",".join(COLUMNS)]


@pytest.mark.parametrize("text,message", [
    ("[check\n", "is not valid TOML"),
    ("[check]\nthreshhold = 0.1\n", "unknown key check.threshhold"),
    ("[check]\nthreshold = 'high'\n", "check.threshold must be a number"),
    ("[[check.rule]]\nmetric = 'x'\nop = '=='\nvalue = 1\n", "rule 1: rule op must be one of"),
    ("[[check.rule]]\nmetric = 'x'\nop = '>'\n", "rule 1 has no 'value'"),
    ("[[check.rule]]\nmetric = 'x'\nop = '>'\nvalue = 1\ncolour = 'red'\n", "unknown key 'colour'"),
    ("[[check.rule]]\nmetric = 'x'\nop = '>'\nvalue = 'nan'\n", "must be a number"),
    ("[check]\nthreshold = nan\n", "check.threshold must be a number (not NaN"),
    ("[check]\nthreshold = -inf\n", "check.threshold must be a number (not NaN"),
    # A table runstore.toml does not have would be ignored: a gate checking less than written.
    ("[[rules]]\nmetric = 'x'\nop = '>'\nvalue = 1\n",
     "unknown table [rules]; runstore.toml takes [check] (rules are [[check.rule]] tables)"),
    ("[chek]\nthreshold = 0.5\n", "unknown table [chek]; did you mean [check]?"),
    ("threshold = 0.5\n", "unknown key threshold"),
    # A name two different rules share: which two, and where each was written.
    ("[[check.rule]]\nmetric = 'x'\nop = '>'\nvalue = 1\nname = 'kl_sample_train_v1|v2 > 0.01'\n",
     "(the default KL rule and /"),
    ("[[check.rule]]\nmetric = 'x'\nop = '>'\nvalue = 1\nname = 'a'\n\n"
     "[[check.rule]]\nmetric = 'x'\nop = '<'\nvalue = 1\nname = 'a'\n",
     "/runstore.toml: rule 1 and /"),
])
def test_bad_toml_is_a_usage_error(kl_store: Path, text: str, message: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(kl_store.parent)
    (kl_store.parent / "runstore.toml").write_text(text)
    result = run_cli(kl_store, "check")
    assert result.exit_code == 2
    assert "runstore.toml" in result.output and message in result.output


# ---------------------------------------------------------------------------------------------
# The command: exit codes and formats


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_a_threshold_that_is_no_finite_number_names_the_option(
        awkward_store: runstore.Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        value: str) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli(awkward_store.path, "check", "--threshold", value)
    assert result.exit_code == 2, result.output
    assert "--threshold" in result.output and "not NaN or ±Infinity" in result.output


def test_exit_codes(awkward_store: runstore.Store, tmp_path: Path,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = awkward_store.path
    assert run_cli(store, "check", "-F", "csv").exit_code == 1
    # +Infinity is over any threshold, so a high threshold alone still fires for one run.
    assert run_cli(store, "check", "-F", "csv", "--threshold", "1e12").stdout.count("\n") == 2
    assert run_cli(store, "check", "-F", "csv", "--threshold", "1",
                   "--runs", "*v2_only_spike").exit_code == 0
    assert run_cli(store, "check", "-F", "csv", "--runs", "awkward/values/*").exit_code == 0
    assert run_cli(store, "check", "-F", "csv", "--since-step", "12").exit_code == 0
    missing = run_cli(tmp_path / "nowhere", "check")
    assert missing.exit_code == 3 and "no store at" in missing.output
    bad = run_cli(store, "check", "--rule", "optim/entropy = 1")
    assert bad.exit_code == 2 and "Error: cannot read rule" in bad.output
    assert run_cli(store, "check", "--since-step", "ten").exit_code == 2
    assert run_cli(store, "check", "--no-default-rules").exit_code == 2
    assert run_cli(store, "check", "-F", "nope").exit_code == 2


def test_exit_codes_from_a_real_process(awkward_store: runstore.Store, tmp_path: Path) -> None:
    def rc(*args: str) -> int:
        return subprocess.run([sys.executable, "-m", "runstore", *args], cwd=tmp_path,
                              capture_output=True, timeout=60).returncode

    assert rc("--store", str(awkward_store.path), "check") == 1
    assert rc("--store", str(awkward_store.path), "check", "--runs", "*/values/*") == 0
    assert rc("--store", str(tmp_path / "nowhere"), "check") == 3


def test_every_format(awkward_store: runstore.Store, tmp_path: Path,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = awkward_store.path
    want = rows_by_run(awkward_store.check(config=False))

    out = run_cli(store, "check", "-F", "json").stdout
    rows = json.loads(out)
    assert [list(r) for r in rows] == [COLUMNS] * len(want)
    assert {r["run_name"]: r["peak"] for r in rows}["awkward/kl/infinity"] == math.inf

    out = run_cli(store, "check", "-F", "jsonl").stdout
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["run_name"] for r in rows] == sorted(want)
    assert all(list(r) == COLUMNS for r in rows)

    out = run_cli(store, "check", "-F", "csv").stdout
    reader = csv.DictReader(io.StringIO(out))
    assert reader.fieldnames == COLUMNS
    rows = list(reader)
    assert {r["run_name"]: int(r["first_step"]) for r in rows} == {
        n: r["first_step"] for n, r in want.items()}

    out = run_cli(store, "check", "-F", "markdown").stdout
    assert out.splitlines()[0] == "| " + " | ".join(COLUMNS) + " |"
    assert len(out.splitlines()) == 2 + len(want)

    table = tmp_path / "fired.txt"  # to a file: no terminal width to fit
    assert run_cli(store, "check", "-F", "table", "-o", str(table)).exit_code == 1
    out = table.read_text()
    assert out.splitlines()[0].split() == COLUMNS
    assert out.rstrip().endswith(f"({len(want)} rows)")

    target = tmp_path / "fired.json"
    result = run_cli(store, "check", "-F", "json", "-o", str(target))
    assert result.exit_code == 1 and len(json.loads(target.read_text())) == len(want)


def checked_runs(root: Path, metrics: tuple[str, ...], *, since_step: int | None = None,
                 runs: str | None = None) -> set[str]:
    """Runs (matching the glob `runs`) that log a live number of any of the rule's metric
    families at `since_step` or later: the runs a rule looks at, from the files."""
    import fnmatch

    keys = {k for m in metrics for k in oracle.rule_family(m)}
    out = set()
    for run in oracle.run_dirs(root):
        name = oracle.run_name(root, run)
        if runs is not None and not fnmatch.fnmatchcase(name, runs):
            continue
        if any(k in keys and (since_step is None or s >= since_step)
               for s, k in oracle.live_numbers(run)):
            out.add(name)
    return out


def in_scope(root: Path, runs: str | None = None) -> int:
    import fnmatch

    return sum(1 for r in oracle.run_dirs(root)
               if runs is None or fnmatch.fnmatchcase(oracle.run_name(root, r), runs))


def test_a_rule_no_run_logs_is_an_error(awkward_store: runstore.Store, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from runstore.errors import UnknownKey

    monkeypatch.chdir(tmp_path)
    store = awkward_store.path
    hint = '(runstore sql "select distinct key from metrics_raw order by 1" lists every key)'
    result = run_cli(store, "check", "--rule", "optim/entrpy < 0.5")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ("Error: no run in the store logs optim/entrpy (rule "
                             f"'optim/entrpy < 0.5'); did you mean optim/entropy? {hint}\n")
    # The unprefixed spelling is the same family: the typo still finds optim/entropy ...
    result = run_cli(store, "check", "--rule", "entrpy < 0.5")
    assert result.exit_code == 2 and "did you mean optim/entropy?" in result.stderr
    # ... and the right name, either spelling, is accepted.
    for rule in ("entropy < 0.5", "optim/entropy < 0.5"):
        assert run_cli(store, "check", "--rule", rule, "-F", "csv").exit_code in (0, 1)
    # Several metrics: each must be logged somewhere.
    (tmp_path / "runstore.toml").write_text(
        '[[check.rule]]\nmetric = ["optim/entropy", "optim/kl_sample_train_v3"]\nop = ">"\n'
        "value = 1\n")
    result = run_cli(store, "check")
    assert result.exit_code == 2 and "logs optim/kl_sample_train_v3 (rule " in result.stderr
    assert "did you mean optim/kl_sample_train_v1 or optim/kl_sample_train_v2?" in result.stderr
    with pytest.raises(UnknownKey, match="optim/entrpy"):
        awkward_store.check(rules=["optim/entrpy < 0.5"], config=False)
    assert issubclass(UnknownKey, RunstoreError)


def test_a_logged_metric_is_accepted_where_no_run_in_scope_logs_it(
        awkward_store: runstore.Store) -> None:
    """The refusal is about the store, not the scope: a rule that checked no run (every step
    is before `since_step`, or no run in `runs` logs it) is looked up, and accepted when some
    run logs its metric; a misspelt one is still refused there."""
    from runstore.errors import UnknownKey
    from runstore.health.rules import Rule

    beyond = 10**9
    for rule in ("optim/entropy < 0.5", "drop(optim/entropy) > 0.1"):
        result = awkward_store.check_result(rules=[rule], default_rules=False, config=False,
                                            since_step=beyond)
        assert result.checked == (0,) and result.fired == (0,) and not result.rows.num_rows
        with pytest.raises(UnknownKey, match="optim/entrpy"):
            awkward_store.check_result(rules=[rule.replace("entropy", "entrpy")],
                                       default_rules=False, config=False, since_step=beyond)
    # A rule of two metrics checks the runs logging either: each must still be logged.
    with pytest.raises(UnknownKey, match="optim/entrpy"):
        awkward_store.check_result(rules=[Rule(("optim/entropy", "optim/entrpy"), "<", 0.5)],
                                   default_rules=False, config=False)


def test_default_rule_is_green_on_a_store_without_kl(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    demo.generate_tree(root, [RunSpec("sl/only", kind="sl", steps=6, eval_every=0,
                                      save_every=0)], seed=2)
    store = runstore.open(tmp_path / "store")
    store.ingest([root])
    assert not checked_runs(root, KL)
    result = run_cli(store.path, "check", "-F", "csv")
    assert result.exit_code == 0 and result.stdout == ",".join(COLUMNS) + "\n"
    assert result.stderr == ("kl_sample_train_v1|v2 > 0.01 fired for 0 of 1 run "
                             "(0 checked, 1 without KL)\n")


def test_green_check_says_what_it_checked(awkward_store: runstore.Store, _awkward_template: Path,
                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store, root = awkward_store.path, _awkward_template
    glob = "awkward/values/*"
    n, seen = in_scope(root, glob), len(checked_runs(root, KL, runs=glob))
    assert 0 < seen < n and not oracle.check_rule(root, KL, ">", 0.01, runs=glob)
    line = (f"kl_sample_train_v1|v2 > 0.01 fired for 0 of {n} runs matching '{glob}' "
            f"({seen} checked, {n - seen} without KL)")
    result = run_cli(store, "check", "--runs", glob, "-F", "csv")
    assert result.exit_code == 0 and result.stderr == line + "\n"
    # Markdown, for $GITHUB_STEP_SUMMARY: the line instead of a table with no rows.
    result = run_cli(store, "check", "--runs", glob, "-F", "markdown")
    assert result.exit_code == 0 and result.stdout == line + "\n"
    summary = tmp_path / "summary.md"
    result = run_cli(store, "check", "--runs", glob, "-o", str(summary))  # .md: markdown
    assert result.exit_code == 0 and summary.read_text() == line + "\n"
    # Several rules: one line, each rule with its counts; --since-step is said too.
    ent = ("optim/entropy",)
    all_n = in_scope(root)
    kl_seen = len(checked_runs(root, KL, since_step=12))
    ent_seen = len(checked_runs(root, ent, since_step=12))
    assert not oracle.check_rule(root, KL, ">", 0.01, since_step=12)
    assert not oracle.check_rule(root, ent, "<", -1, since_step=12)
    result = run_cli(store, "check", "--since-step", "12", "--rule", "optim/entropy < -1",
                     "-F", "markdown")
    line = (f"0 of {all_n} runs fired a rule from step 12: kl_sample_train_v1|v2 > 0.01 "
            f"fired for 0 ({kl_seen} checked, {all_n - kl_seen} without KL from that step); "
            f"optim/entropy < -1 fired for 0 ({ent_seen} checked, {all_n - ent_seen} without "
            "optim/entropy from that step)")
    assert result.exit_code == 0 and result.stdout == line + "\n" and result.stderr == line + "\n"


def test_a_firing_check_also_says_what_it_checked(awkward_store: runstore.Store,
                                                 _awkward_template: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    root = _awkward_template
    fired = oracle.check_rule(root, KL, ">", 0.01)
    n, seen = in_scope(root), len(checked_runs(root, KL))
    result = run_cli(awkward_store.path, "check", "-F", "markdown")
    assert result.exit_code == 1
    assert result.stderr == (f"kl_sample_train_v1|v2 > 0.01 fired for {len(fired)} of {n} runs "
                             f"({seen} checked, {n - seen} without KL)\n")
    assert result.stdout.splitlines()[0] == "| " + " | ".join(COLUMNS) + " |"


@pytest.mark.parametrize("args,heavy", [
    # Threshold rules: plain rows, no Arrow at all, and no HTTP client without a webhook.
    (["--rule", "optim/entropy < 0.3", "-F", "table"], set()),
    (["-F", "json"], set()),
    (["-F", "markdown"], set()),
    # A Parquet file needs the Arrow table.
    (["-F", "parquet", "-o", "fired.parquet"], {"pyarrow", "numpy"}),
])
def test_check_imports_only_what_it_needs(awkward_store: runstore.Store, tmp_path: Path,
                                          args: list[str], heavy: set[str]) -> None:
    """`runstore check` stays a quick command (a CI gate runs it after every ingest): a check
    of threshold rules imports neither pyarrow nor numpy (~0.1 s of a fresh process) nor
    urllib.request (only a webhook needs it); pyarrow's Table.filter alone would import
    pyarrow.compute and pandas (about a second)."""
    watched = ("pandas", "polars", "pyarrow", "pyarrow.compute", "numpy", "urllib.request",
               "runstore.health.notify")
    code = ("import sys\n"
            "from click.testing import CliRunner\n"
            "from runstore.cli import main\n"
            f"r = CliRunner().invoke(main, ['--store', {str(awkward_store.path)!r}, 'check', "
            f"*{args!r}])\n"
            "assert r.exit_code in (0, 1), r.output\n"
            f"print(','.join(m for m in {watched!r} if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, check=True)
    assert set(filter(None, out.stdout.strip().split(","))) == heavy


@pytest.mark.parametrize("rules", [None, ["optim/entropy < 0.3"], ["env/all/reward/total > 0.5"]])
def test_plain_rows_check_is_the_arrow_check(awkward_store: runstore.Store,
                                             rules: list[str] | None) -> None:
    """The CLI's plain-rows check (`arrow=False`) and the Arrow one find the same rows, with
    the same types, run ids, counts and summary, and print the same text in every format."""
    from runstore.present import render

    plain = evaluate.check(awkward_store, rules=rules, config=False, arrow=False)
    arrow = evaluate.check(awkward_store, rules=rules, config=False)
    assert isinstance(plain.rows, Rows) and not isinstance(arrow.rows, Rows)
    assert plain.rows.num_rows > 0  # something fired, so the comparison compares values
    assert plain.table.schema == arrow.table.schema and plain.table.equals(arrow.table)
    assert (plain.run_ids, plain.checked, plain.fired, plain.runs, plain.summary()) == \
        (arrow.run_ids, arrow.checked, arrow.fired, arrow.runs, arrow.summary())
    for fmt in ("table", "csv", "json", "jsonl", "markdown"):
        assert render.render(plain.rows, fmt, width=200) == render.render(arrow.rows, fmt,
                                                                         width=200)


def test_check_help_has_an_example() -> None:
    result = run_cli(None, "check", "--help")
    assert "Example:" in result.output and "runstore check" in result.output
    assert "Exit status" in result.output


# ---------------------------------------------------------------------------------------------
# Watching, in process: one pass at a time


def spike_line(step: int, value: float = 0.5) -> str:
    return json.dumps({"step": step, "optim/kl_sample_train_v1": value,
                       "optim/kl_sample_train_v2": value / 2}) + "\n"


def test_watcher_reports_each_firing_rule_once(small_tree: Path, tmp_path: Path) -> None:
    store = runstore.open(tmp_path / "store")
    alerts: list[Any] = []
    w = Watcher(store, [small_tree], on_alert=alerts.append, on_warning=lambda text: None)
    assert w.run_pass() == [] and alerts == []  # the small tree has no spike
    with open(small_tree / "a" / "rl_flat" / "metrics.jsonl", "a") as fh:
        fh.write(spike_line(100))
    new = w.run_pass()
    assert [(a.run_name, a.rule, a.first_step) for a in new] == [
        ("a/rl_flat", "kl_sample_train_v1|v2 > 0.01", 100)]
    assert alerts == new and "since step 100" in new[0].text()
    with open(small_tree / "a" / "rl_flat" / "metrics.jsonl", "a") as fh:
        fh.write(spike_line(101))
    assert w.run_pass() == [] and w.run_pass() == []  # still firing, already reported
    assert len(alerts) == 1


def test_watcher_survives_paths_and_runs_coming_and_going(small_tree: Path,
                                                          tmp_path: Path) -> None:
    store = runstore.open(tmp_path / "store")
    later = tmp_path / "later"
    warnings: list[str] = []
    alerts: list[Any] = []
    w = Watcher(store, [later], on_alert=alerts.append, on_warning=warnings.append)
    assert w.run_pass() == []  # nothing there, no store yet: a warning, no error
    assert w.run_pass() == []
    assert [m for m in warnings if "does not exist" in m] == [f"{later} does not exist (yet); "
                                                              "watching for it"]
    shutil.copytree(small_tree, later)
    with open(later / "a" / "rl_dirs" / "metrics.jsonl", "a") as fh:
        fh.write(spike_line(50))
    assert [a.run_name for a in w.run_pass()] == ["a/rl_dirs"]
    assert any("exists now" in m for m in warnings)
    # A run directory vanishes: the pass goes on, the run is marked missing.
    reports: list[Any] = []
    w.on_report = reports.append
    shutil.rmtree(later / "b")
    assert w.run_pass() == []
    assert reports[-1].runs_missing == 1
    status = store.sql("select status from runs where run_name = 'b/c/sl'").item()
    assert status == "missing"
    # A new run directory appears with a spike: reported.
    shutil.copytree(later / "a" / "rl_flat", later / "new_run")
    with open(later / "new_run" / "metrics.jsonl", "a") as fh:
        fh.write(spike_line(60))
    assert [a.run_name for a in w.run_pass()] == ["new_run"]
    # The whole path vanishes, then comes back: warnings, never an error.
    shutil.move(later, tmp_path / "aside")
    assert w.run_pass() == []
    shutil.move(tmp_path / "aside", later)
    assert w.run_pass() == []
    assert len(alerts) == 2


def test_watch_sleeps_between_passes_and_stops(small_tree: Path, tmp_path: Path) -> None:
    store = runstore.open(tmp_path / "store")
    started = time.monotonic()
    passes = watch(store, [small_tree], interval=0.3, max_passes=3,
                   on_warning=lambda text: None)
    assert passes == 3 and time.monotonic() - started >= 0.6  # two full rests at least
    stop = threading.Event()
    timer = threading.Timer(0.5, stop.set)
    timer.start()
    try:
        started = time.monotonic()
        passes = watch(store, [small_tree], interval=0.2, stop=stop)
    finally:
        timer.cancel()
    assert 1 <= passes <= 6 and time.monotonic() - started < 5
    with pytest.raises(UsageError, match="seconds > 0"):
        watch(store, [small_tree], interval=0)


def test_ingest_check_without_watch_is_one_pass(small_tree: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with open(small_tree / "b" / "c" / "sl" / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps({"step": 99, "kl_sample_train_v2": float("inf")}) + "\n")
    result = run_cli(tmp_path / "store", "ingest", str(small_tree), "--check")
    assert result.exit_code == 0
    # The small tree's runs wrote their final checkpoint: completed, however fresh the files.
    assert result.stdout.splitlines() == [
        "FIRED b/c/sl: kl_sample_train_v1|v2 > 0.01 since step 99 (peak Infinity, "
        "latest Infinity, 1 step over, run completed)"]
    result = run_cli(tmp_path / "store", "ingest", str(tmp_path / "missing"), "--check")
    assert result.exit_code == 2 and "does not exist" in result.output
    assert run_cli(tmp_path / "store", "ingest", str(small_tree), "--watch", "0").exit_code == 2


# ---------------------------------------------------------------------------------------------
# Watching, as a real process stopped by a signal

INTERVAL = 0.5
DEADLINE = 20.0


class Watched:
    """`python -m runstore ingest PATHS --watch` with stdout and stderr in files."""

    def __init__(self, tmp_path: Path, store: Path, *paths: Path) -> None:
        self.out, self.err = tmp_path / "watch.out", tmp_path / "watch.err"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "runstore", "--store", str(store), "ingest",
                 *map(str, paths), "--watch", str(INTERVAL)],
                stdout=out, stderr=err, cwd=tmp_path, env=env)

    def stdout(self) -> str:
        return self.out.read_text()

    def stderr(self) -> str:
        return self.err.read_text()

    def wait_for(self, what: Callable[[], bool], deadline: float = DEADLINE) -> float:
        """Seconds until `what()` holds; fails after `deadline` or if the process ended."""
        started = time.monotonic()
        while not what():
            assert self.proc.poll() is None, f"watcher exited early:\n{self.stderr()}"
            assert time.monotonic() - started < deadline, (
                f"timed out\nstdout:\n{self.stdout()}\nstderr:\n{self.stderr()}")
            time.sleep(0.05)
        return time.monotonic() - started

    def passes_that_ingested(self) -> int:
        return self.stderr().count("runs: ")

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=DEADLINE)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=DEADLINE)


def test_watch_reports_a_live_spike_once_and_stops_on_sigint(small_tree: Path,
                                                             tmp_path: Path) -> None:
    w = Watched(tmp_path, tmp_path / "store", small_tree)
    metrics = small_tree / "a" / "rl_flat" / "metrics.jsonl"
    try:
        w.wait_for(lambda: "runs: 3 new" in w.stderr())
        assert "FIRED" not in w.stdout()
        # A trainer in the middle of writing a line: the half line must not be read.
        line = spike_line(100)
        with open(metrics, "a") as fh:
            fh.write(line[:20])
            fh.flush()
            os.fsync(fh.fileno())
            time.sleep(3 * INTERVAL)
            assert "FIRED" not in w.stdout()
            fh.write(line[20:])
        seconds = w.wait_for(lambda: "FIRED" in w.stdout())
        # Two intervals, plus slack for a pass (ingest + check) on a loaded machine.
        assert seconds < 2 * INTERVAL + 4.0
        assert w.stdout().splitlines() == [
            "FIRED a/rl_flat: kl_sample_train_v1|v2 > 0.01 since step 100 (peak 0.5, "
            "latest 0.5, 1 step over, run completed)"]  # it wrote its final checkpoint
        # More spike steps: ingested by later passes, never reported again.
        before = w.passes_that_ingested()
        with open(metrics, "a") as fh:
            fh.write(spike_line(101, 0.7))
        w.wait_for(lambda: w.passes_that_ingested() > before)
        time.sleep(4 * INTERVAL)
        assert w.stdout().count("FIRED") == 1
        assert w.stop(signal.SIGINT) == 0
        assert "Traceback" not in w.stderr() and "warning:" not in w.stderr()
    finally:
        w.kill()


def test_watch_survives_a_changing_tree_and_stops_on_sigterm(small_tree: Path,
                                                             tmp_path: Path) -> None:
    later = tmp_path / "later"
    w = Watched(tmp_path, tmp_path / "store", small_tree, later)
    try:
        w.wait_for(lambda: "does not exist (yet)" in w.stderr())
        w.wait_for(lambda: "runs: 3 new" in w.stderr())
        # A run vanishes, another appears with a spike, the missing path appears.
        shutil.rmtree(small_tree / "b")
        shutil.copytree(small_tree / "a" / "rl_flat", small_tree / "a" / "rl_new")
        with open(small_tree / "a" / "rl_new" / "metrics.jsonl", "a") as fh:
            fh.write(spike_line(70))
        w.wait_for(lambda: "FIRED a/rl_new:" in w.stdout())
        w.wait_for(lambda: "1 missing" in w.stderr())
        (later / "x").mkdir(parents=True)
        shutil.copytree(small_tree / "a" / "rl_dirs", later / "x" / "run")
        with open(later / "x" / "run" / "metrics.jsonl", "a") as fh:
            fh.write(spike_line(80))
        w.wait_for(lambda: "FIRED x/run:" in w.stdout())
        assert "exists now" in w.stderr()
        assert w.stop(signal.SIGTERM) == 0
        assert "Traceback" not in w.stderr()
        assert w.stdout().count("FIRED") == 2
    finally:
        w.kill()


def test_docstring_examples() -> None:
    # docs/checks.md's examples run in tests/docs/test_doc_examples.py, on the store `runstore demo`
    # writes, as every page's do.
    import doctest

    for module in (rules_mod, keys):
        result = doctest.testmod(module,
                                 optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        assert result.failed == 0 and result.attempted > 0, module.__name__


def test_errors_are_runstore_errors() -> None:
    assert issubclass(UsageError, RunstoreError) and UsageError.exit_code == 2


def test_check_shapes_file_is_generated_and_used_without_sqlglot() -> None:
    """sql/statements/check_shapes.sql is what `build_statement` (sqlglot over check.sql) makes
    for every shape, and a check reads it without importing sqlglot: a fresh process running
    `runstore check` must not load it."""
    import subprocess
    import sys

    import gen_statements
    from runstore.query.statements import check as statements

    path = Path(__file__).resolve().parents[2] / "sql" / "statements" / "check_shapes.sql"
    assert path.read_text() == gen_statements.check_shapes(), \
        "sql/statements/check_shapes.sql is stale: python tools/gen_statements.py -o " \
        "sql/statements/check_shapes.sql"
    for shape in statements.SHAPES:
        assert statements.check_statement(*shape) == statements.build_statement(*shape)
    probe = ("import sys, runstore.health.evaluate as e\n"
             "from runstore.health.rules import Rule, kl_rule\n"
             "for rules in ([kl_rule(0.01)], [Rule('optim/entropy', '<', 0.5), kl_rule(0.01)]):\n"
             "    for since in (None, 3):\n"
             "        for runs in (None, 'a*'):\n"
             "            e.check_query(rules, since_step=since, runs=runs)\n"
             "print('sqlglot' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"
