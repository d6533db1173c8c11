"""The `runstore` command's process around its own code: Ctrl-C while Python imports it, the end.

Contract: `quiet_interrupts()` is called first thing by `runstore/__init__.py`. In the process
the `runstore` command runs in (`is_the_command`: the console script `runstore`, or `python -m
runstore`) and while SIGINT has Python's default handler, it makes a SIGINT that arrives
before the command's own handling (`cli/stopping.py`) print `interrupted` and exit 130, as a
later one does, instead of a traceback of whatever module was being imported (a second or
two on a loaded machine); a SIGTERM under the OS default (which ends the process by the
signal) does the same until the command's own handling takes it (`takes_term`), also while
click reads the arguments. Anywhere else — `import runstore` in a notebook, a script, a test —
it changes nothing. `after_the_command(previous)` is the handler a command's own handling
leaves behind when it ends, for SIGINT and SIGTERM alike: in the command's process, one under
which a signal between the command's end and the process's exit changes nothing (the
command's ending is decided: it exits with it) and a second ends the process at once,
`interrupted`, 130, up to the interpreter's finalization, during which both are ignored.
Python's default handler would raise `KeyboardInterrupt` wherever the interpreter then was,
and its finalization puts the OS default back: either ends the process by the signal.

In the command's process, DuckDB's Python module is also imported whole (`HELD_IMPORTS`): a
SIGINT that arrives while its native part initializes is held until the import has finished,
then delivered to the handler in force. A `KeyboardInterrupt` raised inside that
initialization (nanobind creating DuckDB's enums) aborts the process with "Critical nanobind
error" and a traceback, or is lost.

`open_database_early()`, called by `runstore/__init__.py` next, starts a reading command's
database before its modules are imported: in the command's process, when the command
(`command_of(argv)`, the first word that is no global option) is one of `READING_COMMANDS`
and no `--help` is asked, it imports DuckDB and makes one in-memory database on a daemon
thread, which DuckDB does without holding the GIL, so it is made while Python imports the
command's own modules. The first database the process opens
(`runstore.query.connect.Database`) takes it, `early_database()`, and sets it up as it would a
new one; when none was started, or making it failed, that is None and the database is made
then, as it always is elsewhere.

`finished(code)` ends the command's process once its command has ended with `code`: the output
flushed and the atexit callbacks run (a store's worker processes ended, a temporary file
removed, coverage saved), then `os._exit`, without the interpreter's teardown of every module
and object, which the person at the prompt would wait for and gain nothing from (mypy ends so
too). It returns, changing nothing, anywhere else, and while a thread that is not a daemon
still runs (Python would wait for it), unless the command was interrupted (130): then
nothing is waited for (a thread still in a query or a tool call would hold the process up,
and a write is as safe as after `kill -9`, docs/reliability.md). `is_the_command()` says
whether this process is the command's: what the process holds only for its command (a
reading command's database) it may leave for its end to free.
"""

from __future__ import annotations

import atexit
import importlib.abc
import os
import signal
import sys
import threading
from typing import Any, Callable


# Extension modules whose initialization a KeyboardInterrupt aborts (nanobind's enum_create
# turns an exception into a fatal error). pyarrow and polars propagate it as usual.
HELD_IMPORTS = frozenset({"duckdb"})


def quiet_interrupts() -> None:
    """Ctrl-C while the `runstore` command starts: `interrupted`, exit 130 (see the module)."""
    if not is_the_command() or threading.current_thread() is not threading.main_thread():
        return
    if not any(isinstance(f, _HeldImports) for f in sys.meta_path):
        sys.meta_path.insert(0, _HeldImports())
    took = False
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # SIGTERM ends a command as SIGINT
        signal.signal(signal.SIGTERM, _interrupted)
        took = True
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _interrupted)
        took = True
    if took:
        atexit.register(_ignore_at_exit)


class _HeldImports(importlib.abc.MetaPathFinder):
    """Finds the modules of `HELD_IMPORTS` through the other finders and loads them whole."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in HELD_IMPORTS:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _HeldLoader(spec.loader)
                return spec
        return None


class _HeldLoader(importlib.abc.Loader):
    """The module's own loader, its `exec_module` run with SIGINT held (see the module)."""

    def __init__(self, loader: Any):
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        if threading.current_thread() is not threading.main_thread() \
                or signal.getsignal(signal.SIGINT) is None:
            # Only the main thread is interrupted; a handler not set from Python (None)
            # could not be put back.
            self._loader.exec_module(module)
            return
        held: list[int] = []
        previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
        try:
            self._loader.exec_module(module)
        finally:
            signal.signal(signal.SIGINT, previous)
            if held:
                signal.raise_signal(signal.SIGINT)  # now, to the handler in force

    def __getattr__(self, name: str) -> Any:  # resource readers and the rest: the loader's
        return getattr(self._loader, name)


def is_the_command() -> bool:
    """Whether this process is the `runstore` command's (see the module docstring): the
    console script (the kernel runs its interpreter, `sys.orig_argv[0]`, on the script,
    `sys.argv[0]`; a frozen or linked `runstore` is `sys.orig_argv[0]` itself) or `python -m
    runstore`."""
    argv = list(getattr(sys, "orig_argv", sys.argv))
    if any(os.path.basename(first) == "runstore" for first in (*argv[:1], *sys.argv[:1])):
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
    if (previous is signal.default_int_handler or previous is _interrupted) \
            and is_the_command():
        _NOTED[:] = [noted]
        return _finishing
    return previous


def takes_term(handler: Any) -> bool:
    """Whether a command's own handling may take SIGTERM from `handler`, the one in force:
    the OS default, or the start-up's (`interrupted`, 130) that stands in for it until then."""
    return handler is signal.SIG_DFL or handler is _interrupted


def _ignore_at_exit() -> None:
    # The interpreter's finalization, after the atexit callbacks, puts the OS default back
    # for a Python-level handler, under which a SIGINT kills the process (status -2) while
    # modules and big objects are torn down; an ignored signal stays ignored through it.
    # Registered first thing, this runs after the callbacks registered later (LIFO).
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) is _finishing:
            signal.signal(signum, signal.SIG_IGN)


_FINISHING_SEEN: list[int] = []
_NOTED: list[Callable[[], None]] = []


def _finishing(signum: int, frame: object) -> None:
    for noted in _NOTED:
        noted()
    if _FINISHING_SEEN:  # a second one: the process did not end, end it now
        _interrupted(signum, frame)
    _FINISHING_SEEN.append(signum)


def started() -> None:
    """The command's own handling is in place: Python's default SIGINT handler again (its
    `KeyboardInterrupt` ends the command `interrupted`, 130, wherever it lands). SIGTERM keeps
    the start-up's handler until the command's own handling takes it (`takes_term`,
    `cli/stopping.py`), which leaves the ending handler (`after_the_command`) behind."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is _interrupted:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def finished(code: object) -> None:
    """End the command's process with the exit status `code` (a `SystemExit`'s) at once, or
    return where the interpreter must end it itself (see the module docstring)."""
    if not is_the_command() or threading.current_thread() is not threading.main_thread():
        return
    from .errors import INTERRUPTED  # here: at the top, it would load before the handlers

    if code != INTERRUPTED and any(not t.daemon for t in threading.enumerate()
                                   if t is not threading.main_thread()):
        return
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # SystemExit("text") prints the text and exits 1, as the interpreter would
        print(code, file=sys.stderr)
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            return  # a reader gone or a stream closed: the interpreter's own ending applies
    atexit._run_exitfuncs()
    os._exit(status)


# The commands whose process queries the store (`open_store` to read, cli/common.py): for
# them the database is made early (see the module). tests/cli/test_cli_startup.py holds the
# set to the CLI's commands.
READING_COMMANDS = frozenset({"check", "compare", "diff", "doctor", "keys", "plot", "report",
                              "runs", "sql", "trace"})
_EARLY: dict[str, Any] = {}


def command_of(args: list[str]) -> str | None:
    """The command `runstore ARGS` runs: its first word that is neither an option nor the
    value of `--store`/`-s` (None: none, as for `runstore --help`)."""
    words = iter(args)
    for word in words:
        if word in ("--store", "-s"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def open_database_early() -> None:
    """For a reading command's process, DuckDB imported and its database started (see the
    module); anywhere else, nothing."""
    if not is_the_command() or threading.current_thread() is not threading.main_thread():
        return
    args = sys.argv[1:]
    if command_of(args) in READING_COMMANDS and "--help" not in args:
        start_database()


def start_database() -> None:
    """Import DuckDB here and make an in-memory database on a daemon thread, for
    `early_database` to hand over."""
    import duckdb

    def make() -> None:
        try:
            _EARLY["database"] = duckdb.connect(":memory:")
        except BaseException:  # noqa: BLE001 - the database is made again where it is needed
            pass

    thread = threading.Thread(target=make, name="runstore-early-database", daemon=True)
    _EARLY["thread"] = thread
    thread.start()


def early_database() -> Any:
    """The database `start_database` made, once (waiting for it if need be); None when none
    was started, it was taken, or making it failed."""
    thread = _EARLY.pop("thread", None)
    if thread is None:
        return None
    thread.join()
    return _EARLY.pop("database", None)
