"""The tool calls the client has in flight, and the ones it cancelled.

Contract: `running(request_id)` is a context manager around one call (the server's middleware
enters it): while it lasts, `cancel(request_id)` (the wire, on the client's
`notifications/cancelled`) makes the test it yields true. A cancel for an id not in flight
(answered already, or not begun) is ignored, so an id the client uses again later starts
afresh. The SDK does not tell a tool that its call was cancelled (it waits for the tool's
thread to end, then drops the answer); this is how the call's queries learn it
(`Store.stopping`).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator

_lock = threading.Lock()
_running: dict[Any, list[threading.Event]] = {}  # id -> the calls with it (a client may reuse one)


@contextmanager
def running(request_id: Any) -> Iterator[Callable[[], bool]]:
    """Note a call in flight; yields whether the client has cancelled it."""
    event = threading.Event()
    with _lock:
        _running.setdefault(request_id, []).append(event)
    try:
        yield event.is_set
    finally:
        with _lock:
            events = _running.get(request_id, [])
            events.remove(event)
            if not events:
                _running.pop(request_id, None)


def cancel(request_id: Any) -> None:
    """The client cancelled the call(s) with this id that are in flight."""
    with _lock:
        for event in _running.get(request_id, []):
            event.set()
