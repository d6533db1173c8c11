"""The `runstore` command before its own code runs: Ctrl-C while Python imports it.

Contract: `quiet_interrupts()` is called first thing by `runstore/__init__.py`. In the process
the `runstore` command runs in (`sys.orig_argv`: the console script `runstore`, or `python -m
runstore`) and while SIGINT has Python's default handler, it makes a SIGINT that arrives
before the command's own handling (`cli/stopping.py`) print `interrupted` and exit 130, as a
later one does, instead of a traceback of whatever module was being imported (a second or
two on a loaded machine). Anywhere else — `import runstore` in a notebook, a script, a test —
it changes nothing. `after_the_command(previous)` is the handler a command's own handling
leaves behind when it ends: in the command's process, one under which a SIGINT between the
command's end and the process's exit changes nothing (the command's ending is decided: it
exits with it) and a second ends the process at once, `interrupted`, 130, up to the
interpreter's finalization, during which SIGINT is ignored. Python's default handler would
raise `KeyboardInterrupt` wherever the interpreter then was, and its finalization puts the
OS default back: either ends the process by the signal.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from typing import Any, Callable


def quiet_interrupts() -> None:
    """Ctrl-C while the `runstore` command starts: `interrupted`, exit 130 (see the module)."""
    if not _is_the_command() or threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    signal.signal(signal.SIGINT, _interrupted)
    atexit.register(_ignore_at_exit)


def _is_the_command() -> bool:
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if argv and os.path.basename(argv[0]) == "runstore":
        return True
    return any(a == "-m" and b == "runstore" for a, b in zip(argv, argv[1:])) \
        or any(a == "-mrunstore" for a in argv)


def _interrupted(signum: int, frame: object) -> None:
    os.write(2, b"interrupted\n")
    os._exit(130)


def after_the_command(previous: Any, noted: Callable[[], None] = lambda: None) -> Any:
    """The SIGINT handler for the rest of the process once a command's own handling ends
    (`cli/stopping.py`): `previous`, except in the `runstore` command's process while that
    is Python's default handler (see the module docstring); it calls `noted()` on each
    signal (a test's pause ends there: `crashpoints.note_signal`)."""
    if previous is signal.default_int_handler and _is_the_command():
        _NOTED[:] = [noted]
        return _finishing
    return previous


def _ignore_at_exit() -> None:
    # The interpreter's finalization, after the atexit callbacks, puts the OS default back
    # for a Python-level handler, under which a SIGINT kills the process (status -2) while
    # modules and big objects are torn down; an ignored signal stays ignored through it.
    # Registered first thing, this runs after the callbacks registered later (LIFO).
    if signal.getsignal(signal.SIGINT) is _finishing:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


_FINISHING_SEEN: list[int] = []
_NOTED: list[Callable[[], None]] = []


def _finishing(signum: int, frame: object) -> None:
    for noted in _NOTED:
        noted()
    if _FINISHING_SEEN:  # a second one: the process did not end, end it now
        _interrupted(signum, frame)
    _FINISHING_SEEN.append(signum)


def started() -> None:
    """The command's own handling is in place: Python's default SIGINT handler again."""
    if threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGINT) is _interrupted:
        signal.signal(signal.SIGINT, signal.default_int_handler)
