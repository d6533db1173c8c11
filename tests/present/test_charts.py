"""Charts, the HTML report and the Perfetto export, checked against an independent reading.

Expected values come from the source files through tests/oracle.py (live metrics, KL per
step, reward trends, timing spans, trace B/E pairs) or from plain SQL over the store's tables,
never from the chart code. The report is also rendered by a real headless Chromium: the
screenshot must not be blank and the page must raise no JavaScript error (skipped, with the
reason, where no Chromium is installed; tests/run.sh installs Debian's as root).
"""

from __future__ import annotations

import json
import math
import re
import struct
import zlib
from collections import defaultdict
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from click.testing import CliRunner

import analysis_oracle as ao
import oracle
from conftest import examples
import runstore
from runstore.present import charts, report, trace_export as perfetto
from runstore import demo
from browser import dump_dom, find_chromium, screenshot
from storekit import cli
from runstore.cli import main
from runstore.demo import RunSpec
from runstore.errors import QueryError, UnknownKey, UsageError

REWARD = oracle.REWARD_KEY
EVIL = 'evil/<img src=x onerror=alert(1)>&"q"'


# ---------------------------------------------------------------------------------------------
# Fixtures


def _store(root: Path, where: Path) -> runstore.Store:
    store = runstore.open(where)
    store.ingest([root], on_warning=lambda text: None)
    return store


@pytest.fixture(scope="module")
def demo_tree(_demo_template: Path, shared_demo_store: Path) -> tuple[Path, runstore.Store]:
    return _demo_template, runstore.open(shared_demo_store)


@pytest.fixture(scope="module")
def awkward_tree(_awkward_template: Path, shared_awkward_store: Path
                 ) -> tuple[Path, runstore.Store]:
    return _awkward_template, runstore.open(shared_awkward_store)


@pytest.fixture(scope="module")
def long_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runstore.Store]:
    """One SL run of 6,000 steps: lines past the 5,000-point budget, bars past MAX_BARS."""
    base = tmp_path_factory.mktemp("charts_long")
    demo.generate_tree(base / "runs", [RunSpec("long/sl", kind="sl", steps=6000, eval_every=0,
                                               save_every=0)], seed=1)
    return base / "runs", _store(base / "runs", base / "store")


@pytest.fixture(scope="module")
def evil_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runstore.Store]:
    """Two small RL runs, one whose name is an HTML injection attempt, and the KL spike run."""
    base = tmp_path_factory.mktemp("charts_evil")
    demo.generate_tree(base / "runs", [
        RunSpec(EVIL, steps=12, eval_every=5, save_every=5, logtree=False, kl_spike_at=6),
        RunSpec("plain/rl", steps=12, eval_every=5, save_every=5, logtree=False, trace=True),
    ], seed=5)
    return base / "runs", _store(base / "runs", base / "store")


def by_meta(fig: Any, kind: str) -> dict[tuple[str, str], Any]:
    out = {}
    for t in fig.data:
        if t.meta and t.meta["kind"] == kind:
            key = (t.meta["run_name"], t.meta["key"])
            assert key not in out, key
            out[key] = t
    return out


def floats(values: Any) -> np.ndarray:
    return np.array([math.nan if v is None else v for v in np.asarray(values, dtype=object)],
                    dtype=float)


def series(root: Path, key: str) -> dict[str, list[tuple[int, float]]]:
    """run_name → sorted (step, value) of a key's live numeric values, from the files."""
    out = {}
    for run in oracle.run_dirs(root):
        pts = sorted((s, v) for (s, k), v in oracle.live_numbers(run).items() if k == key)
        if pts:
            out[oracle.run_name(root, run)] = pts
    return out


def assert_line(trace: Any, pts: list[tuple[int, float | None]]) -> None:
    np.testing.assert_array_equal(np.asarray(trace.x), [s for s, _ in pts])
    np.testing.assert_allclose(floats(trace.y), floats([v for _, v in pts]), rtol=1e-12,
                               equal_nan=True)


def kl_per_step(root: Path) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """run_name → {"v1": [(step, value)], "v2": [...]} with the prefixed name preferred."""
    out: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for run in oracle.run_dirs(root):
        live = oracle.live_numbers(run)
        fams: dict[str, list[tuple[int, float]]] = {"v1": [], "v2": []}
        for step in sorted({s for s, _ in live}):
            for fam, (prefixed, bare) in oracle.KL_FAMILIES.items():
                if (step, prefixed) in live:
                    fams[fam].append((step, live[(step, prefixed)]))
                elif (step, bare) in live:
                    fams[fam].append((step, live[(step, bare)]))
        if fams["v1"] or fams["v2"]:
            out[oracle.run_name(root, run)] = fams
    return out


# ---------------------------------------------------------------------------------------------
# Downsampling and smoothing


@pytest.mark.parametrize("n,max_points", [(5001, 5000), (12_345, 5000), (100_000, 5000),
                                          (1000, 100), (101, 100), (7, 4)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_downsampling_keeps_global_extremes_within_budget(n: int, max_points: int,
                                                          seed: int) -> None:
    rng = np.random.default_rng(seed)
    y = rng.normal(size=n).cumsum()
    spikes = [n // 6, n // 3, n // 2, 2 * n // 3, 5 * n // 6]  # far apart: distinct buckets
    y[spikes[:3]] = 1e6
    y[spikes[3:]] = -1e6
    nan = rng.integers(0, n, size=max(1, n // 50))
    y[[i for i in nan if i not in spikes]] = np.nan
    idx = charts.keep_indices(y, max_points)
    assert len(idx) <= max_points
    assert list(idx) == sorted(set(idx.tolist())) and idx[0] == 0 and idx[-1] == n - 1
    assert np.nanargmax(y) in idx and np.nanargmin(y) in idx
    assert np.nanmax(y[idx]) == np.nanmax(y) and np.nanmin(y[idx]) == np.nanmin(y)
    if max_points >= 100:  # every spike survives, not just the global extremes
        assert set(spikes) <= set(idx.tolist())
    assert len(idx) >= min(n, max_points) // 2  # it reduces to the budget, not far below


def test_downsampling_leaves_short_lines_and_keeps_infinity() -> None:
    y = np.arange(5000, dtype=float)
    assert (charts.keep_indices(y) == np.arange(5000)).all()
    y = np.sin(np.arange(20_000) / 50.0)
    y[12_345] = np.inf
    x, ys, reduced = charts.downsample(np.arange(20_000), y)
    assert reduced and len(ys) <= 5000 and 12_345 in x and np.isinf(ys).sum() == 1


def test_charts_have_one_smoothing() -> None:
    """The charts' smoothing is analysis.smooth's debiased EMA: no second one in charts, and
    the old `smooth=N` (a number of steps) says which weight to give instead."""
    assert not hasattr(charts, "ema") and not hasattr(charts.lines, "ema")
    with pytest.raises(UsageError, match=r"for about a 10-step average write 0\.82"):
        charts.plot_metric(None, REWARD, smooth=10)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"smoothing weight in \[0, 1\)"):
        charts.plot_metric(None, REWARD, smooth=-0.5)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# plot metric


def test_plot_metric_lines_equal_live_metrics(demo_tree: tuple[Path, runstore.Store]) -> None:
    root, store = demo_tree
    keys = [REWARD, "optim/kl_sample_train_v1"]
    fig = store.plot_metric(keys)
    expected = {(run, key): pts for key in keys for run, pts in series(root, key).items()}
    got = by_meta(fig, "raw")
    assert set(got) == set(expected) and len(fig.data) == len(expected)
    for (run, key), pts in expected.items():
        t = got[(run, key)]
        assert_line(t, pts)
        assert run in t.hovertemplate and key in t.hovertemplate
        assert "step %{x}" in t.hovertemplate and "%{y" in t.hovertemplate
        assert t.line.dash == ("solid" if key == REWARD else "dash")
    # One colour per run, the same for both keys.
    colors = {run: {got[(run, k)].line.color for k in keys if (run, k) in got}
              for run, _ in expected}
    assert all(len(c) == 1 for c in colors.values())
    assert "downsampled" not in fig.layout.title.subtitle.text


def test_plot_metric_glob_filters_runs(demo_tree: tuple[Path, runstore.Store]) -> None:
    root, store = demo_tree
    fig = store.plot_metric(REWARD, runs="math_rl_sweep/qwen3-8b/*")
    assert sorted(t.meta["run_name"] for t in fig.data) == sorted(
        r for r in series(root, REWARD) if r.startswith("math_rl_sweep/qwen3-8b/"))
    with pytest.raises(QueryError, match="no run matches --runs 'nothing/\\*'"):
        store.plot_metric(REWARD, runs="nothing/*")
    with pytest.raises(UnknownKey, match="no run in the store logs metric 'no/such/key'"):
        store.plot_metric("no/such/key")


def _config_value(root: Path, run: str, key: str) -> Any:
    path = root / run / "config.json"
    return json.loads(path.read_text()).get(key) if path.is_file() else None


def test_plot_metric_colors_runs_by_config_value(demo_tree: tuple[Path, runstore.Store]) -> None:
    root, store = demo_tree
    fig = store.plot_metric(REWARD, color_by="learning_rate")
    lr = {t.meta["run_name"]: _config_value(root, t.meta["run_name"], "learning_rate")
          for t in fig.data}
    color_of: dict[float, str] = {}
    for t in fig.data:
        assert color_of.setdefault(lr[t.meta["run_name"]], t.line.color) == t.line.color
        assert t.legendgroup == json.dumps(lr[t.meta["run_name"]])
    assert len(set(color_of.values())) == len(color_of) >= 3
    legend = [t for t in fig.data if t.showlegend]
    assert sorted(t.name for t in legend) == sorted(f"learning_rate = {json.dumps(v)}"
                                                    for v in color_of)
    # Numbers are ordered: the legend lists them by value.
    ranked = sorted(legend, key=lambda t: t.legendrank)
    values = [lr[t.meta["run_name"]] for t in ranked]
    assert values == sorted(values)

    fig = store.plot_metric(REWARD, color_by="model_name")
    models = {_config_value(root, t.meta["run_name"], "model_name") for t in fig.data}
    assert sorted(t.name for t in fig.data if t.showlegend) == sorted(
        f"model_name = {m}" for m in models)
    with pytest.raises(QueryError, match="no plotted run has the config key 'no.such.key'"):
        store.plot_metric(REWARD, color_by="no.such.key")


def test_color_by_puts_runs_without_the_key_in_grey(awkward_tree: tuple[Path, runstore.Store]) -> None:
    root, store = awkward_tree
    fig = store.plot_metric(REWARD, color_by="learning_rate")
    unset = [t for t in fig.data if not (root / t.meta["run_name"] / "config.json").is_file()]
    assert unset and all(t.line.color == charts.UNSET_COLOR for t in unset)
    assert all(t.legendgroup == charts.UNSET for t in unset)
    assert sum(t.showlegend for t in unset) == 1


def test_color_by_groups_values_as_compare_does(tmp_path: Path) -> None:
    """A colour per config value as `compare --group-by` groups them (`groups.comparable`):
    1 and 1.0 one value, shown as `compare` shows it; 2**60 and 2**60 + 1 two values, shown
    exactly (a double holds both as one number)."""
    seeds = {"a": 1, "b": 1.0, "c": 2 ** 60, "d": 2 ** 60 + 1}
    for name, seed in seeds.items():
        run = tmp_path / "runs" / name
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"seed": seed}))
        (run / "metrics.jsonl").write_text(json.dumps({"step": 0, "loss": 1.0}) + "\n")
    store = _store(tmp_path / "runs", tmp_path / "store")
    fig = store.plot_metric("loss", color_by="seed")
    group = {t.meta["run_name"]: t.legendgroup for t in fig.data}
    colour = {t.meta["run_name"]: t.line.color for t in fig.data}
    assert group == {"a": "1", "b": "1", "c": str(2 ** 60), "d": str(2 ** 60 + 1)}
    assert colour["a"] == colour["b"] and len({colour["a"], colour["c"], colour["d"]}) == 3
    labels = {r["group"] for r in store.groups(group_by="seed").to_dicts()}
    assert {f"seed={g}" for g in group.values()} == labels


def test_plot_metric_smooth_adds_ema_and_keeps_raw_faint(demo_tree: tuple[Path, runstore.Store]) -> None:
    """`smooth=W` is the debiased EMA of `compare` and the UI (analysis_oracle.ema, the
    definition), the raw line faint beside it."""
    root, store = demo_tree
    fig = store.plot_metric(REWARD, runs="math_rl_sweep/*", smooth=0.6)
    raw, smooth = by_meta(fig, "raw"), by_meta(fig, "ema")
    expected = {r: p for r, p in series(root, REWARD).items() if r.startswith("math_rl_sweep/")}
    assert set(raw) == set(smooth) == {(r, REWARD) for r in expected}
    for run, pts in expected.items():
        assert_line(raw[(run, REWARD)], pts)
        assert raw[(run, REWARD)].opacity < 0.5 and not raw[(run, REWARD)].showlegend
        assert smooth[(run, REWARD)].line.color == raw[(run, REWARD)].line.color
        want = ao.ema([v for _, v in pts], 0.6)
        np.testing.assert_allclose(floats(smooth[(run, REWARD)].y),
                                   [math.nan if w is None else w for w in want], rtol=1e-12)
    assert "debiased EMA, weight 0.6" in fig.layout.title.subtitle.text
    assert not by_meta(store.plot_metric(REWARD, smooth=0), "ema")  # 0: the raw values


def test_long_line_is_downsampled_keeping_min_and_max(long_tree: tuple[Path, runstore.Store]) -> None:
    root, store = long_tree
    key = "train_mean_nll"
    [(run, pts)] = series(root, key).items()
    assert len(pts) == 6000
    fig = store.plot_metric(key)
    [t] = fig.data
    y = floats(t.y)
    assert len(y) <= charts.MAX_POINTS and len(t.x) == len(y)
    values = np.array([v for _, v in pts])
    assert y.max() == values.max() and y.min() == values.min()
    step_of = dict(zip(np.asarray(t.x).tolist(), y.tolist()))
    assert step_of[pts[int(values.argmax())][0]] == values.max()
    # Every kept point is a real (step, value) pair.
    real = dict(pts)
    assert all(real[s] == v for s, v in step_of.items())
    assert "downsampled" in fig.layout.title.subtitle.text
    assert "5,000" in fig.layout.title.subtitle.text


# ---------------------------------------------------------------------------------------------
# plot kl


@pytest.mark.parametrize("tree", ["demo_tree", "awkward_tree"])
def test_plot_kl_lines_threshold_and_flags(tree: str, request: pytest.FixtureRequest) -> None:
    root, store = request.getfixturevalue(tree)
    fig = store.plot_kl()
    expected = kl_per_step(root)
    health = oracle.kl_health(root)
    assert set(expected) == set(health)
    for fam in ("v1", "v2"):
        got = by_meta(fig, f"kl_{fam}")
        assert set(got) == {(run, f"kl_{fam}") for run, f in expected.items() if f[fam]}
        for (run, _), t in got.items():
            assert_line(t, expected[run][fam])
            assert t.line.dash == ("solid" if fam == "v1" else "dot")
    [line] = [s for s in fig.layout.shapes if s.y0 == s.y1]
    assert line.y0 == 0.01 and line.line.dash == "dash"
    flagged = sorted(run for run, row in health.items() if row["flagged"])
    order = [t.meta["run_name"] for t in fig.data]
    if flagged:
        first_flagged = min(order.index(r) for r in flagged)
        assert all(r in flagged for r in order[first_flagged:])  # drawn last = on top
        assert "flagged: " in fig.layout.title.text
        for run in flagged[:3]:
            assert charts.label(run) in fig.layout.title.text
        widths = {t.meta["run_name"]: t.line.width for t in fig.data}
        assert min(widths[r] for r in flagged) > max(w for r, w in widths.items()
                                                     if r not in flagged)
    else:
        assert "no run above 0.01" in fig.layout.title.text


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_plot_kl_refuses_a_threshold_that_is_no_finite_number(
        demo_tree: tuple[Path, runstore.Store], tmp_path: Path, value: str) -> None:
    out = tmp_path / "kl.html"
    result = CliRunner().invoke(main, ["--store", str(demo_tree[1].path), "plot", "kl",
                                       "--threshold", value, "-o", str(out)])
    assert result.exit_code == 2, result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("Error: ")]
    assert "--threshold" in line and "not NaN or ±Infinity" in line and "--param" not in line
    assert not out.exists()


def test_plot_kl_nan_is_a_gap_and_a_missing_step_is_skipped(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "hand/kl"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"learning_rate": 1e-4, "loss_fn": "ppo"}))
    rows = [{"step": 0, "optim/kl_sample_train_v1": 0.001},
            {"step": 1, "optim/kl_sample_train_v1": 0.002},
            {"step": 2, "optim/kl_sample_train_v1": 0.003, "optim/kl_sample_train_v2": 0.001},
            {"step": 3, "optim/kl_sample_train_v1": math.nan, "optim/kl_sample_train_v2": 0.02},
            {"step": 4, "optim/kl_sample_train_v1": 0.004, "kl_sample_train_v2": 0.5}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = _store(tmp_path / "runs", tmp_path / "store")
    fig = store.plot_kl()
    assert_line(by_meta(fig, "kl_v1")[("hand/kl", "kl_v1")],
                [(0, 0.001), (1, 0.002), (2, 0.003), (3, math.nan), (4, 0.004)])
    assert_line(by_meta(fig, "kl_v2")[("hand/kl", "kl_v2")], [(2, 0.001), (3, 0.02), (4, 0.5)])
    assert "flagged: hand/kl" in fig.layout.title.text


@settings(max_examples=examples(200), deadline=None, derandomize=True, database=None)
@given(runs=st.lists(st.lists(st.integers(-3, 30), min_size=1, max_size=12), max_size=6))
def test_kl_step_order_is_a_stable_sort_by_step_within_each_run(runs: list[list[int]]) -> None:
    """`step_order` (None when the steps are already in order) against Python's stable sort
    of each run's steps, on runs in order, shuffled, with repeated steps."""
    from runstore.present.charts.metrics import step_order

    steps = np.array([s for run in runs for s in run], dtype=np.int64)
    lengths = np.array([len(run) for run in runs], dtype=np.int64)
    want, start = [], 0
    for run in runs:
        want += sorted(range(start, start + len(run)), key=lambda i: steps[i])
        start += len(run)
    got = step_order(steps, lengths)
    if got is None:
        assert want == list(range(len(steps)))
    else:
        assert got.tolist() == want


@settings(max_examples=examples(200), deadline=None, derandomize=True, database=None)
@given(steps=st.lists(st.integers(-3, 30), max_size=40))
def test_a_lines_points_are_put_in_a_stable_step_order(steps: list[int]) -> None:
    """`in_step_order` (a chart line's steps and values as the statement gives them, in any
    order) against Python's stable sort of the (step, value) pairs: the same pairs, by step,
    equal steps in the order given."""
    from runstore.present.charts.metrics import in_step_order

    values = [float(i) for i in range(len(steps))]  # each value names its place in the input
    want = sorted(zip(steps, values), key=lambda p: p[0])
    got_steps, got_values = in_step_order(steps, values)
    assert list(zip(got_steps, got_values)) == want


def test_metric_lines_of_resumed_runs_read_in_several_ingests(tmp_path: Path) -> None:
    """Runs whose rows lie in several files (appended between ingests), one resumed (steps
    logged again later in its live file, so its later writes win): each line is the run's
    live values in step order, as tests/oracle.py reads them from the files, and the lines
    come by label, then in the order the keys were asked for."""
    root = tmp_path / "runs"
    store = runstore.open(tmp_path / "store")
    names = ["b/run", "a/run", "c/run"]
    keys = ["z/second", REWARD]
    for part in range(3):
        for i, name in enumerate(names):
            run = root / name
            run.mkdir(parents=True, exist_ok=True)
            steps = range(part * 6, part * 6 + 6)
            if name == "c/run" and part == 2:
                steps = [*range(12, 18), *range(3, 15)]  # a resume from step 3
            with (run / "metrics.jsonl").open("a") as f:
                for step in steps:
                    f.write(json.dumps({"step": step, REWARD: step * 0.1 + i + part,
                                        "z/second": -step - part}) + "\n")
        store.ingest([root], on_warning=lambda text: None)
    fig = store.plot_metric(keys)
    assert [(t.meta["run_name"], t.meta["key"]) for t in fig.data] == [
        (n, k) for n in sorted(names) for k in keys]
    got = by_meta(fig, "raw")
    for key in keys:
        for name, pts in series(root, key).items():
            assert_line(got[(name, key)], pts)
    assert len(series(root, REWARD)["c/run"]) == 18


def test_kl_series_of_runs_read_in_several_ingests(tmp_path: Path) -> None:
    """Runs whose KL steps came in three ingests (the lines appended to a live file in between,
    so each run's rows are in three files): every step, in step order per run, flagged runs
    last, each value as tests/oracle.py reads it from the files."""
    root = tmp_path / "runs"
    store = runstore.open(tmp_path / "store")
    names = ["b/run", "a/run", "c/run"]
    for part in range(3):
        for i, name in enumerate(names):
            run = root / name
            run.mkdir(parents=True, exist_ok=True)
            with (run / "metrics.jsonl").open("a") as f:
                for step in range(part * 5, part * 5 + 5):
                    spike = 0.05 if (name == "b/run" and step == 7) else 0.001 * (i + 1)
                    f.write(json.dumps({"step": step, "optim/kl_sample_train_v1": spike,
                                        "optim/kl_sample_train_v2": step / 100_000}) + "\n")
        store.ingest([root], on_warning=lambda text: None)
    table = charts.kl_series(store)
    rows = table.to_pylist()
    want = kl_per_step(root)
    assert [r["run_label"] for r in rows] == [n for n in ("a/run", "c/run", "b/run")
                                           for _ in range(15)]
    for name, fams in want.items():
        mine = [r for r in rows if r["run_label"] == name]
        assert [(r["step"], r["v1"]) for r in mine] == fams["v1"]
        assert [(r["step"], r["v2"]) for r in mine] == fams["v2"]
        assert {r["flagged"] for r in mine} == {name == "b/run"}
    assert {r["threshold"] for r in rows} == {0.01}


def test_kl_series_flags_what_kl_health_flags_at_the_edges(tmp_path: Path) -> None:
    """The chart flags a run itself, from its values: a value exactly at the threshold is not
    over, nor is NaN, -Infinity or a step whose number a later string superseded; +Infinity
    is. Each run's flag is kl_health's, and the oracle's, at two thresholds."""
    cases = {
        "at": [{"optim/kl_sample_train_v1": 0.01}, {"optim/kl_sample_train_v2": 0.002}],
        "nan": [{"optim/kl_sample_train_v1": math.nan, "optim/kl_sample_train_v2": math.nan}],
        "neg_inf": [{"kl_sample_train_v1": -math.inf}],
        "pos_inf": [{"kl_sample_train_v2": math.inf}, {"kl_sample_train_v2": 0.001}],
        "superseded": [{"optim/kl_sample_train_v1": 0.5}, {"optim/kl_sample_train_v1": "n/a"}],
        "above": [{"optim/kl_sample_train_v1": 0.0100001}],
    }
    root = tmp_path / "runs"
    for name, writes in cases.items():
        (root / name).mkdir(parents=True)
        # Each write its own line at step 1 or 2; the superseding string comes after the number.
        lines = [json.dumps({"step": 1 + (i > 0 and name != "superseded"), **w}) + "\n"
                 for i, w in enumerate(writes)]
        (root / name / "metrics.jsonl").write_text("".join(lines))
    store = _store(root, tmp_path / "store")
    for threshold in (0.01, 0.0005):
        table = charts.kl_series(store, threshold=threshold)
        flags = {r["run_label"]: r["flagged"] for r in table.to_pylist()}
        health = dict(store.sql("select run_name, flagged from kl_health",
                                params={"kl_threshold": threshold}).rows())
        want = {n: row["flagged"] for n, row in oracle.kl_health(root, threshold).items()}
        assert flags == health == want, threshold
    assert {n for n, f in flags.items() if f} == {"at", "pos_inf", "above"}  # at 0.0005
    table = charts.kl_series(store, threshold=0.01)
    assert {r["run_label"] for r in table.to_pylist() if r["flagged"]} == {"pos_inf", "above"}


def test_plot_kl_threshold_follows_setting_and_argument(demo_tree: tuple[Path, runstore.Store]) -> None:
    root, store = demo_tree
    fig = store.plot_kl(threshold=0.002)
    [line] = [s for s in fig.layout.shapes if s.y0 == s.y1]
    assert line.y0 == 0.002
    flagged = sorted(r for r, row in oracle.kl_health(root, 0.002).items() if row["flagged"])
    assert len(flagged) >= 2
    assert all(charts.label(r) in fig.layout.title.text for r in flagged[:3])
    order = [t.meta["run_name"] for t in fig.data]
    assert min(order.index(r) for r in flagged) > max(
        i for i, r in enumerate(order) if r not in flagged)


# ---------------------------------------------------------------------------------------------
# plot rewards


def test_plot_rewards_equals_reward_trends(demo_tree: tuple[Path, runstore.Store]) -> None:
    root, store = demo_tree
    fig = store.plot_rewards()
    trends = oracle.reward_trends(root)
    per_run: dict[str, list[tuple[int, tuple[float, float | None, float | None]]]] = defaultdict(list)
    for (run, step), values in sorted(trends.items()):
        per_run[run].append((step, values))
    raw, ma = by_meta(fig, "reward"), by_meta(fig, "reward_ma10")
    assert set(raw) == set(ma) == {(r, REWARD) for r in per_run}
    for run, rows in per_run.items():
        assert_line(raw[(run, REWARD)], [(s, v[0]) for s, v in rows])
        assert_line(ma[(run, REWARD)], [(s, v[1]) for s, v in rows])
        assert raw[(run, REWARD)].opacity < ma[(run, REWARD)].opacity
    fig = store.plot_rewards(runs="gsm8k_tool_rl/*", color_by="learning_rate")
    groups = {t.meta["run_name"]: t.legendgroup for t in fig.data}
    assert all(groups[r] == json.dumps(_config_value(root, r, "learning_rate")) for r in groups)


# ---------------------------------------------------------------------------------------------
# plot spans


def test_plot_spans_gantt_is_the_steps_spans_in_nesting_order(demo_tree: tuple[Path, runstore.Store]) -> None:
    root, store = demo_tree
    run, step = "gsm8k_tool_rl/sweep/lr_1e-4/seed_0", 10
    fig = store.plot_spans(run, step=step)
    spans = oracle.live_spans(root / run)[step]
    bars = []
    for t in fig.data:
        if t.meta["kind"] == "gantt":
            assert t.meta["step"] == step and t.meta["run_name"] == run
            bars += [(t.meta["key"], b, x, y) for b, x, y in zip(t.base, t.x, t.y)]
    got = sorted((n, round(b, 9), round(x, 9)) for n, b, x, _ in bars)
    want = sorted((s["name"], round(s["wall_start"], 9), round(s["wall_end"] - s["wall_start"], 9))
                  for s in spans)
    assert got == want
    rows = sorted(bars, key=lambda bar: bar[3])
    assert [r[3] for r in rows] == list(range(len(spans)))
    # Tree order: each span sits right below its parent (the nearest row above that is one
    # level less indented), which is named like the span's `parent` and contains it.
    parent = {(r["name"], round(r["wall_start_s"], 9), round(r["wall_end_s"], 9)): r["parent"]
              for r in store.arrow("select s.name, wall_start_s, wall_end_s, parent from spans s "
                                   "join runs r using (run_id) where run_name = $r and step = $s",
                                   {"r": run, "s": step}).to_pylist()}
    ticks = list(fig.layout.yaxis.ticktext)
    level = [len(re.match(r"^(› )*", t).group(0)) // 2 for t in ticks]
    nested = 0
    for i, (name, base, width, _) in enumerate(rows):
        assert ticks[i] == "› " * level[i] + name
        if level[i] == 0:
            continue
        nested += 1
        j = max(k for k in range(i) if level[k] < level[i])
        assert level[j] == level[i] - 1
        assert rows[j][0] == parent[(name, round(base, 9), round(base + width, 9))]
        assert rows[j][1] <= base + 1e-6 and rows[j][1] + rows[j][2] >= base + width - 1e-6
    assert nested > len(rows) / 2
    assert store.plot_spans(run).data[0].meta["step"] == max(oracle.live_spans(root / run))


def test_plot_spans_shares_equal_top_level_time(demo_tree: tuple[Path, runstore.Store]) -> None:
    root, store = demo_tree
    for run in ("math_rl_sweep/qwen3-8b/lr_1e-4", "sl/tulu3_qwen3-8b_lr2e-4"):
        fig = store.plot_spans(run)
        live = oracle.live_numbers(root / run)
        want: dict[tuple[str, int], float] = {}
        for step, spans in oracle.live_spans(root / run).items():
            top = oracle.top_level(spans)
            total = live.get((step, "time/total"))
            denominator = total if total is not None and not math.isnan(total) else \
                sum(s["duration"] for s in top)
            for s in top:
                want[(s["name"], step)] = want.get((s["name"], step), 0.0) + s["duration"]
            for name in {s["name"] for s in top}:
                want[(name, step)] = want[(name, step)] / denominator
        got = {}
        for t in fig.data:
            if t.meta["kind"] == "share":
                got.update({(t.meta["key"], int(x)): y for x, y in zip(t.x, t.y)})
        assert set(got) == set(want)
        for k, v in want.items():
            assert got[k] == pytest.approx(v, rel=1e-9), k
        assert fig.layout.barmode == "stack"


def test_plot_spans_errors_and_long_runs(demo_tree: tuple[Path, runstore.Store],
                                         long_tree: tuple[Path, runstore.Store]) -> None:
    _, store = demo_tree
    with pytest.raises(QueryError, match="no spans at step 999; steps with spans: 0..59"):
        store.plot_spans("sl/tulu3_qwen3-8b_lr2e-4", step=999)
    with pytest.raises(QueryError, match="matches 5 runs"):
        store.plot_spans("gsm8k_tool_rl/*")
    with pytest.raises(QueryError, match="no run is named or matches 'nope'"):
        store.plot_spans("nope")
    _, long_store = long_tree
    fig = long_store.plot_spans("long/sl")
    shares = [t for t in fig.data if t.meta["kind"] == "share"]
    assert shares and all(len(t.x) <= charts.MAX_BARS for t in shares)
    assert "bars average every 6 consecutive steps" in fig.layout.title.subtitle.text


# ---------------------------------------------------------------------------------------------
# Perfetto / Chrome trace export


def slices_of(events: list[dict[str, Any]]) -> list[tuple[str, float, float | None]]:
    out = []
    for e in events:
        if e["ph"] == "X":
            out.append((e["name"], e["ts"], e["dur"]))
        elif e["ph"] == "B":
            out.append((e["name"], e["ts"], None))
    return sorted(out, key=lambda r: (r[1], r[0], -1 if r[2] is None else r[2]))


def check_chrome_trace(events: list[dict[str, Any]]) -> dict[tuple[int, int], str]:
    """Structural rules both viewers rely on; returns (pid, tid) → thread name."""
    assert json.loads(perfetto.dumps(events)) == events  # strict JSON, round-trips
    meta = [e for e in events if e["ph"] == "M"]
    body = [e for e in events if e["ph"] != "M"]
    assert events[: len(meta)] == meta  # metadata first
    assert {e["ph"] for e in body} <= {"X", "B"}  # no E: a B here never ended
    assert all(e["args"]["unmatched"] is True for e in body if e["ph"] == "B")
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    processes = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert {(e["pid"], e["tid"]) for e in body} == set(threads)
    assert {e["pid"] for e in body} == set(processes)
    # Slices of one thread nest: each one ends before the one open around it ends.
    per_thread: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in body:
        per_thread[(e["pid"], e["tid"])].append(e)
    for evs in per_thread.values():
        stack: list[float] = []
        for e in sorted(evs, key=lambda e: (e["ts"], -e.get("dur", math.inf))):
            end = e["ts"] + e.get("dur", math.inf)
            while stack and stack[-1] <= e["ts"] + 1e-3:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-3, e
            stack.append(end)
    return threads


def test_trace_round_trips_every_slice(demo_tree: tuple[Path, runstore.Store]) -> None:
    root, store = demo_tree
    run = "sl/tulu3_qwen3-8b_lr2e-4"  # one process; its last B lost its E
    events = store.trace(run)
    want = oracle.trace_slices(root / run / "trace_events.jsonl")
    assert slices_of(events) == want
    assert sum(1 for e in events if e["ph"] == "B") == sum(1 for *_, d in want if d is None) == 1
    threads = check_chrome_trace(events)
    tracks = {json.loads(line)["args"]["track"] for line in
              (root / run / "trace_events.jsonl").read_text().splitlines()
              if json.loads(line)["ph"] in "BE"}
    assert {re.sub(r" \(lane \d+\)$", "", n) for n in threads.values()} == tracks
    names = [e["args"]["name"] for e in events if e["name"] == "process_name"]
    assert names == [f"{run} · MainThread Thread"]
    # args survive: checkpoint slices carry their state_path.
    assert any("state_path" in e.get("args", {}) for e in events if e["ph"] == "X")


def test_trace_segments_of_a_resumed_run(demo_tree: tuple[Path, runstore.Store]) -> None:
    _, store = demo_tree
    run = "gsm8k_tool_rl/sweep/lr_3e-4/seed_1"
    rows = store.arrow("select t.name, t.start_us, t.dur_us, t.segment from trace_slices t "
                       "join runs r on r.run_id = t.run_id where r.run_name = $r",
                       {"r": run}).to_pylist()
    assert {r["segment"] for r in rows} == {0, 1}
    by_segment: dict[int, list[tuple[str, float, float | None]]] = defaultdict(list)
    for r in rows:
        by_segment[r["segment"]].append((r["name"], r["start_us"], r["dur_us"]))
    for seg, want in by_segment.items():
        events = store.trace(run, segment=seg)
        check_chrome_trace(events)
        assert slices_of(events) == sorted(want, key=lambda r: (r[1], r[0], -1 if r[2] is None else r[2]))
    whole = store.trace(run)
    check_chrome_trace(whole)
    seg_of_pid = {e["pid"]: int(re.search(r"segment (\d+)", e["args"]["name"]).group(1))
                  for e in whole if e["name"] == "process_name"}
    spans: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for e in whole:
        if e["ph"] != "M":
            spans[seg_of_pid[e["pid"]]].append(e)
    for seg, evs in spans.items():
        want = sorted(by_segment[seg], key=lambda r: r[1])
        shift = min(e["ts"] for e in evs) - want[0][1]
        got = sorted(e["ts"] - shift for e in evs)
        np.testing.assert_allclose(got, sorted(ts for _, ts, _ in want), rtol=0, atol=1e-3)
    end0 = max(e["ts"] + e.get("dur", 0) for e in spans[0])
    assert min(e["ts"] for e in spans[1]) >= end0  # laid out one after the other
    with pytest.raises(QueryError, match="no trace segment 7; segments: 0, 1"):
        store.trace(run, segment=7)


def test_trace_step_is_the_steps_time_window(demo_tree: tuple[Path, runstore.Store]) -> None:
    root, store = demo_tree
    run = "sl/tulu3_qwen3-8b_lr2e-4"
    slices = oracle.trace_slices(root / run / "trace_events.jsonl")
    for step in (0, 7, 33):
        spans = oracle.live_spans(root / run)[step]
        matched = []
        for s in spans:  # each timing span is one trace slice: same name and duration
            [hit] = [x for x in slices if x[0] == s["name"] and x[2] is not None
                     and abs(x[2] - s["duration"] * 1e6) < 1.0]
            matched.append(hit)
        lo = min(ts for _, ts, _ in matched)
        hi = max(ts + d for _, ts, d in matched)
        want = sorted([x for x in slices if lo - 100 <= x[1] <= hi + 100],
                      key=lambda r: (r[1], r[0], -1 if r[2] is None else r[2]))
        events = store.trace(run, step=step)
        check_chrome_trace(events)
        assert slices_of(events) == want
        assert set(matched) <= set(want)


def test_trace_step_from_args_and_errors(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "hand/written"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"learning_rate": 1e-4, "loss_fn": "ppo"}))
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "loss": 1.0 / (s + 1)}) + "\n"
                                               for s in range(3)))
    lines = []
    for s in range(3):  # the E event carries the step, as update_scope_context adds it
        t = 1000.0 + s * 1e6
        track = {"track": "Task-1", "thread": "MainThread"}
        lines.append({"name": "train_step", "ph": "B", "pid": 0, "tid": 5, "ts": t, "args": track})
        lines.append({"name": "train_step", "ph": "E", "pid": 0, "tid": 5, "ts": t + 5e5,
                      "args": {**track, "step": s}})
    (run / "trace_events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    store = _store(tmp_path / "runs", tmp_path / "store")
    events = store.trace("hand/*", step=1)
    assert slices_of(events) == [("train_step", 1000.0 + 1e6, 5e5)]
    assert [e["args"] for e in events if e["ph"] == "X"] == [{"step": 1}]
    with pytest.raises(QueryError, match="no trace slice carries args.step = 9 and the run "
                                         "has no timing spans for that step"):
        store.trace("hand/written", step=9)
    with pytest.raises(QueryError, match="neither trace events"):
        store.trace("hand/written", source="spans")
    with pytest.raises(QueryError, match="--step or --segment, not both"):
        store.trace("hand/written", step=1, segment=0)


def test_trace_without_trace_events_uses_spans(demo_tree: tuple[Path, runstore.Store]) -> None:
    root, store = demo_tree
    run = "math_rl_sweep/qwen3-8b/lr_1e-4"
    assert not (root / run / "trace_events.jsonl").exists()
    events = store.trace(run)
    threads = check_chrome_trace(events)
    live = oracle.live_spans(root / run)
    body = [e for e in events if e["ph"] == "X"]
    step_tid = [k for k, n in threads.items() if n == "steps"]
    assert len(step_tid) == 1
    steps = sorted((e for e in body if (e["pid"], e["tid"]) == step_tid[0]), key=lambda e: e["ts"])
    assert [e["args"]["step"] for e in steps] == sorted(live)
    offset = 0.0
    start_of = {}
    for e in steps:  # laid end to end, each as long as its step's spans
        step = e["args"]["step"]
        assert e["ts"] == pytest.approx(offset, abs=1e-6)
        assert e["dur"] == pytest.approx(max(s["wall_end"] for s in live[step]) * 1e6, abs=1e-3)
        start_of[step] = e["ts"]
        offset = e["ts"] + e["dur"]
    spans = [e for e in body if (e["pid"], e["tid"]) != step_tid[0]]
    got = sorted((e["args"]["step"], e["name"], round(e["ts"] - start_of[e["args"]["step"]], 3),
                  round(e["dur"], 3)) for e in spans)
    want = sorted((step, s["name"], round(s["wall_start"] * 1e6, 3),
                   round((s["wall_end"] - s["wall_start"]) * 1e6, 3))
                  for step, ss in live.items() for s in ss)
    assert got == want
    assert all(n == "steps" or re.fullmatch(r"depth \d+( \(lane \d+\))?", n)
               for n in threads.values())
    one = store.trace(run, step=3)
    assert {e["args"]["step"] for e in one if e["ph"] == "X"} == {3}
    assert len([e for e in one if e["ph"] == "X"]) == len(live[3]) + 1
    with pytest.raises(QueryError, match="no segments"):
        store.trace(run, segment=0)
    with pytest.raises(QueryError, match="no trace slices"):
        store.trace(run, source="trace")
    forced = store.trace("sl/tulu3_qwen3-8b_lr2e-4", source="spans")
    assert any(e["args"]["name"] == "steps" for e in forced if e["name"] == "thread_name")


# ---------------------------------------------------------------------------------------------
# Report


class _Tables(HTMLParser):
    """Rows (cell texts) of the tables of each <section id=...>."""

    def __init__(self) -> None:
        super().__init__()
        self.section: str | None = None
        self.tables: dict[str, list[list[str]]] = defaultdict(list)
        self.row: list[str] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section":
            self.section = dict(attrs).get("id")
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.row is not None and self.cell is not None:
            self.row.append("".join(self.cell))
            self.cell = None
        elif tag == "tr" and self.row is not None and self.section:
            self.tables[self.section].append(self.row)
            self.row = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-2**53, 2**53), st.text(max_size=5),
                       st.floats(allow_nan=True, allow_infinity=True))
_ARGS = st.recursive(_JSON_LEAF, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=12)


def _named(value: Any) -> Any:
    """What a strict JSON reader should see: non-finite floats as their names."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, float) and value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {k: _named(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_named(v) for v in value]
    return value


def _no_constants(name: str) -> Any:
    raise AssertionError(f"bare {name} in the trace JSON")


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["step", "loss", "note", "nested"]), _ARGS,
                                max_size=4), max_size=6))
def test_trace_json_is_strict_with_non_finite_args_named(argsets: list[dict[str, Any]]) -> None:
    """Every event's args, finite or not, nested or not, reach the file as strict JSON: a
    non-finite number as its name, everything else as it was."""
    events = [{"name": f"s{i}", "ph": "X", "pid": 1, "tid": 1, "ts": float(i), "dur": 1.0,
               "args": args} for i, args in enumerate(argsets)]
    text = perfetto.dumps(events)
    assert json.loads(text, parse_constant=_no_constants) == _named(events)
    body = [line for line in text.split("\n")[1:-2] if line]  # one event per line
    assert [json.loads(line.removesuffix(","), parse_constant=_no_constants)
            for line in body] == _named(events)


_TEXT = st.text(max_size=6)  # quotes, backslashes, control characters, any code point
_FLOAT = st.one_of(st.floats(), st.sampled_from([math.nan, math.inf, -math.inf]))
_NUMBER = st.one_of(st.integers(-2**70, 2**70), _FLOAT, st.booleans(), st.none(), _TEXT)


@st.composite
def _shaped_events(draw: Any) -> dict[str, Any]:
    """An event with the keys of a trace slice, a timing span's slice or a metadata event, in
    that order or not, with values of the right types or not."""
    shape = draw(st.sampled_from(["slice", "span", "meta"]))
    ids = st.integers(0, 2**40)
    if shape == "slice":
        keys = ["name", "pid", "tid", "ts", "ph", "dur"]
        values = [draw(_TEXT), draw(ids), draw(ids), draw(_FLOAT), "X", draw(_FLOAT)]
    elif shape == "span":
        arg = {"step": draw(ids), "depth": draw(ids), "parent": draw(st.none() | _TEXT),
               "duration_s": draw(_FLOAT)}
        if draw(st.booleans()):  # a value of another type, or a step's args
            arg = (dict(arg, **{draw(st.sampled_from(list(arg))): draw(_NUMBER)})
                   if draw(st.booleans()) else {"step": draw(ids)})
        keys = ["name", "ph", "pid", "tid", "ts", "dur", "args"]
        values = [draw(_TEXT), "X", draw(ids), draw(ids), draw(_FLOAT), draw(_FLOAT), arg]
    else:
        key = st.one_of(st.sampled_from(["name", "sort_index"]), _TEXT)
        arg = draw(st.dictionaries(key, st.one_of(_TEXT, st.integers(), _NUMBER),
                                   min_size=1, max_size=2))
        keys = ["name", "ph", "pid", "tid", "ts", "args"]
        values = [draw(_TEXT), "M", draw(ids), draw(ids), 0, arg]
    if draw(st.integers(0, 3)) == 0:  # a value of another type
        values[draw(st.integers(0, len(values) - 1))] = draw(_NUMBER)
    if draw(st.integers(0, 5)) == 0:  # another order
        order = draw(st.permutations(range(len(keys))))
        keys, values = [keys[i] for i in order], [values[i] for i in order]
    return dict(zip(keys, values))


@settings(max_examples=examples(1000), deadline=None)
@given(st.lists(_shaped_events(), min_size=1, max_size=5))
def test_trace_json_is_what_the_strict_encoder_writes(events: list[dict[str, Any]]) -> None:
    """Each event's line is the standard library's strict, compact text of it, byte for
    byte; an event it refuses (a non-finite number) is written with the numbers named."""
    text = perfetto.dumps(events)
    lines = text.split("\n")
    assert lines[0] == "[" and lines[-2:] == ["]", ""]
    body = lines[1:-2]
    assert len(body) == len(events)
    for i, (line, event) in enumerate(zip(body, events)):
        try:
            want = json.dumps(event, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
        except ValueError:
            want = json.dumps(_named(event), ensure_ascii=False, separators=(",", ":"))
        assert line == want + ("," if i < len(events) - 1 else "")


def report_tables(text: str) -> dict[str, list[dict[str, str]]]:
    p = _Tables()
    p.feed(text)
    return {sec: [dict(zip(rows[0], r)) for r in rows[1:]] for sec, rows in p.tables.items()}


def test_report_is_self_contained_and_complete(demo_tree: tuple[Path, runstore.Store],
                                               tmp_path: Path) -> None:
    from plotly.offline import get_plotlyjs

    root, store = demo_tree
    text = store.report(tmp_path / "report.html").read_text()
    assert text.count(get_plotlyjs()) == 1  # plotly.js inlined, once
    # The file (plotly.js copied as bytes) is the document `build` makes, but for its time.
    written = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
    assert written.sub("", text) == written.sub("", report.build(store))
    assert text.count("Plotly.newPlot(") == 2  # the KL and reward charts
    assert not re.search(r"<(script|img|iframe)[^>]*\bsrc=", text) and "<link" not in text
    assert "@import" not in text and "url(" not in text.split("<script", 1)[0]
    tables = report_tables(text)
    names = sorted(oracle.run_name(root, r) for r in oracle.run_dirs(root))
    assert [r["run_label"] for r in tables["runs"]] == names
    health = oracle.kl_health(root)
    kl_rows = tables["kl"]
    assert sorted(r["run_label"] for r in kl_rows) == sorted(health)
    flags = [r["flagged"] == "yes" for r in kl_rows]
    assert flags == sorted(flags, reverse=True) and flags[0]  # flagged runs first
    assert {r["run_label"] for r in kl_rows if r["flagged"] == "yes"} == {
        n for n, row in health.items() if row["flagged"]}
    slow = oracle.slowest_spans(root)
    top = sorted((run, row["rank"], name) for (run, name), row in slow.items() if row["rank"] <= 5)
    assert sorted((r["run_label"], int(r["rank"]), r["name"]) for r in tables["spans"]) == top
    # Both measures, each as the oracle has it (the table shows 4 significant digits or so).
    for r in tables["spans"]:
        want = slow[(r["run_label"], r["name"])]
        assert float(r["wall_share"]) == pytest.approx(want["wall_share"], rel=1e-3)
        assert float(r["share"]) == pytest.approx(want["share"], rel=1e-3)
    latest = oracle.latest_checkpoints(root)
    assert {r["run_label"]: r["latest_name"] for r in tables["checkpoints"]} == {
        run: row["latest_name"] for run, row in latest.items()}
    at = store.manifest().last_ingest["at"]
    assert at[:10] + " " + at[11:19] + " UTC" in text

    only = report_tables(store.report(tmp_path / "math.html", runs="math_rl_sweep/*").read_text())
    assert [r["run_label"] for r in only["runs"]] == [n for n in names if n.startswith("math_rl_sweep/")]
    with pytest.raises(QueryError, match="no run matches"):
        store.report(tmp_path / "none.html", runs="nothing/*")


def test_report_and_charts_escape_run_names(evil_tree: tuple[Path, runstore.Store],
                                            tmp_path: Path) -> None:
    _, store = evil_tree
    text = store.report(tmp_path / "report.html").read_text()
    assert "<img" not in text and "onerror=alert(1)>" not in text
    assert "evil/&lt;img src=x onerror=alert(1)&gt;&amp;&quot;q&quot;" in text
    assert [r["run_label"] for r in report_tables(text)["runs"]] == [EVIL, "plain/rl"]
    fig = store.plot_kl()
    assert "&lt;img" in fig.layout.title.text and "<img" not in fig.layout.title.text
    assert all("<img" not in t.name and "<img" not in t.hovertemplate for t in fig.data)
    assert {t.meta["run_name"] for t in fig.data} == {EVIL, "plain/rl"}


# ---------------------------------------------------------------------------------------------
# A real browser


def read_png(path: Path) -> tuple[int, int, np.ndarray]:
    """(width, height, pixels as an h×w×channels uint8 array) of an 8-bit RGB/RGBA PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, 1 + width * channels)
    out = np.zeros((height, width * channels), dtype=np.int32)
    prev = np.zeros(width * channels, dtype=np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 0:
            cur = line
        elif kind == 1:  # Sub: a running sum per channel
            cur = np.cumsum(line.reshape(width, channels), axis=0).reshape(-1) % 256
        elif kind == 2:  # Up
            cur = (line + prev) % 256
        else:  # Average (3) and Paeth (4) depend on the pixel just decoded: one at a time
            cur = line.copy()
            for i in range(len(cur)):
                a = cur[i - channels] if i >= channels else 0
                b = prev[i]
                if kind == 3:
                    cur[i] = (cur[i] + (a + b) // 2) % 256
                else:
                    c = prev[i - channels] if i >= channels else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    cur[i] = (cur[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) % 256
        out[y] = cur
        prev = cur
    return width, height, out.reshape(height, width, channels).astype(np.uint8)


@pytest.fixture(scope="module")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip("no Chromium on PATH (tests/run.sh installs Debian's `chromium` when run as "
                    "root; set RUNSTORE_CHROMIUM to use another): the real-browser test cannot run")
    return path


HOOK = ("<script>window.alert=function(m){document.title='XSS: '+m;};"
        "window.addEventListener('error',function(e){document.title='JS-ERROR: '+e.message;});"
        "window.addEventListener('unhandledrejection',function(e){"
        "document.title='JS-ERROR: unhandled '+e.reason;});</script>")


def test_report_renders_in_headless_chromium(chromium: str, evil_tree: tuple[Path, runstore.Store],
                                             tmp_path: Path) -> None:
    _, store = evil_tree
    text = store.report(tmp_path / "report.html").read_text()
    page = tmp_path / "page.html"
    page.write_text(text.replace("<head>", "<head>" + HOOK, 1))  # errors land in the title
    dump = dump_dom(page)
    title = re.search(r"<title>(.*?)</title>", dump.dom, re.S)
    assert title and title.group(1) == "runstore report", title and title.group(1)
    assert "Uncaught" not in dump.log, dump.log[-2000:]
    assert dump.dom.count('class="main-svg"') >= 4  # both charts drawn (two svgs each)
    assert "plain/rl" in dump.dom

    shot = screenshot(page, tmp_path / "report.png", width=1200, height=900)
    width, height, pixels = read_png(shot)
    assert (width, height) == (1200, 900)
    rgb = pixels[..., :3].astype(float)
    assert rgb.std() > 10, "the screenshot is blank"
    assert (rgb.min(axis=2) < 200).mean() > 0.02, "almost nothing is drawn"
    assert len(np.unique(pixels[..., :3].reshape(-1, 3), axis=0)) > 50


def test_kl_chart_draws_its_threshold_in_chromium(chromium: str,
                                                  evil_tree: tuple[Path, runstore.Store],
                                                  tmp_path: Path) -> None:
    _, store = evil_tree
    page = charts.write_html(store.plot_kl(), tmp_path / "kl.html")
    width, height, pixels = read_png(screenshot(page, tmp_path / "kl.png", width=900, height=500))
    rgb = pixels[..., :3].astype(int)
    red = (abs(rgb[..., 0] - 0xD6) < 12) & (abs(rgb[..., 1] - 0x27) < 12) & (abs(rgb[..., 2] - 0x28) < 12)
    assert red.sum() > 100, "the dashed threshold line is not on the screenshot"


# ---------------------------------------------------------------------------------------------
# CLI


def test_cli_writes_charts_report_and_trace(demo_tree: tuple[Path, runstore.Store],
                                           tmp_path: Path) -> None:
    root, store = demo_tree
    cases = [
        ["plot", "metric", REWARD, "optim/kl_sample_train_v1", "--runs", "math_rl_sweep/*",
         "--color-by", "learning_rate", "--smooth", "0.5"],
        ["plot", "kl", "--threshold", "0.02"],
        ["plot", "rewards", "--color-by", "model_name"],
        ["plot", "spans", "sl/*", "--step", "2"],
        ["report", "--runs", "gsm8k_tool_rl/*"],
    ]
    for i, args in enumerate(cases):
        out = tmp_path / f"{i}.html"
        result = cli(store, *args, "-o", str(out))
        assert result.exit_code == 0, (args, result.output)
        assert "wrote " in result.stderr and "Plotly.newPlot(" in out.read_text()
    out = tmp_path / "trace.json"
    result = cli(store, "trace", "sl/tulu3_qwen3-8b_lr2e-4", "--step", "7", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert slices_of(json.loads(out.read_text())) == slices_of(
        store.trace("sl/tulu3_qwen3-8b_lr2e-4", step=7))
    result = cli(store, "trace", "math_rl_sweep/qwen3-8b/lr_1e-4", "--step", "1")
    assert result.exit_code == 0 and json.loads(result.stdout)[0]["ph"] == "M"
    result = cli(store, "trace", "gsm8k*")
    assert result.exit_code == 2 and result.stderr.startswith("Error: 'gsm8k*' matches 5 runs")
    result = cli(store, "trace", "sl/*", "--step", "1", "--segment", "0")
    assert result.exit_code == 2 and "not both" in result.stderr
    result = cli(store, "plot", "metric", "no/such/key", "-o", str(tmp_path / "x.html"))
    assert result.exit_code == 2 and "Error: no run in the store logs metric 'no/such/key'" \
        in result.stderr
    assert not (tmp_path / "x.html").exists()


def test_plot_metric_refuses_a_key_no_run_logs(demo_tree: tuple[Path, runstore.Store],
                                               tmp_path: Path) -> None:
    root, store = demo_tree
    out = tmp_path / "nll.html"
    nll = series(root, "train_mean_nll")
    assert 0 < len(nll) < len(oracle.run_dirs(root)) and not series(root, "loss")
    # `loss` is a typo here: before, the chart silently had only train_mean_nll's lines.
    result = cli(store, "plot", "metric", "train_mean_nll", "loss", "-o", str(out))
    assert result.exit_code == 2 and not out.exists()
    assert result.stderr.startswith("Error: no run in the store logs metric 'loss'; did you "
                                    "mean ") and "dpo_loss" in result.stderr
    # A key that some runs lack draws their lines and says how many runs have it.
    result = cli(store, "plot", "metric", "train_mean_nll", "-o", str(out))
    assert result.exit_code == 0 and out.exists()
    assert result.stderr.splitlines()[-1] == (
        f"note: train_mean_nll is logged by {len(nll)} of {len(oracle.run_dirs(root))} runs")
    result = cli(store, "plot", "metric", REWARD, "--runs", "math_rl_sweep/*", "-o", str(out))
    assert result.exit_code == 0 and "note:" not in result.stderr  # every math run logs it
    # A key logged in the store but by no run in scope is no typo: the chart is empty, and
    # the error says so.
    assert not any(r.startswith("math_rl_sweep/") for r in nll)
    result = cli(store, "plot", "metric", "train_mean_nll", "--runs", "math_rl_sweep/*",
                 "-o", str(tmp_path / "none.html"))
    assert result.exit_code != 0 and "no run in the store logs" not in result.stderr
    assert "train_mean_nll" in result.stderr and not (tmp_path / "none.html").exists()


def test_plot_commands_have_examples() -> None:
    group = main.commands["plot"]
    for name in ["", *group.commands]:
        args = ["plot", name, "--help"] if name else ["plot", "--help"]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0 and "Example:" in result.stdout, name
    for name in ("report", "trace"):
        assert "Example:" in CliRunner().invoke(main, [name, "--help"]).stdout


def test_chromium_install_step_in_run_sh() -> None:
    text = (Path(__file__).parents[1] / "run.sh").read_text()
    assert "apt-get install -y -qq chromium" in text and "set -euo pipefail" in text


# ---------------------------------------------------------------------------------------------
# The HTML the CLI writes, against plotly's own reading of the Figure


def newplot_args(text: str, div_id: str = "chart") -> tuple[Any, Any, Any]:
    """The data, layout and config of the page's `Plotly.newPlot("div_id", ...)` call."""
    head = f'Plotly.newPlot("{div_id}", '
    assert text.count(head) == 1
    at = text.index(head) + len(head)
    decoder = json.JSONDecoder()
    out = []
    for _ in range(3):
        value, at = decoder.raw_decode(text, at)
        out.append(value)
        at = re.compile(r",\s*").match(text, at).end() if len(out) < 3 else at
    return out[0], out[1], out[2]


def typed_arrays_as_lists(value: Any) -> Any:
    """plotly's JSON with its typed arrays (`{"dtype", "bdata"}`, numpy columns in base64)
    read back as lists, NaN as null: what plotly.js draws from them."""
    import base64

    if isinstance(value, dict) and "bdata" in value and "dtype" in value:
        arr = np.frombuffer(base64.b64decode(value["bdata"]), dtype=np.dtype(value["dtype"]))
        if "shape" in value:
            arr = arr.reshape([int(n) for n in str(value["shape"]).split(",")])
        return [None if isinstance(v, float) and math.isnan(v) else v for v in arr.tolist()]
    if isinstance(value, dict):
        return {k: typed_arrays_as_lists(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed_arrays_as_lists(v) for v in value]
    return value


@pytest.mark.parametrize("args,figure", [
    (["metric", REWARD], lambda s: s.plot_metric(REWARD)),
    (["metric", REWARD, "optim/kl_sample_train_v1", "--runs", "math_rl_sweep/*", "--color-by",
      "learning_rate", "--smooth", "0.5"],
     lambda s: s.plot_metric([REWARD, "optim/kl_sample_train_v1"], runs="math_rl_sweep/*",
                             color_by="learning_rate", smooth=0.5)),
    (["kl", "--threshold", "0.002"], lambda s: s.plot_kl(threshold=0.002)),
    (["rewards", "--color-by", "model_name"], lambda s: s.plot_rewards(color_by="model_name")),
    (["spans", "sl/*", "--step", "2"], lambda s: s.plot_spans("sl/*", step=2)),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_cli_html_carries_the_figure_of_the_python_api(demo_tree: tuple[Path, runstore.Store],
                                                       tmp_path: Path, args: list[str],
                                                       figure: Any) -> None:
    """The page `runstore plot` writes without plotly's Python package holds the figure that
    plotly itself writes for the `Store.plot_*` Figure (`plotly.io.to_json`: the template
    written out, NaN as null, its numpy columns as typed arrays, byte for byte), and plotly's
    config."""
    import plotly.io as pio

    _, store = demo_tree
    out = tmp_path / "chart.html"
    result = cli(store, "plot", *args, "-o", str(out))
    assert result.exit_code == 0, result.output
    data, layout, config = newplot_args(out.read_text())
    want = json.loads(pio.to_json(figure(store)))
    assert data and data == want["data"]
    assert any(isinstance(t.get("y"), dict) and "bdata" in t["y"] for t in data)
    assert layout == want["layout"] and layout["template"]["layout"]["plot_bgcolor"] == "white"
    assert config == charts.PLOTLY_CONFIG


def test_kl_threshold_line_is_plotlys_hline(demo_tree: tuple[Path, runstore.Store]) -> None:
    import plotly.graph_objects as go

    _, store = demo_tree
    chart = charts.kl_chart(store, threshold=0.002)
    fig = go.Figure().add_hline(y=0.002, line_dash="dash", line_color="#d62728",
                                line_width=1.5, annotation_text="kl_threshold 0.002",
                                annotation_position="top left").to_dict()["layout"]
    assert chart["layout"]["shapes"] == fig["shapes"]
    assert chart["layout"]["annotations"] == fig["annotations"]


@pytest.mark.parametrize("heights", [[240, 300], [1000, 300], [16 * 200 + 40, 300]])
def test_spans_chart_rows_are_plotlys_subplots(heights: list[int]) -> None:
    """The two plots of the timing chart sit where plotly's make_subplots puts them."""
    from plotly.subplots import make_subplots

    from runstore.present.charts.spans import _two_rows

    spacing = 0.1 * 600 / sum(heights)
    want = make_subplots(rows=2, cols=1, vertical_spacing=spacing, row_heights=heights,
                         subplot_titles=("a &lt; b", "c")).to_dict()["layout"]
    axes, notes = _two_rows(heights, spacing, ("a &lt; b", "c"))
    assert axes == {k: want[k] for k in ("xaxis", "yaxis", "xaxis2", "yaxis2")}
    assert notes == want["annotations"]


def test_palettes_and_scale_are_plotlys() -> None:
    from plotly.colors import qualitative, sample_colorscale

    from runstore.present.charts.lines import colors, sample_viridis

    assert colors() == list(qualitative.Plotly) + list(qualitative.Alphabet)
    points = [0.0, 0.45, 0.9, 1.0] + [0.9 * i / (n - 1) for n in range(2, 40) for i in range(n)]
    assert sample_viridis(points) == sample_colorscale("Viridis", points)


def test_cli_plot_page_draws_its_traces_in_chromium(chromium: str,
                                                    demo_tree: tuple[Path, runstore.Store],
                                                    tmp_path: Path) -> None:
    """The page `runstore plot metric` writes draws one line per run that logs the key (the
    runs counted from the source files), with no JavaScript error."""
    root, store = demo_tree
    out = tmp_path / "reward.html"
    result = cli(store, "plot", "metric", REWARD, "-o", str(out))
    assert result.exit_code == 0, result.output
    page = tmp_path / "page.html"
    page.write_text(out.read_text().replace("<head>", "<head>" + HOOK, 1))
    dump = dump_dom(page)
    assert not re.search(r"<title>(JS-ERROR|XSS)", dump.dom), "an error or an alert"
    assert "Uncaught" not in dump.log, dump.log[-2000:]
    drawn = re.findall(r'<g class="trace scatter[^"]*"', dump.dom)
    assert len(drawn) == len(series(root, REWARD)) > 1


# A trace column as charts build them: integers (of any width), or numbers with gaps (None,
# NaN, ±Infinity), or something that is not one numeric column.
_NUMBERS = st.one_of(
    st.lists(st.integers(-2 ** 63, 2 ** 63 - 1), max_size=40),
    st.lists(st.integers(-300, 300), max_size=40),
    # each edge of int8, int16 and int32, and one past it
    st.lists(st.sampled_from([e + d for b in (7, 15, 31) for e in (-2 ** b, 2 ** b - 1)
                              for d in (-1, 0, 1)]), max_size=6),
    st.lists(st.one_of(st.none(), st.floats(), st.integers(-2 ** 53, 2 ** 53)), max_size=40),
    st.lists(st.one_of(st.text(max_size=3), st.booleans(), st.floats()), max_size=5))


@settings(max_examples=examples(300), deadline=None)
@given(x=_NUMBERS, y=_NUMBERS, base=_NUMBERS)
def test_written_columns_are_plotlys_typed_arrays_byte_for_byte(x: list[Any], y: list[Any],
                                                                 base: list[Any]) -> None:
    """The data `runstore plot` writes without numpy or plotly is what plotly's own writer
    writes for `to_figure` of the same chart: the numeric columns plotly writes as typed
    arrays (`{"dtype", "bdata"}`) with the same dtype and bytes, the others as the same
    lists (NaN and ±Infinity as null)."""
    import plotly.io as pio

    from runstore.present.charts import figure

    chart = {"data": [{"type": "bar", "x": x, "y": y, "base": base}], "layout": {}}
    ours = json.loads(figure._parts(chart)[0])
    want = json.loads(pio.to_json(figure.to_figure(chart)))["data"]
    assert ours == want


def test_typed_columns_draw_the_gaps_plain_lists_draw_in_chromium(chromium: str,
                                                                  tmp_path: Path) -> None:
    """A line written as typed arrays (NaN, ±Infinity and None among its values) draws in
    Chromium exactly as the same line written as JSON lists with those values as null: the
    same path segments and markers, the same y axis."""
    y = [1.0, math.inf, 2.0, math.nan, 3.0, -math.inf, 4.0, 5.0, None, 6.0]
    chart = {"data": [{"type": "scatter", "mode": "lines+markers", "x": list(range(len(y))),
                       "y": y}], "layout": {"template": "plotly_white"}}
    typed = tmp_path / "typed.html"
    charts.write_html(chart, typed)
    text = typed.read_text()
    assert '"bdata"' in text
    data, _, _ = newplot_args(text)
    lists = [{**data[0], "x": chart["data"][0]["x"],
              "y": [v if isinstance(v, float) and math.isfinite(v) else None for v in y]}]
    start = text.index("[", text.index('Plotly.newPlot("'))
    _, end = json.JSONDecoder().raw_decode(text, start)
    plain = tmp_path / "lists.html"
    plain.write_text(text[:start] + json.dumps(lists) + text[end:])

    def drawn(page: Path) -> tuple[list[str], int, list[str]]:
        dom = dump_dom(page).dom
        return (re.findall(r'<path class="js-line" d="([^"]*)"', dom),
                len(re.findall(r'<path class="point"', dom)),
                re.findall(r'class="ytick"><text[^>]*>([^<]*)<', dom))

    segments, points, ticks = drawn(typed)
    assert (segments, points, ticks) == drawn(plain)
    assert len(segments) == 5 and points == 6  # finite points 1-6; 4 and 5 joined
