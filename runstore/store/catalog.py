"""What every store holds, described without opening one: the tables, the canned views.

Contract: module functions (no store is read: `runstore views` and `runstore schema` work
before the first ingest), each one call into `runstore.query`: `schema_table(table)` (every
public table's columns, types and comments, or one table's), `views_table()` (one row per
view column), `views_text()` (the listing `runstore views` prints), `views_ddl(dialect)`
(the views transpiled for one of `DIALECTS`, ready to run on that engine) and
`spelled(name, known)` (a table or view name as SQL resolves it: `RUNS` is `runs`). The
tables are pyarrow Tables; pyarrow is imported only by the functions that return one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from ..query.dialects import DIALECTS  # the engines `views_ddl` writes for

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DIALECTS", "schema_table", "spelled", "views_ddl", "views_table", "views_text"]


def schema_table(table: str | None = None) -> "pa.Table":
    """One row per column of every public table (or of `table`): table, column, type, comment."""
    from ..query import catalog

    return catalog.schema_table(table)


def views_table() -> "pa.Table":
    """One row per column of every canned view: view, description, column, comment."""
    from ..query import catalog

    return catalog.views_table()


def views_text() -> str:
    """The canned views as `runstore views` lists them: name, description, columns."""
    from ..query import catalog

    return catalog.views_text()


def views_ddl(dialect: str) -> str:
    """Every canned view as CREATE OR REPLACE [TEMP] VIEW for `dialect`, in dependency order."""
    from ..query import dialects

    return dialects.views_ddl(dialect)


def spelled(name: str, known: Iterable[str]) -> str:
    """`name` as the one of `known` it names in SQL (identifiers are case-insensitive), else
    `name` unchanged."""
    from ..query import catalog

    return catalog.spelled(name, known)
