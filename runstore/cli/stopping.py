"""Ctrl-C during a command: stop within a second, whatever is running, and say `interrupted`.

Contract: `StopOnSignals()` is a context manager a command runs inside (`handle_errors` opens
it). On the main thread it handles SIGINT for its duration, and SIGTERM the same way when the
process has its default action for it or the start-up's stand-in (`startup.takes_term`; so a
`kill` or a supervisor's stop also ends a command with `interrupted`, 130, as the exit table
says, not silently by the signal), and restores the previous handlers (and wakeup fd) when it
ends — in the `runstore` command's own process, the handler of a command that has ended
(`startup.after_the_command`: a SIGINT or SIGTERM between the command's end and the process's
exit leaves its exit status as it was, rather than killing the process by the signal);
elsewhere it does nothing. A SIGINT the process ignores (a job a script started with `&`,
`nohup`) stays ignored; SIGTERM is still handled then. `finish()` says the command's ending
is decided (its work done and its output flushed, or the line it ends with about to be
said): a signal from then on is not an interruption and says nothing more.
`TermByTheSignal()` is the context of a command whose server handles its own signals
(`runstore ui`): SIGTERM under the OS default for its duration, so the server, which raises
the signal it caught again to the handler it found, ends by the signal as a service does.

A query is DuckDB's C++ code: Python's handler only runs when DuckDB lets it, which for a big
join can be never. So the signal is also seen by a watcher thread, through the wakeup fd
Python's C-level handler writes each signal's number to (`signal.set_wakeup_fd`): the watcher
interrupts every running query at once (`store.running.cancel_running`, the interrupt a
query's time limit uses), which DuckDB obeys between two vectors, and the query then raises
`KeyboardInterrupt`. The Python handler records the stop (`running.request_stop`) and raises
`KeyboardInterrupt` itself when no query runs on the main thread (plain Python work: rendering,
polars, plotly), so the command stops wherever it is; while a query runs it leaves the raising
to the query, because an exception raised inside DuckDB's own signal check comes out as
DuckDB's `RuntimeError`, not as the interrupt. `requested` says a signal came: an error that
follows it (a library's own rewording of the interrupt) is an interruption, not a failure.

A second SIGINT while a query still runs (it did not stop: DuckDB checks between vectors, and
one vector of a heavy function can take long) ends the process at once with status 130:
a read holds nothing to lose, and a write is as safe as after `kill -9` (docs/reliability.md).
`ingest` installs its own handler over this one for the ingest itself (ingest/interrupts.py:
the first signal stops at the next whole file).

Python runs a signal handler between any two bytecodes, also inside a weakref callback or a
`__del__` (an import's module-lock callback, say), where an exception cannot propagate: Python
prints it as "Exception ignored in ..." and goes on. For the command's duration
`sys.unraisablehook` takes such a lost interrupt silently and delivers the signal again
(`_thread.interrupt_main`, from another thread), so that the handler raises where the interrupt can stop the command;
the watcher does not count that second delivery as a second Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

from ..crashpoints import note_signal, pause_point
from ..startup import after_the_command, takes_term
from ..store import running


class TermByTheSignal:
    """SIGTERM under the OS default for the block (see the module)."""

    def __init__(self) -> None:
        self._saved: Any = None

    def __enter__(self) -> None:
        if threading.current_thread() is threading.main_thread() \
                and takes_term(signal.getsignal(signal.SIGTERM)):
            self._saved = signal.signal(signal.SIGTERM, signal.SIG_DFL)

    def __exit__(self, *exc: Any) -> None:
        if self._saved is not None:
            signal.signal(signal.SIGTERM, after_the_command(self._saved))
            self._saved = None


class StopOnSignals:
    """SIGINT (and SIGTERM) stops the command within a second (see the module docstring)."""

    def __init__(self) -> None:
        self.requested = False
        self.finished = False
        self._saved: Any = None
        self._saved_term: Any = None  # SIGTERM's handler before, when this one took it
        self._took_int = False  # whether this one took SIGINT (not when it was ignored)
        self._saved_fd: int | None = None
        self._pipe: tuple[int, int] | None = None
        self._watcher: threading.Thread | None = None
        self._saved_hook: Any = None
        self._redelivered = 0  # deliveries of a lost interrupt the watcher has yet to see

    def _unraisable(self, unraisable: Any) -> None:
        """An interrupt raised where Python could not propagate it: deliver it again."""
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and self.requested \
                and not self.finished:
            import _thread

            def again() -> None:
                # A moment later, from another thread: delivered at once, the handler would
                # run (and raise) inside this hook, where the interrupt is lost again. Should
                # it land in another callback, this hook delivers it once more.
                time.sleep(0.005)
                _thread.interrupt_main(signal.SIGINT)

            self._redelivered += 1
            threading.Thread(target=again, name="runstore-interrupt-again", daemon=True).start()
            return
        (self._saved_hook or sys.__unraisablehook__)(unraisable)

    def _handler(self, signum: int, frame: Any) -> None:
        note_signal()  # ends a test's pause (crashpoints.pause_point)
        if self.finished:
            return  # nothing left to stop: the command ends as it has finished
        self.requested = True
        running.request_stop()
        if running.running_on(threading.main_thread()):
            return  # the watcher interrupts the query, which then raises KeyboardInterrupt
        raise KeyboardInterrupt("interrupted")

    def _watch(self, fd: int) -> None:
        seen = 0
        while True:
            try:
                data = os.read(fd, 64)
            except OSError:
                return
            if not data:  # the write end was closed: the command has ended
                return
            for signum in data:
                if signum not in (signal.SIGINT, signal.SIGTERM):
                    continue
                if self._redelivered:  # a lost interrupt delivered again, not a new Ctrl-C
                    self._redelivered -= 1
                    continue
                seen += 1
                if self.finished:  # the command's ending is decided (and may be said)
                    continue
                if running.cancel_running() and seen > 1:
                    os.write(2, b"\ninterrupted (stopped at once by a second Ctrl-C)\n")
                    os._exit(130)

    def finish(self) -> None:
        """The command's ending is decided: its work done and its output flushed, or the
        error or interruption it ends with about to be said."""
        self.finished = True

    def __enter__(self) -> "StopOnSignals":
        if threading.current_thread() is not threading.main_thread():
            return self
        take_int = signal.getsignal(signal.SIGINT) is not signal.SIG_IGN
        take_term = takes_term(signal.getsignal(signal.SIGTERM))
        if not (take_int or take_term):
            return self
        read, write = os.pipe()
        os.set_blocking(write, False)
        try:
            self._saved_fd = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except ValueError:  # pragma: no cover - only the main thread may set it
            os.close(read)
            os.close(write)
            return self
        self._pipe = (read, write)
        if take_int:  # a process started with SIGINT ignored (`cmd &` in a script) keeps that
            self._saved = signal.signal(signal.SIGINT, self._handler)
            self._took_int = True
        if take_term:
            self._saved_term = signal.signal(signal.SIGTERM, self._handler)
        self._saved_hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        self._watcher = threading.Thread(target=self._watch, args=(read,),
                                         name="runstore-stop-on-signals", daemon=True)
        self._watcher.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pipe is None:
            return
        if self._took_int:
            saved = signal.default_int_handler if self._saved is None else self._saved
            signal.signal(signal.SIGINT, after_the_command(saved, note_signal))
            self._took_int = False
        if self._saved_term is not None:
            signal.signal(signal.SIGTERM, after_the_command(self._saved_term, note_signal))
            self._saved_term = None
        signal.set_wakeup_fd(self._saved_fd if self._saved_fd is not None else -1)
        sys.unraisablehook = self._saved_hook or sys.__unraisablehook__
        read, write = self._pipe
        os.close(write)  # the watcher reads the end of the pipe and returns
        if self._watcher is not None:
            self._watcher.join()
        os.close(read)
        self._pipe = None
        running.clear_stop()
        pause_point("ended")  # tests/cli/test_cli_signals.py signals the process here
