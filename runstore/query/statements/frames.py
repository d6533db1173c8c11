"""The statements behind `Store.runs`, `Store.metrics` and the key lookups.

Contract: each function returns `(sql, params)` — DuckDB SQL text and the values its `$name`
placeholders take — ready for `Store.arrow(sql, params)` / `Store.sql(sql, params)`, which
guard and bind them. User-supplied values (run_ids, metric keys, kinds) only ever
travel as bound parameters; user-supplied names (metric keys, columns) only as quoted
identifiers; a user-supplied `--where` condition only after `guard.condition` has checked it
is a plain expression (and written it back with sqlglot). Nothing is pasted into SQL text.

The statements every read command asks (`runs_query`, `logged_keys_query`,
`count_runs_query`, `in_scope`, the trend rules' two and `compare`'s three) are joined from
fixed pieces of text, with names quoted by
`guard.identifier`: sqlglot costs a short command more time to import than the whole rest of
its work (docs/benchmarks.md, "Command latency"), and it is imported only for a `--where`.
tests/query/test_statement_text.py holds each to the statement sqlglot builds from the same
request. `metrics_query` (the Python API's `Store.metrics`) is built as a sqlglot tree.

A scope of runs (`runs=`) is always the list of run_ids that `runstore.analysis.runs` resolved
(None: every run), bound as `$runs`; nothing here matches run names.

* `runs_query(kind=, runs=, where=, columns=)`: `run_summary` (all its columns or the
  chosen ones), filtered, ordered by `run_label` (then `run_id`).
* `metrics_query(keys, runs=, wide=)`: live metrics of some keys, long (one row per run, step
  and key) or wide (one row per run and step, one column per key, named by the key).
* `logged_keys_query(keys, runs=)`: the distinct (key, run) pairs of `metrics_raw`, for
  `keys.logged_keys`; `count_runs_query(runs)`: how many runs are in scope.
* `run_status_query(runs)` and `family_series_query(runs, since_step=)`: what a trend rule
  reads (health.trends), each run's label, status and last change, and per run and step the
  live value of a family of keys (bound as `$keys`, the first spelling that has one);
  `family_lists_query` is the same points as a list of steps and one of values per run.
* `scoped_runs_query(columns, runs)`, `config_rows_query(runs, keys=)` and
  `metric_values_query(n_keys)`: what `compare` and its groups read (`runstore.analysis`):
  the runs in scope by label, their config leaves, and the live values of some keys coded
  by run and group.
* `fixed_shapes()`: every text of the builders with a few shapes (the list above but
  `runs_query` and `metric_values_query`; `scoped_runs_query` of `SCOPED_RUNS`), whose guard
  verdicts are recorded.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from ...errors import QueryError, UsageError
from ...kinds import RUN_KINDS
from .. import guard
from ..views import view_columns
from . import Statement

# Wide metric frames are keyed by these; a metric with one of these names would collide.
WIDE_KEY_COLUMNS = ("run_id", "run_name", "run_label", "step")
# The columns `runstore.analysis` reads of the runs in scope (`analysis.runs.scoped_runs`,
# through `scoped_runs_query`): one of the fixed shapes.
SCOPED_RUNS = ("run_id", "run_name", "run_label", "kind", "model_name", "learning_rate")


def summary_columns() -> list[str]:
    """The columns of `run_summary`, in order (from the view's documentation)."""
    return [c for c, _ in view_columns("run_summary")]


def runs_query(*, kind: str | None = None, runs: Sequence[str] | None = None,
               where: str | None = None, columns: Sequence[str] | None = None) -> Statement:
    """`run_summary` rows, optionally filtered by kind, a scope (run_ids) and a SQL condition,
    with every column or only `columns` (in that order; each must be one of the view's).

    >>> sql, params = runs_query(kind="rl", runs=["0123456789abcdef"])
    >>> sql
    'SELECT * FROM run_summary WHERE kind = $kind AND LIST_CONTAINS($runs, run_id) ORDER BY run_label, run_id'
    >>> params
    {'kind': 'rl', 'runs': ['0123456789abcdef']}
    >>> runs_query(columns=["run_name", "status"])[0]
    'SELECT "run_name", "status" FROM run_summary ORDER BY run_label, run_id'
    """
    if columns is None:
        chosen = "*"
    else:
        chosen = ", ".join(guard.identifier(c) for c in _summary_columns(columns))
    conditions: list[str] = []
    params: dict[str, Any] = {}
    if kind is not None:
        if kind not in RUN_KINDS:
            raise UsageError(f"kind is one of {', '.join(RUN_KINDS)}, got {kind!r}")
        conditions.append("kind = $kind")
        params["kind"] = kind
    if runs is not None:
        conditions.append(in_scope("run_id"))
        params["runs"] = list(runs)
    if where is not None:
        if not isinstance(where, str):  # the Python API takes any value
            raise UsageError(f"where is one SQL condition as text, got {where!r}")
        # A user's condition: parsed and checked by sqlglot (the only part that needs it).
        try:
            conditions.append(f"({guard.condition(where, '--where').sql(dialect='duckdb')})")
        except RecursionError as e:  # a --where condition just within what sqlglot parses
            raise guard.too_deep("--where condition") from e
    return (f"SELECT {chosen} FROM run_summary{_where(conditions)} "
            "ORDER BY run_label, run_id"), params


def _where(conditions: Sequence[str]) -> str:
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


def _summary_columns(columns: Sequence[str]) -> list[str]:
    """`columns` checked against run_summary's; UsageError naming the closest otherwise."""
    known = summary_columns()
    try:
        items = [columns] if isinstance(columns, str) else list(columns)
    except TypeError:  # the Python API takes any value
        raise UsageError(f"columns is a list of run_summary's columns, got {columns!r}"
                         ) from None
    if not items:
        raise UsageError(f"give at least one column; run_summary has {', '.join(known)}")
    for c in items:
        if c not in known:
            import difflib  # only to name the closest (`runs` asks for every column)

            close = difflib.get_close_matches(str(c), known, n=3)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise UsageError(f"run_summary has no column {c!r}; {hint}its columns: "
                             f"{', '.join(known)}")
    return list(dict.fromkeys(items))


def metric_keys(keys: str | Sequence[str]) -> list[str]:
    """Keys (a key, or a sequence of keys) as a list without duplicates (first occurrence
    wins), checked: the one rule for the metric keys a caller names (charts, `history`)."""
    if isinstance(keys, str):
        items = [keys]
    elif isinstance(keys, Iterable):
        items = list(keys)
    else:
        raise QueryError(f"metric keys are a key or a list of keys, got {keys!r}")
    if not items:
        raise QueryError("give at least one metric key, e.g. keys=['env/all/reward/total']")
    out: list[str] = []
    for k in items:
        if not isinstance(k, str):  # "" is a key a metrics.jsonl can log
            raise QueryError(f"metric keys are strings, got {k!r}")
        if k not in out:
            out.append(k)
    return out


def metrics_query(keys: str | Sequence[str], *, runs: Sequence[str] | None = None,
                  wide: bool = False) -> Statement:
    """Live metrics (the `metrics` view) of `keys`, for the runs (run_ids) `runs` when given.

    Long form: `run_id, run_name, run_label, step, key, value, value_str`, ordered by run
    (label, then run_id), step, key. Wide form: `run_id, run_name, run_label, step` and one
    DOUBLE column per key, named exactly like the key (string values are null there); one row
    per run and step that logs any of the keys.

    >>> sql, params = metrics_query(["env/all/reward/total"], runs=["0123"], wide=True)
    >>> print(sql)  # doctest: +NORMALIZE_WHITESPACE
    SELECT m.run_id, m.run_name, m.run_label, m.step,
      MAX(m.value) FILTER(WHERE m.key = $k0) AS "env/all/reward/total"
    FROM metrics AS m
    WHERE m.key IN ($k0) AND LIST_CONTAINS($runs, m.run_id)
    GROUP BY m.run_id, m.run_name, m.run_label, m.step ORDER BY m.run_label, m.run_id, m.step
    >>> params
    {'k0': 'env/all/reward/total', 'runs': ['0123']}
    """
    from sqlglot import exp

    names = metric_keys(keys)
    if wide:
        clash = [k for k in names if k in WIDE_KEY_COLUMNS]
        if clash:
            raise QueryError(f"metric {clash[0]!r} would collide with a key column of the wide "
                             "frame; use wide=False")
    params: dict[str, Any] = {f"k{i}": k for i, k in enumerate(names)}
    placeholder = {k: exp.Placeholder(this=f"k{i}") for i, k in enumerate(names)}

    def col(name: str, table: str) -> exp.Column:
        return exp.column(name, table=table)

    ids = [col("run_id", "m"), col("run_name", "m"), col("run_label", "m"), col("step", "m")]
    if wide:
        # One row per (run, step, key) in `metrics`, so MAX picks the one value (NaN too).
        columns: list[Any] = [
            exp.alias_(exp.Filter(this=exp.Max(this=col("value", "m")),
                                  expression=exp.Where(this=col("key", "m").eq(placeholder[k]))),
                       exp.to_identifier(k, quoted=True))
            for k in names]
        query = exp.select(*ids, *columns)
    else:
        query = exp.select(*ids, col("key", "m"), col("value", "m"), col("value_str", "m"))
    query = (query.from_(exp.table_("metrics", alias="m"))
             .where(col("key", "m").isin(*placeholder.values())))
    if runs is not None:
        query = query.where(exp.func("list_contains", exp.Placeholder(this="runs"),
                                     col("run_id", "m")))
        params["runs"] = list(runs)
    order = [col("run_label", "m"), col("run_id", "m"), col("step", "m")]
    if wide:
        query = query.group_by(*ids).order_by(*order)
    else:
        query = query.order_by(*order, col("key", "m"))
    return query.sql(dialect="duckdb"), params


def in_scope(column: str) -> str:
    """`column` (a run_id column, as SQL text) is one of the run_ids bound as `$runs`.

    >>> in_scope("m.run_id")
    'LIST_CONTAINS($runs, m.run_id)'
    """
    return f"LIST_CONTAINS($runs, {column})"


def logged_keys_query(keys: Sequence[str] | None = None, *,
                      runs: Sequence[str] | None = None, summarised: bool = True) -> Statement:
    """Distinct `key, run_id` of `metrics_raw` (all rows: live, superseded, step-less), for
    `keys` only when given and for the runs (run_ids) `runs` when given, read
    from `metric_keys`, the per-key summary kept at ingest (it has a key exactly when
    `metrics_raw` does), or from `metrics_raw` for a snapshot without it (`summarised=False`).

    >>> logged_keys_query(["optim/entropy"], runs=["0123"])
    ('SELECT DISTINCT key, run_id FROM metric_keys WHERE LIST_CONTAINS($keys, key) AND LIST_CONTAINS($runs, run_id)', {'keys': ['optim/entropy'], 'runs': ['0123']})
    """
    conditions: list[str] = []
    params: dict[str, Any] = {}
    if keys is not None:
        conditions.append("LIST_CONTAINS($keys, key)")
        params["keys"] = metric_keys(keys)
    if runs is not None:
        conditions.append(in_scope("run_id"))
        params["runs"] = list(runs)
    table = "metric_keys" if summarised else "metrics_raw"
    return f"SELECT DISTINCT key, run_id FROM {table}{_where(conditions)}", params


def count_runs_query(runs: Sequence[str] | None = None) -> Statement:
    """How many runs the store holds (of the run_ids `runs`, when given).

    >>> count_runs_query(["0123"])
    ('SELECT COUNT(*) AS n FROM runs WHERE LIST_CONTAINS($runs, run_id)', {'runs': ['0123']})
    """
    if runs is None:
        return "SELECT COUNT(*) AS n FROM runs", {}
    return f"SELECT COUNT(*) AS n FROM runs WHERE {in_scope('run_id')}", {"runs": list(runs)}


def run_status_query(runs: Sequence[str] | None = None) -> Statement:
    """`run_id, run_name` (the run's `run_label`, as `check` shows runs), `status`
    (`run_status`'s), `last_step` and `source_updated_us` (`source_updated_at` in whole
    microseconds since the epoch: an instant, and no time zone for Python to load) of the runs
    in scope: a trend rule's runs.

    >>> run_status_query(["0123"])[0]
    'SELECT r.run_id, s.run_label AS run_name, s.status, r.last_step, EPOCH_US(r.source_updated_at) AS source_updated_us FROM runs AS r JOIN run_status AS s ON s.run_id = r.run_id WHERE LIST_CONTAINS($runs, r.run_id)'
    """
    sql = ("SELECT r.run_id, s.run_label AS run_name, s.status, r.last_step, "
           "EPOCH_US(r.source_updated_at) AS source_updated_us FROM runs AS r "
           "JOIN run_status AS s ON s.run_id = r.run_id")
    if runs is None:
        return sql, {}
    return f"{sql}{_where([in_scope('r.run_id')])}", {"runs": list(runs)}


def scoped_runs_query(columns: Sequence[str], runs: Sequence[str] | None = None) -> Statement:
    """`columns` of each run (of the run_ids `runs`, when given), by `run_label`: `run_name`
    and `run_label` from `run_labels`, any other from `runs`.

    >>> scoped_runs_query(["run_id", "run_label"], ["0123"])
    ('SELECT r."run_id", l."run_label" FROM runs AS r JOIN run_labels AS l ON l.run_id = r.run_id WHERE LIST_CONTAINS($runs, r.run_id) ORDER BY l.run_label', {'runs': ['0123']})
    """
    chosen = ", ".join(f"{'l' if c in ('run_name', 'run_label') else 'r'}.{guard.identifier(c)}"
                       for c in columns)
    conditions, params = _scoped("r.run_id", runs)
    return (f"SELECT {chosen} FROM runs AS r JOIN run_labels AS l ON l.run_id = r.run_id"
            f"{_where(conditions)} ORDER BY l.run_label"), params


def config_rows_query(runs: Sequence[str] | None = None, *, keys: bool = False) -> Statement:
    """`run_id, key, value, value_num, value_str` of the config leaves of the runs in scope
    and, with `keys`, of the keys bound as `$keys` (bind them). The params hold the scope.

    >>> config_rows_query(keys=True)[0]
    'SELECT run_id, key, value, value_num, value_str FROM config WHERE LIST_CONTAINS($keys, key)'
    """
    conditions, params = _scoped("run_id", runs)
    if keys:
        conditions.append("LIST_CONTAINS($keys, key)")
    return ("SELECT run_id, key, value, value_num, value_str FROM config"
            f"{_where(conditions)}"), params


def metric_values_query(n_keys: int) -> str:
    """Live values (`metrics`, no null) of `n_keys` keys bound as `$k0`, `$k1`, ... of the
    runs bound as `$ids`: `_run` (the run's position in `$ids`, from 0), `_g` (the run's
    entry in `$codes`), `step, key, value`.

    >>> metric_values_query(2)
    'SELECT LIST_POSITION($ids, m.run_id) - 1 AS _run, LIST_EXTRACT($codes, LIST_POSITION($ids, m.run_id)) AS _g, m.step, m.key, m.value FROM metrics AS m WHERE m.key IN ($k0, $k1) AND NOT m.value IS NULL AND LIST_CONTAINS($ids, m.run_id)'
    """
    keys = ", ".join(f"$k{i}" for i in range(n_keys))
    return ("SELECT LIST_POSITION($ids, m.run_id) - 1 AS _run, "
            "LIST_EXTRACT($codes, LIST_POSITION($ids, m.run_id)) AS _g, m.step, m.key, m.value "
            f"FROM metrics AS m WHERE m.key IN ({keys}) AND NOT m.value IS NULL "
            "AND LIST_CONTAINS($ids, m.run_id)")


def _scoped(column: str, runs: Sequence[str] | None) -> tuple[list[str], dict[str, Any]]:
    """The condition that `column` is in scope (none for every run), and its params."""
    if runs is None:
        return [], {}
    return [in_scope(column)], {"runs": list(runs)}


def family_series_query(runs: Sequence[str] | None = None, *,
                        since_step: bool = False) -> Statement:
    """Per run and step, the live numeric value of a family of metric keys, bound as `$keys`
    in order of preference (the first spelling with a value at the step): `run_id, step,
    value` from the `metrics` view, for the runs in scope and, with `since_step`, from the step
    bound as `$since_step` on (bind it). The params returned hold the scope only.

    >>> family_series_query(since_step=True)[0]
    'SELECT m.run_id, m.step, ARG_MIN(m.value, LIST_POSITION($keys, m.key)) AS value FROM metrics AS m WHERE LIST_CONTAINS($keys, m.key) AND NOT m.value IS NULL AND m.step >= $since_step GROUP BY m.run_id, m.step'
    """
    conditions = ["LIST_CONTAINS($keys, m.key)", "NOT m.value IS NULL"]
    params: dict[str, Any] = {}
    if runs is not None:
        conditions.append(in_scope("m.run_id"))
        params["runs"] = list(runs)
    if since_step:
        conditions.append("m.step >= $since_step")
    return ("SELECT m.run_id, m.step, ARG_MIN(m.value, LIST_POSITION($keys, m.key)) AS value "
            f"FROM metrics AS m{_where(conditions)} GROUP BY m.run_id, m.step"), params


def family_lists_query(runs: Sequence[str] | None = None, *,
                       since_step: bool = False) -> Statement:
    """`family_series_query`'s points as one row a run, in the order a trend rule reads them:
    `run_id, steps, numbers`, the run's steps in order (a step-less point first, where a
    null sorts) and the value at each. Some lists, not a row a point: 100 runs of 2,000 steps
    reach Python as 100 rows.

    >>> family_lists_query()[0].split(" FROM (")[0].split(", ")
    ['SELECT run_id', 'LIST(step ORDER BY step NULLS FIRST) AS steps', 'LIST(value ORDER BY step NULLS FIRST) AS numbers']
    """
    sql, params = family_series_query(runs, since_step=since_step)
    return ("SELECT run_id, LIST(step ORDER BY step NULLS FIRST) AS steps, LIST(value ORDER BY "
            f"step NULLS FIRST) AS numbers FROM ({sql}) GROUP BY run_id"), params


def fixed_shapes() -> dict[str, str]:
    """Every text the builders here whose shape is one of a few give, by the call that gives
    it (the values bound do not change a text): the trend rules' two, the key lookups,
    the run count, the runs in scope `runstore.analysis` reads (`SCOPED_RUNS`) and the config
    leaves, over every run and over a scope. Their guard
    verdicts are recorded as the named statements' are (`query.recorded`), so the commands
    that ask them every time (`check` with a trend rule, `plot metric`'s key notes, `compare`)
    parse none of them."""
    shapes: dict[str, str] = {}
    for scope, runs in (("all", None), ("scope", ["-"])):
        shapes[f"count_runs_query({scope})"] = count_runs_query(runs)[0]
        shapes[f"run_status_query({scope})"] = run_status_query(runs)[0]
        shapes[f"scoped_runs_query(SCOPED_RUNS, {scope})"] = \
            scoped_runs_query(SCOPED_RUNS, runs)[0]
        for since in (False, True):
            shapes[f"family_lists_query({scope}, since_step={since})"] = \
                family_lists_query(runs, since_step=since)[0]
        for keys in (None, ["-"]):
            shapes[f"config_rows_query({scope}, keys={keys is not None})"] = \
                config_rows_query(runs, keys=keys is not None)[0]
            for summarised in (True, False):
                shapes[f"logged_keys_query({scope}, keys={keys is not None}, "
                       f"summarised={summarised})"] = \
                    logged_keys_query(keys, runs=runs, summarised=summarised)[0]
    return shapes
