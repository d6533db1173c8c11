"""The error types runstore raises on purpose, the exit status of each, and how a foreign
error is quoted in one.

Every message says what went wrong and what to do next; the CLI prints it as `Error: …` with
the traceback only under `--debug`. The exit statuses are one scheme, defined here and
nowhere else: `EXIT_CODES` lists every status a `runstore` command ends with (docs/cli.md
and `runstore --help` show it), and each error class carries its own as `exit_code`
(`exit_code(e)` for any exception: a `RunstoreError`'s own, `INTERRUPTED` for Ctrl-C, else
`BUG`). `one_line(e)` is how an engine's error (DuckDB, deltalake, pyarrow) is quoted inside
such a message.
"""

from __future__ import annotations

import re

OK = 0
FINDING = 1  # the command ran and found something: a rule fired, a damaged file
USAGE = 2
STORE = 3
BUSY = 4
LIMIT = 5
IO = 6
BUG = 70  # sysexits.h's EX_SOFTWARE
INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command Ctrl-C stopped

# Every exit status of a `runstore` command and what it means (help and docs render this).
EXIT_CODES: dict[int, str] = {
    OK: "done",
    FINDING: "done, and it found something: `check` fired a rule, `repair --check` found "
             "damage",
    USAGE: "a usage mistake: an unknown option, metric, run, column or config key, a bad "
           "value, SQL that is refused or wrong, an output file that cannot be written as "
           "asked, a path longer than the system allows",
    STORE: "the store cannot be used as it is: none at that location, damaged (`runstore "
           "repair`), or written by a newer runstore",
    BUSY: "another process holds the store's write lock (try again later, or raise "
          "--lock-timeout)",
    LIMIT: "a query stopped at its limit (`--timeout`, `--memory-limit`)",
    IO: "reading or writing failed on this machine: a full disk, a permission, the network",
    BUG: "an unexpected error: a runstore bug (run again with --debug and report it)",
    INTERRUPTED: "interrupted by Ctrl-C (SIGINT) or SIGTERM",
    128 + 13: "(the shell's status for a command ended by SIGPIPE) the reader of the output "
              "went away, as with `runstore runs | head -n 1`: nothing is printed",
}


class RunstoreError(Exception):
    """Base of every error runstore raises deliberately (exit status `STORE` unless a
    subclass says otherwise)."""

    exit_code = STORE


class StoreNotFound(RunstoreError):
    """No store at the given location."""


class StoreLocked(RunstoreError):
    """Another process holds the store's write lock."""

    exit_code = BUSY


class StoreVersionError(RunstoreError):
    """The store was written by a newer runstore, or needs a migration."""


class StoreCorrupt(RunstoreError):
    """A file of the store is missing or unreadable."""


class IOFailure(RunstoreError):
    """Reading or writing failed on this machine: a full disk, a permission, the network."""

    exit_code = IO


class UsageError(RunstoreError):
    """Bad arguments."""

    exit_code = USAGE


class SourceNotFound(UsageError):
    """A path given to ingest does not exist."""


class NoRuns(SourceNotFound):
    """The paths given to ingest exist but hold no run."""


class QueryError(UsageError):
    """A query was refused or failed: a question that cannot be answered as asked (a run or
    table that does not exist, SQL that is refused or wrong)."""


class LimitReached(QueryError):
    """A query stopped at its time limit or its memory limit."""

    exit_code = LIMIT


class UnknownKey(UsageError):
    """A metric key (or a health rule's metric) that no run in the store has logged."""


def exit_code(e: BaseException) -> int:
    """The exit status of a command that ended with `e`."""
    if isinstance(e, RunstoreError):
        return e.exit_code
    if isinstance(e, KeyboardInterrupt):
        return INTERRUPTED
    return BUG


_RUST_BACKTRACE = re.compile(r"\n\s*(?:Stack backtrace:\s*)?0: ")


def one_line(e: BaseException, limit: int = 300) -> str:
    """An error's text on one line, without the Rust backtrace deltalake appends when
    $RUST_BACKTRACE is set, cut to `limit` characters."""
    text = _RUST_BACKTRACE.split(str(e), maxsplit=1)[0]
    text = " ".join(text.split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
