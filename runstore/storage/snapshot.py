"""Reading one snapshot: the newest manifest checked for use, and its tables' live files.

Contract: `current(root)` is the newest snapshot of the store at `root`, checked so that
every reader can rely on it: there is a store (else `StoreNotFound`), this runstore reads its
schema version (else "upgrade runstore"), every table with a Delta log is listed, every
setting has the right type (else a `StoreCorrupt` saying to run `runstore repair`). A table
on disk that no snapshot lists is what a writer killed before publishing left when
`left_unpublished` says so (no reader sees it, the next writer deletes it); any other is a
lost snapshot entry.
`table_files(root, manifest, table)` are the absolute paths (`s3://` URIs on S3) of a table's
live Parquet files in that snapshot: exactly the files its manifest lists, never a directory
glob (files a compaction replaced stay on disk until vacuum). `read_table` reads a small table
whole as Arrow (runs, the ledger), conformed to the current schema (columns a later migration
added as nulls; string views as strings), `read_file` one live file of it. A file that is
missing or does not read is reported by name: `damaged_file` finds the first one (optionally
checking content hashes, see integrity.py), `read_error` turns an engine's error about a store
file into one that names the file and says to run `runstore repair`. Every Parquet file of the
store is written once and never modified, so readers never see one change under them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..errors import RunstoreError, StoreCorrupt, one_line
from . import integrity
from . import schema as schema_mod
from .location import location
from .manifest import Manifest, Root, read_manifest, require_store
from .settings import DEFAULT_SETTINGS, bad_settings
from .versions import check_version, filled_by_pending

# A committed version in a Delta log (a commit or a checkpoint), as the Delta protocol names it.
COMMIT = re.compile(r"^\d{20}\.(json$|checkpoint\.)")

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported on first use: opening a snapshot for a query needs none of it
    from ..lazy import pyarrow as pa


def current(root: Root) -> Manifest:
    """The newest snapshot, checked: a store this runstore can read, with settings of the
    right types."""
    m = require_store(root)
    check_version(m.schema_version)
    for name in schema_mod.TABLES:
        if name not in m.tables and (root / "tables" / name / "_delta_log").exists():
            if left_unpublished(root / "tables" / name, name, m.schema_version):
                continue  # a killed writer's table: invisible, deleted by the next writer
            raise StoreCorrupt(
                f"the store's snapshot {m.seq} does not list table {name}, but "
                f"{root / 'tables' / name} holds it. Run `runstore repair` (it takes "
                "the table from its Delta log).")
    bad = bad_settings(m.settings)
    if bad:
        name, value = bad[0]
        raise StoreCorrupt(
            f"the store's setting {name} is {value!r}, not a number (in snapshot {m.seq}). "
            f"Run `runstore repair` (it resets it to the default, "
            f"{DEFAULT_SETTINGS[name]}), or set it again with store.set_setting.")
    return m


def left_unpublished(path: Root, name: str, version: int) -> bool:
    """Whether table `name` at `path`, which no snapshot of the store (at schema `version`)
    lists, is what a writer killed before publishing left: a Delta log with no committed
    version yet (killed while creating it), a table that holds no data file (created, by a
    migration say, then killed: no writer fills a table before a snapshot lists it, so
    nothing is lost with it), or a new table a pending migration fills before publishing
    (`versions.filled_by_pending`; the migration writes it again). Anything else unlisted
    holds data a snapshot lost: `runstore repair` takes it back from its log."""
    if name in filled_by_pending(version):
        return True
    if not any(COMMIT.match(n) for n in (path / "_delta_log").list()):
        return True
    return not open_delta(path).file_uris()


def delta_table(path: Any) -> Any:
    """The Delta table at a local path or under an S3 prefix."""
    from deltalake import DeltaTable

    return DeltaTable(str(path), storage_options=path.storage_options())


def open_delta(path: Any) -> Any:
    """The Delta table at `path`, or a `StoreCorrupt` naming it when its log does not open."""
    try:
        return delta_table(path)
    except Exception as e:  # deltalake raises its own error types
        raise StoreCorrupt(
            f"cannot open the Delta table {path}: {one_line(e)}. Run "
            "`runstore repair` (it rebuilds the table's log from the last snapshot).") from e


def table_files(root: Root, manifest: Manifest, table: str) -> list[str]:
    """Absolute paths (`s3://` URIs for a store on S3) of the live Parquet files of `table`
    in this snapshot."""
    entry = manifest.tables.get(table)
    if not entry:
        return []
    return [str(root / f) for f in entry["files"]]


def open_parquet(path: str) -> Any:
    """A `pyarrow.parquet.ParquetFile` for a local path or an `s3://` URI."""
    import pyarrow.parquet as pq

    # Page CRCs are checked where a file has them (the ledger, written by pyarrow); Delta's
    # writer writes none, and for those this costs nothing.
    return pq.ParquetFile(location(path).parquet_source(), page_checksum_verification=True)


def read_table(root: Root, manifest: Manifest, table: str) -> pa.Table:
    """A whole table of the snapshot as Arrow (for small tables: runs, ledger)."""
    files = table_files(root, manifest, table)
    if not files:
        return schema_mod.empty(table)
    target = schema_mod.schema(table)
    return pa.concat_tables([read_file(f, table, target=target) for f in files])


def read_file(path: str, table: str, *, columns: list[str] | None = None,
              target: pa.Schema | None = None) -> pa.Table:
    """One live Parquet file of `table` as Arrow (only `columns`, if given; `conform`ed to
    `target`, if given); a missing or unreadable one is the `StoreCorrupt` that names it and
    says to run `runstore repair`."""
    try:
        part = open_parquet(path).read(columns=columns)
        return conform(part, target) if target is not None else part
    except (OSError, pa.ArrowException) as e:
        why = ("missing" if not location(path).exists()
               else f"unreadable ({one_line(e, 200)})")
        raise integrity.damaged_error(path, table, why) from e


def check_file(path: str) -> str | None:
    """Why a live Parquet file of the store cannot be read, or None when it can (its footer
    is checked, not every page: see `repair` for the full read)."""
    if not location(path).exists():
        return "missing"
    try:
        open_parquet(path).metadata
    except (OSError, pa.ArrowException) as e:
        return f"unreadable ({one_line(e, 200)})"
    return None


def damaged_file(root: Root, manifest: Manifest, names: Any = None, *,
                 hashes: bool = False) -> StoreCorrupt | None:
    """The first live file of the snapshot (of the tables `names`, default all) that is
    missing or unreadable (with `hashes`, also one whose bytes no longer match the hash
    recorded for it), as the error to show; None when every one is sound."""
    for name in names if names is not None else sorted(manifest.tables):
        entry = manifest.tables.get(name) or {"files": []}
        sums = entry.get("checksums") or {}
        for rel in entry["files"]:
            if hashes and rel in sums:
                why = integrity.verify(root, rel, sums[rel], decode=False)
            else:
                why = check_file(str(root / rel))
            if why:
                return integrity.damaged_error(str(root / rel), name, why)
    return None


def read_error(root: Root, e: BaseException) -> RunstoreError | None:
    """A query engine's error about a file of the store at `root`, as an error that names the
    file and says what to do; None when the error is not about the store's files."""
    text = one_line(e)
    if str(root) not in text:
        return None
    try:
        manifest = read_manifest(root)
    except StoreCorrupt as bad:
        return bad
    found = damaged_file(root, manifest) if manifest is not None else None
    return found or StoreCorrupt(
        f"reading the store failed: {text}. If it happens again, run `runstore repair`.")


def conform(part: pa.Table, target: pa.Schema) -> pa.Table:
    """`part` with exactly `target`'s columns and types.

    Files rewritten by a Delta delete come back with `string_view` columns, which
    `concat_tables` refuses to merge with `string`; columns a file predates become nulls.
    """
    cols = [part.column(f.name).cast(f.type) if f.name in part.column_names
            else pa.nulls(part.num_rows, f.type) for f in target]
    return pa.Table.from_arrays(cols, schema=target)
