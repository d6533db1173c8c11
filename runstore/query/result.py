"""One query's result as a `convert` function sees it, planned once where DuckDB allows.

Contract: `Result(con, sql, params)` stands for the result of `sql` on cursor `con` with the
bound `params`, read in one of these ways, once:

* `columns`, `types` (DuckDB's types), `fetchall()`, `to_arrow_table()`: the query runs as a
  prepared statement (`con.execute`), so DuckDB binds and optimizes it once. A relation
  (`con.sql`) binds it twice, once to make the relation and once to run it, which for the
  canned views' expanded text is 10–15 ms of a 20–60 ms question (docs/benchmarks.md).
  `to_arrow_table()` reads DuckDB's Arrow record batches into one table (`to_arrow_reader`;
  DuckDB copies the rows once for an executed cursor, a few ms for 200,000 rows).
* `__arrow_c_stream__` (what polars reads, with no pyarrow) and any other relation method:
  the DuckDB relation of the query, made on first use. A prepared result has no Arrow C
  stream of its own, so the polars path keeps the relation's double planning.

Only one way per result: the first read decides which.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

# DuckDB warns that Arrow from an executed cursor copies the rows once: that copy is what
# planning the query once costs here (far less than planning it again), so the warning is
# silenced around that one call. `catch_warnings` swaps the process's filters, so the calls
# that do it take turns (a few microseconds each: the rows are read after it).
_QUIET = threading.Lock()
_COPY_WARNING = "Arrow output on a DB-API result"


class Result:
    """The result of one query on one cursor (see the module)."""

    def __init__(self, con: Any, sql: str, params: dict[str, Any] | None):
        self._con, self._sql, self._params = con, sql, params
        self._executed = False
        self._relation: Any = None

    def _run(self) -> Any:
        if not self._executed:
            self._con.execute(self._sql, self._params)
            self._executed = True
        return self._con

    @property
    def columns(self) -> list[str]:
        return [d[0] for d in self._run().description]

    @property
    def types(self) -> list[Any]:
        return [d[1] for d in self._run().description]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._run().fetchall()

    def to_arrow_table(self) -> Any:
        con = self._run()
        with _QUIET, warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_COPY_WARNING, category=UserWarning)
            reader = con.to_arrow_reader()
        return reader.read_all()

    def relation(self) -> Any:
        """The query as a DuckDB relation (planned again when it runs)."""
        if self._relation is None:
            self._relation = self._con.sql(self._sql, params=self._params)
        return self._relation

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.relation().__arrow_c_stream__(requested_schema)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.relation(), name)
