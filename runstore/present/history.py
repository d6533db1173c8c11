"""A metric's history per run, reduced to a readable number of points: `Store.history`.

Contract: `history(store, keys, runs=None, x="step", smooth=None, max_points=200,
x_min=None, x_max=None)` returns the live numeric values of each key in `keys` (the
`metrics` view: the latest write of a step counts; NaN and ±Infinity kept) for each run in
scope, one row per kept point, with

    run_id, run_label, key, step, [<x column>,] value, [smoothed,] n_points

ordered by run (label), key (as given), then step.

* `x`: `"step"`, or an axis of `analysis.compare` (`analysis.compare.positions`: `"time"`,
  `time_s`, the wall time at which the run logged the step; `"tokens"` and `"cost"`,
  `tokens` and `cost_usd`, what the run had spent by the step); points without a place on
  the axis (no finite `time/total`, or no cumulative tokens or cost, at that step) are left
  out. An axis the library does not know is a
  `UsageError` naming the ones it does.
* `smooth=W`: `smoothed`, the debiased EMA with weight W over each line's points in step order
  (`analysis.smooth`, the one smoothing of charts and `compare`), computed on every point
  before the range and the downsampling cut any.
* `x_min`/`x_max`: only points with the x value in that range (inclusive); a bound is a
  number, not NaN.
* Downsampling: a line (a run and a key) with more than `max_points` points in range keeps at
  most that many: equal buckets of consecutive points, each keeping its minimum and its
  maximum, plus the first and the last point (`present.charts.lines.keep_mask`, the one
  implementation of min/max downsampling), so a one-step spike and the extremes always
  survive. With `smooth`, the raw and the smoothed values each choose half of the points.
  `n_points` is the line's number of points in range before downsampling (so
  `n_points - <rows of the line>` were dropped).

A key that no run in the store logs is `UnknownKey` naming the closest keys; a scope that
matches no run a `QueryError`. polars and numpy are imported inside the function.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

from ..analysis.runs import Scope
from ..errors import QueryError, UsageError
from ..query.result import frame
from ..query.statements import named

if TYPE_CHECKING:
    import polars as pl

    from ..query.reader import Reader

MAX_POINTS = 10_000  # most points a line may ask for


def history(store: "Reader", keys: str | Sequence[str], *, runs: Scope = None, x: str = "step",
            smooth: float | None = None, max_points: int = 200, x_min: float | None = None,
            x_max: float | None = None) -> "pl.DataFrame":
    """Each run's history of `keys`, downsampled (see the module)."""
    import polars as pl

    from ..analysis.compare import AXIS_KEYS, X_COLUMNS, positions
    from ..analysis.runs import scope_ids
    from ..analysis.smooth import check_weight, ema
    from ..query import keys as keys_mod
    from ..query.statements.frames import metric_keys

    names = metric_keys(keys)
    if x not in X_COLUMNS:
        raise UsageError(f"this runstore's x axes are {', '.join(repr(k) for k in X_COLUMNS)}; "
                         f"got {x!r}")
    if isinstance(max_points, bool) or not isinstance(max_points, int) \
            or not 4 <= max_points <= MAX_POINTS:
        raise UsageError(f"max_points is a whole number from 4 to {MAX_POINTS}, got {max_points!r}")
    weight = None if smooth is None else check_weight(smooth)
    for name, bound in (("x_min", x_min), ("x_max", x_max)):
        if bound is not None and (isinstance(bound, bool) or not isinstance(bound, (int, float))
                                  or math.isnan(bound)):  # NaN bounds nothing: no point passes
            raise UsageError(f"{name} is a number on the x axis, got {bound!r}")
    ids = scope_ids(store, runs)
    df = frame(store, named("charts.metric_series"), {"keys": names, "runs": ids})
    keys_mod.require(store, names, answered=df["key"].unique().to_list())
    df = df.with_columns(pl.col("value").cast(pl.Float64))  # in run, key, step order
    if weight is not None:
        df = df.with_columns(ema("value", weight).over("run_id", "key").alias("smoothed"))
    xcol = X_COLUMNS[x]
    if x != "step":
        placed = positions(store, x, runs=runs)  # type: ignore[arg-type]
        if placed.height == 0 and df.height:
            raise QueryError(f"no run in scope has a place on the {x} axis (it needs a finite "
                             f"{' or '.join(AXIS_KEYS[x])} at some step); use x='step'")
        df = df.join(placed.select("run_id", "step", xcol), on=["run_id", "step"],
                     maintain_order="left")
    if x_min is not None:
        df = df.filter(pl.col(xcol) >= x_min)
    if x_max is not None:
        df = df.filter(pl.col(xcol) <= x_max)
    df = df.with_columns(n_points=pl.len().over("run_id", "key").cast(pl.Int64))
    keep = _kept(df, "value", max_points if weight is None else max(4, max_points // 2))
    if weight is not None:
        keep |= _kept(df, "smoothed", max(4, max_points // 2))
    columns = ["run_id", "run_label", "key", "step", *([xcol] if x != "step" else []), "value",
               *(["smoothed"] if weight is not None else []), "n_points"]
    return df.filter(pl.Series(keep, dtype=pl.Boolean)).select(columns)


def _kept(df: "pl.DataFrame", column: str, max_points: int) -> Any:
    """Which rows of `df` (lines of one run and key contiguous) the min/max buckets keep."""
    import numpy as np
    import polars as pl

    from .charts.lines import keep_mask

    if df.height == 0:
        return np.zeros(0, dtype=bool)
    line = df.select(pl.struct("run_id", "key").rle_id())["run_id"].to_numpy()
    start = np.flatnonzero(np.r_[True, line[1:] != line[:-1]])
    length = np.diff(np.r_[start, df.height])
    values = df[column].fill_null(float("nan")).to_numpy()
    return keep_mask(values, start, length, max_points)
