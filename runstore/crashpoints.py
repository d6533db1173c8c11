"""Test-only hooks: the named points of the writing commands where a test stops the process.

Nothing here changes what runstore does: every function is a no-op unless one of two
environment variables is set, which only tests set.

Contract: `pause_point(phase)` marks that a writing command reached `phase` (discover, parse,
locked, migrate, recover, forget, write, compact, ledger, publish, prune, vacuum, repair,
interrupted; and a notification's notify_claimed, notify_posted, notify_recorded:
health/notify.py), that any command is about to run a query (`query`, once per query), or
that a command's own Ctrl-C handling has ended (`ended`, cli/stopping.py), or that the
command's process has started it (`started`, cli/group.py: before click reads the arguments).
`$RUNSTORE_TEST_POINTS=FILE` appends the name of every phase reached to FILE;
`$RUNSTORE_TEST_PAUSE=PHASE:N[,PHASE:N...]` makes the process print `paused at PHASE:N` on
stderr and wait the N-th time it reaches PHASE, so tests/reliability/test_crash.py can SIGKILL it exactly
there. A signal that the ingest handles (`ingest.interrupts`, which calls `note_signal`) ends
the wait, so tests/reliability/test_interrupt.py can interrupt it exactly there too, and so does a Ctrl-C
any other command handles (`cli/stopping.py`), which tests/cli/test_cli_signals.py sends at each
`query`; `signals()` counts those signals.
"""

from __future__ import annotations

import os
import sys
import threading
import time

_reached: dict[str, int] = {}
_count_lock = threading.Lock()  # phases are reached from writer threads too
_signals = 0


def note_signal() -> None:
    """Count one signal handled by the ingest's signal handling (it ends a pause)."""
    global _signals
    _signals += 1


def signals() -> int:
    """How many signals the ingest's signal handling has handled in this process."""
    return _signals


def pause_point(phase: str) -> None:
    """Record reaching `phase` and pause there when a test asked to (see the module doc)."""
    log, pause = os.environ.get("RUNSTORE_TEST_POINTS"), os.environ.get("RUNSTORE_TEST_PAUSE")
    if not (log or pause):
        return
    with _count_lock:
        n = _reached[phase] = _reached.get(phase, 0) + 1
    if log:
        with open(log, "a") as f:
            f.write(f"{phase}\n")
    if pause and f"{phase}:{n}" in pause.split(","):
        seen = signals()
        sys.stderr.write(f"paused at {phase}:{n}\n")
        sys.stderr.flush()
        while signals() == seen:
            time.sleep(0.02)
