"""A time limit for one query: DuckDB's own interrupt, fired from a timer.

Contract: DuckDB has no statement-timeout setting, but a cursor's `interrupt()` stops the
query running on that cursor (`duckdb.InterruptException`) and only that one: other cursors
of the same database, and later queries, are untouched. `Deadline(cursor, seconds)` is a
context manager that interrupts `cursor` once `seconds` have passed, unless the block ended
first; `fired` says whether it did. Interrupting and ending share a lock, so the timer never
touches a cursor after the block has ended (the caller closes the cursor then; a query has a
cursor of its own, so an interrupt that lands just as a query finishes has nothing left to
stop). `seconds=None` is no limit and starts no timer. `checked(value)` is a time limit as
given by a caller (None, or a finite number of seconds above 0), else a `UsageError`;
`stopped(seconds, e)` is the `QueryError` to raise for `e` when the deadline `fired` and `e`
is (or wraps) DuckDB's interrupt, else None.

The interrupt stops DuckDB's work (scans, joins, aggregates, producing the result); Python
work around the query (the guard, converting a fetched result) is not cut short.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from ..errors import QueryError, UsageError

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
    """Interrupt `cursor` after `seconds` unless the `with` block ended first."""

    def __init__(self, cursor: Any, seconds: float | None):
        self.seconds = seconds
        self.fired = False
        self._cursor: Any = cursor
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        if seconds is not None:
            self._timer = threading.Timer(seconds, self._fire)
            self._timer.daemon = True  # a query's timer never keeps a process alive

    def _fire(self) -> None:
        with self._lock:
            if self._cursor is None:  # the query ended while the timer woke up
                return
            self.fired = True
            self._cursor.interrupt()

    def __enter__(self) -> "Deadline":
        if self._timer is not None:
            self._timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._cursor = None


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
