"""Evaluating health rules over live metrics: which runs went wrong, when, and how badly.

Contract: `evaluate(store, rules)` runs every rule (rules.py) over the `metrics` view (live
values only: the latest write of each step, no `pre_resume` copies), KL families over the
`metric_kl` table their merge rules filled at ingest (the values `kl_steps` shows), in one
statement (`query.statements.check`, from `sql/statements/check.sql`), and returns one row
per (run, rule) that fires: `run_name, rule, first_step, last_step, steps_over,
longest_streak, peak, latest, status` (plus `run_id`, the run's identity, for callers that
track runs; `run_name` is the run as shown, its `run_label`: the name, with a run_id prefix
when two runs share it; `status` is `run_status`'s, as of the query). `runs` is a scope
(`analysis.runs`: names, run_ids, directories or a GLOB), resolved to run_ids once. Trend
rules (`drop`, `rise`, `stale`: trends.py) in the
same list are evaluated beside that statement and merged into the same rows, ordered by run
name, then rule order; the rows come as plain Python values (`arrow=False`) for either kind,
so `runstore check` imports neither polars nor pyarrow (polars makes the Arrow table when
one is asked for: pyarrow's own `from_pylist` would import pandas).
`check(store, ...)` is `runstore check`: it chooses the rules (config.py), refuses a rule
whose metric no run in the store has logged (`keys.UnknownKey`, naming the closest logged
keys; the default KL rule excepted) and returns a `CheckResult` whose `summary()` is one
line saying how many runs each rule fired for and how many it checked. Metric names and
thresholds only ever reach SQL as bound parameters.

Semantics, the same as the `kl_health` view's for KL (a test holds the two together):

* A metric name and its spelling with or without `optim/` are one family
  (`optim/entropy` = `entropy`); when a step logs both, the `optim/` one is used.
* A step is over when any metric of the rule compares true with the rule's value. NaN never
  compares true, for any op; `+Infinity` is greater than every number, `-Infinity` smaller.
* Steps are the steps that log a numeric value of the rule's metrics (NaN included): a
  logged step that is not over ends a streak, a step that logs none of them does not.
* `peak` is the most extreme value over the threshold (largest for `>`/`>=`, smallest for
  `<`/`<=`); `latest` is the rule's value at the last step that logs it (NaN when that step
  has only NaN), so it shows whether a run has recovered.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from .. import families
from ..errors import UsageError
from ..printable import printable
from ..query.keys import family
from ..query.rows import Rows, from_relation
from ..storage.schema import F64, I64, STR, arrow_type
from ..query.statements.check import check_statement
from ..query.statements.frames import count_runs_query
from .config import choose_rules
from .firing import COLUMN_TYPES, COLUMNS, Alert
from .rules import KL_METRICS, Rule, RuleLike, TrendRule, kl_rule

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from ..query.reader import Reader
# The KL families and the `metric_kl` (and `kl_steps`) column that holds each.
KL_COLUMNS = {family(m): column for m, column in zip(KL_METRICS, families.KL_COLUMNS)}


def kl_floor(rules: Sequence[Rule]) -> float | None:
    """The value every KL write of a run that can fire one of `rules` is at or above, when
    there is one: the smallest value of the rules that read KL, when each of them reads only
    KL families and fires only above its value (`>`, `>=`). The KL values may then be read
    for the runs with a write at or above it alone (`check.kl_over_floor`); a rule that reads
    no KL family does not matter. None (every run is read) otherwise.
    """
    values = []
    for r in rules:
        kl = [f in KL_COLUMNS for f in r.families]
        if not any(kl):
            continue
        if not all(kl) or r.op not in (">", ">="):
            return None
        values.append(r.value)
    return min(values) if values else None


def check_query(rules: Sequence[Rule], *, runs: Sequence[str] | None = None,
                since_step: int | None = None,
                every_run: bool = False) -> tuple[str, dict[str, Any]]:
    """`(sql, params)` evaluating every rule in one statement (for `Store.arrow`); `runs`:
    the run_ids in scope (None: every run).

    The KL values are read for the runs with a KL write at or above `kl_floor(rules)` alone,
    when there is a floor, unless `every_run` (the reference the tests hold that reading to).
    """
    if not rules:
        raise UsageError("no rules to check")
    params: dict[str, Any] = {
        "rule_idx": list(range(len(rules))),
        "rule_name": [r.name for r in rules],
        "rule_op": [r.op for r in rules],
        "rule_value": [r.value for r in rules],
        "key_rule": [], "key_series": [], "key_name": [], "key_pref": [],
        "rule_v1": [], "rule_v2": [], "klk_rule": [], "klk_name": [],
    }
    for i, r in enumerate(rules):
        columns = {KL_COLUMNS[keys] for keys in r.families if keys in KL_COLUMNS}
        params["rule_v1"].append("v1" in columns)
        params["rule_v2"].append("v2" in columns)
        for s, keys in enumerate(r.families):
            if keys in KL_COLUMNS:
                params["klk_rule"] += [i] * len(keys)
                params["klk_name"] += list(keys)
                continue
            for pref, key in enumerate(keys):
                params["key_rule"].append(i)
                params["key_series"].append(s)
                params["key_name"].append(key)
                params["key_pref"].append(pref)
    # The key list again as one filter on `metrics.key`: a filter on a partition column of the
    # view's window, which DuckDB pushes below the window (a join alone would not be).
    params["keys"] = sorted(set(params["key_name"]))
    if since_step is not None:
        if isinstance(since_step, bool) or not isinstance(since_step, int):
            raise UsageError(f"since_step must be a whole step number, got {since_step!r}")
        params["since_step"] = since_step
    if runs is not None:
        params["runs"] = list(runs)
    metrics_used, kl_used = bool(params["key_name"]), bool(params["klk_name"])
    unused = [] if metrics_used else ["key_rule", "key_series", "key_name", "key_pref", "keys"]
    floor = None if every_run or not kl_used else kl_floor(rules)
    if kl_used:
        params["kl_keys"] = sorted(set(params["klk_name"]))
        if floor is not None:
            params["kl_floor"] = floor
    else:
        unused += ["klk_rule", "klk_name"]
    for name in unused:  # their relations are left out of the statement
        del params[name]
    sql = check_statement(metrics_used, kl_used, since_step is not None, runs is not None,
                          floor is not None)
    return sql, params


def _answer(store: "Reader", rules: Sequence[Rule], runs: Sequence[str] | None,
            since_step: int | None, *, arrow: bool) -> tuple["Rows | pa.Table",
                                                            list[dict[str, Any]]]:
    """The check query's two parts: the fired rows (`run_id`, the `COLUMNS`, `rule_idx`) and
    one dict per rule (`rule_idx`, `checked`, `fired_runs`, `scope_runs`). The rows are an
    Arrow table with `arrow`, else plain `Rows` (every column of the statement has a plain
    type), so a check of threshold rules imports no pyarrow."""
    sql, params = check_query(rules, runs=runs, since_step=since_step)
    table = (store.arrow(sql, params) if arrow
             else store.fetch(sql, params, convert=from_relation))
    n_fired = table.num_rows - len(rules)
    counts = table.slice(n_fired).select(["rule_idx", "checked", "fired_runs", "scope_runs"])
    return table.slice(0, n_fired).select(["run_id", *COLUMNS, "rule_idx"]), counts.to_pylist()


@dataclass(frozen=True)
class _Evaluated:
    table: "Rows | pa.Table"  # run_id, the COLUMNS, rule_idx; by run_name, then rule order
    checked: tuple[int, ...]
    fired: tuple[int, ...]
    runs: int  # runs in scope


def _evaluate(store: "Reader", rules: "Sequence[Rule | TrendRule]", runs: str | None,
              since_step: int | None, *, arrow: bool = True) -> _Evaluated:
    """Threshold rules in one statement, trend rules (trends.py) beside them (at once, on
    two threads), merged in rule order: one table with both kinds' rows and per-rule counts,
    merged as plain rows; with `arrow=False` they stay plain `Rows` and neither polars nor
    pyarrow is loaded, for threshold and trend rules alike."""
    from ..analysis.runs import scope_ids

    ids = scope_ids(store, runs)  # type: ignore[arg-type]
    if not any(isinstance(r, TrendRule) for r in rules):
        table, counts = _answer(store, rules, ids, since_step,  # type: ignore[arg-type]
                                arrow=arrow)
        by_rule = sorted(counts, key=lambda c: c["rule_idx"])
        return _Evaluated(table, tuple(int(c["checked"]) for c in by_rule),
                          tuple(int(c["fired_runs"]) for c in by_rule),
                          int(by_rule[0]["scope_runs"]))
    from concurrent.futures import ThreadPoolExecutor

    from .trends import evaluate as evaluate_trends

    plain = [(i, r) for i, r in enumerate(rules) if not isinstance(r, TrendRule)]
    trend = [(i, r) for i, r in enumerate(rules) if isinstance(r, TrendRule)]
    checked, fired = [0] * len(rules), [0] * len(rules)
    columns = ["run_id", *COLUMNS, "rule_idx"]
    merged: list[tuple[Any, ...]] = []
    scope_runs = 0
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The threshold rules' statement (without them, the count of the runs in scope) runs
        # on a thread of its own while the trend rules fetch their points and fire: DuckDB
        # lets go of Python as it plans and runs.
        answer = (pool.submit(_answer, store, [r for _, r in plain], ids, since_step,
                              arrow=False) if plain else
                  pool.submit(store.fetch, *count_runs_query(ids),
                              convert=lambda r: r.fetchall()))
        result = evaluate_trends(store, [r for _, r in trend], runs=runs, since_step=since_step)
        answered = answer.result()
    if plain:
        table, counts = answered
        where = [i for i, _ in plain]
        for c in counts:
            checked[where[c["rule_idx"]]] = int(c["checked"])
            fired[where[c["rule_idx"]]] = int(c["fired_runs"])
            scope_runs = int(c["scope_runs"])
        merged += _renumber(table, where)
    else:
        scope_runs = int(answered[0][0])
    where = [i for i, _ in trend]
    for j, i in enumerate(where):
        checked[i], fired[i] = result.checked[j], result.fired[j]
    merged += _renumber(result.rows, where)
    if plain and trend:
        # By run name (no name first), then rule order; each part is in that order already.
        name, idx = columns.index("run_name"), columns.index("rule_idx")
        merged.sort(key=lambda r: (r[name] is not None, r[name] or "", r[idx]))
    rows = Rows(columns, [ROW_TYPES[c] != STR for c in columns], merged)
    table = pa_table(rows) if arrow else rows
    return _Evaluated(table, tuple(checked), tuple(fired), scope_runs)


# Each column of the check's rows: its identity, the COLUMNS, and the rule it fired for.
ROW_TYPES = {"run_id": STR, **COLUMN_TYPES, "rule_idx": I64}


def arrow_schema(columns: Sequence[str]) -> "pa.Schema":
    """The Arrow schema of the check's rows with these columns (the check statement's
    types, `ROW_TYPES`)."""
    import pyarrow as pa

    return pa.schema([(c, arrow_type(ROW_TYPES[c])) for c in columns])


def _frame(rows: "Rows | pa.Table") -> "pl.DataFrame":
    """The check statement's rows as a polars DataFrame of their types (`ROW_TYPES`), read
    from plain rows without pyarrow."""
    import polars as pl

    if not isinstance(rows, Rows):
        frame = pl.from_arrow(rows)
        assert isinstance(frame, pl.DataFrame)
        return frame
    types = {STR: pl.String, I64: pl.Int64, F64: pl.Float64}
    return pl.DataFrame(rows.data, orient="row",
                        schema={c: types[ROW_TYPES[c]] for c in rows.column_names})


def _renumber(rows: "Rows | pa.Table", where: list[int]) -> list[tuple[Any, ...]]:
    """`rows` (run_id, the COLUMNS, rule_idx) as tuples of those columns, in that order, with
    `rule_idx` (a position in a subset of the rules) mapped to `where`."""
    data = rows.select(["run_id", *COLUMNS, "rule_idx"]).to_pylist()
    return [(*(r[c] for c in ("run_id", *COLUMNS)), where[r["rule_idx"]]) for r in data]


def pa_table(rows: Rows) -> "pa.Table":
    """Plain check rows as Arrow, with the check statement's column types (`ROW_TYPES`),
    through polars (pyarrow's own `from_pylist` imports pandas, ~0.3 s)."""
    return _frame(rows).to_arrow().cast(arrow_schema(rows.column_names))


def evaluate(store: "Reader", rules: "Sequence[Rule | TrendRule]", *, runs: str | None = None,
             since_step: int | None = None) -> pa.Table:
    """Every (run, rule) that fires, as Arrow: `run_id` then the `COLUMNS`, by run name then
    rule order. Trend rules (trends.py) and threshold rules alike."""
    table = _evaluate(store, rules, runs, since_step).table.select(["run_id", *COLUMNS])
    assert not isinstance(table, Rows)
    return table


@dataclass(frozen=True)
class CheckResult:
    """What `runstore check` found: the rows that fired and how many runs each rule saw.

    `checked[i]` counts the runs (in scope) that log a value of `rules[i]`'s metrics (at
    `since_step` or later), `fired[i]` those it fired for; `runs` counts every run in scope
    (the runs the `--runs` scope `scope` covers, when given). `rows` holds the fired rows as they
    came (plain `Rows` from `check(..., arrow=False)`, else Arrow); `table` is them as Arrow.
    """

    rows: "Rows | pa.Table"  # exactly the COLUMNS, one row per (run, rule) that fired
    rules: tuple[Rule, ...]
    runs: int
    checked: tuple[int, ...]
    fired: tuple[int, ...]
    scope: str | None = None
    since_step: int | None = None
    run_ids: tuple[str, ...] = ()  # the run_id of each row of `table`, for notifications

    @property
    def table(self) -> "pa.Table":
        """The fired rows as an Arrow table, with the check statement's column types."""
        if not isinstance(self.rows, Rows):
            return self.rows
        import pyarrow as pa

        return pa.Table.from_pylist(self.rows.to_pylist(), schema=arrow_schema(COLUMNS))

    def frame(self) -> "pl.DataFrame":
        """The fired rows as a polars DataFrame (from plain rows without pyarrow: DuckDB's
        Arrow export of an executed result copies it, see `query/result.py`)."""
        return _frame(self.rows)

    def alerts(self) -> "list[Alert]":
        """Each fired row as the `Alert` a notification posts (with the row's run_id)."""
        return [Alert(run_id=run_id, **row)
                for run_id, row in zip(self.run_ids, self.rows.to_pylist())]

    def summary(self) -> str:
        """One line for people (and CI summaries), fired or not, e.g.
        `kl_sample_train_v1|v2 > 0.01 fired for 0 of 23 runs (21 checked, 2 without KL)`.
        One line whatever a rule's name or the scope holds (`printable`)."""
        return printable(self._summary())

    def _summary(self) -> str:
        where = f" matching {self.scope!r}" if self.scope is not None else ""
        since = f" from step {self.since_step}" if self.since_step is not None else ""
        total = f"{self.runs} run{'s' if self.runs != 1 else ''}{where}"

        def seen(i: int) -> str:
            missing = self.runs - self.checked[i]
            # From a step on, a run may log the metric but no step that late: say so.
            late = " from that step" if self.since_step is not None else ""
            lacking = f", {missing} without {_what(self.rules[i])}{late}" if missing else ""
            return f"({self.checked[i]} checked{lacking})"

        if len(self.rules) == 1:
            return f"{self.rules[0].name} fired for {self.fired[0]} of {total}{since} {seen(0)}"
        hit = len(set(self.run_ids))  # runs, by identity: two may share a name
        parts = "; ".join(f"{r.name} fired for {self.fired[i]} {seen(i)}"
                          for i, r in enumerate(self.rules))
        return f"{hit} of {total} fired a rule{since}: {parts}"


def _what(rule: "Rule | TrendRule") -> str:
    """How the summary names a rule's metrics: `KL` for the default rule's; a stale rule
    checks the runs whose source times are known."""
    if isinstance(rule, TrendRule):
        return rule.metric if rule.metric is not None else "a known source time"
    return "KL" if rule.metrics == KL_METRICS else "|".join(rule.metrics)


def _is_default(rule: Rule) -> bool:
    return rule == kl_rule(rule.value)


def _named_metrics(rule: "Rule | TrendRule") -> tuple[str, ...]:
    """The metrics a rule names that must be logged: none for the default KL rule and a stale
    rule."""
    if isinstance(rule, TrendRule):
        return () if rule.metric is None else (rule.metric,)
    return () if _is_default(rule) else tuple(rule.metrics)


def require_metrics(store: "Reader", rules: Sequence[Rule]) -> None:
    """`keys.UnknownKey` when a rule names a metric that no run in the store has logged (a
    misspelt rule would otherwise never fire, and a CI gate would pass forever). The default
    KL rule is exempt: a store of SL runs logs no KL, and its check is simply green."""
    from ..query import keys

    named: dict[str, str] = {}  # metric -> the first rule naming it, for the message
    for rule in rules:
        for m in _named_metrics(rule):
            named.setdefault(m, rule.name)
    if named:
        keys.require(store, list(named), families=True,
                     what=lambda m: f"{m} (rule {named[m]!r})")


def check(store: "Reader", *, threshold: float | None = None,
          rules: Iterable[RuleLike] | None = None, runs: str | None = None,
          since_step: int | None = None, default_rules: bool | None = None,
          config: bool | str | os.PathLike[str] = True, arrow: bool = True) -> CheckResult:
    """`runstore check`: choose the rules (arguments, runstore.toml, store setting), evaluate
    them, count what was seen, and make sure each names logged metrics (`require_metrics`).
    A rule of one metric that checked a run names a logged metric (the run logs it), so
    only the others are looked up: a check whose rules each checked a run reads no more.

    `config=True` reads the runstore.toml beside the store or in the working directory,
    `False` none, a path that file. `arrow=False` keeps the fired rows as plain `Rows` when
    the rules allow (threshold rules only), so the check imports no pyarrow (the CLI).
    """
    chosen = choose_rules(store, threshold=threshold, rules=rules,
                          default_rules=default_rules, config=config)
    found = _evaluate(store, chosen, runs, since_step, arrow=arrow)
    require_metrics(store, [r for r, n in zip(chosen, found.checked)
                            if not n or len(_named_metrics(r)) > 1])
    return CheckResult(
        rows=found.table.select(list(COLUMNS)), rules=tuple(chosen), runs=found.runs,
        checked=found.checked, fired=found.fired, scope=runs, since_step=since_step,
        run_ids=tuple(row["run_id"] for row in found.table.select(["run_id"]).to_pylist()))


def run_check(store: "Reader", **options: Any) -> pa.Table:
    """`check(store, **options).table`: the rows that fired, exactly the `COLUMNS`."""
    return check(store, **options).table
