"""The queries running in this process, for a caller that handles Ctrl-C itself (the CLI).

Contract: every `Store` query runs inside a deadline block (`query.deadline`), so this
process knows which queries run on which thread. `request_stop()` records that the process
was asked to stop: each query running is cancelled and none starts until `clear_stop()`;
`cancel_running()` interrupts every running query now (DuckDB's own interrupt, obeyed between
two vectors) and returns how many it reached; `running_on(thread)` says whether a query runs
on `thread`. The functions are `query.deadline`'s, reached through the front door.
"""

from __future__ import annotations

from ..query.deadline import cancel_running, clear_stop, request_stop, running_on

__all__ = ["cancel_running", "clear_stop", "request_stop", "running_on"]
