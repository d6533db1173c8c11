"""The error types runstore raises on purpose.

Every message says what went wrong and what to do next; the CLI prints it as `Error: …` and
exits 1 (2 for usage errors), with the traceback only under `--debug`.
"""

from __future__ import annotations


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
