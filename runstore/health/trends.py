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

Computed over plain rows (the statements' results as Python values, `query.rows`), with the
one smoothing's row form (`analysis.smooth.smoothed`): `runstore check` with trend rules
imports neither polars nor pyarrow, and neither does the doctor, which hands its series to the
same `fire_rows` (`fire_lists` of each run's points put in step order; the check's statement
gives them so, `family_lists_query`).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterable, Sequence, cast

from ..analysis.runs import Scope, scope_ids
from ..analysis.smooth import smoothed
from ..errors import UsageError
from ..query.rows import Rows, records
from ..query.session import AT_ONCE
from ..query.statements.frames import family_lists_query, run_status_query
from ..storage.schema import F64, I64, STR
from .firing import COLUMN_TYPES, COLUMNS
from .grammar import is_trend
from .rules import DEFAULT_WEIGHT, KINDS, TrendRule, parse_rule

__all__ = ["DEFAULT_WEIGHT", "KINDS", "MIN_HISTORY", "TrendResult", "TrendRule", "evaluate",
           "fire_lists", "fire_rows", "fire_run", "parse_trend"]

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from ..query.reader import Reader

MIN_HISTORY = 10
# The columns of `evaluate`'s rows and their types: the check's own (`firing.COLUMN_TYPES`).
ROW_TYPES = {"run_id": STR, **COLUMN_TYPES, "rule_idx": I64}
NAN = float("nan")


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
    """What `evaluate` found: the rows that fired (`rows`, plain: `run_id`, the COLUMNS,
    `rule_idx`, by run_name then rule_idx; `table`, the same as Arrow; `frame`, as polars)
    and, per rule, runs checked and fired."""

    rows: Rows
    checked: tuple[int, ...]
    fired: tuple[int, ...]

    @property
    def table(self) -> "pa.Table":
        # Through polars: pyarrow's own from_pylist imports pandas (~0.3 s).
        return self.frame.to_arrow()

    @property
    def frame(self) -> "pl.DataFrame":
        import polars as pl

        kinds = {STR: pl.String, I64: pl.Int64, F64: pl.Float64}
        return pl.DataFrame(self.rows.data, orient="row",
                            schema={c: kinds[t] for c, t in ROW_TYPES.items()})


def evaluate(store: "Reader", rules: Sequence[TrendRule], *, runs: Scope = None,
             since_step: int | None = None, now: datetime | None = None) -> TrendResult:
    """Every (run, rule) that fires, with per-rule counts (see the module)."""
    if since_step is not None and (isinstance(since_step, bool) or not isinstance(since_step, int)):
        raise UsageError(f"since_step must be a whole step number, got {since_step!r}")
    from concurrent.futures import ThreadPoolExecutor

    now = now or datetime.now(timezone.utc)
    rows: list[tuple[Any, ...]] = []
    checked, fired = [], []
    # The runs' status and each drop/rise rule's points are separate statements: they run
    # `AT_ONCE` at a time, each on its own cursor (query/session.py), and a rule fires (in
    # Python) while the next rule's points are fetched.
    with ThreadPoolExecutor(max_workers=AT_ONCE) as pool:
        pending = pool.submit(_status, store, runs)
        series = {i: pool.submit(_series, store, rule.families[0], runs, since_step)
                  for i, rule in enumerate(rules) if rule.kind != "stale"}
        status = pending.result()
        by_id = {s["run_id"]: s for s in status}
        for i, rule in enumerate(rules):
            if rule.kind == "stale":
                found, n = _stale(status, rule, now)
            else:
                found, n = fire_lists(series.pop(i).result(), rule)
                found = [{**f, "run_name": by_id[f["run_id"]]["run_name"],
                          "status": by_id[f["run_id"]]["status"]}
                         for f in found if f["run_id"] in by_id]
            rows += [(f["run_id"], f["run_name"], rule.name, *(f[c] for c in COLUMNS[2:-1]),
                      f["status"], i) for f in found]
            checked.append(n)
            fired.append(len(found))
    # By run name (no name first), then rule.
    rows.sort(key=lambda r: (r[1] is not None, r[1] or "", r[-1]))
    columns = list(ROW_TYPES)
    return TrendResult(Rows(columns, [ROW_TYPES[c] != STR for c in columns], rows),
                       tuple(checked), tuple(fired))


def _status(store: "Reader", runs: Scope) -> list[dict[str, Any]]:
    """run_id, run_name (the run's `run_label`, as `check` shows runs), status (run_status, as
    of the query), last_step, source_updated_us (epoch microseconds)."""
    return records(store, *run_status_query(scope_ids(store, runs)))


def _stale(status: list[dict[str, Any]], rule: TrendRule,
           now: datetime) -> tuple[list[dict[str, Any]], int]:
    known = [s for s in status if s["source_updated_us"] is not None]
    # Epoch microseconds on both sides: the column's time zone name (UTC, Etc/UTC) may differ
    # from `now`'s, and an instant is an instant.
    now_us = (now if now.tzinfo else now.replace(tzinfo=timezone.utc)).timestamp() * 1e6
    rows = []
    for s in known:
        minutes = (now_us - s["source_updated_us"]) / 6e7
        over = minutes > rule.value if rule.op == ">" else minutes >= rule.value
        if over and s["status"] is not None and s["status"] not in ("completed", "missing"):
            rows.append({"run_id": s["run_id"], "run_name": s["run_name"],
                         "status": s["status"], "first_step": s["last_step"],
                         "last_step": s["last_step"], "steps_over": None,
                         "longest_streak": None, "peak": minutes, "latest": minutes})
    return rows, len(known)


def _series(store: "Reader", keys: tuple[str, ...], runs: Scope,
            since_step: int | None) -> list[tuple[Any, ...]]:
    """run_id, steps, values: per run, its steps in order and at each the live numeric value
    of the family `keys` (the first spelling that has one at the step)."""
    sql, params = family_lists_query(scope_ids(store, runs), since_step=since_step is not None)
    params["keys"] = list(keys)
    if since_step is not None:
        params["since_step"] = since_step
    return store.fetch(sql, params, convert=lambda r: r.fetchall())


def fire_run(steps: Sequence[Any], values: Sequence[float | None],
             rule: TrendRule) -> dict[str, Any] | None:
    """One run's fired row of a drop/rise rule (`first_step`, `last_step`, `steps_over`,
    `peak`, `latest`, `longest_streak`; see the module) over its points in step order (one
    point a step), or None when no step is over. The rule's value at each rule step and
    whether it is over are computed in one pass: the one definition of drop and rise."""
    inf = math.inf
    s = smoothed(values, rule.smoothing)
    limit, strict = rule.value, rule.op == ">"
    drop = rule.kind == "drop"
    best = None  # drop: the best smoothed value so far, from the first finite point on
    earlier: list[float] = []  # rise: the finite raw values before this step, sorted
    insort = bisect.insort
    first = last = peak = None
    latest = NAN
    over_n = streak = longest = 0
    seen = False  # a rule step yet
    for step, v, sm in zip(steps, values, s):
        ok = v is not None and -inf < v < inf
        if drop:
            if ok and (best is None or sm > best):  # type: ignore[operator]
                best = sm
            if best is None:
                continue
            r = best - sm if ok else NAN  # type: ignore[operator]
        else:
            n = len(earlier)  # the finite raw values before this step
            if n >= MIN_HISTORY:
                mid = n // 2
                median = earlier[mid] if n % 2 else (earlier[mid - 1] + earlier[mid]) / 2
                r = sm / median if ok and median > 0 else NAN  # type: ignore[operator]
            if ok:
                insort(earlier, v)  # type: ignore[arg-type]
            if n < MIN_HISTORY:
                continue
        seen = True
        latest = r
        if r == r and (r > limit if strict else r >= limit):
            over_n += 1
            if step is not None:
                first = step if first is None else first
                last = step
            peak = r if peak is None or r > peak else peak
            streak += 1
            longest = longest if longest > streak else streak
        else:
            streak = 0
    if not seen or not over_n:
        return None
    return {"first_step": first, "last_step": last, "steps_over": over_n, "peak": peak,
            "latest": latest, "longest_streak": longest}


def fire_rows(points: Iterable[tuple[Any, ...]],
              rule: TrendRule) -> tuple[list[dict[str, Any]], int]:
    """`fire_lists` of `points` (run_id, step, value: per run and step the live numeric value
    of the rule's family, any order), each run's put in step order (a step-less point first,
    as the sort of a null does; one point a step)."""
    by_run: dict[str, list[tuple[Any, float | None]]] = {}
    for run_id, step, value in points:
        by_run.setdefault(run_id, []).append((step, value))
    runs = []
    for run_id, run in by_run.items():
        run.sort(key=lambda p: (p[0] is not None, p[0] or 0))
        runs.append((run_id, [p[0] for p in run], [p[1] for p in run]))
    return fire_lists(runs, rule)


def fire_lists(runs: Iterable[tuple[Any, Sequence[Any], Sequence[float | None]]],
               rule: TrendRule) -> tuple[list[dict[str, Any]], int]:
    """The fired rows of a drop/rise rule over `runs` (run_id, its steps in order, the value
    at each), each a dict of `run_id` and `fire_run`'s columns, by run_id, and how many runs
    there are (checked)."""
    ordered = sorted(runs, key=lambda r: r[0])
    rows = []
    for run_id, steps, values in ordered:
        found = fire_run(steps, values, rule)
        if found is not None:
            rows.append({"run_id": run_id, **found})
    return rows, len(ordered)
