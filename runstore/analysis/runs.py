"""Which runs an analysis covers, and RUN arguments resolved to exactly one run each.

Contract:

* `Scope` = `None` (every run), a GLOB over `run_name` (`*` matches `/` too; DuckDB's GLOB),
  or a sequence of exact run names. `scope_condition(scope, column)` is the sqlglot condition
  on a `run_id` column that keeps the runs in scope (None for every run) and the params it
  binds; `scoped_runs(store, scope)` returns those runs (`run_id, run_name, kind, model_name,
  learning_rate`) ordered by name, raising `QueryError` when a GLOB matches no run or a name
  is no run's (a typo must not look like "no data").
* `resolve(store, patterns)` resolves each RUN argument to one `(run_id, run_name)`, in
  order, in one query. The rule is `runstore plot spans` / `runstore trace`'s (charts.one_run)
  extended by a prefix step: the run whose `run_name` equals the pattern; else the one run
  its GLOB matches; else, when the GLOB matches none, the one run whose name starts with it
  (`gsm8k_tool_rl/sweep/lr_1e-3` for `.../lr_1e-3/seed_0`). No run: "no run is named or
  matches 'x' (`runstore runs` lists run names)"; several: "'x' matches 3 runs (a, b, c);
  give one run_name or a narrower GLOB" — charts.one_run's messages, word for word.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Sequence, Union

from ..errors import QueryError

if TYPE_CHECKING:
    import polars as pl

    from . import Queryable

Scope = Union[str, Sequence[str], None]
RUN_COLUMNS = ("run_id", "run_name", "kind", "model_name", "learning_rate")
HINT = "(`runstore runs` lists run names)"


def scope_condition(scope: Scope, column: Any) -> tuple[Any | None, dict[str, Any]]:
    """`column IN (the run_ids in scope)` as a sqlglot condition (None: every run), and params.

    >>> cond, params = scope_condition("math/*", "m.run_id")
    >>> cond.sql(dialect="duckdb"), params
    ('m.run_id IN (SELECT run_id FROM runs WHERE run_name GLOB $scope)', {'scope': 'math/*'})
    """
    from sqlglot import exp

    if scope is None:
        return None, {}
    col = exp.column(*reversed(column.split("."))) if isinstance(column, str) else column
    name = exp.column("run_name")
    if isinstance(scope, str):
        match: Any = exp.Glob(this=name, expression=exp.Placeholder(this="scope"))
        params: dict[str, Any] = {"scope": scope}
    else:
        match = exp.func("list_contains", exp.Placeholder(this="scope"), name)
        params = {"scope": _names(scope)}
    return col.isin(query=exp.select("run_id").from_("runs").where(match)), params


def _names(scope: Sequence[str]) -> list[str]:
    names = list(dict.fromkeys(scope))
    if not names or not all(isinstance(n, str) for n in names):
        raise QueryError(f"runs is a GLOB over run_name or a list of run names, got {scope!r}")
    return names


def scoped_runs(store: "Queryable", scope: Scope) -> "pl.DataFrame":
    """The runs in scope (`RUN_COLUMNS`), by `run_name`; `QueryError` for an empty GLOB or an
    unknown name."""
    import polars as pl
    from sqlglot import exp

    cond, params = scope_condition(scope, "run_id")
    query = exp.select(*RUN_COLUMNS).from_("runs")
    if cond is not None:
        query = query.where(cond)
    df = pl.from_arrow(store.arrow(query.order_by("run_name").sql(dialect="duckdb"), params))
    assert isinstance(df, pl.DataFrame)
    if isinstance(scope, str) and df.height == 0:
        raise QueryError(f"no run matches --runs {scope!r} (`runstore runs` lists them; `*` "
                         "matches `/` too)")
    if scope is not None and not isinstance(scope, str):
        unknown = sorted(set(params["scope"]) - set(df["run_name"].to_list()))
        if unknown:
            raise QueryError(f"no run is named {unknown[0]!r} {HINT}")
    return df


def resolve(store: "Queryable", patterns: Sequence[str]) -> list[tuple[str, str]]:
    """`(run_id, run_name)` for each RUN pattern, in order (see the module for the rule)."""
    items = [patterns] if isinstance(patterns, str) else list(patterns)
    if not items or not all(isinstance(p, str) and p for p in items):
        raise QueryError(f"give one or more run names or GLOBs, got {patterns!r}")
    rows = store.arrow(_resolve_sql(), {"patterns": items, "idx": list(range(len(items)))}).to_pylist()
    found: dict[int, dict[str, list[tuple[str, str]]]] = {}
    for r in rows:
        tiers = found.setdefault(r["i"], {"exact": [], "glob": [], "prefix": []})
        for tier in tiers:
            if r[f"is_{tier}"]:
                tiers[tier].append((r["run_id"], r["run_name"]))
    out = []
    for i, pattern in enumerate(items):
        tiers = found.get(i, {"exact": [], "glob": [], "prefix": []})
        matches = tiers["exact"] or tiers["glob"] or tiers["prefix"]
        if len(matches) == 1:
            out.append(matches[0])
            continue
        if not matches:
            raise QueryError(f"no run is named or matches {pattern!r} {HINT}")
        names = ", ".join(n for _, n in matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise QueryError(f"{pattern!r} matches {len(matches)} runs ({names}); give one "
                         "run_name or a narrower GLOB")
    return out


@lru_cache(maxsize=1)
def _resolve_sql() -> str:
    import sqlglot

    return sqlglot.parse_one(_RESOLVE, read="duckdb").sql(dialect="duckdb")


# Every run that a pattern names, globs or prefixes, with which of the three it does.
_RESOLVE = """
with asked as (
    select unnest($patterns) as pattern, unnest($idx) as i
)
select a.i, r.run_id, r.run_name,
       r.run_name = a.pattern as is_exact,
       r.run_name glob a.pattern as is_glob,
       starts_with(r.run_name, a.pattern) as is_prefix
from asked as a
join runs as r
  on r.run_name = a.pattern or r.run_name glob a.pattern or starts_with(r.run_name, a.pattern)
order by a.i, r.run_name
"""
