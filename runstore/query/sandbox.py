"""DuckDB's own sandbox around every query connection: what a query may read, and nothing else.

Contract: `confine(con, files, directories, memory_limit=)` turns an in-memory DuckDB
connection into one that can open exactly `files` (the store's live Parquet files, plus any
the caller allows) and whatever lies under `directories` (only what a caller passes with
`allow_read`), and nothing else: `enable_external_access = false` with `allowed_paths` /
`allowed_directories`, then `lock_configuration = true`, so no statement and no function can
change a setting afterwards (turn logging or profiling on, widen the allowed paths, spill to a
temporary directory, raise the memory limit). Everything runstore needs is set before the
lock: no progress bar, the Parquet footer cache, no temporary directory, no extension
auto-loading or installing, and DuckDB's `memory_limit` when given (DuckDB's text, e.g.
`3000000000B`: `memory.duckdb_setting`). `cursor(con)` opens a cursor for one query (a fresh
client context: per-connection state such as `setseed` dies with it) with Python replacement
scans off, so a query cannot read a DataFrame that happens to be in the caller's frame.
`refusal(error)` turns DuckDB's permission errors into a `QueryError` that says what was
refused, why, and how to allow a file on purpose; None for any other error.

Stores on S3 are read through a registered fsspec filesystem (`storage.location.S3`); DuckDB
applies `allowed_paths` to `s3://` URIs the same way, so the confinement is the same: the
snapshot's objects, nothing else in the bucket, no other bucket, no other scheme.

The sandbox is the guarantee; `guard.guard` only adds clear messages (and refuses the
few table functions that would change shared state the sandbox does not cover).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..errors import QueryError
from ..storage.location import is_remote

# Why a file outside the store cannot be read, and what to do when that is what one wants.
ALLOW_HINT = ("runstore sql reads only the store's files (DuckDB sandbox); pass --allow-read "
              "PATH (Python: allow_read=[PATH]) to read an outside file")

# Set before `lock_configuration`, in this order: DuckDB refuses to change the allowed paths
# once external access is off, and every setting once the configuration is locked. `global`
# where a setting can also be a connection's own: cursors must see the database's value.
_BEFORE: tuple[tuple[str, str, Any], ...] = (
    # DuckDB draws a progress bar on stderr for long queries, garbling CLI output.
    ("", "enable_progress_bar", False),
    # Keep each Parquet footer once parsed: Store reuses one database per snapshot for many
    # queries, which otherwise re-parse the footer of every file they scan. Safe because a
    # store file is never modified once written.
    ("global", "parquet_metadata_cache", True),
    # No spilling: the default `.tmp` in the working directory would be a directory the
    # sandbox lets every query write to, and DuckDB would fill up to 90% of its disk. A query
    # whose hash tables or sorts outgrow `memory_limit` fails instead (query/memory.py).
    ("global", "temp_directory", ""),
    ("global", "autoinstall_known_extensions", False),
    ("global", "autoload_known_extensions", False),
    # Cursors start with replacement scans on; `cursor()` turns them off, after the lock.
    ("global", "allowed_configs", ["python_enable_replacements"]),
)


def confine(con: Any, files: Sequence[str], directories: Sequence[str] = (), *,
            memory_limit: str | None = None) -> None:
    """Lock `con` down to reading `files` and what is under `directories`, with DuckDB's
    `memory_limit` set to `memory_limit` when given."""
    for scope, name, value in _BEFORE:
        con.execute(f"set {scope} {name} = $v", {"v": value})
    if memory_limit is not None:
        con.execute("set global memory_limit = $v", {"v": memory_limit})
    con.execute("set global allowed_paths = $v", {"v": list(files)})
    con.execute("set global allowed_directories = $v", {"v": list(directories)})
    con.execute("set python_enable_replacements = false")
    con.execute("set global enable_external_access = false")
    con.execute("set global lock_configuration = true")


def cursor(con: Any) -> Any:
    """A cursor on `con` for one query, with Python replacement scans off."""
    cur = con.cursor()
    cur.execute("set python_enable_replacements = false")
    return cur


def allowances(paths: Iterable[str | os.PathLike[str]] | None) -> tuple[list[str], list[str]]:
    """`allow_read` paths as (files, directories) for `confine`: local paths made absolute
    (DuckDB resolves a query's relative paths against the working directory too), a
    directory with a trailing `/` so that it allows what is under it and no sibling that
    shares its prefix; `s3://` URIs as given (one ending in `/` is a prefix)."""
    files: list[str] = []
    directories: list[str] = []
    for p in paths or ():
        text = os.fspath(p)
        if not text:
            raise QueryError("allow_read takes file or directory paths; got an empty one")
        if is_remote(text):
            (directories if text.endswith("/") else files).append(text)
            continue
        where = Path(text).expanduser().absolute()
        if where.is_dir():
            directories.append(str(where).rstrip("/") + "/")
        else:
            files.append(str(where))
    return files, directories


_PERMISSION = re.compile(r'Cannot access (?:file|directory) "(.*)" - file system operations are '
                         r"disabled by configuration")
_LOCKED = re.compile(r'Cannot change configuration option "(\w+)" - the configuration has been '
                     r"locked")
_MODIFY = re.compile(r"Modifying (?:the )?(\w+) has been disabled by configuration")
# DuckDB's own directory (`~/.duckdb`: installed extensions, persistent secrets).
_DUCKDB_OWN = re.compile(r"(^|/)\.duckdb(/|$)")
# `FROM 'file.csv'`: with external access off DuckDB does not try a file it may not read, and
# says there is no such table.
_NO_TABLE = re.compile(r"Table with name (.+?) does not exist!")


def refusal(e: BaseException) -> QueryError | None:
    """DuckDB's sandbox refusing something, as the error to show; None for other errors."""
    text = str(e)
    m = _PERMISSION.search(text)
    if m and _DUCKDB_OWN.search(m.group(1)):
        return QueryError(
            f"reading {m.group(1)} refused: it is DuckDB's own directory (installed "
            "extensions, stored secrets), outside the store, and the sandbox keeps queries "
            "from reading it; duckdb_extensions(), duckdb_secrets() and which_secret() read it, "
            "so they do not answer in runstore")
    if m:
        return QueryError(f"reading {m.group(1)} refused: {ALLOW_HINT}")
    m = _LOCKED.search(text) or _MODIFY.search(text)
    if m:
        return QueryError(
            f"changing DuckDB's {m.group(1)} setting refused: runstore sql runs with its "
            "configuration locked (DuckDB sandbox), so a query cannot turn on logging or "
            "profiling, change a setting or widen what it may read")
    m = _NO_TABLE.search(text)
    if m and ("/" in m.group(1) or re.search(r"\.\w+$", m.group(1))):
        return QueryError(f"reading {m.group(1)} refused: {ALLOW_HINT}")
    if "disabled by configuration" in text or "external access is disabled" in text.lower():
        return QueryError(f"refused by the DuckDB sandbox ({text.splitlines()[0].strip()}): "
                          f"{ALLOW_HINT}")
    return None
