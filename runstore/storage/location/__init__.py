"""Locations: a directory on local disk or a prefix in an S3 bucket, behind one interface.

Contract: `location(where)` is the one constructor: an `S3` for an `s3://bucket/prefix` URI,
else a `Local` (a `pathlib.Path`, so local code keeps os/pathlib speed and idioms). Both are
`Location`s and offer the operations runstore needs, with paths relative to the location and
`/` as separator, so code above `storage/` never asks which kind it holds:

* naming: `loc / "name"` (a location below), `.name`, `.parent`, `uri(rel)`, `str(loc)`;
  `resolved()` (a local path made absolute, `~` expanded);
* reading: `read(rel)`, `read_range(rel, start, end)`, `read_ranges(rel, ranges)` (several
  `[start, end)` ranges of one file: locally one open, on S3 concurrent requests),
  `chunks(rel)` (for hashing), `parquet_source(rel)` (what pyarrow's Parquet reader
  opens), `list(rel)` (sorted names directly inside, empty when there is none),
  `walk_files(skip_dirs)` (every file below, with its size and change token), `tree()` (the
  directory walk discovery needs), and `exists()`, `is_file()`, `is_dir()`, `read_text()`;
  `each(fn, items, at_least=1)` runs independent work `requests_at_once` (or `at_least`)
  at a time (one locally, in threads on S3, where each request is a round trip);
* writing: `put(rel, data)` replaces an object atomically, `delete(rel)` and `rmtree(rel)`
  remove, `unlink(missing_ok=True)`, `check_writable()` says clearly when the store cannot
  be written;
* engines: `storage_options()` for deltalake and polars (object_store), `duckdb_register(con)`
  lets a DuckDB connection read it, `relative_files(uris)` turns a Delta table's file URIs
  into paths relative to the location.

They differ only where local disk and S3 really do, and each such method says so:
`create(rel, data)` makes a file that must appear whole and only once (a manifest, the
lease): locally written aside, fsynced and hard-linked into place, on S3 a conditional
`If-None-Match: *` put; either fails with `AlreadyExists` when the file is there.
`write_unpublished(rel, data)` writes a file no snapshot lists yet (a ledger): locally
renamed into place, replacing what a writer that died left; on S3 a conditional put, since a
writer whose lease was taken over must not overwrite the new holder's. `sweep_temporaries`
deletes the `.NAME.UUID.tmp` files a killed local writer left (S3 has none: an object
appears whole or not at all). The store's write lock is the other difference (a
process-lifetime `fcntl` lock against a lease object: `lock.py`).

Credentials and endpoint of S3 come from the standard AWS environment and config
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL` for
S3-compatible services, `AWS_PROFILE`); nothing here prints them. S3 support needs the `s3`
extra (`pip install 'runstore[s3]'`, which brings s3fs).
"""

from __future__ import annotations

from typing import Any

from .base import CHUNK, AlreadyExists, Entry, Location, Tree
from .local import Local
from .s3 import S3

__all__ = ["CHUNK", "AlreadyExists", "Entry", "Location", "Tree", "Local", "S3", "gone",
           "is_remote", "location"]


def is_remote(where: Any) -> bool:
    """Whether `where` names an S3 location (an `S3`, or text starting with `s3://`)."""
    return isinstance(where, S3) or (isinstance(where, str) and where.startswith("s3://"))


def location(where: Any) -> "Location":
    """The location `where` names: an `S3` for an `s3://` URI (or an `S3`), else a `Local`."""
    if isinstance(where, Location):
        return where
    return S3(str(where)) if is_remote(where) else Local(where)


def gone(directory: str) -> bool:
    """Whether the directory of a run or an eval store is gone (where it was is no directory
    now): the ingest marks such a run missing, and `forget --missing` forgets such a unit."""
    return not location(directory).is_dir()
