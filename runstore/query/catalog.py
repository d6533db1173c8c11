"""What a store offers, described: its tables (from `schema.py`) and canned views (from the
comments of `sql/*.sql`), as Arrow tables or text, and the views as DDL for other engines.

Contract: everything here is derived from the two sources of truth — the column lists and
comments in `runstore/schema.py`, and each view file's purpose comment and `-- @column`
lines — and needs no store. `views_ddl(dialect)` returns one script that creates `settings`
(with the default settings) and every canned view, in dependency order, so it can be run as
is on Spark (`CREATE OR REPLACE TEMP VIEW`) or Trino (`CREATE OR REPLACE VIEW`) over tables
with runstore's names.
"""

from __future__ import annotations

import textwrap

import pyarrow as pa

from . import connect as query, guard as sqlcheck
from ..storage import schema
from ..errors import QueryError

DIALECTS = ("spark", "trino")


def schema_table(table: str | None = None) -> pa.Table:
    """One row per column of every public table (or of `table`): table, column, type, comment."""
    names = list(schema.TABLES)
    if table is not None:
        if table not in schema.TABLES:
            views = {v.name for v in query.views()}
            hint = (f"; {table!r} is a view, see `runstore views`" if table in views
                    else f"; tables: {', '.join(names)}")
            raise QueryError(f"no table {table!r}{hint}")
        names = [table]
    rows = [{"table": t, "column": col, "type": schema.DUCKDB_TYPES[typ], "comment": comment}
            for t in names for col, typ, comment in schema.TABLES[t]]
    return pa.Table.from_pylist(rows, schema=pa.schema(
        [("table", pa.string()), ("column", pa.string()), ("type", pa.string()),
         ("comment", pa.string())]))


def views_table() -> pa.Table:
    """One row per column of every canned view: view, description, column, comment."""
    rows = [{"view": v.name, "description": v.description, "column": col, "comment": comment}
            for v in query.views() for col, comment in v.columns]
    return pa.Table.from_pylist(rows, schema=pa.schema(
        [("view", pa.string()), ("description", pa.string()), ("column", pa.string()),
         ("comment", pa.string())]))


def views_text(width: int = 88) -> str:
    """The canned views for people: name, wrapped description, columns with their comments."""
    out: list[str] = []
    for v in query.views():
        out.append(v.name)
        out += textwrap.wrap(v.description, width, initial_indent="  ", subsequent_indent="  ")
        pad = max((len(c) for c, _ in v.columns), default=0)
        for col, comment in v.columns:
            out += textwrap.wrap(comment, width, initial_indent=f"    {col.ljust(pad)}  ",
                                 subsequent_indent=" " * (pad + 6)) or [f"    {col}"]
        out.append("")
    return "\n".join(out)


def views_ddl(dialect: str) -> str:
    """Every canned view as `CREATE OR REPLACE [TEMP] VIEW` statements for `dialect`."""
    from sqlglot import exp

    if dialect not in DIALECTS:
        raise QueryError(f"unknown dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")
    # `settings` is a table in runstore's DuckDB; elsewhere a view of the default values.
    rows = [exp.select(exp.alias_(exp.Literal.string(name), "name"),
                       exp.alias_(exp.cast(exp.Literal.number(value), "double"), "value_num"),
                       exp.alias_(exp.cast(exp.null(), "varchar"), "value_str"))
            for name, value in query.DEFAULT_SETTINGS.items()]
    settings: exp.Query = rows[0]
    for more in rows[1:]:
        settings = exp.union(settings, more, distinct=False)
    parts = [f"-- runstore canned views for {dialect}, in dependency order. They read tables "
             "named like runstore's\n-- (runs, metrics_raw, spans, ...) and the `settings` "
             "view below (edit kl_threshold there).",
             sqlcheck.view_ddl("settings", settings.sql(dialect="duckdb"), dialect)]
    if dialect == "trino":
        # Trino has no exact percentile aggregate; say so rather than differ silently.
        parts[0] += ("\n-- Trino has no exact percentile: slowest_spans.p50_s/p95_s use "
                     "approx_percentile there.")
    for v in query.views():
        parts.append("\n".join(textwrap.wrap(v.description, 96,
                                              initial_indent="-- ", subsequent_indent="-- "))
                     + "\n" + sqlcheck.view_ddl(v.name, v.body, dialect))
    return "\n\n".join(parts) + "\n"
