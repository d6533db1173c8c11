"""A time limit for one query: DuckDB's own interrupt, sent from a watching thread.

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
`stopped(seconds, e)` is the `QueryError` to raise for `e` when the deadline `fired`: `e` is
(or wraps) DuckDB's interrupt; else None.

The interrupt stops DuckDB's work (scans, joins, aggregates, producing the result); Python
work around the query (the guard, converting a fetched result) is not cut short.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from ..errors import QueryError, UsageError

# DuckDB drops an interrupt that comes while the cursor runs nothing (between the guard's
# statements, before `convert` starts the query): so, once the time is up, interrupt again
# this often until the query has stopped.
REPEAT_S = 0.05
HINT = ("narrow it (a WHERE, a LIMIT, fewer joins) or allow it longer (runstore sql --timeout "
        "SECONDS; runstore ui --sql-timeout SECONDS; Python: timeout=SECONDS)")


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
        self._cursor: Any = cursor
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._thread: threading.Thread | None = None
        if seconds is not None:
            # A daemon: a query's timer never keeps a process alive.
            self._thread = threading.Thread(target=self._watch, name="runstore-query-deadline",
                                            daemon=True)

    def _watch(self) -> None:
        assert self.seconds is not None
        # Beyond TIMEOUT_MAX (centuries) the wait would fail instead of waiting.
        if self._ended.wait(min(self.seconds, threading.TIMEOUT_MAX)):
            return
        while True:
            with self._lock:
                if self._cursor is None:  # the block ended while this thread woke up
                    return
                self.fired = True
                self._cursor.interrupt()
            if self._ended.wait(REPEAT_S):
                return

    def __enter__(self) -> "Deadline":
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._ended.set()
        with self._lock:  # waits for an interrupt under way: none can follow
            self._cursor = None
        if self._thread is not None:
            self._thread.join()


def stopped(seconds: float | None, e: BaseException) -> QueryError | None:
    """The error for a query the deadline stopped: `e` is DuckDB's interrupt, or wraps it (a
    conversion that catches and rewraps errors); None otherwise."""
    import duckdb

    seen: BaseException | None = e
    visited: set[int] = set()
    while seen is not None and id(seen) not in visited:
        if isinstance(seen, duckdb.InterruptException):
            return QueryError(f"query stopped after {seconds:g} s (its time limit): {HINT}")
        visited.add(id(seen))
        seen = seen.__cause__ or seen.__context__
    return None
