"""SQL over Arrow tables held in memory, in a DuckDB that reads nothing else.

Contract: `run(sql, tables)` runs one SQL query with each Arrow table of `tables` visible
under its key, and returns the result as Arrow; `run_all(sqls, tables)` runs several over
the same tables, registered once; `row(sql, params)` the one row of a query of bound values.
The DuckDB is in memory, with external access off (no file, no extension, no network: a
query reads the rows it is given and nothing else), one thread per query (its callers, the
ingest's read-ahead threads, are the parallelism) and every macro of
`sql/statements/macros.sql`, as query connections have them. One database serves the
process; each call has its own cursor and its own registrations, so threads may run queries
at once.

Who calls it: the ingest, to keep its summaries with the very statements the query layer
runs over stored tables (`ingest/statements.py`) and a run's status with the macro the view
`run_status` applies, and migrations, through `MigrationContext.query`, to run the frozen
copy of the statement they were written with.
It lives in `storage/` because migrations may import nothing from the ingest.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from ..resources import create_macros

if TYPE_CHECKING:
    import pyarrow as pa

_con: Any = None
_lock = threading.Lock()


def _cursor() -> Any:
    import duckdb

    global _con
    with _lock:
        if _con is None:
            con = duckdb.connect(":memory:", config={"enable_external_access": False,
                                                     "threads": 1})
            create_macros(con)  # every macro, as query connections have them
            _con = con
        return _con.cursor()


def run_all(sqls: Sequence[str], tables: Mapping[str, "pa.Table"]) -> list["pa.Table"]:
    """Each query of `sqls` over `tables` (see the module), as Arrow, in order."""
    cur = _cursor()
    try:
        for name, rows in tables.items():
            cur.register(name, rows)
        return [cur.sql(sql).to_arrow_table() for sql in sqls]
    finally:
        cur.close()


def run(sql: str, tables: Mapping[str, "pa.Table"]) -> "pa.Table":
    """One query over `tables` (see the module), as Arrow."""
    return run_all([sql], tables)[0]


def row(sql: str, params: Mapping[str, Any]) -> tuple[Any, ...]:
    """The one row of `sql` (a query of bound values `params` that reads no table), as Python
    values: a macro applied to values Python holds."""
    cur = _cursor()
    try:
        return cur.execute(sql, dict(params)).fetchone()
    finally:
        cur.close()
