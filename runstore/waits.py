"""A wait on the main thread for another thread's work that leaves signal handlers running.

Contract: `awaited(future)` is `future.result()`, waited for in waits of `SIGNAL_POLL_S` at
most. The kernel may deliver a signal to any thread of the process. Python's C-level handler
then runs in that thread and only flags the signal: the Python handler runs when the main
thread next runs Python code. A main thread blocked on a lock until a worker is done would
not run it until then, and a worker that waits for the signal to be handled (a test's pause,
`crashpoints.pause_point`) would never be done. So every wait of the main thread for a
worker's future goes through here: the ingest's for its read-ahead and background commit
(ingest/), the writer's for the tables its commit writes two at a time (storage/writer.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from concurrent.futures import Future

SIGNAL_POLL_S = 0.1  # the longest a main-thread wait goes without running a signal handler


def awaited(future: "Future[Any]") -> Any:
    """`future.result()`, waited for in waits of `SIGNAL_POLL_S` at most (see the module)."""
    from concurrent.futures import wait

    while not future.done():
        wait([future], timeout=SIGNAL_POLL_S)
    return future.result()
