"""Test-only hooks: the named points of the writing commands where a test stops the process.

Nothing here changes what runstore does: every function is a no-op unless one of two
environment variables is set, which only tests set.

Contract: `pause_point(phase)` marks that a writing command reached `phase` (discover, parse,
locked, migrate, recover, write, compact, ledger, publish, prune, vacuum, repair,
interrupted). `$RUNSTORE_TEST_POINTS=FILE` appends the name of every phase reached to FILE;
`$RUNSTORE_TEST_PAUSE=PHASE:N[,PHASE:N...]` makes the process print `paused at PHASE:N` on
stderr and wait the N-th time it reaches PHASE, so tests/test_crash.py can SIGKILL it exactly
there. A signal that the ingest handles (`ingest.interrupts`, which calls `note_signal`) ends
the wait, so tests/test_interrupt.py can interrupt it exactly there too; `signals()` counts
those signals.
"""

from __future__ import annotations

import os
import sys
import time

_reached: dict[str, int] = {}
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
