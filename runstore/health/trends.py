"""Trend rules: a reward that collapses, a step time that climbs, a run that went quiet.

Contract: a `TrendRule` (rules.py) is one of three forms, written (grammar.py) as

    drop(METRIC) > X          drop(METRIC, W) > X
    rise(METRIC) > X          rise(METRIC, W) > X
    stale > MINUTES

(`>=` works as well as `>`; METRIC is written as in threshold rules: bare, or quoted when it
holds spaces, quotes, brackets or commas; W is the smoothing weight, `DEFAULT_WEIGHT` when
left out). `evaluate(store, rules, runs=, since_step=, now=)` returns one row per (run, rule)
that fires with exactly the threshold rules' columns (`firing.COLUMNS`, plus `run_id` and
`rule_idx`, the rule's position in `rules`), and how many runs each rule checked and fired
for, so `runstore check` can put both kinds of rules in one table and one verdict line.

Definitions, per run, over the live values of METRIC (the `metrics` view: the latest write of
each step, no `pre_resume` copies; `optim/X` and `X` are one family, the `optim/` spelling
preferred where a step logs both, as in threshold rules), in step order:

* s_t is the debiased EMA with weight W (analysis.smooth: TensorBoard's smoothing; NaN and
  ±Infinity do not move it). The rule's steps are the steps with a numeric value from the
  first one where the rule has a value on; a NaN or ±Infinity step is one of them with the
  value NaN: it never fires and it ends a streak, as in threshold rules.
* `drop`: the value at t is b_t - s_t, where b_t = max of s over the rule's steps up to t
  (the best smoothed value so far): how far the smoothed metric fell below its best. Fires
  where it is above X (in the metric's units). Default W = 0.9: one bad batch moves the
  smoothed value by a tenth of its deviation, so only a sustained fall fires.
* `rise`: the value at t is s_t / m_t, where m_t is the median of the raw finite values at
  the rule's steps *before* t. The median of the raw values, not of the smoothed ones: it is
  already robust (a spike or two do not move it), and it does not depend on W; the steps
  before t only, so the change being measured does not pull its own baseline up. The rule
  has a value from the first step with at least `MIN_HISTORY` (10) earlier finite values on
  (a median of fewer is not a baseline); where m_t <= 0 the ratio means nothing and the value
  is NaN (rise is for positive quantities: times, lengths, costs). Fires where the ratio is
  above X: `rise(time/total) > 2` is "the smoothed step time doubled". Default W = 0.9.
* `stale`: a run whose `run_status` is neither `completed` nor `missing` and whose source
  files last changed (`runs.source_updated_at`, as of the last ingest) more than MINUTES
  before `now`: a crashed or hung job. Its row has `first_step = last_step = runs.last_step`,
  `steps_over` and `longest_streak` null (it is not about steps), and `peak = latest` = the
  minutes since the last change. It is as fresh as the last ingest: `ingest --watch` keeps
  it current; a check of an old store sees every unfinished run as stale.

Columns of a drop/rise row, as for threshold rules: `first_step`/`last_step` the first and
last step over, `steps_over` how many, `longest_streak` the most consecutive rule steps over,
`peak` the largest value over X, `latest` the value at the run's last rule step (NaN there
when that step's value is NaN), `status` `run_status`'s. `since_step` drops the earlier steps
before anything is computed (as if they were not logged); stale ignores it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Sequence, cast

from ..analysis.runs import Scope, scope_ids
from ..analysis.smooth import ema
from ..errors import UsageError
from ..query.result import frame
from ..query.statements.frames import family_series_query, run_status_query
from .firing import COLUMNS
from .grammar import is_trend
from .rules import DEFAULT_WEIGHT, KINDS, TrendRule, parse_rule

__all__ = ["DEFAULT_WEIGHT", "KINDS", "MIN_HISTORY", "TrendResult", "TrendRule", "evaluate",
           "parse_trend", "values"]

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from ..query.reader import Reader

MIN_HISTORY = 10


def parse_trend(text: str) -> TrendRule | None:
    """`text` as a TrendRule, None when it is not written as one (`grammar.is_trend`: then it
    is a threshold rule), `UsageError` saying why and where when it starts like one but is
    not. One grammar reads both kinds: this is `rules.parse_rule` for trend text.

    >>> r = parse_trend('rise("time/sample_async:total", 0.8) >= 1.5')
    >>> r.kind, r.metric, r.weight, r.op, r.value
    ('rise', 'time/sample_async:total', 0.8, '>=', 1.5)
    >>> parse_trend("stale > 30").value, parse_trend("optim/entropy < 0.05") is None
    (30.0, True)
    >>> parse_trend("DROP( env/all/reward/total ) >= 2").name
    'drop(env/all/reward/total) >= 2'
    """
    if not isinstance(text, str) or not is_trend(text):
        return None
    return cast(TrendRule, parse_rule(text))


# ---------------------------------------------------------------------------------------------
# Evaluating


@dataclass(frozen=True)
class TrendResult:
    """What `evaluate` found: the rows that fired (`frame`, as polars computed them; `table`,
    the same as Arrow) and, per rule, runs checked and fired."""

    frame: "pl.DataFrame"  # run_id, the COLUMNS, rule_idx; by run_name, then rule_idx
    checked: tuple[int, ...]
    fired: tuple[int, ...]

    @property
    def table(self) -> "pa.Table":
        return self.frame.to_arrow()


def evaluate(store: "Reader", rules: Sequence[TrendRule], *, runs: Scope = None,
             since_step: int | None = None, now: datetime | None = None) -> TrendResult:
    """Every (run, rule) that fires, with per-rule counts (see the module)."""
    import polars as pl

    if since_step is not None and (isinstance(since_step, bool) or not isinstance(since_step, int)):
        raise UsageError(f"since_step must be a whole step number, got {since_step!r}")
    now = now or datetime.now(timezone.utc)
    parts, checked, fired = [], [], []
    status = _status(store, runs)
    for i, rule in enumerate(rules):
        if rule.kind == "stale":
            rows, n = _stale(status, rule, now)
        else:
            rows, n = _trend(store, rule, runs, since_step)
            rows = rows.join(status.select("run_id", "run_name", "status"), on="run_id")
        rows = rows.with_columns(rule=pl.lit(rule.name), rule_idx=pl.lit(i, pl.Int64))
        parts.append(rows.select("run_id", *COLUMNS, "rule_idx"))
        checked.append(n)
        fired.append(rows.height)
    table = pl.concat(parts) if parts else _empty()
    table = table.sort(["run_name", "rule_idx"])
    return TrendResult(table, tuple(checked), tuple(fired))


def _empty() -> "pl.DataFrame":
    import polars as pl

    return pl.DataFrame(schema={"run_id": pl.Utf8, "run_name": pl.Utf8, "rule": pl.Utf8,
                                "first_step": pl.Int64, "last_step": pl.Int64,
                                "steps_over": pl.Int64, "longest_streak": pl.Int64,
                                "peak": pl.Float64, "latest": pl.Float64, "status": pl.Utf8,
                                "rule_idx": pl.Int64})


def _status(store: "Reader", runs: Scope) -> "pl.DataFrame":
    """run_id, run_name (the run's `run_label`, as `check` shows runs), status (run_status, as
    of the query), last_step, source_updated_at."""
    return frame(store, *run_status_query(scope_ids(store, runs)))


def _stale(status: "pl.DataFrame", rule: TrendRule, now: datetime) -> tuple["pl.DataFrame", int]:
    import polars as pl

    known = status.filter(pl.col("source_updated_at").is_not_null())
    # Epoch microseconds on both sides: the column's time zone name (UTC, Etc/UTC) may differ
    # from `now`'s, and an instant is an instant.
    now_us = (now if now.tzinfo else now.replace(tzinfo=timezone.utc)).timestamp() * 1e6
    minutes = (pl.lit(now_us) - pl.col("source_updated_at").dt.epoch("us")) / 6e7
    over = minutes > rule.value if rule.op == ">" else minutes >= rule.value
    rows = (known.with_columns(minutes=minutes)
            .filter(~pl.col("status").is_in(["completed", "missing"]) & over)
            .select("run_id", "run_name", "status",
                    first_step=pl.col("last_step"), last_step=pl.col("last_step"),
                    steps_over=pl.lit(None, pl.Int64), longest_streak=pl.lit(None, pl.Int64),
                    peak=pl.col("minutes"), latest=pl.col("minutes")))
    return rows, known.height


def _series(store: "Reader", keys: tuple[str, ...], runs: Scope,
            since_step: int | None) -> "pl.DataFrame":
    """run_id, step, value: per run and step, the live numeric value of the family `keys`
    (the first spelling that has one at the step)."""
    sql, params = family_series_query(scope_ids(store, runs), since_step=since_step is not None)
    params["keys"] = list(keys)
    if since_step is not None:
        params["since_step"] = since_step
    return frame(store, sql, params)


def values(frame: "pl.DataFrame", rule: TrendRule) -> "pl.DataFrame":
    """`frame` (run_id, step, value; any order) with the rule's value at each of its steps
    (`rule_value`; NaN where undefined), restricted to the rule's steps (see the module)."""
    import polars as pl

    df = frame.sort(["run_id", "step"])
    v = pl.col("value")
    finite = v.is_finite()
    smoothed = ema("value", rule.smoothing).over("run_id")
    df = df.with_columns(_finite=finite, _s=smoothed)
    if rule.kind == "drop":
        best = (pl.when(pl.col("_finite")).then(pl.col("_s")).cum_max().forward_fill()
                .over("run_id"))
        # Steps before the first finite value have no best yet: not rule steps.
        df = df.with_columns(_best=best).filter(pl.col("_best").is_not_null())
        value = pl.when(pl.col("_finite")).then(pl.col("_best") - pl.col("_s"))
    else:
        raw = pl.when(finite).then(v)
        history = (finite.cast(pl.Int64).cum_sum() - finite.cast(pl.Int64)).over("run_id")
        median = raw.rolling_median(window_size=max(df.height, 1), min_samples=1) \
            .shift(1).over("run_id")
        df = df.with_columns(_history=history, _median=median)
        df = df.filter(pl.col("_history") >= MIN_HISTORY)
        value = (pl.when(pl.col("_finite") & (pl.col("_median") > 0))
                 .then(pl.col("_s") / pl.col("_median")))
    return (df.with_columns(rule_value=value.fill_null(float("nan")))
            .select("run_id", "step", "value", "rule_value"))


def _trend(store: "Reader", rule: TrendRule, runs: Scope,
           since_step: int | None) -> tuple["pl.DataFrame", int]:
    """The fired rows of a drop/rise rule (without run_name/status) and the runs checked."""
    return fire(_series(store, rule.families[0], runs, since_step), rule)


def fire(frame: "pl.DataFrame", rule: TrendRule) -> tuple["pl.DataFrame", int]:
    """The fired rows of a drop/rise rule over `frame` (run_id, step, value: per run and step
    the live numeric value of the rule's family, any order): `run_id, first_step, last_step,
    steps_over, peak, latest, longest_streak`, and how many runs `frame` holds (checked)."""
    import polars as pl

    checked = frame["run_id"].n_unique()
    df = values(frame, rule)
    r = pl.col("rule_value")
    over = ~r.is_nan() & ((r > rule.value) if rule.op == ">" else (r >= rule.value))
    # Streaks: the number of not-over steps so far is the same along a streak of over-steps.
    df = df.with_columns(_over=over).with_columns(
        _island=(~pl.col("_over")).cast(pl.Int64).cum_sum().over("run_id"))
    streaks = (df.filter(pl.col("_over")).group_by("run_id", "_island").agg(n=pl.len())
               .group_by("run_id").agg(longest_streak=pl.col("n").max()))
    rows = (df.group_by("run_id").agg(
        first_step=pl.col("step").filter(pl.col("_over")).min(),
        last_step=pl.col("step").filter(pl.col("_over")).max(),
        steps_over=pl.col("_over").sum().cast(pl.Int64),
        peak=r.filter(pl.col("_over")).max(),
        latest=r.sort_by("step").last())
        .filter(pl.col("steps_over") > 0)
        .join(streaks, on="run_id")
        .with_columns(pl.col("longest_streak").cast(pl.Int64)))
    return rows, checked

