"""The statements of `compare`'s bands: per group and x, the statistics of the runs' values.

Contract: `group_stats_query(source, keys, smoothed=False)` is DuckDB SQL text over the
relation `source` (a table's name, or a parenthesized query) with the columns `keys`, `value`
and, when `smoothed`, `smoothed`: one row per distinct `keys` with

    <keys>, n, n_nan, n_inf, mean, std, min, max [, smooth_n, smooth_mean, smooth_std,
    smooth_min, smooth_max]

`n` counts the finite values, `n_nan` the NaN ones and `n_inf` the ±Infinity ones; `mean`,
`std` (the sample standard deviation, n - 1: null for one value), `min` and `max` are over the
finite values only (null when there are none). The `smooth_` ones are the same over
`smoothed` (`smooth_n` counts its finite values: a null is no value). It is the one
definition of a band: `compare` runs it over the store's values when they need no reshaping,
and over the points Python placed (smoothed, or on a time or spend axis) otherwise.

Mean and std never overflow or underflow where their exact values do not. Each group's
finite values are summed at one of three scales, chosen by the group's largest magnitude m:
above 2^500 they are multiplied by 2^-600, below 2^-500 by 2^600, and otherwise left as
they are; the mean and std are scaled back by the inverse. Multiplying by a power of two is
exact where it leaves a value normal, and a value it makes subnormal is below 2^-900 of m, so
it moves nothing at the precision of the result: 1.5e308 and 1.7e308 average to 1.6e308
(their sum would be Infinity), and values near 1e-200 keep their spread (their squares would
be 0). Where no finite magnitude lies outside [2^-500, 2^500] (zeros aside), the numbers are
those of the plain aggregates, to the bit. tests/analysis/test_overflow.py holds them to
exact rational arithmetic. All three sums are made in one pass over the rows (a per-group
scale would need a second pass: a window).

`compare_query(source, x, key_columns)` is the whole answer of `compare`: the statistics of
`group_stats_query(source, ["_g", x])`, each row's group code `_g` (from 0) replaced by the
group's label (`$labels`, one per code) and its key columns (`$key0`, `$key1`, ..., one value
per code, each column a number or text as `key_columns` says: `(name, numeric)` pairs),
ordered by group code, then x. Names are quoted (`guard.identifier`); values are bound.
"""

from __future__ import annotations

from typing import Sequence

from ..guard import identifier

# A group's values are summed at 2^-SCALE when its largest magnitude is above 2^BOUND, at
# 2^SCALE below 2^-BOUND (see the module).
BOUND = 500
SCALE = 600
STATS = ("n", "n_nan", "n_inf", "mean", "std", "min", "max")
SMOOTH_STATS = ("smooth_n", "smooth_mean", "smooth_std", "smooth_min", "smooth_max")


def _scaled(aggregate: str, finite: str) -> str:
    """`aggregate` (avg, stddev_samp) of the finite values `finite`, at the group's scale."""
    size = f"max(abs({finite}))"
    return (f"CASE WHEN {size} > pow(2.0, {BOUND}) "
            f"THEN {aggregate}({finite} * pow(2.0, -{SCALE})) * pow(2.0, {SCALE}) "
            f"WHEN {size} < pow(2.0, -{BOUND}) "
            f"THEN {aggregate}({finite} * pow(2.0, {SCALE})) * pow(2.0, -{SCALE}) "
            f"ELSE {aggregate}({finite}) END")


def group_stats_query(source: str, keys: Sequence[str], smoothed: bool = False) -> str:
    """Per distinct `keys` of `source`: n, n_nan, n_inf, mean, std, min, max of `value`
    (see the module).

    >>> group_stats_query("points", ["_g"]).startswith('SELECT "_g", count(_v) AS n')
    True
    """
    names = ", ".join(identifier(k) for k in keys)
    finite = ["CASE WHEN isfinite(value) THEN value END AS _v"]
    stats = ["count(_v) AS n", "count(*) FILTER (WHERE isnan(value)) AS n_nan",
             "count(*) FILTER (WHERE isinf(value)) AS n_inf",
             f"{_scaled('avg', '_v')} AS mean", f"{_scaled('stddev_samp', '_v')} AS std",
             "min(_v) AS min", "max(_v) AS max"]
    if smoothed:
        finite.append("CASE WHEN isfinite(smoothed) THEN smoothed END AS _s")
        stats += ["count(_s) AS smooth_n", f"{_scaled('avg', '_s')} AS smooth_mean",
                  f"{_scaled('stddev_samp', '_s')} AS smooth_std", "min(_s) AS smooth_min",
                  "max(_s) AS smooth_max"]
    return (f"SELECT {names}, {', '.join(stats)} "
            f"FROM (SELECT {names}, value, {', '.join(finite)} FROM {source}) "
            f"GROUP BY {names}")


def compare_query(source: str, x: str, key_columns: Sequence[tuple[str, bool]],
                  smoothed: bool = False) -> str:
    """`compare`'s answer over `source` (`_g`, `x`, `value` [, `smoothed`]): see the module.

    >>> compare_query("points", "step", [("lr", True)]).split(', s."step"')[0]
    'SELECT list_extract($labels, s._g + 1) AS "group", CAST(list_extract($key0, s._g + 1) AS DOUBLE) AS "lr"'
    """
    keys = [f"CAST(list_extract($key{i}, s._g + 1) AS {'DOUBLE' if numeric else 'VARCHAR'}) "
            f"AS {identifier(name)}" for i, (name, numeric) in enumerate(key_columns)]
    stats = [*STATS, *(SMOOTH_STATS if smoothed else ())]
    columns = ['list_extract($labels, s._g + 1) AS "group"', *keys, f"s.{identifier(x)}",
               *(f"s.{c}" for c in stats)]
    return (f"SELECT {', '.join(columns)} "
            f"FROM ({group_stats_query(source, ['_g', x], smoothed)}) AS s "
            f"ORDER BY s._g, s.{identifier(x)}")
