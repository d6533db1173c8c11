"""One of the project's named statements run over Arrow tables, in a DuckDB that reads nothing else.

Contract: `run(name, tables)` runs the statement `name` (`resources.statement`, e.g.
`summaries.metric_kl`) with each Arrow table of `tables` visible under its key (the table
names the statement reads), and returns the result as Arrow. The DuckDB is in memory with
external access off: a statement reads the rows it is given and no file. One database serves
the process; each run has its own cursor and its own registrations, so threads (the ingest's
read-ahead) may run statements at once. The ingest uses it to keep summaries with the very
text the query layer runs over stored tables (one text, one answer), and migrations to fill
them for the rows stored before.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

_con: Any = None
_lock = threading.Lock()


def run(name: str, tables: dict[str, "pa.Table"]) -> "pa.Table":
    """The statement `name` over `tables` (see the module), as Arrow."""
    import duckdb

    from ..resources import statement

    global _con
    with _lock:
        if _con is None:
            _con = duckdb.connect(":memory:", config={"enable_external_access": False})
        cur = _con.cursor()
    try:
        for table, rows in tables.items():
            cur.register(table, rows)
        return cur.sql(statement(name)).to_arrow_table()
    finally:
        cur.close()
