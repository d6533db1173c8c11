"""Aggregates and smoothing near the ends of the doubles: finite where the exact result is.

* `compare`'s mean and std (per group and step) against exact rational arithmetic (fractions;
  the square root in 60-digit decimals) on values up to ±1.79e308 and down to subnormals:
  finite whenever the exact value is a finite double, and within 1e-12 of it relative to the
  group's largest magnitude (a float sum's rounding); `inf` only where the exact value is
  beyond the doubles.
* The debiased EMA (`analysis.smooth.ema`, what compare, plots, the UI and trend rules use)
  against its definition in exact arithmetic: always finite on finite points (it is a
  weighted mean of them).
* End to end, a store whose runs log 1.5e308, 1.7e308 and an alternating ±1.7e308: `runstore
  compare` prints mean 1.6e308 (not Infinity), its smoothed band is finite, and
  `drop(METRIC) > X` fires on the alternating run (a NaN smoothed curve would never fire).
"""

from __future__ import annotations

import json
import math
from decimal import Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

import runstore
from runstore.analysis import compare as compare_mod
from runstore.analysis.smooth import ema
from runstore.cli import main

MAX = 1.7976931348623157e308
HUGE = st.one_of(st.floats(-MAX, MAX, allow_nan=False, allow_infinity=False),
                 st.sampled_from([1.5e308, 1.7e308, -1.7e308, MAX, -MAX, 5e-324, -5e-324,
                                  2.2250738585072014e-308, 1e-200, 0.0, -0.0, 1.0]))


def exact_mean(xs: list[float]) -> Fraction:
    return sum((Fraction(x) for x in xs), Fraction(0)) / len(xs)


def exact_std(xs: list[float]) -> Decimal:
    m = exact_mean(xs)
    var = sum(((Fraction(x) - m) ** 2 for x in xs), Fraction(0)) / (len(xs) - 1)
    with localcontext() as ctx:
        ctx.prec = 60
        return (Decimal(var.numerator) / Decimal(var.denominator)).sqrt()


def as_double(exact: Fraction | Decimal) -> float:
    """The exact value as the nearest double, inf beyond the doubles' range."""
    try:
        return float(exact)
    except OverflowError:
        return math.inf if exact > 0 else -math.inf


def near(got: float, want: float, scale: float) -> bool:
    if math.isinf(want):
        return got == want
    return math.isfinite(got) and abs(got - want) <= 1e-12 * max(scale, abs(want)) + 1e-320


@given(st.lists(st.lists(HUGE, min_size=1, max_size=6), min_size=1, max_size=4))
@settings(max_examples=400, deadline=None)
def test_mean_and_std_are_exact_where_finite(groups: list[list[float]]) -> None:
    frame = pl.DataFrame({"_g": [g for g, xs in enumerate(groups) for _ in xs],
                          "value": [x for xs in groups for x in xs]})
    out = compare_mod.group_stats(frame, ["_g"], smoothed=False).sort("_g")
    for xs, row in zip(groups, out.iter_rows(named=True)):
        scale = max(abs(x) for x in xs)
        want_mean = as_double(exact_mean(xs))
        assert math.isfinite(want_mean)  # a mean of doubles is always within their range
        assert near(row["mean"], want_mean, scale), (xs, row["mean"], want_mean)
        if len(xs) == 1:
            assert row["std"] is None
            continue
        want_std = as_double(exact_std(xs))
        assert near(row["std"], want_std, scale), (xs, row["std"], want_std)
        assert row["min"] == min(xs) and row["max"] == max(xs) and row["n"] == len(xs)


def test_the_example_of_the_issue() -> None:
    frame = pl.DataFrame({"_g": [0, 0], "value": [1.5e308, 1.7e308]})
    row = compare_mod.group_stats(frame, ["_g"], smoothed=False).row(0, named=True)
    assert row["mean"] == 1.6e308
    assert row["std"] == as_double(exact_std([1.5e308, 1.7e308])) == pytest.approx(1.4142e307,
                                                                                    rel=1e-4)
    tiny = pl.DataFrame({"_g": [0, 0], "value": [1e-200, 3e-200]})
    assert compare_mod.group_stats(tiny, ["_g"], smoothed=False)["std"][0] == \
        pytest.approx(math.sqrt(2) * 1e-200, rel=1e-12)  # its square underflows


# Values around where a band changes the scale it sums at (a group's largest magnitude past
# 2^500 or below 2^-500), where a scaled value turns subnormal (2^-422 beside a value past
# 2^500), and the subnormals themselves; with NaN and ±Infinity, which are counted, not summed.
EDGES = st.builds(lambda m, e, sign: sign * math.ldexp(m, e), st.floats(0.5, 1.0),
                  st.sampled_from([501, 500, 499, 422, 421, 1, 0, -421, -422, -499, -500, -501,
                                   -1021, -1030, -1060, 1024 - 1]),
                  st.sampled_from([1.0, -1.0]))


@given(st.lists(st.lists(st.one_of(EDGES, st.sampled_from([math.nan, math.inf, -math.inf])),
                         min_size=1, max_size=6), min_size=1, max_size=4))
@settings(max_examples=300, deadline=None)
def test_mean_and_std_are_exact_at_the_scale_boundaries(groups: list[list[float]]) -> None:
    frame = pl.DataFrame({"_g": [g for g, xs in enumerate(groups) for _ in xs],
                          "value": [x for xs in groups for x in xs]})
    out = {r["_g"]: r for r in compare_mod.group_stats(frame, ["_g"], smoothed=False)
           .iter_rows(named=True)}
    for g, xs in enumerate(groups):
        row, finite = out[g], [x for x in xs if math.isfinite(x)]
        assert (row["n"], row["n_nan"], row["n_inf"]) == (
            len(finite), sum(map(math.isnan, xs)), sum(map(math.isinf, xs)))
        if not finite:
            assert row["mean"] is None and row["std"] is None and row["min"] is None
            continue
        scale = max(abs(x) for x in finite)
        assert near(row["mean"], as_double(exact_mean(finite)), scale), (xs, row["mean"])
        if len(finite) == 1:
            assert row["std"] is None
        else:
            assert near(row["std"], as_double(exact_std(finite)), scale), (xs, row["std"])


def exact_ema(xs: list[float], w: float) -> list[float]:
    wf, out, seen = Fraction(w), [], []
    for x in xs:
        seen.append(Fraction(x))
        k = len(seen)
        num = sum((wf ** (k - 1 - j) * v for j, v in enumerate(seen)), Fraction(0))
        den = sum((wf ** (k - 1 - j) for j in range(k)), Fraction(0))
        out.append(as_double(num / den))
    return out


@given(st.lists(HUGE, min_size=1, max_size=25),
       st.sampled_from([0.0, 0.3, 0.6, 0.9, 0.99]))
@settings(max_examples=300, deadline=None)
def test_the_ema_is_finite_and_exact_on_huge_values(xs: list[float], w: float) -> None:
    got = pl.DataFrame({"value": xs}).select(ema("value", w))["value"].to_list()
    scale = max(abs(x) for x in xs)
    for g, want in zip(got, exact_ema(xs, w)):
        assert math.isfinite(g), (xs, w, got)
        assert abs(g - want) <= 1e-9 * scale + 1e-320, (xs, w, g, want)


def test_an_alternating_huge_series_smooths_to_finite_values() -> None:
    xs = [1.7e308, -1.7e308] * 20
    frame = pl.DataFrame({"run": [0] * 40 + [1] * 3, "value": xs + [1.0, 2.0, 3.0]})
    got = frame.select(ema("value", 0.9).over("run"))["value"].to_list()
    assert all(math.isfinite(v) for v in got)
    assert got[-3:] == pytest.approx([1.0, 1.526315789, 2.070110701])  # the other run: as is


# ---------------------------------------------------------------------------------------------
# End to end

METRIC = "env/all/reward/total"


@pytest.fixture(scope="module")
def huge_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("huge")
    series = {"big/a": [1.5e308] * 4, "big/b": [1.7e308] * 4,
              "big/alternating": [1.7e308, -1.7e308] * 6}
    for name, values in series.items():
        run = base / "runs" / name
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"learning_rate": 1e-4}))
        (run / "metrics.jsonl").write_text("".join(
            json.dumps({"step": i, METRIC: v}) + "\n" for i, v in enumerate(values)))
    runstore.open(base / "store").ingest([base / "runs"])
    return base / "store"


def test_compare_prints_finite_aggregates(huge_store: Path) -> None:
    result = CliRunner().invoke(main, ["--store", str(huge_store), "compare", METRIC,
                                       "--runs", "big/[ab]", "--group-by", "learning_rate",
                                       "--smooth", "0.9", "-F", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [r["mean"] for r in rows] == [1.6e308] * 4
    assert all(r["std"] == as_double(exact_std([1.5e308, 1.7e308])) for r in rows)
    assert all(math.isfinite(r["smooth_mean"]) and r["smooth_n"] == 2 for r in rows)


def test_drop_keeps_firing_on_an_alternating_huge_run(huge_store: Path) -> None:
    smoothed = CliRunner().invoke(main, ["--store", str(huge_store), "compare", METRIC,
                                         "--runs", "big/alternating", "--smooth", "0.9",
                                         "-F", "json"])
    assert all(math.isfinite(r["smooth_mean"]) for r in json.loads(smoothed.stdout))
    result = CliRunner().invoke(main, ["--store", str(huge_store), "check",
                                       "--no-default-rules", "--rule",
                                       f"drop({METRIC}) > 1e300", "-F", "json"])
    assert result.exit_code == 1, result.output  # it fired
    fired = json.loads(result.stdout)
    assert [r["run_name"] for r in fired] == ["big/alternating"]
    assert fired[0]["first_step"] == 1
