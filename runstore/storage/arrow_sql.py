"""SQL over Arrow tables held in memory, in a DuckDB that reads nothing else.

Contract: `run(sql, tables)` runs one SQL query with each Arrow table of `tables` visible
under its key, and returns the result as Arrow; `run_all(sqls, tables)` runs several over
the same tables, registered once. The DuckDB is in memory, with external access off (no
file, no extension, no network: a query reads the rows it is given and nothing else) and
one thread per query (its callers, the ingest's read-ahead threads, are the parallelism).
One database serves the process; each call has its own cursor and its own registrations,
so threads may run queries at once.

Who calls it: the ingest, to keep its summaries with the very statements the query layer
runs over stored tables (`ingest/statements.py`), and migrations, through
`MigrationContext.query`, to run the frozen copy of the statement they were written with.
It lives in `storage/` because migrations may import nothing from the ingest.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:
    import pyarrow as pa

_con: Any = None
_lock = threading.Lock()


def _cursor() -> Any:
    import duckdb

    global _con
    with _lock:
        if _con is None:
            _con = duckdb.connect(":memory:", config={"enable_external_access": False,
                                                      "threads": 1})
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
