"""The statements behind `Store.runs`, `Store.metrics` and the key lookups, as sqlglot trees.

Contract: each function returns `(sql, params)` — DuckDB SQL text and the values its `$name`
placeholders take — ready for `Store.arrow(sql, params)` / `Store.sql(sql, params)`, which
guard and bind them. User-supplied values (run-name globs, metric keys, kinds) only ever
travel as bound parameters; user-supplied names (metric keys as column names) only as
identifiers quoted by sqlglot; a user-supplied `--where` condition only after
`guard.condition` has checked it is a plain expression. Nothing is pasted into SQL text.

* `runs_query(kind=, name=, where=, columns=)`: `run_summary` (all its columns or the
  chosen ones), filtered, ordered by `run_name`.
* `metrics_query(keys, runs=, wide=)`: live metrics of some keys, long (one row per run, step
  and key) or wide (one row per run and step, one column per key, named by the key).
* `logged_keys_query(keys, runs=)`: the distinct (key, run) pairs of `metrics_raw`, for
  `keys.logged_keys`; `count_runs_query(runs)`: how many runs match a GLOB.
"""

from __future__ import annotations

from typing import Any, Sequence

from ...errors import QueryError, UsageError
from .. import guard
from ..views import views
from . import Statement

# Wide metric frames are keyed by these; a metric with one of these names would collide.
WIDE_KEY_COLUMNS = ("run_id", "run_name", "step")


def summary_columns() -> list[str]:
    """The columns of `run_summary`, in order (from the view's documentation)."""
    return [c for c, _ in next(v for v in views() if v.name == "run_summary").columns]


def runs_query(*, kind: str | None = None, name: str | None = None,
               where: str | None = None, columns: Sequence[str] | None = None) -> Statement:
    """`run_summary` rows, optionally filtered by kind, a run-name GLOB and a SQL condition,
    with every column or only `columns` (in that order; each must be one of the view's).

    >>> sql, params = runs_query(kind="rl", name="math_rl_sweep/*")
    >>> sql
    'SELECT * FROM run_summary WHERE kind = $kind AND run_name GLOB $name ORDER BY run_name'
    >>> params
    {'kind': 'rl', 'name': 'math_rl_sweep/*'}
    >>> runs_query(columns=["run_name", "status"])[0]
    'SELECT run_name, status FROM run_summary ORDER BY run_name'
    """
    from sqlglot import exp

    if columns is None:
        query = exp.select("*")
    else:
        query = exp.select(*(exp.column(c) for c in _summary_columns(columns)))
    query = query.from_("run_summary")
    params: dict[str, Any] = {}
    if kind is not None:
        query = query.where(exp.column("kind").eq(exp.Placeholder(this="kind")))
        params["kind"] = kind
    if name is not None:
        query = query.where(exp.Glob(this=exp.column("run_name"),
                                     expression=exp.Placeholder(this="name")))
        params["name"] = name
    if where is not None:
        query = query.where(exp.paren(guard.condition(where, "--where"), copy=False))
    query = query.order_by(exp.column("run_name"))
    try:
        return query.sql(dialect="duckdb"), params
    except RecursionError as e:  # a --where condition just within what sqlglot parses
        raise guard.too_deep("--where condition") from e


def _summary_columns(columns: Sequence[str]) -> list[str]:
    """`columns` checked against run_summary's; UsageError naming the closest otherwise."""
    import difflib

    known = summary_columns()
    items = [columns] if isinstance(columns, str) else list(columns)
    if not items:
        raise UsageError(f"give at least one column; run_summary has {', '.join(known)}")
    for c in items:
        if c not in known:
            close = difflib.get_close_matches(str(c), known, n=3)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise UsageError(f"run_summary has no column {c!r}; {hint}its columns: "
                             f"{', '.join(known)}")
    return list(dict.fromkeys(items))


def metric_keys(keys: str | Sequence[str]) -> list[str]:
    """Keys as a list without duplicates (first occurrence wins), checked."""
    items = [keys] if isinstance(keys, str) else list(keys)
    if not items:
        raise QueryError("give at least one metric key, e.g. keys=['env/all/reward/total']")
    out: list[str] = []
    for k in items:
        if not isinstance(k, str):
            raise QueryError(f"metric keys are strings, got {k!r}")
        if k not in out:
            out.append(k)
    return out


def metrics_query(keys: str | Sequence[str], *, runs: str | None = None,
                  wide: bool = False) -> Statement:
    """Live metrics (the `metrics` view) of `keys`, for runs whose name matches the GLOB `runs`.

    Long form: `run_id, run_name, step, key, value, value_str`, ordered by run, step, key.
    Wide form: `run_id, run_name, step` and one DOUBLE column per key, named exactly like the
    key (string values are null there); one row per run and step that logs any of the keys.

    >>> sql, params = metrics_query(["env/all/reward/total"], runs="math/*", wide=True)
    >>> print(sql)  # doctest: +NORMALIZE_WHITESPACE
    SELECT m.run_id, r.run_name, m.step,
      MAX(m.value) FILTER(WHERE m.key = $k0) AS "env/all/reward/total"
    FROM metrics AS m JOIN runs AS r ON r.run_id = m.run_id
    WHERE m.key IN ($k0) AND r.run_name GLOB $runs
    GROUP BY m.run_id, r.run_name, m.step ORDER BY r.run_name, m.step
    >>> params
    {'k0': 'env/all/reward/total', 'runs': 'math/*'}
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

    ids = [col("run_id", "m"), col("run_name", "r"), col("step", "m")]
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
             .join(exp.table_("runs", alias="r"), on=col("run_id", "r").eq(col("run_id", "m")))
             .where(col("key", "m").isin(*placeholder.values())))
    if runs is not None:
        query = query.where(exp.Glob(this=col("run_name", "r"),
                                     expression=exp.Placeholder(this="runs")))
        params["runs"] = runs
    if wide:
        query = query.group_by(*ids).order_by(col("run_name", "r"), col("step", "m"))
    else:
        query = query.order_by(col("run_name", "r"), col("step", "m"), col("key", "m"))
    return query.sql(dialect="duckdb"), params


def _runs_named(runs: str) -> Any:
    """`run_id IN (ids of the runs whose name matches $runs)`."""
    from sqlglot import exp

    named = exp.select("run_id").from_("runs").where(
        exp.Glob(this=exp.column("run_name"), expression=exp.Placeholder(this="runs")))
    return exp.column("run_id").isin(query=named)


def logged_keys_query(keys: Sequence[str] | None = None, *,
                      runs: str | None = None, summarised: bool = True) -> Statement:
    """Distinct `key, run_id` of `metrics_raw` (all rows: live, superseded, step-less), for
    `keys` only when given and for runs whose name matches the GLOB `runs` when given, read
    from `metric_keys`, the per-key summary kept at ingest (it has a key exactly when
    `metrics_raw` does), or from `metrics_raw` for a snapshot without it (`summarised=False`).

    >>> logged_keys_query(["optim/entropy"], runs="math/*")
    ('SELECT DISTINCT key, run_id FROM metric_keys WHERE LIST_CONTAINS($keys, key) AND run_id IN (SELECT run_id FROM runs WHERE run_name GLOB $runs)', {'keys': ['optim/entropy'], 'runs': 'math/*'})
    """
    from sqlglot import exp

    query = exp.select("key", "run_id").distinct().from_(
        "metric_keys" if summarised else "metrics_raw")
    params: dict[str, Any] = {}
    if keys is not None:
        query = query.where(exp.func("list_contains", exp.Placeholder(this="keys"),
                                     exp.column("key")))
        params["keys"] = metric_keys(keys)
    if runs is not None:
        query = query.where(_runs_named(runs))
        params["runs"] = runs
    return query.sql(dialect="duckdb"), params


def count_runs_query(runs: str | None = None) -> Statement:
    """How many runs the store holds (whose name matches the GLOB `runs`, when given).

    >>> count_runs_query("math/*")
    ('SELECT COUNT(*) AS n FROM runs WHERE run_name GLOB $runs', {'runs': 'math/*'})
    """
    from sqlglot import exp

    query = exp.select(exp.alias_(exp.Count(this=exp.Star()), "n")).from_("runs")
    if runs is None:
        return query.sql(dialect="duckdb"), {}
    query = query.where(exp.Glob(this=exp.column("run_name"),
                                 expression=exp.Placeholder(this="runs")))
    return query.sql(dialect="duckdb"), {"runs": runs}
