"""A time limit for one query, and Ctrl-C: DuckDB's own interrupt, sent from another thread.

Contract: DuckDB has no statement-timeout setting, but a cursor's `interrupt()` stops the
query running on that cursor (`duckdb.InterruptException`) and only that one: other cursors
of the same database, and later queries, are untouched. `Deadline(cursor, seconds)` is a
context manager that interrupts `cursor` once `seconds` have passed unless the block ended
first, then again every `REPEAT_S` until it ends (DuckDB drops an interrupt that comes while
the cursor runs nothing, e.g. between two statements of one query's work); `fired` says
whether it did. Interrupting and ending share a lock, and ending waits for the timer thread,
so nothing touches the cursor once the block has ended (the caller closes it then; a query
has a cursor of its own, so an interrupt landing as a query finishes stops nothing else).
`seconds=None` is no limit and starts no thread. `checked(value)` is a time limit as given by
a caller (None, or a finite number of seconds above 0), else a `UsageError`;
`stopped(seconds, e)` is the `LimitReached` (a `QueryError`) to raise for `e` when the
deadline `fired`: `e` is (or wraps) DuckDB's interrupt; else None. `stop_error(seconds)` is
that error (a query's worker process that had to be killed at its limit fails with it too:
query/workers.py).

Ctrl-C uses the same interrupt. Every `Deadline` block is listed while it runs, so
`cancel_running()` (called from any thread: the CLI's signal watcher, cli/stopping.py)
interrupts every query running in the process, as its time limit would. `request_stop()`
records that the process was asked to stop (the CLI's SIGINT handler calls it, and
`clear_stop()` forgets it when the command ends): `cancelled` is then true of every block
running, so its caller raises `KeyboardInterrupt` however the query ended (stopped, finished
or failed), and a block that would start raises it at once. A block `cancel_running()`
reached is `cancelled` too. `running_on(thread)` says whether a query runs on that thread.

A caller that may give up on its queries (`runstore mcp`, for a call its client cancels)
runs them inside `stopping(stop)`: a context variable, so it reaches the threads the
caller's context is copied into. A `Deadline` block entered there asks `stop()` every
`STOP_POLL_S` and, once it is true, interrupts its cursor and is `given_up`: its caller
raises `Stopped`. Queries in worker processes ask it too (query/workers.py), and
`caller_stop()` is the test in force (None: none).

The interrupt stops DuckDB's work (scans, joins, aggregates, producing the result); Python
work around the query (the guard, converting a fetched result) is not cut short.
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterator

from ..errors import LimitReached, QueryError, UsageError

# DuckDB drops an interrupt that comes while the cursor runs nothing (between the guard's
# statements, before `convert` starts the query): so, once the time is up, interrupt again
# this often until the query has stopped.
REPEAT_S = 0.05
HINT = ("narrow it (a WHERE, a LIMIT, fewer joins) or allow it longer (runstore sql --timeout "
        "SECONDS; runstore ui --sql-timeout SECONDS; Python: timeout=SECONDS)")


STOP_POLL_S = 0.1  # how often a query that can be stopped checks whether it should stop

_STOP: ContextVar[Callable[[], bool] | None] = ContextVar("runstore_query_stop", default=None)


class Stopped(QueryError):
    """The query's caller gave it up (`stopping`)."""

    def __init__(self, message: str = "the query was stopped: its caller gave it up"):
        super().__init__(message)


@contextmanager
def stopping(stop: Callable[[], bool]) -> Iterator[None]:
    """Queries started while this lasts stop once `stop()` is true (see the module)."""
    token = _STOP.set(stop)
    try:
        yield
    finally:
        _STOP.reset(token)


def caller_stop() -> Callable[[], bool] | None:
    """The `stop` of the `stopping` block in force here, if any."""
    return _STOP.get()


# The queries running now (Ctrl-C stops them all), and whether the process was asked to stop.
_running: set["Deadline"] = set()
# Re-entrant: the CLI's SIGINT handler asks `running_on` from the main thread, which may hold
# this lock at that very moment (entering or leaving a block).
_running_lock = threading.RLock()
_stop_requested = False


def request_stop() -> None:
    """Record that the process was asked to stop: every query running is `cancelled`, and
    none starts (see the module docstring)."""
    global _stop_requested
    _stop_requested = True


def clear_stop() -> None:
    """Forget `request_stop()` (the command it was for has ended)."""
    global _stop_requested
    _stop_requested = False


def running_on(thread: threading.Thread) -> bool:
    """Whether a query is running (inside a `Deadline` block) on `thread`."""
    with _running_lock:
        return any(d.thread is thread for d in _running)


def cancel_running() -> int:
    """Interrupt every query running in this process (each `Deadline` block now open), as
    their time limits would, and mark them `cancelled`; the number of queries reached."""
    with _running_lock:
        running = list(_running)
    for d in running:
        d.cancel()
    return len(running)


def checked(value: Any, name: str = "timeout") -> float | None:
    """`value` as a time limit in seconds (None: no limit); a UsageError for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise UsageError(f"{name} must be a number of seconds above 0 (or None for no limit), "
                         f"got {value!r}")
    return float(value)


class Deadline:
    """Interrupt `cursor` after `seconds`, and again every `REPEAT_S` until the `with` block
    ends (see the module docstring)."""

    def __init__(self, cursor: Any, seconds: float | None):
        self.seconds = seconds
        self.fired = False
        self.given_up = False  # the caller's `stop()` turned true (see the module)
        self._stop = _STOP.get()
        self._cancelled = False
        self.thread = threading.current_thread()
        self._cursor: Any = cursor
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._thread: threading.Thread | None = None
        if seconds is not None:
            # A daemon: a query's timer never keeps a process alive.
            self._thread = threading.Thread(target=self._watch, name="runstore-query-deadline",
                                            daemon=True)
        self._stop_thread: threading.Thread | None = None
        if self._stop is not None:
            self._stop_thread = threading.Thread(target=self._watch_stop, daemon=True,
                                                 name="runstore-query-stop")

    @property
    def cancelled(self) -> bool:
        """Whether Ctrl-C stopped this query (`cancel_running`) or came while it ran
        (`request_stop`): its caller then raises KeyboardInterrupt."""
        return self._cancelled or _stop_requested

    def cancel(self) -> None:
        """Interrupt the query now, and again every `REPEAT_S` until the block ends."""
        with self._lock:
            if self._cursor is None or self._cancelled:
                return
            self._cancelled = True
        threading.Thread(target=self._interrupt, name="runstore-query-cancel",
                         daemon=True).start()

    def _watch(self) -> None:
        assert self.seconds is not None
        # Beyond TIMEOUT_MAX (centuries) the wait would fail instead of waiting.
        if self._ended.wait(min(self.seconds, threading.TIMEOUT_MAX)):
            return
        with self._lock:
            if self._cursor is None:  # the block ended while this thread woke up
                return
            self.fired = True
        self._interrupt()

    def _watch_stop(self) -> None:
        assert self._stop is not None
        while not self._ended.wait(STOP_POLL_S):
            if self._stop():
                with self._lock:
                    if self._cursor is None:
                        return
                    self.given_up = True
                self._interrupt()
                return

    def _interrupt(self) -> None:
        import duckdb

        while True:
            with self._lock:
                if self._cursor is None:  # the block has ended: nothing touches the cursor
                    return
                try:
                    self._cursor.interrupt()
                except duckdb.Error:  # closed under us (the command ending): nothing runs
                    return
            if self._ended.wait(REPEAT_S):
                return

    def __enter__(self) -> "Deadline":
        if _stop_requested:
            raise KeyboardInterrupt("interrupted")
        with _running_lock:
            _running.add(self)
        for thread in (self._thread, self._stop_thread):
            if thread is not None:
                thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._ended.set()
        with self._lock:  # waits for an interrupt under way: none can follow
            self._cursor = None
        with _running_lock:
            _running.discard(self)
        for thread in (self._thread, self._stop_thread):
            if thread is not None:
                thread.join()


def stopped(seconds: float | None, e: BaseException) -> LimitReached | None:
    """The error for a query the deadline stopped: `e` is DuckDB's interrupt, or wraps it (a
    conversion that catches and rewraps errors); None otherwise."""
    import duckdb

    seen: BaseException | None = e
    visited: set[int] = set()
    while seen is not None and id(seen) not in visited:
        if isinstance(seen, duckdb.InterruptException) or (
                # through Arrow's C stream (a result read as batches) only the text is left
                isinstance(seen, OSError) and str(seen).startswith("INTERRUPT Error")):
            return stop_error(seconds)
        visited.add(id(seen))
        seen = seen.__cause__ or seen.__context__
    return None


def stop_error(seconds: float | None) -> LimitReached:
    """The error of a query stopped at its time limit of `seconds`."""
    return LimitReached(f"query stopped after {seconds:g} s (its time limit): {HINT}")
