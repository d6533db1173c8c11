"""The error types runstore raises on purpose, and how a foreign error is quoted in one.

Every message says what went wrong and what to do next; the CLI prints it as `Error: …` and
exits 1 (2 for usage errors), with the traceback only under `--debug`. `one_line(e)` is how
an engine's error (DuckDB, deltalake, pyarrow) is quoted inside such a message.
"""

from __future__ import annotations

import re


class RunstoreError(Exception):
    """Base of every error runstore raises deliberately."""

    exit_code = 1


class StoreNotFound(RunstoreError):
    """No store at the given location."""


class StoreLocked(RunstoreError):
    """Another process holds the store's write lock."""


class StoreVersionError(RunstoreError):
    """The store was written by a newer runstore, or needs a migration."""


class StoreCorrupt(RunstoreError):
    """A file of the store is missing or unreadable."""


class SourceNotFound(RunstoreError):
    """A path given to ingest does not exist."""


class NoRuns(SourceNotFound):
    """The paths given to ingest exist but hold no run."""


class QueryError(RunstoreError):
    """A query was refused or failed."""


class UsageError(RunstoreError):
    """Bad arguments."""

    exit_code = 2


class UnknownKey(UsageError):
    """A metric key (or a health rule's metric) that no run in the store has logged."""


_RUST_BACKTRACE = re.compile(r"\n\s*(?:Stack backtrace:\s*)?0: ")


def one_line(e: BaseException, limit: int = 300) -> str:
    """An error's text on one line, without the Rust backtrace deltalake appends when
    $RUST_BACKTRACE is set, cut to `limit` characters."""
    text = _RUST_BACKTRACE.split(str(e), maxsplit=1)[0]
    text = " ".join(text.split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
