"""The query side of one store: a database per snapshot, a cursor per query, errors made clear.

Contract: `Session(root, manifest, memory_limit, inline_views=)` answers read-only queries over
the store at `root` (`manifest()` gives its checked newest snapshot), each database's DuckDB
limited by `memory_limit` (bytes; `memory.duckdb_setting`). `fetch(sql, params, allow_read=,
convert=, timeout=)` runs one: the guard (`guard.guard`) checks it first; a `$name` it uses
needs a value, and a param it does not use must name a setting (a typo in `kl_threshold` must
not pass silently); only what the query reads is created on the database (`Database.ensure`;
with `inline_views`, a query starting with SELECT or WITH reads the canned views and the tables
it needs as CTEs put in front of it instead, `Database.statement`, their values bound beside
the query's own, and a DuckDB error's `LINE n` is given back as the query's own text numbers
it: `relined`); values are bound, never pasted; `convert(result)` runs while the query's cursor
is open (`result.Result`: rows and Arrow from the query planned once, else a DuckDB relation).
With `timeout` (seconds above 0; `deadline.checked`), the clock starts before the guard and the
query's own cursor is interrupted when it runs out (`deadline.Deadline`), which stops whatever
DuckDB is executing for it; the error says the query hit its time limit and how to allow
longer. Ctrl-C reaches the query the same way (`deadline.cancel_running`): a query it stopped,
or that ran while it came, raises `KeyboardInterrupt`. The cursor is closed only once the timer
can no longer fire, so an interrupt never reaches another query. Queries share one `Database`
per snapshot, kept while no newer one is published and swapped under a lock (the web UI queries
from several threads); the older one is dropped, not closed, so a query still running on one of
its cursors finishes. A query that overrides a setting, or may read files outside the store
(`allow_read`), gets a database of its own, closed after it. `newest()` is the newest
snapshot's manifest. `pinned()` is a session (`Pinned`) that reads one snapshot for its life,
the newest at its first read (`Store.one_snapshot`: a command of several statements answers
from one snapshot, and lists the manifests once, a round trip on S3); it uses this session's
database when that is of the same snapshot, and its worker processes. DuckDB's errors come out
as the error to show (`failure`): the sandbox refusing something, a query nested too deeply, an
allocation that failed (DuckDB's out-of-memory error, or a `MemoryError` while converting:
`memory.exceeded`, naming the limit and how to raise it), a store file that vanished or broke
since the snapshot was opened, else DuckDB's own message. `workers()` are the worker processes
that run a query in a process of its own (`workers.Workers`, made on first use): the caller's
process is never capped, theirs is. `close()` closes the shared database and stops the workers.
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ..crashpoints import pause_point
from ..errors import QueryError, RunstoreError, StoreNotFound
from ..storage.manifest import Manifest, Root, manifest_paths, read_manifest
from ..storage.settings import DEFAULT_SETTINGS
from ..storage.snapshot import damaged_file, read_error
from . import deadline, guard, memory, sandbox
from .request import checked as checked_request
from .connect import Database
from .result import Result

if TYPE_CHECKING:
    from .workers import Workers

T = TypeVar("T")

# How many statements a command runs at once where it has several (the doctor's findings, the
# report's sections): each on its own cursor, DuckDB plans and runs them in parallel and lets
# go of Python meanwhile. This machine has 2 cores.
AT_ONCE = 2


class Session:
    """Read-only queries over one store, one cursor each (see the module docstring)."""

    def __init__(self, root: Root, manifest: Callable[[], Manifest], memory_limit: int, *,
                 inline_views: bool = False):
        self.root = root
        self.manifest = manifest
        self.memory_limit = memory_limit
        self.inline_views = inline_views
        self._db: Database | None = None
        self._db_seq: int | None = None
        self._db_lock = threading.Lock()
        self._workers: Workers | None = None

    def snapshot(self) -> int | None:
        """The number of the newest published snapshot (None before the first one): one
        directory listing, no file read."""
        paths = manifest_paths(self.root)
        return paths[-1][0] if paths else None

    def close(self) -> None:
        """Close the shared database and stop the workers (a later query starts anew)."""
        with self._db_lock:
            if self._db is not None:
                self._db.close()
            self._db, self._db_seq = None, None
            workers, self._workers = self._workers, None
        if workers is not None:
            workers.close()

    def workers(self) -> "Workers":
        """The worker processes of this store (started on first use; see query/workers.py)."""
        from .workers import Workers

        with self._db_lock:
            if self._workers is None:
                self._workers = Workers(self.root, self.memory_limit)
            return self._workers

    def database(self, params: dict[str, Any],
                 allow_read: list[str] | None) -> tuple[Database, bool]:
        """The database for one query and whether the caller must close it: the shared one of
        the newest snapshot, or a fresh one when the query overrides a setting (settings are
        per database) or may read files outside the store (the allowed paths are too)."""
        if allow_read or any(k in DEFAULT_SETTINGS for k in params):
            return Database(self.root, self.newest(), params, allow_read=allow_read,
                            memory_limit=self.memory_limit), True
        # A first query reads the newest manifest, which says its number; a later one lists
        # the manifests to learn whether a newer snapshot came since (on S3, a round trip each).
        seq = self.snapshot() if self._db is not None else None
        with self._db_lock:
            if self._db is None or seq != self._db_seq:
                # The older database is dropped, not closed: a query still running on one of
                # its cursors (another thread) finishes on it.
                manifest = self.manifest()
                self._db = Database(self.root, manifest, memory_limit=self.memory_limit)
                self._db_seq = manifest.seq
            return self._db, False

    def newest(self) -> Manifest:
        """The newest snapshot's manifest."""
        return self.manifest()

    def pinned(self) -> "Pinned":
        """A session of this store that reads one snapshot (see the module)."""
        return Pinned(self)

    def fetch(self, sql: str, params: dict[str, Any] | None, *,
              allow_read: list[str] | None, convert: Callable[[Any], T],
              timeout: float | None = None) -> T:
        """Run one read-only query; `convert(result)` of its `Result`. With
        `timeout` (seconds), DuckDB stops the query on its cursor once that much time has
        passed (`deadline.Deadline`), and a `QueryError` says so."""
        import duckdb

        timeout = deadline.checked(timeout)
        params = checked_request(sql, params)
        db, owned = self.database(params, allow_read)
        con = db.cursor()
        limit = deadline.Deadline(con, timeout)
        try:
            with limit:
                out = self._run(db, con, sql, params, convert)
        except Exception as e:
            if limit.cancelled:  # Ctrl-C: whatever the interrupt made of the query
                raise KeyboardInterrupt("interrupted") from e
            if limit.given_up:  # its caller's `stop()`: whatever the interrupt made of it
                raise deadline.Stopped() from e
            if not isinstance(e, (duckdb.Error, QueryError, MemoryError, OSError)):
                raise
            # QueryError too: a conversion may rewrap the interrupt (Store's polars one does);
            # OSError: DuckDB's error through Arrow's C stream keeps only its text.
            stop = deadline.stopped(timeout, e) if limit.fired else None
            if stop is not None:
                raise stop from e
            if memory.exhausted(e):
                raise memory.exceeded(self.memory_limit) from e
            if isinstance(e, (QueryError, OSError)):
                raise
            raise self.failure(e) from e
        finally:
            # The deadline has ended (its `with`), so no interrupt can reach this cursor now.
            con.close()
            if owned:
                db.close()
        if limit.cancelled:  # Ctrl-C came as the query finished: stop all the same
            raise KeyboardInterrupt("interrupted")
        return out

    def _run(self, db: Database, con: Any, sql: str, params: dict[str, Any],
             convert: Callable[[Any], T]) -> T:
        import duckdb

        names = guard.guard(sql, con)
        missing = [n for n in names.params if n not in params]
        if missing:
            raise QueryError(f"the query uses ${missing[0]} but no value was given: pass "
                             f"--param {missing[0]}=VALUE (params={{'{missing[0]}': ...}})")
        unused = [k for k in params if k not in names.params and k not in DEFAULT_SETTINGS]
        if unused:
            raise QueryError(
                f"param {unused[0]!r} is neither used by the query (as ${unused[0]}) nor a "
                f"setting ({', '.join(DEFAULT_SETTINGS)})")
        text, shift, own = db.statement(sql, names.tables, inline=self.inline_views,
                                        params=names.params, defines=names.defines)
        bound = {**{k: v for k, v in params.items() if k in names.params}, **own}
        pause_point("query")  # tests stop a command here (Ctrl-C within a query)
        try:
            return convert(Result(con, text, bound or None))
        except duckdb.Error as e:
            # The views' CTEs came first: the error's line as the caller's text numbers it.
            moved = relined(e, shift, text, sql) if shift else e
            if moved is e:
                raise
            raise moved from e

    def failure(self, e: Exception) -> Exception:
        """DuckDB's error as the one to show: the sandbox refusing a file or a setting; a
        store file that vanished or broke since the snapshot was opened (an I/O error, or any
        error when a live file is indeed damaged); else DuckDB's own message. (A query that
        merely mentions a store path, as a string given to a JSON function say, is not a
        damaged store.)"""
        import duckdb

        refused = sandbox.refusal(e) or guard.depth_error(e)
        if refused is not None:
            return refused
        if isinstance(e, duckdb.IOException):
            return read_error(self.root, e) or QueryError(str(e).strip())
        if str(self.root) in str(e):
            try:
                manifest = read_manifest(self.root)
            except RunstoreError as bad:
                return bad
            damaged = damaged_file(self.root, manifest) if manifest else None
            if damaged is not None:
                return damaged
        return QueryError(str(e).strip())


# DuckDB's pointer to where in a statement an error is: `LINE n: text`, then a line of carets
# under the place, indented by the width of `LINE n: ` too.
_LINE = re.compile(r"^LINE (\d+):(.*\n?)( *)", re.M)


def relined(e: Exception, shift: int, sent: str = "", written: str = "") -> Exception:
    """DuckDB's error `e` about a statement that had `shift` lines put in front of it
    (`Database.statement`), its `LINE n:` as the caller's text numbers it, the carets under
    it moved with it (one inside what was put in front is left as it is); `e` itself when it
    has none to change. With `sent` (the statement as DuckDB got it) and `written` (as the
    caller wrote it; a line of it may differ from what was sent, at the same length: a
    `with` made spaces), the line DuckDB shows is shown as written."""
    sent_lines, written_lines = sent.split("\n")[shift:], written.split("\n")

    def line(m: re.Match[str]) -> str:
        n = int(m.group(1))
        if n <= shift:
            return m.group(0)
        narrower = len(str(n)) - len(str(n - shift))
        echo = m.group(2)
        if n - shift <= min(len(sent_lines), len(written_lines)):
            echo = as_written(echo, sent_lines[n - shift - 1], written_lines[n - shift - 1])
        return f"LINE {n - shift}:{echo}{m.group(3)[narrower:]}"

    text = _LINE.sub(line, str(e))
    if text == str(e):
        return e
    try:
        return type(e)(text)
    except Exception:  # an error type that cannot be made from its text: as it came
        return e


def as_written(echo: str, sent: str, written: str) -> str:
    """DuckDB's `echo` of (a window of) the line `sent`, with what stands there in `written`,
    the same line as the caller wrote it (of the same length): unchanged where the window is
    not found in `sent`."""
    if sent == written or len(sent) != len(written):
        return echo
    core = echo.rstrip("\n").removeprefix(" ").removeprefix("...").removesuffix("...")
    at = sent.find(core) if core else -1
    return echo if at < 0 else echo.replace(core, written[at:at + len(core)], 1)


class Pinned(Session):
    """A session that reads one snapshot for its life: the newest when it is first read (its
    queries, `newest` and `snapshot` all read that one). It uses the database of the session
    it came from when that is of the same snapshot, else one of its own, closed with it, and
    that session's worker processes."""

    def __init__(self, parent: Session):
        super().__init__(parent.root, parent.newest, parent.memory_limit,
                         inline_views=parent.inline_views)
        self._parent = parent
        self._manifest: Manifest | None = None
        self._own = False  # whether `_db` is this session's, to close with it

    def newest(self) -> Manifest:
        with self._db_lock:
            if self._manifest is None:
                # The parent's database, when it is of the newest snapshot, says which one
                # (a listing, no manifest read).
                parent_db = self._parent._db
                self._manifest = (parent_db.manifest if parent_db is not None
                                  and parent_db.manifest.seq == self._parent.snapshot()
                                  else self._parent.newest())
            return self._manifest

    def snapshot(self) -> int | None:
        """Its snapshot's number (None when there is no store yet, as for any session)."""
        try:
            return self.newest().seq
        except StoreNotFound:
            return None

    def database(self, params: dict[str, Any],
                 allow_read: list[str] | None) -> tuple[Database, bool]:
        if allow_read or any(k in DEFAULT_SETTINGS for k in params):
            return super().database(params, allow_read)  # of its own, from `newest`
        manifest = self.newest()
        with self._db_lock:
            if self._db is None:
                parent_db = self._parent._db
                if parent_db is not None and parent_db.manifest.seq == manifest.seq:
                    self._db = parent_db
                else:
                    self._db, self._own = Database(self.root, manifest,
                                                   memory_limit=self.memory_limit), True
            return self._db, False

    def workers(self) -> "Workers":
        return self._parent.workers()

    def close(self) -> None:
        """Close its own database, if it made one (not the parent's, nor its workers)."""
        with self._db_lock:
            db, own = self._db, self._own
            self._db, self._own = None, False
        if db is not None and own:
            db.close()
