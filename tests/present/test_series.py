"""runstore.present.series: min/max downsampling and the debiased EMA, against direct definitions."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

import analysis_oracle as ao
from hypothesis import example, given, settings, strategies as st

from runstore.errors import UsageError
from runstore.present import series
from conftest import examples


def reference_keep(values: list[float], max_points: int) -> set[int]:
    """The min/max bucket rule written as plainly as possible, one line at a time."""
    n = len(values)
    if n <= max_points:
        return set(range(n))
    buckets = (max_points - 2) // 2
    keep = {0, n - 1}
    members: dict[int, list[int]] = {}
    for i in range(n):
        members.setdefault(i * buckets // n, []).append(i)
    for idx in members.values():
        finite = [i for i in idx if not math.isnan(values[i])]
        if not finite:
            keep.add(idx[0])
            continue
        low = min(values[i] for i in finite)
        high = max(values[i] for i in finite)
        keep.add(next(i for i in finite if values[i] == low))
        keep.add(next(i for i in finite if values[i] == high))
    return keep


def frame(lines: dict[str, list[float]]) -> pl.DataFrame:
    rows = [(name, step, v) for name, vs in lines.items() for step, v in enumerate(vs)]
    return pl.DataFrame(rows, schema={"run_id": pl.Utf8, "step": pl.Int64, "value": pl.Float64},
                        orient="row")


def labelled(df: pl.DataFrame) -> pl.DataFrame:
    """A frame as `Store.metrics` gives it: each run's label beside its run_id."""
    return df.with_columns(run_label=pl.col("run_id"))


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


values_st = st.lists(st.one_of(st.floats(-1e6, 1e6, allow_nan=False),
                               st.just(math.nan), st.just(math.inf), st.just(-math.inf)),
                     min_size=0, max_size=400)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(values_st, min_size=1, max_size=4), st.integers(4, 60))
def test_keep_mask_matches_the_bucket_definition(lines: list[list[float]], max_points: int) -> None:
    data = {f"run{i}": vs for i, vs in enumerate(lines)}
    df = frame(data).sort(["run_id", "step"])
    mask = series.keep_mask(df, "value", max_points)
    offset = 0
    for name in sorted(data):
        vs = data[name]
        got = {i for i in range(len(vs)) if mask[offset + i]}
        assert got == reference_keep(vs, max_points), name
        assert len(got) <= max(max_points, len(vs) if len(vs) <= max_points else 0)
        offset += len(vs)


@example([[6392.0, 0.0]], 1.5646471818671505e-16)  # a CI run's falsifying example
@settings(max_examples=examples(100), deadline=None)
@given(st.lists(values_st, min_size=1, max_size=3), st.floats(0.0, 0.99))
def test_smoothing_is_the_debiased_ema(lines: list[list[float]], weight: float) -> None:
    data = {f"run{i}": vs for i, vs in enumerate(lines)}
    out = {line.run_id: line for line in series.lines(labelled(frame(data)), smooth=weight or 0.5,
                                                        max_points=10_000)}
    w = weight or 0.5
    for name, vs in data.items():
        if not vs:
            assert name not in out
            continue
        line = out[name]
        want = ao.ema(vs, w)
        assert line.smooth_steps == list(range(len(vs)))
        # An average's rounding error is relative to the values averaged, not to the result:
        # averaging 6392 and 0 at weight ~1e-16 gives ~1e-12, off by an ulp of 6392 (~1e-12).
        scale = max((abs(v) for v in vs if math.isfinite(v)), default=0.0)
        for got, exp in zip(line.smoothed or [], want):
            exp = None if exp is None else float(f"{exp:.7g}")
            assert close(got, exp) or (got is not None and exp is not None
                                       and abs(got - exp) <= 1e-12 * scale), (got, exp)


def test_a_single_step_spike_survives_at_ten_thousand_steps_over_a_hundred_runs() -> None:
    rng = np.random.default_rng(1)
    n, runs = 10_000, 100
    values = rng.normal(0.001, 0.0002, size=(runs, n))
    values[37, 6_543] = 0.5  # one KL blow-up in one run
    values[80, 9_999] = -3.0  # at the very end
    df = pl.DataFrame({"run_id": np.repeat([f"r{i:03d}" for i in range(runs)], n),
                       "step": np.tile(np.arange(n), runs), "value": values.ravel()})
    max_points = series.points_per_line(runs, smoothed=True)
    lines = {line.run_id: line for line in series.lines(labelled(df), smooth=0.9, max_points=max_points)}
    assert len(lines) == runs
    for name, line in lines.items():
        assert len(line.steps) <= max_points and len(line.smooth_steps or []) <= max_points
        assert line.n_points == n
        i = int(name[1:])
        kept = dict(zip(line.steps, line.values))
        assert kept[0] is not None and 0 in kept and n - 1 in kept
        assert max(v for v in kept.values() if v is not None) == pytest.approx(values[i].max(), rel=1e-6)
        assert min(v for v in kept.values() if v is not None) == pytest.approx(values[i].min(), rel=1e-6)
    assert lines["r037"].values[lines["r037"].steps.index(6_543)] == 0.5
    assert lines["r080"].values[-1] == -3.0


def test_infinities_are_reported_and_nan_is_a_gap() -> None:
    df = labelled(frame({"a": [1.0, math.nan, math.inf, 2.0, -math.inf]}))
    (line,) = series.lines(df)
    # JSON carries NaN and ±Infinity by name (numbers.json_number); a chart draws a gap.
    assert line.to_json()["values"] == [1.0, "NaN", "Infinity", 2.0, "-Infinity"]
    assert (line.n_nan, line.n_inf, line.inf_steps, line.inf_signs) == (1, 2, [2, 4], [1, -1])
    (smooth,) = series.lines(df, smooth=0.5)
    # Carried over the non-finite points: the EMA of [1, 2] by position is (0.5*1 + 2)/1.5.
    assert smooth.smoothed == [1.0, 1.0, 1.0, pytest.approx(2.5 / 1.5), pytest.approx(2.5 / 1.5)]


@pytest.mark.parametrize("bad", [1.0, -0.1, math.nan, math.inf, 2])
def test_smooth_outside_zero_one_is_refused(bad: float) -> None:
    with pytest.raises(UsageError, match=r"\[0, 1\)"):  # analysis.smooth.check_weight's
        series.check_smooth(bad)


def test_points_per_line_shares_the_budget() -> None:
    assert series.points_per_line(1, smoothed=False) == series.MAX_POINTS
    assert series.points_per_line(100, smoothed=True) == series.BUDGET // 200
    assert series.points_per_line(100_000, smoothed=True) == series.MIN_POINTS
    assert series.points_per_line(2, smoothed=False, asked=500) == 500
    assert series.points_per_line(2, smoothed=False, asked=10) == series.MIN_POINTS
    assert series.points_per_line(2, smoothed=False, asked=10**9) == series.MAX_POINTS


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                          st.sampled_from([0.0, 1.0, float("nan"), float("inf")])),
                min_size=0, max_size=300),
       st.integers(min_value=4, max_value=40))
def test_one_line_keeps_each_buckets_first_min_and_max(values: list[float], max_points: int) -> None:
    """The charts' one-line downsampling (the UI's lines share its code) against the rule
    written out point by point."""
    from runstore.present.charts.lines import keep_indices

    want = reference_keep(values, max_points)
    assert set(keep_indices(values, max_points).tolist()) == want
