"""How a command ends: its exit status and the one line it prints, whatever went wrong.

Contract: `handle_errors` wraps every command. The command runs inside
`stopping.StopOnSignals` (Ctrl-C stops it within a second; `handle_errors(stop_queries=False)`
for `runstore ui`, whose server handles its own signals: `stopping.TermByTheSignal`), its
output is flushed before it counts as done, and then:

* a `RunstoreError` prints `Error: …` (its message says what to do next) and exits with the
  status its class carries (`errors.EXIT_CODES`: 2 usage, 3 store, 4 busy, 5 limit, 6 I/O);
* Ctrl-C prints `interrupted` (an ingest's says what it kept) and exits 130; so does any error
  that follows a Ctrl-C (a library's own rewording of the interrupt);
* the reader of the output going away (`runstore runs | head -n 1`) prints nothing and ends
  the process as SIGPIPE ends other Unix tools (`broken_pipe`; `echo` prints a line from
  inside a loop that retries an OSError, raising `ReaderGone` past it);
* an `OSError` (a full disk, a permission, the network) prints what failed and on which file,
  exit 6: the machine's fault, not runstore's; but a name longer than the system allows
  (ENAMETOOLONG: a `--store`, a tree, a file given) is the caller's to shorten, exit 2;
* anything else is a runstore bug: one `Error: unexpected …` line, exit 70.

click's own exceptions (usage errors, exit 2; `ctx.exit`) pass through. `--debug` (on the
group or after the command) shows the traceback instead of the line. `cli.group` applies the
same scheme to what happens outside a command (parsing, `--help`).
"""

from __future__ import annotations

import errno
import functools
import os
import select
import signal
import sys
from typing import Any, Callable

import click

from ..errors import BUG, INTERRUPTED, IO, USAGE, RunstoreError, one_line
from .stopping import StopOnSignals, TermByTheSignal


def handle_errors(fn: Callable[..., Any] | None = None, *,
                  stop_queries: bool = True) -> Any:
    """Run a command under the exit-status scheme (see the module docstring)."""
    if fn is None:
        return functools.partial(handle_errors, stop_queries=stop_queries)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        with StopOnSignals() if stop_queries else TermByTheSignal() as stopping:
            try:
                out = fn(*args, **kwargs)
                flush_output()  # a reader that went away shows here, not at interpreter exit
                if stopping:
                    stopping.finish()
                return out
            except (click.exceptions.ClickException, click.exceptions.Exit,
                    click.exceptions.Abort):
                raise  # click's own: usage errors and exits say what they have to
            except BaseException as e:  # noqa: B902 - every ending is mapped, SystemExit too
                if isinstance(e, SystemExit):
                    raise
                interrupted = bool(stopping and stopping.requested)
                code, message = outcome(e, interrupted=interrupted)
                if code != INTERRUPTED and ctx.obj and ctx.obj.get("debug"):
                    raise
                if stopping:  # its ending is decided: a signal from here on says nothing more
                    stopping.finish()
                say(message)
                ctx.exit(code)

    return wrapper


class ReaderGone(BaseException):
    """The output's reader has gone, raised past code that retries an `OSError` (the watch
    loop retries a failed pass): `handle_errors` ends the process as SIGPIPE would."""


def echo(text: str) -> None:
    """One line on stdout from inside a library's loop (see `ReaderGone`)."""
    try:
        click.echo(text)
    except OSError as e:
        if is_broken_pipe(e):
            raise ReaderGone() from e
        raise


def outcome(e: BaseException, *, interrupted: bool = False) -> tuple[int, str | None]:
    """The exit status of a command that ended with `e`, and the line to print (the process
    ends here, printing nothing, when the output's reader has gone)."""
    if isinstance(e, ReaderGone) or is_broken_pipe(e):
        broken_pipe()
    if isinstance(e, KeyboardInterrupt) or (interrupted and not isinstance(e, RunstoreError)):
        # An ingest's says what it kept (it carries the report); others were just stopped.
        return INTERRUPTED, str(e) if hasattr(e, "report") else "interrupted"
    if isinstance(e, RunstoreError):
        return e.exit_code, f"Error: {e}"
    if isinstance(e, OSError) and e.errno == errno.ENAMETOOLONG:
        path = f"the path {e.filename}" if e.filename else "a path given"
        return USAGE, (f"Error: {path} is longer than this system allows (a name too "
                       "long, or too many of them); give a shorter one")
    if isinstance(e, OSError):
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        return IO, (f"Error: {e.strerror or one_line(e)}{where}: a fault of this machine (the "
                    "disk, a permission, the network), not of the command; fix it and run the "
                    "command again (--debug shows the traceback)")
    return BUG, (f"Error: unexpected {type(e).__name__}: {one_line(e)} (a runstore bug; run "
                 "again with --debug for the traceback and report it)")


def say(message: str | None) -> None:
    """Print an ending's line on stderr (nothing when stderr's reader is gone too)."""
    if message is None:
        return
    try:
        click.echo(message, err=True)
    except OSError as e:
        if not is_broken_pipe(e):
            raise
        broken_pipe()


def flush_output() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def is_broken_pipe(e: BaseException) -> bool:
    """Whether `e` is a write to a pipe whose reader has gone (EPIPE), on our output."""
    return isinstance(e, OSError) and e.errno == errno.EPIPE and _reader_gone()


def _reader_gone() -> bool:
    """Whether stdout's or stderr's reader has gone: a pipe whose read end is closed polls
    POLLERR, which tells it from a socket of ours that broke (a webhook's, say)."""
    for stream in (sys.stdout, sys.stderr):
        fd = _fileno(stream)
        if fd is None:
            continue
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        for _, events in poller.poll(0):
            if events & (select.POLLERR | select.POLLHUP):
                return True
    return False


def _fileno(stream: Any) -> int | None:
    try:
        return stream.fileno() if stream is not None else None
    except (OSError, ValueError, AttributeError):  # click's test runner: no file descriptor
        return None


def broken_pipe() -> None:
    """End as Unix tools end when their reader goes away (`yes | head -n 1`): no message,
    killed by SIGPIPE (the shell shows status 141). Python ignores SIGPIPE, so writes raised
    EPIPE instead; what is still buffered is dropped (stdout now writes to /dev/null, so
    nothing more can fail), and the default action is restored and taken."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        fd = _fileno(stream)
        if fd is not None:
            os.dup2(devnull, fd)
    os.close(devnull)
    if _fileno(sys.stdout) is None:  # in-process (click's test runner): no process to end
        sys.exit(128 + signal.SIGPIPE)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    sys.exit(128 + signal.SIGPIPE)  # pragma: no cover - not reached: the signal ends us
