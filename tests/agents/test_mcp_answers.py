"""What the MCP tools answer, checked against the demo tree's own files (tests/oracle.py),
never against runstore: metric histories (values, the wall-time axis, smoothing, and min/max
downsampling that keeps a spike and says what it dropped), rollouts lowest and highest reward
first, and a scripted agent that answers "which runs went unstable and what was their learning
rate" from the tool answers alone.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from mcpkit import McpSession, csv_rows, table

import oracle

FLAGGED = "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"
KL = "optim/kl_sample_train_v1"
RL_RUN = "math_rl_sweep/qwen3-8b/lr_1e-5"


@pytest.fixture(scope="module")
def demo(ui_demo: tuple[Path, Path]) -> Any:
    tree, store = ui_demo
    with McpSession(store) as session:
        yield tree, session
        assert "Traceback" not in session.stderr(), session.stderr()


def points(text: str) -> list[dict[str, str]]:
    """The `## points` CSV table of a metric_history answer in CSV."""
    block = text.split("## points\n", 1)[1]
    lines = [ln for ln in block.split("\n") if ln and not ln.startswith("(")]
    rows = csv_rows("\n".join(lines))
    return [dict(zip(rows[0], r)) for r in rows[1:]]


def same(a: str, b: float | None) -> bool:
    if b is None:
        return a == ""
    if math.isnan(b):
        return a == "NaN"
    return float(a) == pytest.approx(b, rel=1e-12, abs=1e-300)


def test_a_history_is_the_files_values(demo: Any) -> None:
    tree, session = demo
    series = oracle.metric_series(tree / FLAGGED, KL)
    text = session.ok("metric_history", {"keys": KL, "runs": FLAGGED, "max_points": 2000,
                                         "format": "csv"})
    got = points(text)
    assert [int(p["step"]) for p in got] == [s for s, _ in series]
    assert all(same(p["value"], v) for p, (_, v) in zip(got, series))
    assert all(p["run_label"] == FLAGGED and p["key"] == KL for p in got)
    assert "Downsampled" not in text


def test_downsampling_keeps_the_spike_and_says_what_it_dropped(demo: Any) -> None:
    tree, session = demo
    series = oracle.metric_series(tree / FLAGGED, KL)
    text = session.ok("metric_history", {"keys": KL, "runs": FLAGGED, "max_points": 8,
                                         "format": "csv"})
    got = points(text)
    kept = {int(p["step"]): float(p["value"]) for p in got}
    assert 4 <= len(kept) <= 8 < len(series)
    finite = [(s, v) for s, v in series if math.isfinite(v)]
    for s, v in (max(finite, key=lambda p: p[1]), min(finite, key=lambda p: p[1]),
                 series[0], series[-1]):
        assert kept.get(s) == pytest.approx(v), (s, v)  # the spike, the floor, both ends
    assert (f"Downsampled: {len(series) - len(kept):,} of {len(series):,} points dropped"
            in text)


def test_the_time_axis_and_smoothing_are_the_files(demo: Any) -> None:
    tree, session = demo
    run = tree / FLAGGED
    series = oracle.metric_series(run, KL)
    times = oracle.elapsed_times(run)
    smoothed = dict(zip([s for s, _ in series],
                        oracle.debiased_ema([v for _, v in series], 0.6)))
    got = points(session.ok("metric_history", {"keys": [KL], "runs": [FLAGGED], "x": "time",
                                               "smooth": 0.6, "max_points": 2000,
                                               "format": "csv"}))
    assert [int(p["step"]) for p in got] == [s for s, _ in series if s in times]
    for p in got:
        step = int(p["step"])
        assert float(p["time_s"]) == pytest.approx(times[step], rel=1e-9)
        assert same(p["smoothed"], smoothed[step])
    window = points(session.ok("metric_history", {"keys": KL, "runs": FLAGGED, "x_min": 20,
                                                  "x_max": 25, "format": "csv"}))
    assert [int(p["step"]) for p in window] == [s for s, _ in series if 20 <= s <= 25]


@pytest.mark.parametrize("order", ["lowest", "highest"])
def test_rollouts_come_lowest_or_highest_reward_first(demo: Any, order: str) -> None:
    tree, session = demo
    rewards = oracle.rollout_index(tree)[(RL_RUN, "train", 3)]
    expected = sorted(rewards, reverse=order == "highest")
    text = session.ok("rollouts", {"run": RL_RUN, "iteration": 3, "order": order,
                                   "limit": 3, "chars": 0})
    header, rows = table(text)
    got = [float(r[header.index("total_reward")]) for r in rows]
    assert got == pytest.approx(expected[:3])
    assert f": {len(rewards)} trajectories, {order} total_reward first" in text
    rest = session.ok("rollouts", {"run": RL_RUN, "iteration": 3, "order": order,
                                   "limit": 50, "offset": 3, "chars": 0})
    header, rows = table(rest)
    assert [float(r[header.index("total_reward")]) for r in rows] == \
        pytest.approx(expected[3:])


def test_a_scripted_agent_finds_the_unstable_runs_and_their_learning_rates(demo: Any) -> None:
    """The calls an agent makes for "which runs went unstable and what was their learning
    rate": check (what fired), then list_runs for those runs' learning rate. Only what the
    answers say is used; the truth comes from the tree's metrics.jsonl and config.json."""
    tree, session = demo
    truth = {name: row["learning_rate"] for name, row in oracle.run_summary(tree).items()
             if row["kl_flagged"]}
    assert truth  # the demo has an unstable run

    fired = session.ok("check", {})
    assert "`runstore check` would exit 1" in fired
    header, rows = table(fired)
    run_ids = sorted({r[header.index("run_id")] for r in rows})

    answer = session.ok("list_runs", {"runs": run_ids, "columns": ["run_label", "learning_rate"],
                                      "format": "csv"})
    found = {r[1]: float(r[2]) for r in csv_rows(answer.split("\n", 1)[1])[1:] if r}
    assert found == pytest.approx(truth)


def test_a_key_without_a_line_says_why(demo: Any) -> None:
    # Found from the files: a key every run logs only as text, and one no `sl/` run logs.
    ui_tree, demo = demo
    values: dict[str, list[Any]] = {}
    for run in oracle.run_dirs(ui_tree):
        for (_, key), v in oracle.live_metrics(run).items():
            values.setdefault(key, []).append(v)
    text_only = sorted(k for k, vs in values.items()
                       if all(isinstance(v, str) for v in vs))
    assert text_only, "the demo logs a key only as text"
    answer = demo.ok("metric_history", {"keys": text_only[0]})
    assert "## 0 lines" in answer
    assert f"No line for {text_only[0]}: its values are text, not numbers" in answer
    sl_keys = {k for run in oracle.run_dirs(ui_tree)
               if oracle.run_name(ui_tree, run).startswith("sl/")
               for (_, k) in oracle.live_metrics(run)}
    other = "env/all/reward/total"
    assert other in values and other not in sl_keys
    answer = demo.ok("metric_history", {"keys": other, "runs": "sl/*"})
    assert f"No line for {other}: no run in scope logs it." in answer
    last = max(s for run in oracle.run_dirs(ui_tree)
               for (s, k) in oracle.live_metrics(run) if k == other)
    answer = demo.ok("metric_history", {"keys": other, "x_min": last + 1})
    assert f"No line for {other}: no numeric point in scope on this x axis or window." in answer
    # A key that has its line says nothing of the kind.
    assert "No line" not in demo.ok("metric_history", {"keys": other})
