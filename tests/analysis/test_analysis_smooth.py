"""runstore.analysis.smooth: polars' ewm_mean against the debiased EMA's definition.

Two references written from the definition alone: the closed formula (`analysis_oracle.ema`,
a weighted mean over the finite points so far) and TensorBoard's loop (`last = W*last + (1-W)*x`, divided by
`1 - W^k`). polars must agree with both on random series with NaN, ±Infinity and null gaps.
"""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import given, settings, strategies as st

import analysis_oracle as ao
from runstore.analysis import smooth
from runstore.errors import UsageError
from conftest import examples


def tensorboard(values: list[float | None], w: float) -> list[float | None]:
    """TensorBoard's resmoothing loop (vz_line_chart), with runstore's carry over non-finite
    points instead of TensorBoard's raw value there."""
    last, k, out, current = 0.0, 0, [], None
    for v in values:
        if v is not None and math.isfinite(v):
            last = last * w + (1 - w) * v
            k += 1
            current = last / (1 - w ** k) if w else last
        out.append(current)
    return out


def close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


values = st.lists(st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.just(math.nan),
                            st.just(math.inf), st.just(-math.inf), st.none()),
                  max_size=120)
weights = st.one_of(st.just(0.0), st.just(0.9), st.just(0.999),
                    st.floats(0, 1, exclude_max=True))


@settings(max_examples=examples(300), deadline=None)
@given(values, weights)
def test_polars_is_the_definition(xs: list[float | None], w: float) -> None:
    got = pl.DataFrame({"value": xs}, schema={"value": pl.Float64}).select(
        smooth.ema("value", w))["value"].to_list()
    want = ao.ema(xs, w)
    assert len(got) == len(want)
    assert all(close(a, b) for a, b in zip(got, want)), (xs, w, got, want)
    assert all(close(a, b) for a, b in zip(want, tensorboard(xs, w)))


def test_a_hand_computed_value() -> None:
    # W = 0.9 over 1, 3, 5: (0.81*1 + 0.9*3 + 5) / (0.81 + 0.9 + 1) = 8.51 / 2.71.
    got = pl.DataFrame({"v": [1.0, 3.0, 5.0]}).select(smooth.ema("v", 0.9))["v"].to_list()
    assert got[0] == 1.0  # debiased: the first point is itself
    assert math.isclose(got[2], 8.51 / 2.71, rel_tol=1e-12)
    # alpha = 1 - W, not W: with alpha = 0.9 the last point would weigh 10x, not 1/0.9x.
    wrong = pl.Series([1.0, 3.0, 5.0]).ewm_mean(alpha=0.9, adjust=True).to_list()[2]
    assert not math.isclose(wrong, got[2], rel_tol=1e-3)


def test_weight_zero_is_the_raw_series_carried_over_gaps() -> None:
    xs = [None, 2.0, math.nan, -1.0, math.inf, 4.0]
    got = pl.DataFrame({"v": xs}).select(smooth.ema("v", 0))["v"].to_list()
    assert got == [None, 2.0, 2.0, -1.0, -1.0, 4.0]


@settings(max_examples=examples(60), deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), values, min_size=1), weights,
       st.randoms(use_true_random=False))
def test_per_run_and_in_step_order_whatever_the_row_order(runs: dict[str, list[float | None]],
                                                          w: float, rnd) -> None:  # type: ignore[no-untyped-def]
    rows = [(r, step, v) for r, vs in runs.items() for step, v in enumerate(vs)]
    rnd.shuffle(rows)
    df = pl.DataFrame(rows, schema={"run_id": pl.Utf8, "step": pl.Int64, "value": pl.Float64},
                      orient="row")
    out = smooth.smooth_frame(df, w)
    assert out.columns == ["run_id", "step", "value", "smoothed"]
    for r, vs in runs.items():
        part = out.filter(pl.col("run_id") == r)
        assert part["step"].to_list() == list(range(len(vs)))
        assert all(close(a, b) for a, b in zip(part["smoothed"].to_list(), ao.ema(vs, w)))


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(values, min_size=1, max_size=3), st.floats(0, 1, exclude_max=True))
def test_the_web_ui_smooths_the_same_way(lines: list[list[float | None]], w: float) -> None:
    # runstore/present/series.py (the web UI's lines) calls this module; the two must agree.
    from runstore.present import series

    rows = [(f"r{i}", s, v) for i, vs in enumerate(lines) for s, v in enumerate(vs)]
    df = pl.DataFrame(rows, schema={"run_name": pl.Utf8, "step": pl.Int64, "value": pl.Float64},
                      orient="row").sort(["run_name", "step"])
    ui = series.smoothed(df, w, by="run_name").to_list()
    ours = smooth.smooth_frame(df, w, by="run_name")["smoothed"].to_list()
    assert all(close(a, b) for a, b in zip(ui, ours))


@pytest.mark.parametrize("bad", [1, 1.0, -0.1, math.nan, math.inf, True, "0.9", None])
def test_bad_weights_are_refused(bad: object) -> None:
    with pytest.raises(UsageError, match=r"smoothing weight in \[0, 1\)"):
        smooth.check_weight(bad)


# Issue 31: `smoothed` (plain floats, what trend rules compute with, without polars) is the one
# computation and `ema` runs it over a polars group. Two paths, held to each other and to
# polars' own ewm_mean (the same average, computed in Rust), to the bit.
wide = st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.just(math.nan),
                          st.just(math.inf), st.just(-math.inf), st.none()), max_size=80)


def polars_ewm(xs: list[float | None], w: float) -> list[float | None]:
    """polars' debiased EMA over the finite values, held within the largest of them (an
    average is), carried over the others."""
    finite = pl.when(pl.col("v").is_finite()).then(pl.col("v"))
    largest = finite.abs().max()
    return pl.DataFrame({"v": xs}, schema={"v": pl.Float64}).select(
        finite.ewm_mean(alpha=1 - w, adjust=True, ignore_nulls=True)
        .clip(-largest, largest).forward_fill()
    )["v"].to_list()


@settings(max_examples=examples(300), deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c"]), wide, min_size=1), weights)
def test_the_row_form_and_the_polars_form_are_one(runs: dict[str, list[float | None]],
                                                  w: float) -> None:
    rows = [(r, step, v) for r, vs in runs.items() for step, v in enumerate(vs)]
    df = pl.DataFrame(rows, schema={"run_id": pl.Utf8, "step": pl.Int64, "value": pl.Float64},
                      orient="row")
    out = smooth.smooth_frame(df, w)
    for r, vs in runs.items():
        rows_form = smooth.smoothed(vs, w)
        polars_form = out.filter(pl.col("run_id") == r)["smoothed"].to_list()
        assert len(rows_form) == len(vs)
        assert [repr(v) for v in rows_form] == [repr(v) for v in polars_form], (vs, w)
        # Finite wherever a finite point came before, and null before the first one.
        seen = False
        for x, s in zip(vs, rows_form):
            seen = seen or (x is not None and math.isfinite(x))
            assert (s is not None and math.isfinite(s)) if seen else s is None, (vs, w)
        if all(x is None or not math.isfinite(x) or abs(x) < 2.0 ** 1022 for x in vs):
            # Below the values it scales, the same numbers as polars' own call, to the bit.
            assert [repr(v) for v in rows_form] == [repr(v) for v in polars_ewm(vs, w)], (vs, w)


def test_the_row_form_without_polars() -> None:
    # What `runstore check` computes trend rules with: plain floats, the carry and the gaps.
    assert smooth.smoothed([], 0.9) == []
    got = smooth.smoothed([None, math.nan, 1.0, math.inf, 3.0], 0.5)
    assert got[:4] == [None, None, 1.0, 1.0]
    assert math.isclose(got[4], (0.5 * 1.0 + 3.0) / 1.5, rel_tol=1e-15)  # type: ignore[arg-type]
    big = smooth.smoothed([1.7e308, -1.7e308, 1.7e308], 0.9)
    assert all(math.isfinite(v) for v in big)  # type: ignore[arg-type]
