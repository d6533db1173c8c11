"""What a store offers, described: its tables and canned views, as Arrow tables or text.

Contract: everything here is derived from the two sources of truth — the column lists and
comments in `runstore/storage/schema.py`, and each view file's purpose comment and
`-- @column` lines (`views.py`) — and needs no store: `schema_table(table)` (`runstore
schema`), `views_table()` and `views_text()` (`runstore views`). The views as DDL for other
engines are `dialects.views_ddl`. A table or view is found by its name in any case, as SQL
finds it (`spelled`: `RUNS` is `runs`). pyarrow is imported only by the functions that return a
table: `runstore views` lists the views without it.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Iterable

from ..errors import QueryError
from ..storage import schema
from .views import views

if TYPE_CHECKING:
    import pyarrow as pa


def spelled(name: str, known: Iterable[str]) -> str:
    """`name` as `known` spells it when one of them is `name` in another case (DuckDB's names
    ignore case: `KL_Health` reads kl_health), else `name` itself; a `name` that is not text is
    a `QueryError` (the Python API takes any value)."""
    if not isinstance(name, str):
        raise QueryError(f"a table or view is named by text, got {name!r}")
    return next((k for k in known if k.lower() == name.lower()), name)


def schema_table(table: str | None = None) -> "pa.Table":
    """One row per column of every public table (or of `table`, in any case): table, column,
    type, comment."""
    import pyarrow as pa

    names = list(schema.TABLES)
    if table is not None:
        table = spelled(table, names)
        if table not in schema.TABLES:
            known = {v.name for v in views()}
            hint = (f"; {table!r} is a view, see `runstore views`" if spelled(table, known) in known
                    else f"; tables: {', '.join(names)}")
            raise QueryError(f"no table {table!r}{hint}")
        names = [table]
    rows = [{"table": t, "column": col, "type": schema.duckdb_type(typ), "comment": comment}
            for t in names for col, typ, comment in schema.TABLES[t]]
    return pa.Table.from_pylist(rows, schema=pa.schema(
        [("table", pa.string()), ("column", pa.string()), ("type", pa.string()),
         ("comment", pa.string())]))


def views_table() -> "pa.Table":
    """One row per column of every canned view: view, description, column, comment."""
    import pyarrow as pa

    rows = [{"view": v.name, "description": v.description, "column": col, "comment": comment}
            for v in views() for col, comment in v.columns]
    return pa.Table.from_pylist(rows, schema=pa.schema(
        [("view", pa.string()), ("description", pa.string()), ("column", pa.string()),
         ("comment", pa.string())]))


def views_text(width: int = 88) -> str:
    """The canned views for people: name, wrapped description, columns with their comments."""
    out: list[str] = []
    for v in views():
        out.append(v.name)
        out += textwrap.wrap(v.description, width, initial_indent="  ", subsequent_indent="  ")
        pad = max((len(c) for c, _ in v.columns), default=0)
        for col, comment in v.columns:
            out += textwrap.wrap(comment, width, initial_indent=f"    {col.ljust(pad)}  ",
                                 subsequent_indent=" " * (pad + 6)) or [f"    {col}"]
        out.append("")
    return "\n".join(out)
