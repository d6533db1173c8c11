"""`Store`: the one entry object of the library (`runstore.open(path)`).

Contract: a `Store` names a store location (`--store`, else `$RUNSTORE_STORE`, else
`./.runstore`). Writing methods (`ingest`, `compact`, `migrate`) take the store's write lock for
their duration. Reading methods build a fresh in-memory DuckDB over the newest snapshot for
each call, so a long-lived `Store` always sees the latest committed state and never blocks
anyone. Results are polars DataFrames (polars is imported only when a method needs it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import pyarrow as pa

from . import migrate as migrate_mod
from . import query, sqlcheck, tables
from .errors import QueryError
from .ingest import IngestReport, Progress

if TYPE_CHECKING:
    import polars as pl

DEFAULT_STORE = ".runstore"


def resolve(store: str | os.PathLike[str] | None = None) -> Path:
    """The store location: the argument, else $RUNSTORE_STORE, else ./.runstore."""
    chosen = store if store not in (None, "") else os.environ.get("RUNSTORE_STORE") or DEFAULT_STORE
    return Path(chosen).expanduser().absolute()


class Store:
    """A runstore store. Create with `runstore.open(path)`; usable as a context manager.

    Example:
        >>> import runstore, tempfile
        >>> from runstore import demo
        >>> tmp = tempfile.mkdtemp()
        >>> _ = demo.generate_tree(tmp + "/runs")
        >>> store = runstore.open(tmp + "/store")
        >>> store.ingest([tmp + "/runs"]).runs_new > 0
        True
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = resolve(path)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # -- writing -------------------------------------------------------------------------
    def ingest(self, paths: Iterable[str | os.PathLike[str]] | str, *,
               progress: Progress | None = None, on_warning: Any = None,
               lock_timeout: float = 60.0) -> IngestReport:
        """Ingest every run under `paths` (incrementally); returns what was done."""
        from .ingest import ingest

        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        return ingest(self.path, list(paths), progress=progress, on_warning=on_warning,
                      lock_timeout=lock_timeout)

    def compact(self, *, vacuum_hours: float | None = None,
                lock_timeout: float = 60.0) -> dict[str, int]:
        """Rewrite every table into few files; returns the file count per table before."""
        self.manifest()
        with tables.writer(self.path, lock_timeout=lock_timeout) as w:
            return w.compact(vacuum_hours=vacuum_hours)

    def migrate(self, *, lock_timeout: float = 60.0) -> list[str]:
        """Apply pending schema migrations; returns their names."""
        self.manifest()
        with tables.writer(self.path, lock_timeout=lock_timeout) as w:
            return [m.name for m in migrate_mod.apply(w)]

    # -- reading -------------------------------------------------------------------------
    def manifest(self) -> tables.Manifest:
        m = tables.require_store(self.path)
        migrate_mod.check_version(m)
        return m

    def connect(self, params: dict[str, Any] | None = None) -> Any:
        """A fresh in-memory DuckDB connection over the newest snapshot."""
        return query.connect(self.path, self.manifest(), params)

    def arrow(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        """Run one read-only query; the result as a pyarrow Table."""
        names = sqlcheck.guard(sql)
        missing = [n for n in names if n not in (params or {})]
        if missing:
            raise QueryError(f"the query uses ${missing[0]} but no value was given: pass "
                             f"--param {missing[0]}=VALUE (params={{'{missing[0]}': ...}})")
        con = self.connect(params)
        try:
            bound = {k: v for k, v in (params or {}).items() if k in names}
            return con.sql(sql, params=bound or None).to_arrow_table()
        except Exception as e:  # duckdb.Error subclasses; keep the import lazy
            if type(e).__module__.startswith("duckdb") or "duckdb" in type(e).__module__:
                raise QueryError(str(e).strip()) from e
            raise
        finally:
            con.close()

    def sql(self, sql: str, params: dict[str, Any] | None = None, *,
            lazy: bool = False) -> "pl.DataFrame | pl.LazyFrame":
        """Run one read-only query; a polars DataFrame (LazyFrame with `lazy=True`).

        Example:
            >>> store.sql("select kind, count(*) as n from runs group by kind order by kind")  # doctest: +SKIP
        """
        import polars as pl

        df = pl.from_arrow(self.arrow(sql, params))
        assert isinstance(df, pl.DataFrame)
        return df.lazy() if lazy else df

    def table(self, name: str) -> "pl.LazyFrame":
        """One table of the newest snapshot as a polars LazyFrame (scanning its live files)."""
        import polars as pl

        from . import schema

        if name not in schema.TABLES:
            raise QueryError(f"no table {name!r}; tables: {', '.join(schema.TABLES)}")
        files = tables.table_files(self.path, self.manifest(), name)
        if not files:
            return pl.from_arrow(schema.empty(name)).lazy()  # type: ignore[union-attr]
        return pl.scan_parquet(files, missing_columns="insert", extra_columns="ignore")

    def tables(self) -> Sequence[str]:
        from . import schema

        return list(schema.TABLES)


def open(path: str | os.PathLike[str] | None = None) -> Store:  # noqa: A001 - the public name
    """Open the store at `path` (else $RUNSTORE_STORE, else ./.runstore)."""
    return Store(path)
