"""Ctrl-C and SIGTERM during an ingest: the first one keeps what is whole, a second stops at once.

Contract: `Interrupts(signals)` is a context manager that handles `signals` (default SIGINT)
for its duration and restores the previous handlers when it ends; it installs nothing outside
the main thread (only the main thread receives Python signal handlers) nor for a signal the
process ignores. Until `defer()` is called, a signal raises `KeyboardInterrupt` at once: the
code it protects has nothing at stake yet. From then on, the first signal is only recorded
(`requested` names it) and the protected code polls `requested` at the points where stopping
is safe (the ingest: between whole files), then finishes what it must (publishes a snapshot)
and raises `ingest_interrupted(report)`. Any further signal stops at once: with
`exit_at_once` (the CLI) the process prints why and leaves with status 130 by `os._exit`,
which is as safe as a `kill -9` (see docs/reliability.md); otherwise it raises
`KeyboardInterrupt` where the code is, and the store keeps its last published snapshot.
`request(why)` asks for a stop as a first signal does, from any thread; a stop asked before
`defer()` also ends a wait for the store's lock (storage/lock.py).

The kernel may deliver a signal to any thread of the process, and Python runs the handler
only when the main thread next runs Python code: so the ingest's main thread waits for a
worker's future with `waits.awaited(future)`, never in one blocking wait.

Every signal handled is counted (`crashpoints.note_signal`): the test hook
`crashpoints.pause_point` ends a pause when the count grows, so a test can send a signal
exactly at a chosen point of an ingest.
"""

from __future__ import annotations

import os
import signal
import threading
from typing import Any

from ..crashpoints import note_signal

def ingest_interrupted(report: Any) -> KeyboardInterrupt:
    """The exception an ingest raises after publishing what it kept: a `KeyboardInterrupt`
    (that very type, not a subclass: an uncaught one then ends a script as Ctrl-C does,
    killed by SIGINT, which shells rely on to stop a loop) whose message says how much was
    kept and whose `report` attribute is the `IngestReport` (`report.interrupted` names the
    signal)."""
    e = KeyboardInterrupt(report.summary())
    e.report = report  # type: ignore[attr-defined]
    return e


class Interrupts:
    """Signal handling for one ingest (see the module docstring)."""

    def __init__(self, signals: tuple[str, ...] = ("SIGINT",), *, exit_at_once: bool = False):
        self.signals = signals
        self.exit_at_once = exit_at_once
        self.requested: str | None = None  # the first signal received after defer()
        self.deferring = False
        self._saved: dict[int, Any] = {}

    def defer(self) -> None:
        """From now on the first signal is recorded, not raised (see the module docstring)."""
        self.deferring = True

    def request(self, why: str) -> None:
        """Ask the ingest to stop as a first signal does, from any thread (a watch in a
        thread, which no signal reaches): at the next whole file, or at once while it still
        waits for the store's lock."""
        self.requested = self.requested or why

    def _handler(self, signum: int, frame: Any) -> None:
        note_signal()
        name = signal.Signals(signum).name
        if self.deferring and self.requested is None:
            self.requested = name
            return
        if self.requested is not None and self.exit_at_once:
            os.write(2, (f"\nstopped at once by a second {name}: what was read since the last "
                         "published snapshot is dropped. Run the same command again: it rolls "
                         "back the unfinished snapshot and continues.\n").encode())
            os._exit(130)
        self.requested = self.requested or name
        raise KeyboardInterrupt(name)

    def __enter__(self) -> "Interrupts":
        if threading.current_thread() is not threading.main_thread():
            return self
        for name in self.signals:
            sig = getattr(signal, name, None)
            if sig is None or signal.getsignal(sig) is signal.SIG_IGN:
                continue
            self._saved[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, previous in self._saved.items():
            # None: the handler was not set from Python; the default is the closest there is.
            signal.signal(sig, signal.SIG_DFL if previous is None else previous)
        self._saved.clear()
        self.deferring = False
