"""Trend rules: a reward that collapses, a step time that climbs, a run that went quiet.

Contract: a `TrendRule` is one of three forms, written (`parse_trend`) as

    drop(METRIC) > X          drop(METRIC, W) > X
    rise(METRIC) > X          rise(METRIC, W) > X
    stale > MINUTES

(`>=` works as well as `>`; METRIC is written as in threshold rules: bare, or quoted when it
holds spaces, quotes, brackets or commas; W is the smoothing weight, `DEFAULT_WEIGHT` when
left out). `evaluate(store, rules, runs=, since_step=, now=)` returns one row per (run, rule)
that fires with exactly the threshold rules' columns (`checks.COLUMNS`, plus `run_id` and
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

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, Sequence, cast

from ..analysis.runs import Scope, scope_condition
from ..analysis.smooth import check_weight, ema
from .evaluate import COLUMNS
from .rules import _metric, _number, _parse_number
from ..query.keys import family
from ..errors import UsageError

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from ..analysis import Queryable

Kind = Literal["drop", "rise", "stale"]
KINDS = ("drop", "rise", "stale")
TrendOp = Literal[">", ">="]
DEFAULT_WEIGHT = 0.9
MIN_HISTORY = 10
HINT = ("trend rules are drop(METRIC) > X, rise(METRIC) > X (optionally with a smoothing "
        "weight: drop(METRIC, 0.8) > X) and stale > MINUTES")


@dataclass(frozen=True)
class TrendRule:
    """One trend rule (see the module). `metric` is None for `stale`; `weight` is the EMA
    weight of drop/rise (`DEFAULT_WEIGHT` when None); `name` defaults to the rule as written.

    >>> TrendRule("drop", "env/all/reward/total", ">", 0.2).name
    'drop(env/all/reward/total) > 0.2'
    >>> TrendRule("rise", "time/total", ">", 2, weight=0.5).name
    'rise(time/total, 0.5) > 2'
    """

    kind: Kind
    metric: str | None
    op: TrendOp
    value: float
    weight: float | None = None
    name: str = ""
    families: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UsageError(f"a trend rule is one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.op not in (">", ">="):
            raise UsageError(f"trend rules fire above a value: use > or >=, not {self.op!r}")
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)) \
                or not math.isfinite(self.value):
            raise UsageError(f"a trend rule's value must be a finite number, got {self.value!r}")
        if self.kind == "stale":
            if self.metric is not None or self.weight is not None:
                raise UsageError("stale takes no metric and no weight: stale > MINUTES")
            if self.value < 0:
                raise UsageError(f"stale counts minutes, at least 0, got {self.value!r}")
        else:
            if not isinstance(self.metric, str) or not self.metric.strip():
                raise UsageError(f"{self.kind} needs a metric name: {self.kind}(METRIC) > X")
            if self.weight is not None:
                object.__setattr__(self, "weight", check_weight(self.weight, "the weight"))
            if self.kind == "drop" and self.value < 0:
                raise UsageError(f"drop is how far below its best a metric fell, at least 0; "
                                 f"got {self.value!r}")
            if self.kind == "rise" and self.value <= 0:
                raise UsageError(f"rise is a ratio to the running median, above 0; got "
                                 f"{self.value!r}")
        object.__setattr__(self, "value", float(self.value))
        object.__setattr__(self, "families",
                           () if self.metric is None else (family(self.metric),))
        if not self.name:
            object.__setattr__(self, "name", self.text())

    @property
    def smoothing(self) -> float:
        return DEFAULT_WEIGHT if self.weight is None else self.weight

    def text(self) -> str:
        """The rule as `parse_trend` reads it."""
        if self.kind == "stale":
            return f"stale {self.op} {_number(self.value)}"
        metric = _quoted(cast(str, self.metric))
        weight = "" if self.weight is None else f", {_number(self.weight)}"
        return f"{self.kind}({metric}{weight}) {self.op} {_number(self.value)}"


def _quoted(metric: str) -> str:
    """A metric as rule text: bare when it can be, else in double quotes."""
    if metric and not any(c.isspace() or c in "\"'`()[]{},;" for c in metric):
        return metric
    return '"' + metric.replace('"', '""') + '"'


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_trend(text: str) -> TrendRule | None:
    """`text` as a TrendRule, None when it is not written as one (then it is a threshold rule
    for `checks.parse_rule`), `UsageError` saying why when it starts like one but is not.

    It is a trend rule when it starts with `drop(` or `rise(`, or is `stale` followed by a
    comparison; a metric named `stale` (or `drop`) is written in quotes.

    >>> r = parse_trend('rise("time/sample_async:total", 0.8) >= 1.5')
    >>> r.kind, r.metric, r.weight, r.op, r.value
    ('rise', 'time/sample_async:total', 0.8, '>=', 1.5)
    >>> parse_trend("stale > 30").value, parse_trend("optim/entropy < 0.05") is None
    (30.0, True)
    """
    from sqlglot.dialects.duckdb import DuckDB
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    if not isinstance(text, str) or not text.strip():
        return None
    try:
        tokens = DuckDB().tokenize(text)
    except TokenError:
        return None  # parse_rule reports it
    if not tokens or tokens[0].token_type in (TokenType.IDENTIFIER, TokenType.STRING):
        return None
    word = tokens[0].text.lower()
    opens = len(tokens) > 1 and tokens[1].token_type == TokenType.L_PAREN
    if not ((word in ("drop", "rise") and opens) or word == "stale"):
        return None

    def fail(why: str) -> UsageError:
        return UsageError(f"cannot read rule {text!r}: {why}. {HINT}")

    ops = {TokenType.GT: ">", TokenType.GTE: ">=", TokenType.LT: "<", TokenType.LTE: "<=",
           TokenType.EQ: "=", TokenType.NEQ: "!="}
    if word == "stale":
        if len(tokens) < 2 or tokens[1].token_type not in ops:
            return None  # `stale` alone or `stale something`: not this form
        return _made(fail, "stale", None, _op(ops[tokens[1].token_type], fail),
                     _value(text[tokens[1].end + 1:], fail))
    # drop( / rise(: find the matching parenthesis and the top-level comma inside.
    depth, comma, close = 0, None, None
    for i, t in enumerate(tokens[1:], start=1):
        if t.token_type == TokenType.L_PAREN:
            depth += 1
        elif t.token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                close = i
                break
        elif t.token_type == TokenType.COMMA and depth == 1 and comma is None:
            comma = i
    if close is None:
        raise fail(f"{word}( has no closing parenthesis")
    inner_end = comma if comma is not None else close
    metric_tokens = tokens[2:inner_end]
    start, stop = tokens[1].end + 1, tokens[inner_end].start
    metric = _metric(metric_tokens, text[start:stop].strip()) if metric_tokens else None
    if metric is None:
        raise fail(f"{text[start:stop].strip()!r} is not a metric name (quote a name that holds "
                   "spaces, quotes, brackets or commas)")
    weight = None
    if comma is not None:
        weight = _parse_number(text[tokens[comma].end + 1:tokens[close].start])
        if weight is None:
            raise fail("the second argument is the smoothing weight, a number in [0, 1)")
    rest = tokens[close + 1:]
    if not rest or rest[0].token_type not in ops:
        raise fail(f"{word}(...) must be followed by > or >= and a number")
    op = _op(ops[rest[0].token_type], fail)
    return _made(fail, cast(Kind, word), metric, op, _value(text[rest[0].end + 1:], fail),
                 weight=weight)


def _made(fail: Any, *args: Any, **kwargs: Any) -> TrendRule:
    """A TrendRule, its validation errors worded as errors reading the rule's text."""
    try:
        return TrendRule(*args, **kwargs)
    except UsageError as e:
        raise fail(str(e)) from None


def _op(op: str, fail: Any) -> TrendOp:
    if op not in (">", ">="):
        raise fail(f"{op!r}: trend rules fire above a value, so they take > or >=")
    return cast(TrendOp, op)


def _value(text: str, fail: Any) -> float:
    value = _parse_number(text.strip())
    if value is None:
        raise fail(f"{text.strip()!r} is not a number")
    return value


def toml_trend(where: str, entry: dict[str, Any]) -> TrendRule | None:
    """A `[[check.rule]]` table with a `trend` key as a TrendRule (None without one);
    `where` names the file and rule for errors.

    ```toml
    [[check.rule]]
    trend = "drop"                 # drop | rise | stale
    metric = "env/all/reward/total"
    op = ">"
    value = 0.2
    smooth = 0.9                   # optional (drop, rise)
    name = "reward collapse"       # optional
    ```
    """
    if "trend" not in entry:
        return None
    unknown = sorted(set(entry) - {"trend", "metric", "op", "value", "smooth", "name"})
    missing = [k for k in ("op", "value") if k not in entry]
    if entry.get("trend") != "stale" and "metric" not in entry:
        missing.insert(0, "metric")
    if unknown or missing:
        problem = f"unknown key {unknown[0]!r}" if unknown else f"no {missing[0]!r}"
        raise UsageError(f"{where} has {problem}; a trend rule has trend (drop, rise or "
                         "stale), metric (not for stale), op, value, and optional smooth and "
                         "name")
    metric = entry.get("metric")
    if metric is not None and not isinstance(metric, str):
        raise UsageError(f"{where}: a trend rule's metric is one name")
    name = entry.get("name", "")
    if not isinstance(name, str):
        raise UsageError(f"{where}: name must be a string")
    try:
        return TrendRule(entry["trend"], metric, entry["op"], entry["value"],
                         weight=entry.get("smooth"), name=name)
    except UsageError as e:
        raise UsageError(f"{where}: {e}") from None


# ---------------------------------------------------------------------------------------------
# Evaluating


@dataclass(frozen=True)
class TrendResult:
    """What `evaluate` found: the rows that fired and, per rule, runs checked and fired."""

    table: "pa.Table"  # run_id, the COLUMNS, rule_idx; by run_name, then rule_idx
    checked: tuple[int, ...]
    fired: tuple[int, ...]


def evaluate(store: "Queryable", rules: Sequence[TrendRule], *, runs: Scope = None,
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
    return TrendResult(table.to_arrow(), tuple(checked), tuple(fired))


def _empty() -> "pl.DataFrame":
    import polars as pl

    return pl.DataFrame(schema={"run_id": pl.Utf8, "run_name": pl.Utf8, "rule": pl.Utf8,
                                "first_step": pl.Int64, "last_step": pl.Int64,
                                "steps_over": pl.Int64, "longest_streak": pl.Int64,
                                "peak": pl.Float64, "latest": pl.Float64, "status": pl.Utf8,
                                "rule_idx": pl.Int64})


def _status(store: "Queryable", runs: Scope) -> "pl.DataFrame":
    """run_id, run_name, status (run_status, as of the query), last_step, source_updated_at."""
    import polars as pl
    from sqlglot import exp

    r = lambda name: exp.column(name, table="r")  # noqa: E731 - a local shorthand
    query = (exp.select(r("run_id"), r("run_name"), exp.column("status", table="s"),
                        r("last_step"), r("source_updated_at"))
             .from_(exp.table_("runs", alias="r"))
             .join(exp.table_("run_status", alias="s"),
                   on=exp.column("run_id", table="s").eq(r("run_id"))))
    cond, params = scope_condition(runs, r("run_id"))
    if cond is not None:
        query = query.where(cond)
    df = pl.from_arrow(store.arrow(query.sql(dialect="duckdb"), params))
    assert isinstance(df, pl.DataFrame)
    return df


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


def _series(store: "Queryable", keys: tuple[str, ...], runs: Scope,
            since_step: int | None) -> "pl.DataFrame":
    """run_id, step, value: per run and step, the live numeric value of the family `keys`
    (the first spelling that has one at the step)."""
    import polars as pl
    from sqlglot import exp

    m = lambda name: exp.column(name, table="m")  # noqa: E731
    keys_param = exp.Placeholder(this="keys")
    value = exp.func("arg_min", m("value"), exp.func("list_position", keys_param, m("key")))
    query = (exp.select(m("run_id"), m("step"), exp.alias_(value, "value"))
             .from_(exp.table_("metrics", alias="m"))
             .where(exp.func("list_contains", keys_param.copy(), m("key")))
             .where(m("value").is_(exp.null()).not_())
             .group_by(m("run_id"), m("step")))
    params: dict[str, Any] = {"keys": list(keys)}
    cond, scope_params = scope_condition(runs, m("run_id"))
    if cond is not None:
        query = query.where(cond)
        params.update(scope_params)
    if since_step is not None:
        query = query.where(m("step") >= exp.Placeholder(this="since_step"))
        params["since_step"] = since_step
    df = pl.from_arrow(store.arrow(query.sql(dialect="duckdb"), params))
    assert isinstance(df, pl.DataFrame)
    return df


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


def _trend(store: "Queryable", rule: TrendRule, runs: Scope,
           since_step: int | None) -> tuple["pl.DataFrame", int]:
    """The fired rows of a drop/rise rule (without run_name/status) and the runs checked."""
    import polars as pl

    frame = _series(store, rule.families[0], runs, since_step)
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

