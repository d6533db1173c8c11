"""`runstore doctor` (issue 33): every finding against an independent reading of the run files.

* The `problems` scenario (demo.problem_specs) plants each finding in its own run: each is
  found, at its steps, and no finding fires on the healthy runs (their count is a figure
  printed at the end of the run: `doctor: findings on healthy runs`).
* Each finding's statement against tests/doctor_oracle.py (plain Python over the files, from
  docs/doctor.md's definitions) on the problems, demo and awkward trees, and on histories
  hypothesis writes (NaN, ±Infinity, resumed steps, missing keys, strings in numeric keys,
  one-step runs).
* `doctor.live_metrics`, the faster read of the live values, equals the `metrics` view.
* Thresholds from runstore.toml, the CLI (exit status, formats, --explain, errors), the
  statement each finding prints, and the real sample runs of ../shared/sample-runs.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import doctor_oracle as do
import runstore
from conftest import REPORT
from runstore import demo
from runstore.health.doctor import CATALOGUE, NAMES, diagnose
from runstore.health.doctor.catalogue import FINDING_COLUMNS
from runstore.health.doctor.config import doctor_config
from runstore.health.doctor.diagnose import _evaluate, evidence_statement
from runstore.resources import statement

PROBLEMS_SEED = 5
FROM = demo.problems.PLANTED_FROM
# Where each planted finding must be found: (first step, last step), a pair being a range.
EXPECTED_STEPS: dict[str, tuple[Any, Any]] = {
    "kl_spike": (FROM, 39), "reward_stuck": (0, 39), "parse_errors": (FROM, 39),
    "no_improvement": (30, 39), "reward_collapse": ((FROM + 1, FROM + 10), 39),
    "entropy_collapse": (FROM, 39), "length_at_limit": (FROM, 39), "no_signal": (FROM, 39),
    "rollout_errors": (FROM, 39), "stale_policy": (FROM, 39),
    # The rise rule needs the smoothed time to double over its running median: some steps.
    "slow_steps": ((FROM + 1, FROM + 12), (FROM + 10, 39)),
    "crashed": (demo.problems.CRASH_AFTER - 1, demo.problems.CRASH_AFTER - 1),
    "not_finite": (min(demo.problems.NAN_STEPS), max(demo.problems.NAN_STEPS)),
    "eval_gap": (24, 40)}
# What else a planted run truly shows: a reward stuck at 0 neither improves nor has a group
# with mixed rewards; a collapsed or stalled reward may show no trend over the run.
COMPANIONS = {"reward_stuck": {"no_improvement", "no_signal"},
              "reward_collapse": {"no_improvement"}, "entropy_collapse": {"no_improvement"}}


def build(root: Path, specs: list[demo.RunSpec], seed: int) -> runstore.Store:
    demo.generate_tree(root, specs, seed=seed)
    store = runstore.open(root.parent / "store")
    store.ingest([root])
    return store


@pytest.fixture(scope="session")
def problems(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runstore.Store]:
    root = tmp_path_factory.mktemp("problems") / "runs"
    return root, build(root, demo.problem_specs(), PROBLEMS_SEED)


@pytest.fixture(scope="session")
def demo_store(_demo_template: Path) -> tuple[Path, runstore.Store]:
    store = runstore.open(_demo_template.parent / "doctor-store")
    store.ingest([_demo_template])
    return _demo_template, store


@pytest.fixture(scope="session")
def awkward_store(_awkward_template: Path) -> tuple[Path, runstore.Store]:
    store = runstore.open(_awkward_template.parent / "doctor-store")
    store.ingest([_awkward_template])
    return _awkward_template, store


def write_run(run: Path, lines: list[dict[str, Any]]) -> Path:
    """A run directory of a config.json (learning_rate 1e-4) and these metrics.jsonl lines."""
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"learning_rate": 1e-4}))
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run


def found(store: runstore.Store, **kw: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {(r["run_name"], r["finding"]): r for r in diagnose(store, config=False, **kw).rows}


# ---------------------------------------------------------------------------------------------
# The problems scenario


def test_every_planted_finding_is_found_at_its_steps(problems: tuple[Path, runstore.Store]
                                                     ) -> None:
    rows = found(problems[1])
    for name in NAMES:
        row = rows.get((f"problems/{name}", name))
        assert row is not None, f"{name} is not found in the run planting it"
        for got, want in zip((row["first_step"], row["last_step"]), EXPECTED_STEPS[name]):
            if isinstance(want, tuple):
                assert want[0] <= got <= want[1], (name, row)
            else:
                assert got == want, (name, row)
        assert row["evidence"] and row["to_try"] and row["statement"]
        others = {f for (run, f) in rows if run == f"problems/{name}"} - {name}
        assert others <= COMPANIONS.get(name, set()), (name, others)


def test_no_finding_fires_on_the_healthy_runs(problems: tuple[Path, runstore.Store]) -> None:
    result = diagnose(problems[1], "problems/healthy/*", config=False)
    REPORT["doctor: findings on healthy runs"] = len(result.rows)
    assert result.runs == 5
    assert result.rows == (), [(r["run_name"], r["finding"], r["evidence"])
                               for r in result.rows]


def test_planted_evidence_reads_as_the_numbers(problems: tuple[Path, runstore.Store]) -> None:
    rows = found(problems[1])
    stuck = rows[("problems/reward_stuck", "reward_stuck")]
    assert stuck["evidence"].startswith("env/all/reward/total was at most 0 at each of the "
                                        "last 40 reward steps (steps 0-39")
    assert "100% of the 512 training trajectories" in stuck["evidence"]  # every 5th step, 64
    slow = rows[("problems/slow_steps", "slow_steps")]
    assert "span sampling grew most" in slow["evidence"]
    errors = rows[("problems/rollout_errors", "rollout_errors")]
    assert errors["evidence"].startswith("240 rollouts failed (rollout_errors/total: "
                                         "APITimeoutError 160, RuntimeError 80) against 2560")
    stale = rows[("problems/stale_policy", "stale_policy")]
    assert "max_steps_off_policy = 4" in stale["evidence"]


def test_statements_show_the_evidence(problems: tuple[Path, runstore.Store]) -> None:
    """Each row's statement runs as printed and returns rows inside its steps."""
    store = problems[1]
    for row in diagnose(store, config=False).rows:
        shown = store.sql(row["statement"])
        assert shown.height > 0, row["statement"]
        if "step" in shown.columns and row["finding"] not in ("no_improvement",
                                                              "reward_collapse", "eval_gap",
                                                              "entropy_collapse", "slow_steps"):
            steps = shown["step"].to_list()
            assert min(steps) >= row["first_step"] and max(steps) <= row["last_step"], row


@pytest.mark.parametrize("first", [-2**63, -2**63 + 3, 2**63 - 3], ids=str)
def test_statements_run_at_the_ends_of_the_step_range(tmp_path: Path, first: int) -> None:
    """A step is any 64-bit integer a file logs. For a run that logs three steps from
    `first` on, each finding's statement, printed for those steps, runs (reading from 10
    steps before the first must not overflow) and shows each of them it reads."""
    run = tmp_path / "runs" / "edge"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"model_name": "m"}))
    keys = ("time/total", "optim/entropy", "env/all/reward/total")
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"step": first + i, **{k: 1.0 + i for k in keys}}) + "\n" for i in range(3)))
    store = runstore.open(tmp_path / "store")
    store.ingest([tmp_path / "runs"])
    run_id = store.arrow("select run_id from runs").column(0)[0].as_py()
    params = doctor_config(store, config=False).params
    for f in CATALOGUE:
        shown = store.sql(evidence_statement(f, run_id, first, first + 2, params[f.name],
                                             list(keys)))
        if f.name in ("slow_steps", "entropy_collapse"):  # they read these keys' steps
            assert sorted(set(shown["step"].to_list())) == [first, first + 1, first + 2]


# ---------------------------------------------------------------------------------------------
# Against the oracle


def check_against_oracle(store: runstore.Store, root: Path, name: str,
                         params: dict[str, Any] | None = None, config: Path | None = None,
                         result: Any = None) -> int:
    """Every run's verdict for finding `name` equals the oracle's; how many runs compared.
    `result`: a diagnosis of the store already made (with these params)."""
    result = result or diagnose(store, config=config or False, only=[name])
    got = {r["run_name"]: r for r in result.rows if r["finding"] == name}
    why = {m["run_name"]: m["reason"] for m in result.not_evaluated if m["finding"] == name}
    expected = do.FINDINGS[name](root, **(params or {}))
    compared = 0
    for run, verdict in expected.items():
        if verdict.borderline():
            continue
        compared += 1
        assert (run in why) == (verdict.missing is not None), (name, run, why.get(run), verdict)
        assert (run in got) == verdict.fired, (name, run, got.get(run), verdict)
        if verdict.fired:
            row = got[run]
            assert (row["first_step"], row["last_step"]) == (verdict.first_step,
                                                             verdict.last_step), (name, run)
            facts = json.loads(row["facts"])
            for key, want in verdict.facts.items():
                assert close(facts.get(key), want), (name, run, key, facts.get(key), want)
    assert set(expected) == set(got) | set(why) | {r for r, v in expected.items()
                                                   if not v.fired and v.missing is None}
    return compared


def close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return a == b


@pytest.mark.parametrize("name", NAMES)
def test_problems_match_the_oracle(problems: tuple[Path, runstore.Store], name: str) -> None:
    assert check_against_oracle(problems[1], problems[0], name) > 0


@pytest.mark.parametrize("name", NAMES)
def test_demo_and_awkward_trees_match_the_oracle(demo_store: tuple[Path, runstore.Store],
                                                 awkward_store: tuple[Path, runstore.Store],
                                                 name: str) -> None:
    for root, store in (demo_store, awkward_store):
        assert check_against_oracle(store, root, name) > 0


# ---------------------------------------------------------------------------------------------
# Generated histories


FLOATS = st.one_of(st.floats(min_value=-1.0, max_value=3.0, allow_nan=False),
                   st.sampled_from([float("nan"), float("inf"), float("-inf"), 0.0, 1.0]))
VALUE = st.one_of(FLOATS, FLOATS, FLOATS, st.just("n/a"), st.none())
KEYS = ("env/all/reward/total", "optim/entropy", "entropy", "env/all/format",
        "env/all/ac_tokens_per_turn", "env/all/stop/max_tokens", "env/all/by_group/frac_mixed",
        "async/staleness_mean", "rollout_errors/total", "env/all/total_episodes",
        "time/total", "optim/kl_sample_train_v1", "kl_sample_train_v2", "train_mean_nll",
        "test/env/all/reward/total", "progress/done_frac")


@st.composite
def histories(draw: Any) -> list[dict[str, Any]]:
    """metrics.jsonl rows: 1 to 45 steps, each logging some keys (some steps twice, as a
    pre-0.6 resume writes them; later writes win)."""
    n = draw(st.integers(min_value=1, max_value=45))
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=6, unique=True))
    scale = draw(st.sampled_from([0.01, 1.0, 100.0]))
    rows = []
    for step in range(n):
        row: dict[str, Any] = {"step": step}
        for key in keys:
            if draw(st.integers(0, 9)) == 0:
                continue  # a missing key
            v = draw(VALUE)
            row[key] = v * scale if isinstance(v, float) else v
        rows.append(row)
    resume = draw(st.integers(min_value=0, max_value=n))
    if 0 < resume < n and draw(st.booleans()):
        rows += [dict(r) for r in rows[resume:]]  # the replayed steps, logged again
        for r in rows[n:]:
            for key in keys:
                if key in r and isinstance(r[key], float):
                    r[key] = r[key] * 0.5
    return rows


HYPOTHESIS_FINDINGS = ["kl_spike", "reward_stuck", "parse_errors", "no_improvement",
                       "reward_collapse", "entropy_collapse", "length_at_limit", "no_signal",
                       "rollout_errors", "stale_policy", "not_finite", "eval_gap"]


@pytest.mark.slow
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(runs=st.lists(histories(), min_size=1, max_size=3))
def test_generated_histories_match_the_oracle(tmp_path_factory: pytest.TempPathFactory,
                                              runs: list[list[dict[str, Any]]]) -> None:
    base = tmp_path_factory.mktemp("histories")
    for i, rows in enumerate(runs):
        run = base / "runs" / f"run_{i}"
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"learning_rate": 1e-4 * (i + 1),
                                                     "loss_fn": "ppo", "max_tokens": 100}))
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = runstore.open(base / "store")
    store.ingest([base / "runs"])
    result = diagnose(store, config=False, only=HYPOTHESIS_FINDINGS)
    for name in HYPOTHESIS_FINDINGS:
        check_against_oracle(store, base / "runs", name, result=result)
    REPORT["doctor: generated histories checked"] = (
        int(str(REPORT.get("doctor: generated histories checked", 0))) + 1)


# ---------------------------------------------------------------------------------------------
# The live values the findings read


def test_live_metrics_equal_the_metrics_view(awkward_store: tuple[Path, runstore.Store],
                                             demo_store: tuple[Path, runstore.Store]) -> None:
    for _, store in (awkward_store, demo_store):
        keys = store.sql("select distinct key from metrics_raw")["key"].to_list()
        unplain = store.sql(statement("doctor.unplain_runs"))["run_id"].to_list()
        assert unplain, "the trees resume runs: some runs log a step twice"
        live = store.sql(f"select * from ({statement('doctor.live_metrics')}) "
                         "order by run_id, step, key", {"live_keys": keys, "live_unplain": unplain})
        # Every column of the view but the names it joins for people (run_name, run_label).
        view = store.sql("select * exclude (run_name, run_label) from metrics "
                         "order by run_id, step, key")
        assert live.columns == view.columns and live.equals(view, null_equal=True)


def test_every_statement_answers_one_row_per_run(demo_store: tuple[Path, runstore.Store]) -> None:
    """The catalogue's contract: each `finding` statement returns `FINDING_COLUMNS`, one row
    per run of `runs`."""
    store = demo_store[1]
    rows, _ = _evaluate(store, list(CATALOGUE), doctor_config(store, False), None, None)
    runs = store.sql("select count(*) as n from runs").item()
    for f in CATALOGUE:
        mine = [r for r in rows if r["finding"] == f.name]
        assert len(mine) == runs and len({r["run_id"] for r in mine}) == runs, f.name
        assert set(mine[0]) == {*FINDING_COLUMNS, "finding"}, f.name


def test_rollout_summaries_status_is_evidence_of_failed_rollouts(tmp_path: Path) -> None:
    """Newer rollout summaries say each trajectory's `status` (and `error_type`): failed
    training trajectories count as failed rollouts even where the metrics count none, an
    `ok` run or failures only in eval splits do not fire, and a run whose summaries say no
    status is not judged on them."""
    def summary(split: str, it: int, traj: int, status: str | None,
                error_type: str | None = None) -> str:
        rec: dict[str, Any] = {"schema_version": 1, "split": split, "iteration": it,
                               "group_idx": 0, "traj_idx": traj, "tags": [],
                               "total_reward": 1.0, "final_reward": 1.0,
                               "trajectory_metrics": {}, "steps": [], "final_ob_len": 0}
        if status is not None:
            rec["status"] = status
        if error_type is not None:
            rec["error_type"] = error_type
        return json.dumps(rec) + "\n"

    plans = {  # run -> iteration -> the statuses of its training (and eval) trajectories
        "failing": {2: ["ok", "ok", ("error", "RuntimeError")], 3: ["ok", ("error", None)],
                    4: ["ok"] * 6},
        "healthy": {2: ["ok"] * 4, 3: ["ok"] * 4},
        "eval_only": {2: ["ok"] * 4},
        "no_status": {2: [None] * 4},
    }
    root = tmp_path / "runs"
    for name, plan in plans.items():
        run = write_run(root / name, [{"step": s, "env/all/reward/total": 0.5} for s in range(5)])
        for it, statuses in plan.items():
            d = run / f"iteration_{it:06d}"
            d.mkdir()
            lines = [summary("train", it, i, *(s if isinstance(s, tuple) else (s,)))
                     for i, s in enumerate(statuses)]
            (d / "train_rollout_summaries.jsonl").write_text("".join(lines))
            if name == "eval_only":
                (d / "eval_test_rollout_summaries.jsonl").write_text(
                    summary("eval/test", it, 0, "error", "APITimeoutError"))
    store = runstore.open(tmp_path / "store")
    store.ingest([root])
    assert check_against_oracle(store, root, "rollout_errors") == len(plans)
    rows = found(store, only=["rollout_errors"])
    assert set(rows) == {("failing", "rollout_errors")}
    row = rows[("failing", "rollout_errors")]
    assert (row["first_step"], row["last_step"]) == (2, 3)
    assert ("2 of the 11 training trajectories the rollout summaries give a status for failed "
            "(RuntimeError 1, error 1): 18.2%") in row["evidence"]
    shown = store.sql(row["statement"])
    assert sorted(shown.filter(shown["key"].str.starts_with("trajectories."))["key"]) == [
        "trajectories.status: RuntimeError", "trajectories.status: error"]
    why = {m["run_name"] for m in diagnose(store, config=False, only=["rollout_errors"])
           .not_evaluated}
    assert why == {"no_status"}


def test_kl_spike_evidence_names_steps_the_run_logged(tmp_path: Path) -> None:
    """The evidence's "from step N on" is the first KL step of the counted window, as the file
    says: a run of 1 step, or one logging KL every 4 steps, never gets a step it lacks."""
    plans = {"single": [(0, 0.5)], "sparse": [(s, 0.02 if s >= 8 else 0.001)
                                              for s in range(0, 33, 4)]}
    root = tmp_path / "runs"
    for name, rows in plans.items():
        write_run(root / name, [{"step": s, "optim/kl_sample_train_v1": v} for s, v in rows])
    store = runstore.open(tmp_path / "store")
    store.ingest([root], on_warning=lambda text: None)
    got = found(store, only=["kl_spike"])
    for name, rows in plans.items():
        last = max(s for s, _ in rows)
        recent = [(s, v) for s, v in rows if s > last - 10]  # the window of 10 steps
        over = sum(v > 0.01 for _, v in recent)
        evidence = got[(name, "kl_spike")]["evidence"]
        want = f"at {over} of the {len(recent)} KL steps from step {recent[0][0]} on"
        assert want in evidence, (name, evidence)


def spelled(v: float) -> str:
    """A non-finite number as the run files and every runstore text write it (FORMATS.md)."""
    return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")


def test_non_finite_numbers_in_evidence_are_spelled_as_the_files_do(tmp_path: Path) -> None:
    """+Infinity is a KL spike and a reward exactly on a falling line (whole numbers: no
    rounding) has t = -Infinity
    (docs/doctor.md): the evidence writes them `Infinity` and `-Infinity`, as the files,
    the tables and the alerts do, never DuckDB's `inf`."""
    root = tmp_path / "runs"
    write_run(root / "line", [{"step": s, "env/all/reward/total": float(25 - s),
                               "optim/kl_sample_train_v1": math.inf if s == 3 else 0.001}
                              for s in range(25)])
    store = runstore.open(tmp_path / "store")
    store.ingest([root])
    got = found(store, only=["kl_spike", "no_improvement"])
    kl = do.kl_spike(root)["line"]
    assert kl.fired and math.isinf(kl.facts["peak"])
    assert f"peaked at {spelled(kl.facts['peak'])} at step 3" in got[("line", "kl_spike")]["evidence"]
    trend = do.no_improvement(root)["line"]
    assert trend.fired and math.isinf(trend.facts["t"])
    assert f"t = {spelled(trend.facts['t'])} " in got[("line", "no_improvement")]["evidence"]


def test_entropy_is_read_as_its_family_step_by_step(tmp_path: Path) -> None:
    """A run that logged `entropy` (older releases) and then `optim/entropy` (after an upgrade,
    say) has one entropy series, as every rule reads a family (runstore.families): the older
    name where a step has no `optim/` number, the `optim/` one where it has. Its entropy fell
    to 5% of its start at the switch with the reward flat: `entropy_collapse` fires from the
    first `optim/` step, as the oracle says (the `optim/` steps alone would show no fall)."""
    root = tmp_path / "runs"
    write_run(root / "upgraded", [
        {"step": s, "env/all/reward/total": 0.5,
         **({"entropy": 1.0} if s < 20 else {"optim/entropy": 0.05}),
         # Both spellings at one step: the `optim/` number counts.
         **({"entropy": 9.0} if s == 30 else {})}
        for s in range(40)])
    store = runstore.open(tmp_path / "store")
    store.ingest([root])
    verdict = do.entropy_collapse(root)["upgraded"]
    assert verdict.fired and verdict.first_step == 20 and verdict.last_step == 39
    assert ("upgraded", "entropy_collapse") in found(store, only=["entropy_collapse"])
    check_against_oracle(store, root, "entropy_collapse")


def test_steps_at_the_ends_of_int64_are_judged_like_any(tmp_path: Path) -> None:
    """A step may be any int64 (the ingest stores -2**63 and 2**63 - 1 as written): windows
    of steps, spans and ties count past the ends without overflowing, and each finding
    agrees with the oracle, for a run of one such step and one spanning both ends."""
    low, high = -2 ** 63, 2 ** 63 - 1
    root = tmp_path / "runs"
    write_run(root / "lowest", [{"step": low, "optim/kl_sample_train_v1": 0.5,
                                 "env/all/reward/total": 1.0, "optim/entropy": 1.0}])
    steps = [low, *range(25), high]
    write_run(root / "both_ends", [
        {"step": s, "optim/kl_sample_train_v1": 0.5, "env/all/reward/total": float(i % 3),
         "time/total": 1.0 + i, "optim/entropy": 1.0 / (i + 1), "env/all/format": 0.0,
         "env/all/by_group/frac_mixed": 0.0, "async/staleness_mean": 5.0,
         "env/all/ac_tokens_per_turn": 10.0 * (i + 1), "env/all/stop/max_tokens": 0.5}
        for i, s in enumerate(steps)])
    # An evaluator's reward falling while the training reward rises, at the last 30 steps
    # below the top: the middle of its steps is past int64.
    write_run(root / "evals_at_the_top", [
        {"step": high - 29 + i, "env/all/reward/total": 0.1 * i + 0.05 * (i % 2),
         "test/env/all/reward/total": 1.0 - 0.1 * i + 0.05 * (i % 2)} for i in range(30)])
    store = runstore.open(tmp_path / "store")
    store.ingest([root])
    result = diagnose(store, config=False)  # every finding runs
    fired = {(r["run_name"], r["finding"]) for r in result.rows}
    assert ("both_ends", "kl_spike") in fired and ("lowest", "kl_spike") in fired
    assert ("evals_at_the_top", "eval_gap") in fired
    for name in NAMES:
        if name != "crashed":  # (file times: test_problems_match_the_oracle holds it)
            check_against_oracle(store, root, name, result=result)


# ---------------------------------------------------------------------------------------------
# The keys a finding compares with, read from DuckDB's parse tree


def keys_by_sqlglot(sql: str) -> frozenset[str]:
    """The reference: the same question asked of sqlglot's tree (how the doctor read it
    before; sqlglot is a test dependency here, not the doctor's)."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="duckdb")
    keys: set[str] = set()
    for node in tree.find_all(exp.In):
        if isinstance(node.this, exp.Column) and node.this.name == "key":
            keys |= {e.this for e in node.expressions if isinstance(e, exp.Literal) and e.is_string}
    for node in tree.find_all(exp.EQ):
        for a, b in ((node.this, node.expression), (node.expression, node.this)):
            if isinstance(a, exp.Column) and a.name == "key" and isinstance(b, exp.Literal) \
                    and b.is_string:
                keys.add(b.this)
    return frozenset(keys)


KEY_TEXT = st.text(alphabet="ab/'_. %", min_size=1, max_size=8)


def quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@st.composite
def predicates(draw: st.DrawFn) -> str:
    column = draw(st.sampled_from(["key", "m.key", "other", "keys", "k.key"]))
    values = draw(st.lists(KEY_TEXT, min_size=1, max_size=3))
    form = draw(st.sampled_from(["eq", "eq_flipped", "in", "not_in", "param", "like", "number"]))
    if form == "eq":
        return f"{column} = {quoted(values[0])}"
    if form == "eq_flipped":
        return f"{quoted(values[0])} = {column}"
    if form in ("in", "not_in"):
        return f"{column} {'not ' if form == 'not_in' else ''}in ({', '.join(map(quoted, values))})"
    if form == "param":
        return f"{column} = $p"
    if form == "like":
        return f"{column} like {quoted(values[0])}"
    return f"{column} = 3"


@settings(max_examples=200, deadline=None)
@given(st.lists(predicates(), min_size=1, max_size=5), st.sampled_from(["plain", "cte", "sub"]))
def test_literal_keys_are_those_sqlglot_reads(preds: list[str], shape: str) -> None:
    from runstore.health.doctor.diagnose import literal_keys

    where = " and ".join(preds[:2]) + "".join(f" or ({p})" for p in preds[2:])
    sql = {"plain": f"select * from metrics as m where {where}",
           "cte": f"with t as (select * from metrics as m where {where}) select * from t",
           "sub": f"select * from runs where run_id in (select run_id from metrics as m "
                  f"where {where})"}[shape]
    assert literal_keys(sql) == keys_by_sqlglot(sql), sql


def test_literal_keys_of_every_finding_are_those_sqlglot_reads() -> None:
    from runstore.health.doctor.diagnose import literal_keys

    for f in CATALOGUE:
        assert literal_keys(f.sql) == keys_by_sqlglot(f.sql), f.name


def test_a_run_too_short_for_a_trend_says_how_many_values_it_needs(tmp_path: Path) -> None:
    """no_improvement fits a line with its standard error: it needs 3 values whatever
    `min_steps` says, and a run with fewer is not judged with that number as the reason."""
    root = tmp_path / "runs"
    write_run(root / "two", [{"step": s, "env/all/reward/total": 0.1 * s} for s in range(2)])
    store = runstore.open(tmp_path / "store")
    store.ingest([root])
    config = tmp_path / "runstore.toml"
    config.write_text("[doctor.no_improvement]\nmin_steps = 1\n")
    result = diagnose(store, config=config, only=["no_improvement"])
    assert not result.rows
    [why] = [m["reason"] for m in result.not_evaluated]
    assert why == "only 2 finite values of env/all/reward/total (fewer than 3)"


def test_slow_steps_shows_the_step_time_it_read(tmp_path: Path) -> None:
    """slow_steps reads `time/total`: its statement shows those values (from 10 steps before
    the first step on), also for a run that logs no spans."""
    root = tmp_path / "runs"
    times = [1.0] * 15 + [9.0] * 3
    write_run(root / "slow", [{"step": s, "time/total": t} for s, t in enumerate(times)])
    store = runstore.open(tmp_path / "store")
    store.ingest([root])
    [row] = [r for r in diagnose(store, config=False, only=["slow_steps"]).rows]
    shown = store.sql(row["statement"])
    want = [(s, "time/total", t) for s, t in enumerate(times)
            if row["first_step"] - 10 <= s <= row["last_step"]]
    assert want and shown.rows() == want
