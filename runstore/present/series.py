"""Chart lines for a page that draws its own charts (the web UI): per-run smoothing and min/max
downsampling of a metrics frame.

Contract: `lines(frame, smooth=W, max_points=N)` takes a long metrics frame (`run_id`,
`run_label`, `step`, `value`: one row per run and step, as `Store.metrics` returns for one
key) and returns one `Line` per run (keyed by `run_id`, so two runs that share a name are
two lines; named by `run_label`), ordered by label, with

* `steps`/`values`: the raw points, all of them when the run has at most `max_points`,
  otherwise a subset that keeps, for each of `(max_points - 2) // 2` equal buckets of
  consecutive points, the point with the smallest and the one with the largest value, plus
  the run's first and last point. So a single-step spike (a KL blow-up) and the global
  minimum and maximum always survive, and a line never has more than `max_points` points.
  NaN counts as neither small nor large (a bucket of NaNs only keeps its first point, drawn
  as a gap); +Infinity is the largest value and -Infinity the smallest, so they survive too;
* `smoothed` (when `W` is given): the debiased exponential moving average with weight `W`
  in [0, 1) as TensorBoard and W&B draw it: s_t = sum_i W^(t-i) x_i / sum_i W^(t-i) over the
  run's finite points up to t (`analysis.smooth.ema`, the smoothing of `compare`), carried
  unchanged over non-finite points, computed on every raw point before downsampling and then
  downsampled on its own in the same way;
* `points_per_line(n_runs, smoothed=)`: the `max_points` that keeps an answer for many runs
  within `BUDGET` points in all (never below `MIN_POINTS` per line);
* `n_points` (raw points before downsampling), `n_nan`, `n_inf` and `inf_steps`/`inf_signs`
  (where the line is ±Infinity);
* with `over=T` (the KL threshold, for a KL metric), `over_steps`/`over_values`: the points
  over T — the macro `over_threshold` (query/macros.py, the one home of "over"), evaluated by
  DuckDB — among those kept, and every +Infinity, at most `max_points` of them.

JSON has no NaN or Infinity: values are written by `numbers.json_number`, the one rule for a
number in JSON (NaN and ±Infinity as the strings "NaN", "Infinity", "-Infinity", as in every
UI answer and webhook payload); a chart draws them as gaps.

`group_lines(frame, x=, band=, smoothed=, max_points=, over=)` does the same for the groups
of a `Store.compare` answer: one line per group (mean, a std or min-max band, the count of
runs per point), see its docstring.

Values are sent rounded to `SIG_DIGITS` (7) significant digits: far finer than a chart shows,
and half the size of full doubles.

Everything is vectorised over the whole frame (a polars window for the EMA, numpy segment
reductions for the buckets), one pass for any number of runs. polars and numpy are imported
inside the functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

MAX_POINTS = 2000  # most points of one line
# Most points of one answer, over all its lines (raw and smoothed): ~16 bytes of JSON each, so
# an answer stays near 1.3 MB for any number of runs; the page asks again at a finer
# resolution for the step range it zooms into.
BUDGET = 80_000
SIG_DIGITS = 7  # significant digits of the values sent
MIN_POINTS = 100  # fewest points of one line, however many runs share the budget


@dataclass
class Line:
    run_id: str
    run_label: str
    steps: list[int]
    values: list[float | None]
    n_points: int
    n_nan: int = 0
    n_inf: int = 0
    inf_steps: list[int] = field(default_factory=list)
    inf_signs: list[int] = field(default_factory=list)
    smooth_steps: list[int] | None = None
    smoothed: list[float | None] | None = None
    over_steps: list[int] | None = None
    over_values: list[float] | None = None

    def to_json(self) -> dict[str, Any]:
        from ..numbers import json_numbers

        out = {k: v for k, v in self.__dict__.items() if v is not None}
        for k in ("values", "smoothed", "over_values"):
            if k in out:
                out[k] = json_numbers(out[k])
        return out


def check_smooth(smooth: float | None) -> float | None:
    """`smooth` as a weight in [0, 1) (`analysis.smooth.check_weight`, the one check of a
    smoothing weight), or None for no smoothing (0 means none too)."""
    from ..analysis.smooth import check_weight

    if smooth is None:
        return None
    return check_weight(smooth) or None


def points_per_line(n_runs: int, *, smoothed: bool, asked: int | None = None) -> int:
    """Points each line may keep: `asked` (else MAX_POINTS), within [MIN_POINTS, MAX_POINTS],
    and no more than the runs' share of BUDGET (a smoothed run draws two lines)."""
    want = MAX_POINTS if asked is None else asked
    lines_ = max(1, n_runs * (2 if smoothed else 1))
    return max(MIN_POINTS, min(want, MAX_POINTS, BUDGET // lines_))


def keep_mask(frame: "pl.DataFrame", column: str, max_points: int,
              by: str = "run_id") -> "np.ndarray":
    """Which rows of `frame` (sorted by `by`, then x) the min/max buckets keep (see module):
    `present.charts.lines.keep_mask` over every run's line at once."""
    import numpy as np

    from .charts.lines import keep_mask as keep_lines

    if max_points < 4:
        raise ValueError("max_points must be at least 4")
    total = frame.height
    if total == 0:
        return np.zeros(0, dtype=bool)
    runs = frame[by].rle_id().to_numpy()  # contiguous rows of one run: one id each
    values = frame[column].cast(float).fill_null(float("nan")).to_numpy()
    run_start = np.flatnonzero(np.r_[True, runs[1:] != runs[:-1]])
    run_len = np.diff(np.r_[run_start, total])
    return keep_lines(values, run_start, run_len, max_points)


def smoothed(frame: "pl.DataFrame", weight: float, by: str = "run_id") -> "pl.Series":
    """The debiased EMA of `value` per run (`analysis.smooth.ema`, the one `compare` uses),
    as a Series aligned with `frame` (sorted by `by`, then step)."""
    from ..analysis.smooth import ema

    return frame.select(ema("value", weight).over(by).alias("smoothed"))["smoothed"]


def _sig(name: str, alias: str | None = None) -> "pl.Expr":
    """A column rounded to SIG_DIGITS significant digits (NaN and ±Infinity kept: the answer
    writes them by `numbers.json_number`)."""
    import polars as pl

    return pl.col(name).round_sig_figs(SIG_DIGITS).alias(alias or name)


def group_lines(frame: "pl.DataFrame", *, x: str, band: str, smoothed: bool,
                max_points: int = MAX_POINTS, over: float | None = None) -> list[dict[str, Any]]:
    """One line per group of a `compare` answer (see `analysis.compare`): `x`, `mean`,
    `lo`/`hi` (mean ± std for `band="std"`, where a one-run point has lo = hi = mean; min and
    max for `band="minmax"`), `n` runs per point, and with `smoothed` the same of the smoothed
    values (`smooth_x`, `smooth_mean`, `smooth_lo`, `smooth_hi`). Downsampled like run lines:
    the min/max buckets of mean, lo and hi each keep a third of `max_points`, so a spike in
    the mean or in the band's edge survives. `over`: also `over_x`/`over_y`, the kept points
    where the group's largest value (`max`) is over it (`over_threshold`: the KL panels'
    marks)."""
    import polars as pl

    def edges(prefix: str) -> list[pl.Expr]:
        mean, std = pl.col(prefix + "mean"), pl.col(prefix + "std")
        if band == "minmax":
            return [pl.col(prefix + "min").alias("_lo"), pl.col(prefix + "max").alias("_hi")]
        spread = pl.when(std.is_finite()).then(std).otherwise(0.0)
        return [(mean - spread).alias("_lo"), (mean + spread).alias("_hi")]

    def reduce(df: pl.DataFrame, prefix: str, out: str) -> pl.DataFrame:
        df = df.with_columns(*edges(prefix))
        third = max(4, max_points // 3)
        keep = np_or(keep_mask(df, prefix + "mean", third, by="group"),
                     keep_mask(df, "_lo", third, by="group"),
                     keep_mask(df, "_hi", third, by="group"))
        kept = df.filter(pl.Series(keep))
        aggs = [pl.col(x).alias(out + "x"), _sig(prefix + "mean", out + "mean"),
                _sig("_lo", out + "lo"), _sig("_hi", out + "hi")]
        if not prefix:
            aggs.append(pl.col("n"))
            if over is not None:
                kept = kept.with_columns(_hit=_over(kept["max"], over))
                aggs += [pl.col(x).filter(pl.col("_hit")).alias("over_x"),
                         _sig("max", "over_y").filter(pl.col("_hit"))]
        return kept.group_by("group", maintain_order=True).agg(aggs)

    df = frame  # compare's order: by group as `groups` orders them, then x (contiguous)
    table = (df.group_by("group", maintain_order=True).agg(n_points=pl.len())
             .join(reduce(df, "", ""), on="group", maintain_order="left"))
    if smoothed:
        table = table.join(reduce(df, "smooth_", "smooth_"), on="group", maintain_order="left")
    return table.to_dicts()


def _over(values: "pl.Series", threshold: float) -> "pl.Series":
    """Whether each value is over `threshold` (`>`): the macro `over_threshold`, evaluated by
    DuckDB over these values (query/macros.py), never restated here."""
    import polars as pl

    from ..query.macros import over_threshold

    return pl.Series(over_threshold(values.cast(pl.Float64).to_arrow(), ">", threshold),
                     dtype=pl.Boolean)


def np_or(*masks: "np.ndarray") -> "np.ndarray":
    import numpy as np

    return np.logical_or.reduce(masks)


def lines(frame: "pl.DataFrame", *, smooth: float | None = None,
          max_points: int = MAX_POINTS, over: float | None = None) -> list[Line]:
    """One `Line` per run of a long metrics frame (see the module docstring)."""
    import polars as pl

    weight = check_smooth(smooth)
    df = (frame.select("run_id", "run_label", "step", pl.col("value").cast(pl.Float64))
          .filter(pl.col("step").is_not_null())
          .sort(["run_label", "run_id", "step"]))
    if weight is not None:
        df = df.with_columns(smoothed(df, weight))
    df = df.with_columns(_keep=pl.Series(keep_mask(df, "value", max_points)))

    inf = pl.col("value").is_infinite()
    table = (df.group_by("run_id", "run_label", maintain_order=True).agg(
        n_points=pl.len(), n_nan=pl.col("value").is_nan().sum(), n_inf=inf.sum(),
        inf_steps=pl.col("step").filter(inf).head(1000),
        inf_signs=pl.col("value").filter(inf).sign().cast(pl.Int64).head(1000))
        .join(df.filter(pl.col("_keep")).group_by("run_id", maintain_order=True)
              .agg(steps=pl.col("step"), values=_sig("value")), on="run_id",
              maintain_order="left"))
    if weight is not None:
        df = df.with_columns(_keep_s=pl.Series(keep_mask(df, "smoothed", max_points)))
        table = table.join(df.filter(pl.col("_keep_s")).group_by("run_id", maintain_order=True)
                           .agg(smooth_steps=pl.col("step"), smoothed=_sig("smoothed")),
                           on="run_id", maintain_order="left")
    if over is not None:
        marks = df.filter(pl.col("_keep") | (pl.col("value") == float("inf")))
        marks = marks.filter(_over(marks["value"], over))
        table = table.join(marks.group_by("run_id", maintain_order=True)
                           .agg(over_steps=pl.col("step").head(max_points),
                                over_values=_sig("value").head(max_points)),
                           on="run_id", how="left", maintain_order="left")
    out = [Line(**row) for row in table.to_dicts()]
    if over is not None:
        for line in out:
            line.over_steps, line.over_values = line.over_steps or [], line.over_values or []
    return out
