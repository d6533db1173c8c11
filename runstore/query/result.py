"""One query's result as a `convert` function sees it, planned once where DuckDB allows.

Contract: `Result(con, sql, params)` stands for the result of `sql` on cursor `con` with the
bound `params`, read in one of these ways, once:

* `columns`, `types` (DuckDB's types), `fetchall()`: the query runs as a prepared statement
  (`con.execute`), so DuckDB binds and optimizes it once. A relation (`con.sql`) binds it
  twice, once to make the relation and once to run it, which for the canned views' expanded
  text is a measurable part of a quick statement's time.
* `to_arrow_table()`, `__arrow_c_stream__` (what polars reads, with no pyarrow) and any other
  relation method: the DuckDB relation of the query, made on first use, so these keep the
  double planning. An executed statement's Arrow export would plan once, but DuckDB copies
  its rows (even a few) and warns about that on every call. Only a result already
  run for its `types` (`rows.from_relation` on columns that are not plain) gives its Arrow
  that way, rather than running the query again.

`to_polars(result)` is the result as a polars DataFrame through the Arrow C stream, without
pyarrow (~0.1 s of a short process); `polars_frame(data)` makes one of a DuckDB relation or
an Arrow table, a type polars lacks being a `QueryError` that says what to do; and
`frame(reader, sql, params)` is one statement's result (over a `query.reader.Reader`) read
that way: what the layers that compute with polars read a store with (`Store.sql` is it too).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from ..errors import QueryError

if TYPE_CHECKING:
    import polars as pl

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
        if not self._executed:
            return self.relation().to_arrow_table()
        with warnings.catch_warnings():  # the copy is cheaper than running the query again
            warnings.filterwarnings("ignore", message=_COPY_WARNING, category=UserWarning)
            return self._con.to_arrow_table()

    def relation(self) -> Any:
        """The query as a DuckDB relation (planned again when it runs; a result already run
        for its `types` is given up first)."""
        if self._executed:
            self._con.abort()
            self._executed = False
        if self._relation is None:
            self._relation = self._con.sql(self._sql, params=self._params)
        return self._relation

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self.relation().__arrow_c_stream__(requested_schema)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.relation(), name)


def polars_frame(data: Any) -> "pl.DataFrame":
    """A DuckDB relation or an Arrow table as a polars DataFrame (DuckDB's error, as it is,
    when the query fails as polars reads its rows)."""
    import polars as pl
    try:
        return pl.DataFrame(data)
    except (KeyboardInterrupt, SystemExit, MemoryError):
        raise
    except BaseException as e:  # polars panics (pyo3's PanicException) on types it lacks
        import duckdb

        if isinstance(e, duckdb.Error):  # the query failed as its rows were read: its error
            raise
        why = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise QueryError(f"polars cannot hold this result ({why}): cast the column (an "
                         "interval to varchar, say), or use store.arrow()") from e


def to_polars(result: Result) -> "pl.DataFrame":
    """DuckDB's result as a polars DataFrame, through the Arrow C stream (no pyarrow)."""
    # DuckDB's own errors (a refused file, say) are raised as they are.
    return polars_frame(result.relation())


def frame(reader: Any, sql: str, params: dict[str, Any] | None = None) -> "pl.DataFrame":
    """One statement's result over `reader` (a `query.reader.Reader`) as a polars DataFrame,
    read without pyarrow (`to_polars`)."""
    return reader.fetch(sql, dict(params or {}), convert=to_polars)
