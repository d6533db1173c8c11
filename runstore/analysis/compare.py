"""Grouped curves with bands: `runstore compare METRIC --group-by ... --smooth W --x step|time`.

Contract: `compare(store, metric, runs=None, group_by=None, smooth=None, x="step")` returns one
row per group and x value with

    group, <group key columns>, step | time_s, n, n_nan, n_inf, mean, std, min, max
    [, smooth_n, smooth_mean, smooth_std, smooth_min, smooth_max]   (when `smooth` is given)

ordered by group (as `groups` orders them), then x.

* Values: the live values of `metric` — the `metrics` view itself, so the latest write of each
  (run, step) counts, as everywhere in runstore (a resumed run's superseded rows and
  `pre_resume` copies do not); only numbers (a step whose live write is a string has none).
* Groups: `analysis.groups` (`group_by=None`: one group per run; keys; `"auto"`: seeds).
* Per group and x: `n` runs with a finite value there, `n_nan` and `n_inf` runs whose value is
  NaN or ±Infinity (left out of every aggregate, counted here), `mean`, `std` (sample standard
  deviation, n - 1; null for one run, as pandas and W&B's std band), `min`, `max`. A run
  without a point at that x is not counted at all.
* Smoothing (`smooth=W`, analysis.smooth): each run's debiased EMA over its own points in step
  order, computed before grouping, then aggregated like the raw values (`smooth_n` counts runs
  with a smoothed value: the EMA is carried over a run's NaN steps, so a NaN step keeps the run
  in the smoothed band while the raw band leaves it out). W = 0 gives the raw values.
* `x="step"`: the training step. `x="time"`: `time_s`, wall time since the run's first step,
  from the step durations the trainer logs as `time/total` (tinker-cookbook writes it at every
  step; metrics.jsonl has no clock time). A run's point at step t is at the sum of the
  `time/total` of its steps after its first step, up to and including t — the time at which t
  was logged, counted from the first logged step, as TensorBoard's "relative" axis is; like
  W&B's "Relative Time (Process)" it leaves out time spent outside steps (start-up, the gap
  before a resume). Only steps with a finite `time/total` have a time (a run without any has
  no points on this axis). Runs' times differ, so points are put in buckets of `time_bucket`
  seconds (default: the median over the runs with points of each run's median step
  duration, about one step), and each run contributes its last point in a bucket (the value it showed at the end
  of it, as W&B's bucketing draws its line); `time_s` is the bucket's start.

`step_times(store, step, runs=None)` places one step on that time axis: per run in scope,
`run_name, time_s`, the wall time at which the run logged `step` (its exact time, not its
bucket's start; runs without a finite `time/total` at `step` make no row). The Charts page
marks a step with it when x is wall time.

Errors: a metric no run in the store logs is `UnknownKey` (naming the closest keys); a GLOB
that matches no run a `QueryError`; a bad `smooth`, `x`, `time_bucket` or group key a
`UsageError`. Runs in scope that do not log the metric make no rows (an empty frame when none
does). Speed: one query for the runs, one for the config keys grouped by (if any), one for
the values; the rest is polars over the values (~0.1 s for 100 runs x 2000 steps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ..errors import QueryError, UsageError
from .groups import GroupBy, groups
from .runs import Scope
from .smooth import check_weight, ema

if TYPE_CHECKING:
    import polars as pl

    from . import Queryable

X = Literal["step", "time"]
TIME_KEY = "time/total"
STATS = ("n", "n_nan", "n_inf", "mean", "std", "min", "max")
SMOOTH_STATS = ("smooth_n", "smooth_mean", "smooth_std", "smooth_min", "smooth_max")
X_COLUMNS = {"step": "step", "time": "time_s"}


def compare(store: "Queryable", metric: str, *, runs: Scope = None, group_by: GroupBy = None,
            smooth: float | None = None, x: X = "step",
            time_bucket: float | None = None) -> "pl.DataFrame":
    """Per group and x: n, mean, std, min, max of `metric`, raw and smoothed (see module).

    Example:
        >>> df = compare(store, "env/all/reward/total", runs="gsm8k_tool_rl/*",
        ...              group_by="learning_rate", smooth=0.9)
        >>> df.columns[:4], df["group"].unique(maintain_order=True).to_list()
        (['group', 'learning_rate', 'step', 'n'], ['learning_rate=0.0001', 'learning_rate=0.0003', 'learning_rate=0.001'])
        >>> df.filter(df["step"] == 0)["n"].to_list()
        [2, 2, 1]
    """
    import polars as pl

    if not isinstance(metric, str) or not metric:
        raise UsageError(f"give one metric key, e.g. 'env/all/reward/total', got {metric!r}")
    if x not in X_COLUMNS:
        raise UsageError(f"x is 'step' or 'time', got {x!r}")
    weight = None if smooth is None else check_weight(smooth)
    if time_bucket is not None and (isinstance(time_bucket, bool)
                                    or not isinstance(time_bucket, (int, float))
                                    or not 0 < time_bucket < float("inf")):
        raise UsageError(f"time_bucket is a number of seconds > 0, got {time_bucket!r}")
    xcol = X_COLUMNS[x]
    reserved = [xcol, *STATS, *(SMOOTH_STATS if weight is not None else ())]
    members = groups(store, runs=runs, group_by=group_by, reserved=reserved)
    key_columns = [c for c in members.columns if c not in ("run_id", "run_name", "group")]
    # Integer codes for runs (`_run`, their position in `members`) and groups (`_g`, in the
    # order `groups` gives): sorting and grouping 200k points on them takes ~10 ms, on the
    # names ~50 ms, out of the 0.25 s a compare of 100 runs x 2000 steps may take.
    labels = members.select("group", *key_columns).unique("group", maintain_order=True)
    labels = labels.with_row_index("_g")
    run_group = members.join(labels.select("group", "_g"), on="group", maintain_order="left")
    values = _values(store, metric, members["run_id"].to_list(), run_group["_g"].to_list(),
                     with_time=x == "time")
    points = values.filter(pl.col("key") == metric).drop("key")
    if points.height == 0:
        _require(store, metric)
    points = _in_step_order(points)
    if weight is not None:
        points = points.with_columns(ema("value", weight).over("_run").alias("smoothed"))
    if x == "time":
        points = _on_time_axis(points, values.filter(pl.col("key") == TIME_KEY), time_bucket)
    else:
        points = points.rename({"step": xcol})
    out = (points.group_by(["_g", xcol]).agg(_aggregates(weight is not None))
           .join(labels, on="_g").sort(["_g", xcol]))
    counts = [pl.col(c).cast(pl.Int64) for c in ("n", "n_nan", "n_inf")]
    if weight is not None:
        counts.append(pl.col("smooth_n").cast(pl.Int64))
    columns = ["group", *key_columns, xcol, *STATS, *(SMOOTH_STATS if weight is not None else ())]
    return out.with_columns(counts).select(columns)


def _in_step_order(points: "pl.DataFrame") -> "pl.DataFrame":
    """`points` sorted by run code, then step (one int64 key when the steps fit in 32 bits)."""
    import polars as pl

    if points.height == 0:
        return points
    lo, hi = points["step"].min(), points["step"].max()
    if not (-(2 ** 31) <= lo and hi < 2 ** 31):  # type: ignore[operator]
        return points.sort(["_run", "step"])
    key = pl.col("_run").cast(pl.Int64) * (2 ** 32) + pl.col("step")
    return points.sort(key)


def _aggregates(smoothed: bool) -> list["pl.Expr"]:
    import polars as pl

    v = pl.col("value")
    finite = pl.when(v.is_finite()).then(v)
    aggs = [v.is_finite().sum().alias("n"), v.is_nan().sum().alias("n_nan"),
            v.is_infinite().sum().alias("n_inf"), finite.mean().alias("mean"),
            finite.std(ddof=1).alias("std"), finite.min().alias("min"),
            finite.max().alias("max")]
    if smoothed:
        s = pl.col("smoothed")
        fs = pl.when(s.is_finite()).then(s)
        aggs += [fs.is_not_null().sum().alias("smooth_n"), fs.mean().alias("smooth_mean"),
                 fs.std(ddof=1).alias("smooth_std"), fs.min().alias("smooth_min"),
                 fs.max().alias("smooth_max")]
    return aggs


def _values(store: "Queryable", metric: str, run_ids: list[str], group_codes: list[int], *,
            with_time: bool) -> "pl.DataFrame":
    """`_run`, `_g`, step, key, value: live numeric values of `metric` (and `time/total`) of
    the runs `run_ids` (`_run` is the position in it, `_g` the run's entry in `group_codes`)."""
    import polars as pl
    from sqlglot import exp

    keys = [metric, TIME_KEY] if with_time and metric != TIME_KEY else [metric]
    params: dict[str, Any] = {f"k{i}": k for i, k in enumerate(keys)}
    params.update(ids=run_ids, codes=group_codes)
    m = lambda name: exp.column(name, table="m")  # noqa: E731 - a local shorthand
    position = exp.func("list_position", exp.Placeholder(this="ids"), m("run_id"))
    query = (exp.select(exp.alias_(position - 1, "_run"),
                        exp.alias_(exp.func("list_extract", exp.Placeholder(this="codes"),
                                            position.copy()), "_g"),
                        m("step"), m("key"), m("value"))
             .from_(exp.table_("metrics", alias="m"))
             .where(m("key").isin(*(exp.Placeholder(this=f"k{i}") for i in range(len(keys)))))
             .where(m("value").is_(exp.null()).not_())
             .where(exp.func("list_contains", exp.Placeholder(this="ids"), m("run_id"))))
    df = pl.from_arrow(store.arrow(query.sql(dialect="duckdb"), params))
    assert isinstance(df, pl.DataFrame)
    return df


def _on_time_axis(points: "pl.DataFrame", durations: "pl.DataFrame",
                  bucket: float | None) -> "pl.DataFrame":
    """`points` with `time_s` (bucket start) instead of `step`: one point per run and bucket,
    the run's last in the bucket (see the module)."""
    import polars as pl

    if points.height == 0:
        return points.drop("step").with_columns(time_s=pl.lit(None, pl.Float64))
    plotted = points["_run"].unique()
    times = _elapsed(durations.filter(pl.col("_run").is_in(plotted)))
    if times.height == 0:
        raise QueryError(f"none of these runs logs {TIME_KEY} (the step durations that x=time "
                         "adds up); use x='step'")
    if bucket is None:
        medians = times.group_by("_run").agg(pl.col("duration").median())["duration"]
        bucket = float(medians.median() or 0.0)
        if not bucket > 0:
            raise QueryError(f"the runs' median {TIME_KEY} is {bucket}: give time_bucket "
                             "(seconds) for x=time")
    placed = points.join(times.select("_run", "step", "elapsed"), on=["_run", "step"],
                         maintain_order="left")
    placed = placed.with_columns(time_s=(pl.col("elapsed") / bucket).floor() * bucket)
    return (placed.group_by(["_run", "time_s"], maintain_order=True).last()
            .drop("step", "elapsed"))


def _elapsed(durations: "pl.DataFrame") -> "pl.DataFrame":
    """_run, step, elapsed, duration: per run and step with a finite `time/total`, the wall
    time since the run's first such step (the sum of the durations after it, up to and
    including the step), from `_values` rows of `time/total`."""
    import polars as pl

    d = pl.col("value")
    return (_in_step_order(durations.filter(d.is_finite()))
            .with_columns(elapsed=(d.cum_sum() - d.first()).over("_run"))
            .select("_run", "step", "elapsed", duration=d))


def step_times(store: "Queryable", step: int, *, runs: Scope = None) -> "pl.DataFrame":
    """run_name, time_s: for each run in scope that logged a finite `time/total` at `step`,
    the wall time at which it logged `step` on the `x="time"` axis (exactly, not the start
    of its bucket), in run-name order; runs without a time at `step` make no row.

    Example:
        >>> t = step_times(store, 3, runs="gsm8k_tool_rl/*")
        >>> t.columns, t.height == t["run_name"].n_unique() > 0
        (['run_name', 'time_s'], True)
    """
    import polars as pl

    if isinstance(step, bool) or not isinstance(step, int):
        raise UsageError(f"step is a whole step number, got {step!r}")
    members = groups(store, runs=runs)
    durations = _values(store, TIME_KEY, members["run_id"].to_list(), [0] * members.height,
                        with_time=False)
    times = _elapsed(durations).filter(pl.col("step") == step)
    names = members.select("run_name").with_row_index("_run").with_columns(
        pl.col("_run").cast(times.schema["_run"]))
    return (times.join(names, on="_run").select("run_name", time_s=pl.col("elapsed"))
            .sort("run_name"))


def _require(store: "Queryable", metric: str) -> None:
    """`UnknownKey` when no run in the store has logged `metric` (else nothing: the runs in
    scope simply do not log it)."""
    from ..query.keys import require

    require(store, [metric])  # type: ignore[arg-type]
