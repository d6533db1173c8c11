"""Integrity: a content hash for every data file, recorded when it is written, checked before
anything is built from the file again and by the full check.

Contract:

* Each table entry of a manifest maps its live files to `"sha256:<hex>"` of their bytes
  (`checksums`), computed by the writer right after it wrote them (`entry`). Files from a store
  written before this existed have none until `runstore repair` records them.
* `verify(root, rel, expected)` says why a live file cannot be trusted (missing, its bytes no
  longer match the recorded hash, or a Parquet file that does not decode in full), or None.
  `runstore repair` and `runstore repair --check` run it on every live file.
* `check_removed` runs before a rewrite is published: a Delta delete or a compaction reads the
  files it replaces, so a damaged one would come back as new, well-hashed files holding wrong
  rows. Its damage is reported instead, and nothing is published.
* Queries do not hash the files they scan: DuckDB reads them directly (it verifies no Parquet
  page checksum either), and hashing every file per query would cost more than most queries.

Why a hash of the whole file and not Parquet page checksums: the deltalake writer (delta-rs,
through arrow-rs) has no option to write page CRCs, and the DuckDB Parquet reader does not check
them. The hash lives in runstore's own manifest, beside each file's path; Delta logs and the
Parquet files stay exactly as Spark and older runstore versions read them. Files runstore writes
with pyarrow (the ingest ledger) carry page CRCs as well, which pyarrow verifies on read.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from ..errors import StoreCorrupt, one_line

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported on first use: a query's connection needs none of it
    from ..lazy import pyarrow as pa

def digest_bytes(data: bytes | memoryview) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest(root: Any, rel: str) -> str:
    """The content hash of a store file (hashlib releases the GIL: writer threads hash at once)."""
    h = hashlib.sha256()
    for chunk in root.chunks(rel):
        h.update(chunk)
    return "sha256:" + h.hexdigest()


def _read(root: Any, rel: str) -> bytes | None:
    try:
        return root.read(rel)
    except (FileNotFoundError, NotADirectoryError):
        return None


MISMATCH = "damaged: its bytes no longer match the content hash recorded when it was written"


def verify(root: Any, rel: str, expected: str | None, *, decode: bool = True) -> str | None:
    """Why the live file `rel` is damaged, or None when it reads whole (see the module doc)."""
    try:
        data = _read(root, rel)
    except IsADirectoryError:
        return "unreadable: a directory, not a file"
    except OSError as e:
        return f"unreadable: {e.strerror or e}"
    if data is None:
        return "missing"
    if expected is not None and digest_bytes(data) != expected:
        return MISMATCH
    if decode:
        import pyarrow.parquet as pq

        try:
            f = pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True)
            for i in range(f.num_row_groups):
                f.read_row_group(i)
        except (OSError, pa.ArrowException) as e:
            return f"unreadable: {one_line(e, 120)}"
    return None


def entry(root: Any, dt: Any, before: dict[str, Any] | None) -> dict[str, Any]:
    """The manifest entry of Delta table `dt` now: version, live files, and their checksums
    (kept from `before` for files it listed, computed for the files new since)."""
    files = root.relative_files(dt.file_uris())
    old = set(before["files"]) if before else set()
    known = dict(before.get("checksums") or {}) if before else {}
    sums = {f: known[f] for f in files if f in known}
    for f in files:
        if f not in old:
            sums[f] = digest(root, f)
    return {"version": dt.version(), "files": files, "checksums": sums}


def check_removed(root: Any, table: str, before: dict[str, Any] | None,
                  after: list[str]) -> None:
    """Raise when a file a rewrite just replaced no longer matches its recorded hash: the
    rewrite read damaged bytes, and what it wrote must not be published."""
    if not before:
        return
    sums = before.get("checksums") or {}
    for f in sorted(set(before["files"]) - set(after)):
        if f in sums and _matches(root, f, sums[f]) is False:
            raise damaged(root, f, table, MISMATCH)


def _matches(root: Any, rel: str, expected: str) -> bool | None:
    try:
        return digest(root, rel) == expected
    except OSError:
        return None  # gone: the rewrite that just read it did not need it checked again


def damaged(root: Any, rel: str, table: str, why: str) -> StoreCorrupt:
    return damaged_error(str(root / rel), table, why)


def damaged_error(path: str, table: str, why: str) -> StoreCorrupt:
    """The error for a live file of the store that is `why` (missing, unreadable, ...)."""
    return StoreCorrupt(
        f"the store file {path} (table {table}) is {why}. Run `runstore repair`: it drops the "
        "file from the store, and the next `runstore ingest` re-reads the sources whose rows "
        "it held.")
