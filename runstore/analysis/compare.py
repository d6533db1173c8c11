"""Grouped curves with bands: `runstore compare METRIC --group-by ... --smooth W --x AXIS`.

Contract: `compare(store, metric, runs=None, group_by=None, smooth=None, x="step",
bucket=None)` returns one row per group and x value with

    group, <group key columns>, step | time_s | tokens | cost_usd, n, n_nan, n_inf, mean,
    std, min, max [, smooth_n, smooth_mean, smooth_std, smooth_min, smooth_max] (with `smooth`)

ordered by group (as `groups` orders them), then x.

* Values: the live values of `metric` — the `metrics` view itself, so the latest write of each
  (run, step) counts, as everywhere in runstore (a resumed run's superseded rows and
  `pre_resume` copies do not); only numbers (a step whose live write is a string has none).
* Groups: `analysis.groups` (`group_by=None`: one group per run; keys; `"auto"`: seeds).
* Per group and x: `n` runs with a finite value there, `n_nan` and `n_inf` runs whose value is
  NaN or ±Infinity (left out of every aggregate, counted here), `mean`, `std` (sample standard
  deviation, n - 1; null for one run, as pandas and W&B's std band), `min`, `max`. A run
  without a point at that x is not counted at all. Mean and std are finite whenever their
  exact values are (1.5e308 and 1.7e308 average to 1.6e308: no sum overflows).
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
  no points on this axis).
* `x="tokens"` and `x="cost"`: what the run had spent by the step, from the cumulative
  totals tinker-cookbook 0.6 logs at every step: `tokens`, the live `tokens/cumulative/sampled`
  plus `tokens/cumulative/trained` at that step (the finite ones of the two), `cost_usd` the
  live `cost/cumulative_usd`. A step without them has no point on the axis (an eval logged
  at a step the run logged no training row for, say).
* A common grid: runs' times and spends differ, so on every axis but `step` points are put in
  buckets of `bucket` (seconds, tokens or USD; default about one step: for time the median
  over the runs with points of each run's median step duration, for tokens and cost the
  median over the runs of each run's median increase from one step to the next), and each
  run contributes its last point in a bucket (the value it showed at the end of it, as W&B's
  bucketing draws its line); the x column is the bucket's start. The band of a bucket is
  then over the runs that reached it.

`positions(store, x, runs=None)` places every step of each run in scope on axis `x` (any
axis but `step`: `run_id, run_label, step` and the axis column, exact, not bucketed);
`Store.history` draws a metric's per-run history on it. `step_times(store, step, runs=None)`
is one step of the time axis: per run in scope, `run_id, run_label, time_s`, the wall time at
which the run logged `step` (runs without a finite `time/total` at `step` make no row). The
Charts page marks a step with it when x is wall time.

Errors: a metric no run in the store logs is `UnknownKey` (naming the closest keys); a GLOB
that matches no run a `QueryError` (and so is an axis none of the runs logs); a bad
`smooth`, `x`, `bucket` or group key a `UsageError`. Runs in scope that do not log the metric make no rows (an empty frame when none
does). The bands are one statement, `query.statements.bands` (the one definition of n, mean,
std, min and max, and of how mean and std stay finite): on the step axis without smoothing it
reads the store's values itself, and `compare_rows` (what `runstore compare` prints) imports
neither polars nor pyarrow; smoothing and the other axes place each run's points with polars
first, and the statement reads them in the private DuckDB (`query.macros.private_cursor`).
One query for the runs, one for the config keys grouped by (if any), and one for the values
and their bands (two with smoothing or another axis: the values, then the bands).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Literal, TypeVar

from ..errors import QueryError, UsageError
from ..query.result import frame
from ..query.statements.bands import SMOOTH_STATS, STATS, compare_query, group_stats_query
from ..query.statements.frames import metric_values_query
from .groups import GroupBy, group_rows, groups
from .runs import Scope
from .smooth import check_weight, ema

if TYPE_CHECKING:
    import polars as pl

    from ..query.reader import Reader
    from ..query.rows import Rows

T = TypeVar("T")

X = Literal["step", "time", "tokens", "cost"]
TIME_KEY = "time/total"
X_COLUMNS = {"step": "step", "time": "time_s", "tokens": "tokens", "cost": "cost_usd"}
# The keys whose live values at a step place it on each axis but `step` (their sum, for
# tokens: sampled + trained).
AXIS_KEYS = {"time": (TIME_KEY,),
             "tokens": ("tokens/cumulative/sampled", "tokens/cumulative/trained"),
             "cost": ("cost/cumulative_usd",)}


def compare(store: "Reader", metric: str, *, runs: Scope = None, group_by: GroupBy = None,
            smooth: float | None = None, x: X = "step",
            bucket: float | None = None) -> "pl.DataFrame":
    """Per group and x: n, mean, std, min, max of `metric`, raw and smoothed (see module).

    Example:
        >>> df = compare(store, "env/all/reward/total", runs="gsm8k_tool_rl/*",
        ...              group_by="learning_rate", smooth=0.9)
        >>> df.columns[:4], df["group"].unique(maintain_order=True).to_list()
        (['group', 'learning_rate', 'step', 'n'], ['learning_rate=0.0001', 'learning_rate=0.0003', 'learning_rate=0.001'])
        >>> df.filter(df["step"] == 0)["n"].to_list()
        [2, 2, 1]
    """
    from ..query.result import polars_frame, to_polars

    return _answer(store, metric, runs, group_by, smooth, x, bucket, to_polars, polars_frame)


def compare_rows(store: "Reader", metric: str, *, runs: Scope = None,
                 group_by: GroupBy = None, smooth: float | None = None, x: X = "step",
                 bucket: float | None = None) -> "Rows":
    """The rows of `compare` as plain Python rows (`query.rows.Rows`): what `runstore
    compare` prints. Without smoothing, on the step axis, neither polars nor pyarrow is
    imported: the statement computes the answer from the store's values."""
    from ..query.rows import from_relation

    return _answer(store, metric, runs, group_by, smooth, x, bucket, from_relation,
                   from_relation)


def _answer(store: "Reader", metric: str, runs: Scope, group_by: GroupBy,
            smooth: float | None, x: X, bucket: float | None,
            convert: Callable[[Any], T], local: Callable[[Any], T]) -> T:
    """`compare`'s answer, read by `convert` (a store's result) or `local` (a DuckDB
    relation over the points placed in Python)."""
    if not isinstance(metric, str) or not metric:
        raise UsageError(f"give one metric key, e.g. 'env/all/reward/total', got {metric!r}")
    if x not in X_COLUMNS:
        raise UsageError(f"x is one of {', '.join(X_COLUMNS)}, got {x!r}")
    weight = None if smooth is None else check_weight(smooth)
    if bucket is not None and (isinstance(bucket, bool) or not isinstance(bucket, (int, float))
                               or not 0 < bucket < float("inf")):
        raise UsageError(f"bucket is a number > 0 (seconds, tokens or USD), got {bucket!r}")
    if bucket is not None and x == "step":
        raise UsageError("bucket is the grid of x='time', 'tokens' or 'cost'; on the step axis "
                         "every step is its own point: leave bucket out, or choose one of "
                         "those axes")
    xcol = X_COLUMNS[x]
    reserved = [xcol, *STATS, *(SMOOTH_STATS if weight is not None else ())]
    members = group_rows(store, runs=runs, group_by=group_by, reserved=reserved)
    key_columns = list(zip(members.column_names[4:], members.numeric[4:]))
    # Integer codes for groups (`_g`, in the order `groups` gives), bound with each code's
    # label and key values: the statement groups on the codes and names the groups last.
    codes: dict[str, int] = {}
    keys_of: list[tuple[Any, ...]] = []
    run_codes = []
    for row in members.data:
        if row[3] not in codes:
            codes[row[3]] = len(codes)
            keys_of.append(row[4:])
        run_codes.append(codes[row[3]])
    ids = [row[0] for row in members.data]
    params: dict[str, Any] = {"labels": list(codes)}
    params.update({f"key{i}": [k[i] for k in keys_of] for i in range(len(key_columns))})
    if not ids:
        _require(store, metric)  # no run in the store logs it (there is no run)
    if weight is None and x == "step":
        # The store's live values as they are: one statement, no polars.
        params.update(k0=metric, ids=ids, codes=run_codes)
        sql = compare_query(f"({metric_values_query(1)})", xcol, key_columns)
        out = store.fetch(sql, params, convert=convert)
    else:
        points = _points(store, metric, ids, run_codes, weight, x, bucket)
        sql = compare_query("points", xcol, key_columns, smoothed=weight is not None)
        out = _over(points, sql, params, local)
    if _height(out) == 0:
        _require(store, metric)
    return out


def _height(table: Any) -> int:
    """How many rows `table` (a polars frame, `Rows` or an Arrow table) holds."""
    return table.height if hasattr(table, "height") else table.num_rows


def _points(store: "Reader", metric: str, ids: list[str], run_codes: list[int],
            weight: float | None, x: X, bucket: float | None) -> "pl.DataFrame":
    """`_g`, the x column, `value` [, `smoothed`]: each run's points of `metric`, smoothed
    per run (`weight`) and placed on axis `x` (see the module)."""
    import polars as pl

    xcol = X_COLUMNS[x]
    axis = AXIS_KEYS.get(x, ())
    values = _values(store, [metric, *(k for k in axis if k != metric)], ids, run_codes)
    points = _in_step_order(values.filter(pl.col("key") == metric).drop("key"))
    if weight is not None:
        points = points.with_columns(ema("value", weight).over("_run").alias("smoothed"))
    if x == "time":
        points = _on_time_axis(points, values.filter(pl.col("key") == TIME_KEY), bucket)
    elif x != "step":
        points = _on_spend_axis(points, values.filter(pl.col("key").is_in(axis)), x, bucket)
    return points.select("_g", xcol, "value", *(["smoothed"] if weight is not None else []))


class _Stream:
    """A polars frame as DuckDB reads it through the Arrow C stream, without pyarrow (DuckDB
    converts a polars frame itself through pyarrow)."""

    def __init__(self, frame: "pl.DataFrame"):
        self.frame = frame

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.frame.__arrow_c_stream__(requested_schema)


def _over(points: "pl.DataFrame", sql: str, params: dict[str, Any],
          convert: Callable[[Any], T]) -> T:
    """`convert` of statement `sql` over `points` (as the relation `points`), in the private
    DuckDB (`query.macros.private_cursor`). The name is registered on this call's own cursor,
    where no other call sees it (a view would be the database's: two threads comparing at
    once would read each other's points)."""
    from ..query.macros import private_cursor

    cur = private_cursor()
    try:
        cur.register("points", _Stream(points))
        return convert(cur.sql(sql, params=params))
    finally:
        cur.close()


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


def group_stats(points: "pl.DataFrame", keys: list[str], *, smoothed: bool) -> "pl.DataFrame":
    """Per group of `keys`: n, n_nan, n_inf, mean, std, min, max of `value` (and the smooth_
    ones of `smoothed`), the finite values only: the statement
    `query.statements.bands.group_stats_query` (the one definition of a band; see it for how
    mean and std stay finite) over `points`."""
    from ..query.result import polars_frame

    return _over(points, group_stats_query("points", keys, smoothed), {}, polars_frame)


def _values(store: "Reader", keys: list[str], run_ids: list[str],
            group_codes: list[int]) -> "pl.DataFrame":
    """`_run`, `_g`, step, key, value: live numeric values of `keys` of the runs `run_ids`
    (`_run` is the position in it, `_g` the run's entry in `group_codes`)."""
    params: dict[str, Any] = {f"k{i}": k for i, k in enumerate(keys)}
    params.update(ids=run_ids, codes=group_codes)
    return frame(store, metric_values_query(len(keys)), params)


def _on_time_axis(points: "pl.DataFrame", durations: "pl.DataFrame",
                  bucket: float | None) -> "pl.DataFrame":
    """`points` with `time_s` (bucket start) instead of `step`: one point per run and bucket,
    the run's last in the bucket (see the module)."""
    import polars as pl

    if points.height == 0:
        return points.drop("step").with_columns(time_s=pl.lit(None, pl.Float64))
    plotted = points["_run"].unique()
    times = _elapsed(durations.filter(pl.col("_run").is_in(plotted.to_list())))
    if times.height == 0:
        raise QueryError(f"none of these runs logs {TIME_KEY} (the step durations that x=time "
                         "adds up); use x='step'")
    if bucket is None:
        medians = times.group_by("_run").agg(pl.col("duration").median())["duration"]
        bucket = float(medians.median() or 0.0)
        if not bucket > 0:
            raise QueryError(f"the runs' median {TIME_KEY} is {bucket}: give bucket "
                             "(seconds) for x=time")
    placed = points.join(times.select("_run", "step", "elapsed"), on=["_run", "step"],
                         maintain_order="left")
    placed = placed.with_columns(time_s=(pl.col("elapsed") / bucket).floor() * bucket)
    return (placed.group_by(["_run", "time_s"], maintain_order=True).last()
            .drop("step", "elapsed"))


def _on_spend_axis(points: "pl.DataFrame", spend: "pl.DataFrame", x: str,
                   bucket: float | None) -> "pl.DataFrame":
    """`points` with `tokens` or `cost_usd` (bucket start) instead of `step`: each point at
    what its run had spent by its step (the live values there of the axis' cumulative keys,
    summed), one point per run and bucket, the run's last in it (see the module)."""
    import polars as pl

    xcol = X_COLUMNS[x]
    if points.height == 0:
        return points.drop("step").with_columns(pl.lit(None, pl.Float64).alias(xcol))
    plotted = points["_run"].unique()
    spent = _spent(spend.filter(pl.col("_run").is_in(plotted.to_list())))
    if spent.height == 0:
        raise QueryError(f"none of these runs logs {' or '.join(AXIS_KEYS[x])} (what "
                         f"x={x!r} places steps by; tinker-cookbook 0.6 writes it); use "
                         "x='step'")
    if bucket is None:
        # About one step: the runs' median (over runs) median increase from step to step.
        steps = _in_step_order(spent)
        rises = steps.with_columns(rise=pl.col("spent").diff().over("_run")).filter(
            pl.col("rise") > 0)
        medians = rises.group_by("_run").agg(pl.col("rise").median())["rise"]
        bucket = float(medians.median() or 0.0)
        if not bucket > 0:
            raise QueryError(f"the runs' {xcol} does not grow from step to step: give "
                             f"bucket for x={x!r}")
    placed = points.join(spent, on=["_run", "step"], maintain_order="left")
    placed = placed.filter(pl.col("spent").is_not_null()).with_columns(
        ((pl.col("spent") / bucket).floor() * bucket).alias(xcol))
    return (placed.group_by(["_run", xcol], maintain_order=True).last()
            .drop("step", "spent"))


def _spent(spend: "pl.DataFrame") -> "pl.DataFrame":
    """_run, step, spent: per run and step, the sum of the finite live values of an axis'
    cumulative keys there (`_values` rows of `AXIS_KEYS["tokens"]` or `["cost"]`)."""
    import polars as pl

    return (spend.filter(pl.col("value").is_finite())
            .group_by(["_run", "step"]).agg(pl.col("value").sum().alias("spent")))


def _elapsed(durations: "pl.DataFrame") -> "pl.DataFrame":
    """_run, step, elapsed, duration: per run and step with a finite `time/total`, the wall
    time since the run's first such step (the sum of the durations after it, up to and
    including the step), from `_values` rows of `time/total`."""
    import polars as pl

    d = pl.col("value")
    return (_in_step_order(durations.filter(d.is_finite()))
            .with_columns(elapsed=(d.cum_sum() - d.first()).over("_run"))
            .select("_run", "step", "elapsed", duration=d))


def positions(store: "Reader", x: X, *, runs: Scope = None) -> "pl.DataFrame":
    """Where each step of each run in scope sits on axis `x` (any axis but `"step"`, where a
    step is its own place): `run_id, run_label, step` and the axis column (`X_COLUMNS[x]`),
    exactly, before any bucketing, in label then step order (see the module for each axis; a
    step without a place on the axis has no row). A metric's history on an axis
    (`Store.history`) joins its points to these.

    Example:
        >>> p = positions(store, "time", runs="gsm8k_tool_rl/sweep/lr_1e-3/seed_0")
        >>> p.columns, p["time_s"][0], p["time_s"].is_sorted()
        (['run_id', 'run_label', 'step', 'time_s'], 0.0, True)
    """
    import polars as pl

    if x not in X_COLUMNS or x == "step":
        axes = " or ".join(repr(k) for k in X_COLUMNS if k != "step")
        raise UsageError(f"positions are for the x axes {axes}, got {x!r}")
    members = groups(store, runs=runs)
    values = _values(store, list(AXIS_KEYS[x]), members["run_id"].to_list(),
                     [0] * members.height)
    placed = (_elapsed(values).rename({"elapsed": "_x"}) if x == "time"
              else _spent(values).rename({"spent": "_x"}))
    names = members.select("run_id", "run_label").with_row_index("_run").with_columns(
        pl.col("_run").cast(placed.schema["_run"]))
    return (placed.join(names, on="_run")
            .select("run_id", "run_label", "step", pl.col("_x").alias(X_COLUMNS[x]))
            .sort("run_label", "run_id", "step"))


def step_times(store: "Reader", step: int, *, runs: Scope = None) -> "pl.DataFrame":
    """run_id, run_label, time_s: for each run in scope that logged a finite `time/total`
    at `step`, the wall time at which it logged `step` on the `x="time"` axis (exactly, not
    the start of its bucket), in label order; runs without a time at `step` make no row.

    Example:
        >>> t = step_times(store, 3, runs="gsm8k_tool_rl/*")
        >>> t.columns, t.height == t["run_id"].n_unique() > 0
        (['run_id', 'run_label', 'time_s'], True)
    """
    import polars as pl

    if isinstance(step, bool) or not isinstance(step, int):
        raise UsageError(f"step is a whole step number, got {step!r}")
    return (positions(store, "time", runs=runs).filter(pl.col("step") == step)
            .select("run_id", "run_label", "time_s"))


def _require(store: "Reader", metric: str) -> None:
    """`UnknownKey` when no run in the store has logged `metric` (else nothing: the runs in
    scope simply do not log it)."""
    from ..query.keys import require

    require(store, [metric])  # type: ignore[arg-type]
