"""`StoreBase`: what every `Store` method stands on — the location, the snapshot, queries.

Contract: `StoreBase(path, memory_limit=)` names a store location (`resolve`: the argument,
else `$RUNSTORE_STORE`, else `./.runstore`; local or `s3://`) and keeps one
`query.session.Session` (an in-memory DuckDB per snapshot) whose queries may use `memory_limit`
(`query.memory.resolve`: bytes or text such as `4GB`; else `$RUNSTORE_MEMORY_LIMIT`, else a
quarter of the machine's memory). With `inline_views=True` (runstore's commands: a process that
runs a statement or two) a query starting with SELECT or WITH reads the canned views and tables
it needs as CTEs put in front of it rather than creating them
(`query.connect.Database.statement`: each is bound once, when the query runs). Its methods
read: the newest snapshot (`manifest`, `settings`, and its number, `snapshot`), one read-only
query converted as the caller asks (`fetch`, and `arrow`/`rows`/`sql` over it; `isolated=True`
runs it in a worker process capped at the limit, `query.workers`, whose processes `workers()`
gives), the canned views (`views`) and a table as a polars LazyFrame (`table`).
`one_snapshot()` gives a view of the Store whose every read (`snapshot` too) reads one
snapshot, the newest at its first read. `bounded()` caps this process's memory at the limit for
a block (`query.memory.bounded`: for runstore's own commands, never a caller's process).
`close()` (or leaving a `with` block) closes the cached database and ends the worker processes.
The other parts of `Store` (`writing`, `questions`, `pictures`) are subclasses that add one
group of methods each, every one a call into the package that owns the work.
"""

from __future__ import annotations

import copy
import os
from contextlib import contextmanager
from typing import (TYPE_CHECKING, Any, Callable, ContextManager, Iterable, Iterator, Sequence,
                    TypeVar)

from ..errors import QueryError
from ..query import connect, memory
from ..query.result import polars_frame as _polars_frame, to_polars as _polars
from ..query.session import Session
from ..query.views import View, views
from ..storage import schema, settings as settings_mod, snapshot
from ..storage.location import location
from ..storage.manifest import Manifest, Root

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from ..query.rows import Rows
    from ..query.workers import Workers

T = TypeVar("T")
S = TypeVar("S", bound="StoreBase")

DEFAULT_STORE = ".runstore"


def resolve(store: str | os.PathLike[str] | None = None) -> Root:
    """The store location: the argument, else $RUNSTORE_STORE, else ./.runstore. An
    `s3://bucket/prefix` names a store on S3-compatible object storage (see docs/scale.md)."""
    chosen = store if store not in (None, "") else os.environ.get("RUNSTORE_STORE") or DEFAULT_STORE
    return location(chosen).resolved()


class StoreBase:
    """The location, the session over its newest snapshot, and the reading every method uses."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *,
                 memory_limit: int | str | None = None, inline_views: bool = False):
        self.path = resolve(path)
        # What one query may use, in bytes: DuckDB's own limit in this process, and the cap
        # of the worker processes of `isolated=True` (query/memory.py).
        self.memory_limit = memory.resolve(memory_limit)
        # One DuckDB database per snapshot, shared by this Store's queries (and threads: the
        # web UI's request threads share one Store); see query/session.py.
        self._session = Session(self.path, lambda: snapshot.current(self.path),
                                self.memory_limit, inline_views=inline_views)

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the cached database and end the worker processes (a later query starts
        them anew)."""
        self._session.close()

    def workers(self) -> "Workers":
        """The worker processes that run `isolated=True` queries (`query.workers.Workers`;
        the web UI streams its SQL page's answers from them)."""
        return self._session.workers()

    @staticmethod
    def stopping(stop: Callable[[], bool]) -> "ContextManager[None]":
        """A block whose queries stop once `stop()` is true and fail with `Stopped` (a
        `QueryError`): one in process is interrupted; one in a worker process (`isolated=True`,
        the web UI's SQL, the MCP server's `sql`) has its worker killed and replaced
        (`query.deadline.stopping`; `runstore mcp` stops a cancelled call so)."""
        from ..query.deadline import stopping

        return stopping(stop)

    def bounded(self) -> "ContextManager[None]":
        """A block in which this process's memory is held to `memory_limit` beyond what it
        holds now, a `LimitReached` error naming the limit when a query needs more
        (`query.memory.bounded`). Only for a process of runstore's own (`runstore sql`, `runs
        --where`), never a caller's Python process."""
        return memory.bounded(self.memory_limit)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    def settings(self) -> dict[str, Any]:
        """The settings queries see by default: the built-in defaults, then the store's own."""
        return settings_mod.merged(self.manifest().settings)

    # -- reading -------------------------------------------------------------------------
    def manifest(self) -> Manifest:
        """The newest snapshot, checked: a store this runstore can read, with settings of the
        right types (`storage.snapshot.current`); of a `one_snapshot()` view, its snapshot."""
        return self._session.newest()

    @contextmanager
    def one_snapshot(self: S) -> Iterator[S]:
        """A view of this Store that reads one snapshot, for a block: every read through it,
        from any thread (queries, `manifest`, `settings`, `snapshot`, and every method built
        on them), answers from the snapshot that was newest at its first read. An ingest that
        commits meanwhile is seen by this Store, not by the view. The commands that run
        several statements read through one (`doctor`, `report`, each reading command of the
        CLI), so the parts of their answers agree.

        Example:
            >>> with store.one_snapshot() as snap:
            ...     n = snap.sql("select count(*) as n from runs").item()
            ...     flagged = snap.sql("select count(*) as n from kl_health where flagged").item()
            >>> n, flagged
            (13, 1)
        """
        view = copy.copy(self)
        view._session = self._session.pinned()
        try:
            yield view
        finally:
            view._session.close()

    def snapshot(self) -> int | None:
        """The number of the newest published snapshot (None before the first ingest).

        Cheap (one directory listing, no file read), so callers may poll it to learn that an
        ingest committed: every commit publishes a higher number. Of a `one_snapshot()` view:
        the number of its snapshot, the one its queries read.

        Example:
            >>> store.snapshot() > 0
            True
        """
        return self._session.snapshot()

    def connect(self, params: dict[str, Any] | None = None, *,
                allow_read: Iterable[str | os.PathLike[str]] | None = None) -> Any:
        """A fresh in-memory DuckDB connection over the newest snapshot, every table and view
        created, confined by DuckDB's sandbox to the snapshot's files (and `allow_read`)."""
        return connect.connect(self.path, self.manifest(), params, allow_read=_paths(allow_read),
                               memory_limit=self.memory_limit)

    def fetch(self, sql: str, params: dict[str, Any] | None = None, *,
              allow_read: Iterable[str | os.PathLike[str]] | None = None,
              convert: "Callable[[Any], T]", timeout: float | None = None) -> T:
        """Run one read-only query; `convert(result)` of its result (`query.result.Result`).

        The guard (`query.guard`) checks the query and the params first; `convert` runs
        while the query's cursor is open (e.g. `lambda r: r.fetchall()`). `arrow` and `sql`
        are this with their conversions. `timeout`: as in `sql` (it covers `convert` too).
        """
        return self._session.fetch(sql, params, allow_read=_paths(allow_read), convert=convert,
                                   timeout=timeout)

    def arrow(self, sql: str, params: dict[str, Any] | None = None, *,
              allow_read: Iterable[str | os.PathLike[str]] | None = None,
              timeout: float | None = None, isolated: bool = False) -> "pa.Table":
        """Run one read-only query; the result as a pyarrow Table (`timeout`, `isolated` as
        in `sql`).

        Example:
            >>> store.arrow("select count(*) as n from runs").column("n").to_pylist()
            [13]
        """
        if isolated:
            return self.workers().table(sql, params, timeout=timeout,
                                        allow_read=_paths(allow_read))
        return self.fetch(sql, params, allow_read=allow_read,
                          convert=lambda rel: rel.to_arrow_table(), timeout=timeout)

    def rows(self, sql: str, params: dict[str, Any] | None = None, *,
             allow_read: Iterable[str | os.PathLike[str]] | None = None,
             timeout: float | None = None, arrow: bool = False) -> "Rows | pa.Table":
        """Run one read-only query; its result as plain Python rows (`query.rows.Rows`: the
        questions a pyarrow Table answers — `column_names`, `num_rows`, `to_pylist()` — asked
        of rows that never went through Arrow) when every column's type gives the same Python
        values either way, else as a pyarrow Table. What a command that prints a result uses:
        a result of plain types imports no pyarrow (`timeout` as in `sql`). A value Python
        cannot hold as DuckDB means it (an interval, a blob, a bit string, nanoseconds, a
        time's offset; `query.rows.TEXT_ONLY`) comes as DuckDB's own text of it. With
        `arrow=True`, always an Arrow table, as a Parquet file can hold it (`-o FILE.parquet`):
        only what Arrow cannot hold as DuckDB means it (`query.rows.ARROW_TEXT`: an interval,
        a bit string, a BIGNUM, a time's offset) comes as text.

        Example:
            >>> store.rows("select count(*) as n from runs").to_pylist()
            [{'n': 13}]
        """
        from ..query.rows import for_parquet, for_printing

        return self.fetch(sql, params, allow_read=allow_read,
                          convert=for_parquet if arrow else for_printing, timeout=timeout)

    def sql(self, sql: str, params: dict[str, Any] | None = None, *, lazy: bool = False,
            allow_read: Iterable[str | os.PathLike[str]] | None = None,
            timeout: float | None = None,
            isolated: bool = False) -> "pl.DataFrame | pl.LazyFrame":
        """Run one read-only query; a polars DataFrame (LazyFrame with `lazy=True`).

        Values go in `params` and are bound to the query's `$name` placeholders, never pasted
        into its text. A param named like a setting (`kl_threshold`) overrides that setting
        for this query. The query reads only the store's files (DuckDB's sandbox); list an
        outside file or directory in `allow_read` to read it as well. `timeout=SECONDS` (None:
        no limit; else above 0) stops the query if it still runs then, with a `QueryError`.

        Memory: DuckDB's own limit (three quarters of the Store's `memory_limit`) applies to
        every query, but it does not bound all of a query's memory (strings being built, say),
        and your process is never capped. `isolated=True` runs the query in a worker process
        of its own that is (`memory_limit` beyond its start-up size; a `QueryError` naming the
        limit when the query needs more, and a result larger than the limit is refused), and
        hands the result back as Arrow; the worker is kept for the next isolated query.

        Example:
            >>> store.sql("select run_name from kl_health where flagged")["run_name"].to_list()
            ['gsm8k_tool_rl/sweep/lr_1e-3/seed_0']
            >>> store.sql("select count(*) as n from kl_health where flagged",
            ...           params={"kl_threshold": 0.002}).item()
            3
            >>> store.sql("select run_name from runs where run_name glob $g order by 1",
            ...           params={"g": "math_rl_sweep/qwen3-8b/*"}).height
            3
            >>> store.sql("select * from metrics", lazy=True).collect_schema().names()
            ['run_id', 'run_name', 'run_label', 'step', 'key', 'value', 'value_str', 'seq']
        """
        if isolated:
            df = _polars_frame(self.arrow(sql, params, allow_read=allow_read, timeout=timeout,
                                   isolated=True))
        else:
            df = self.fetch(sql, params, allow_read=allow_read, convert=_polars, timeout=timeout)
        return df.lazy() if lazy else df

    def _frame(self, sql: str, params: dict[str, Any] | None,
               allow_read: Iterable[str | os.PathLike[str]] | None = None) -> "pl.DataFrame":
        return self.fetch(sql, params, allow_read=allow_read, convert=_polars)

    def views(self) -> tuple[View, ...]:
        """The canned views (name, description, documented columns, SQL), in dependency order.

        Example:
            >>> [v.name for v in store.views()][:3]
            ['run_labels', 'metrics', 'eval_metrics']
            >>> dict(next(v for v in store.views() if v.name == "kl_health").columns)["flagged"]
            'true when any step is over the threshold'
        """
        return views()

    def table(self, name: str) -> "pl.LazyFrame":
        """One table of the newest snapshot as a polars LazyFrame (scanning its live files).

        Example:
            >>> store.table("trajectories").select("split").unique().sort("split").collect()["split"].to_list()
            ['eval/aime2025', 'eval/test', 'train']
        """
        import polars as pl

        from ..query.catalog import spelled

        name = spelled(name, schema.TABLES)  # in any case, as SQL reads it
        if name not in schema.TABLES:
            raise QueryError(f"no table {name!r}; tables: {', '.join(schema.TABLES)}")
        if name in connect.LINKED:  # a column resolved when queried: the table as SQL reads it
            return self.sql(f"select * from {name}", lazy=True)
        files = snapshot.table_files(self.path, self.manifest(), name)
        if not files:
            return pl.from_arrow(schema.empty(name)).lazy()  # type: ignore[union-attr]
        return pl.scan_parquet(files, missing_columns="insert", extra_columns="ignore",
                               storage_options=self.path.storage_options())

    def tables(self) -> Sequence[str]:
        """The public table names (see `runstore schema`)."""
        return list(schema.TABLES)


def _paths(paths: Iterable[str | os.PathLike[str]] | str | None) -> list[str] | None:
    """`allow_read` as a list of strings (one path given bare is one path, not its letters)."""
    if paths is None:
        return None
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return [os.fspath(p) for p in paths]
