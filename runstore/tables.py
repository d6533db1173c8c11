"""The store on disk: Delta tables, the manifest that makes them one snapshot, and the lock.

Layout of a store directory::

    tables/<name>/            one Delta table per public table (Parquet files + _delta_log/)
    _runstore/manifests/N.json  snapshot N: each table's Delta version and live file list,
                              the ledger file, schema version and applied migrations
    _runstore/ledger/N.parquet  the ingest ledger as of snapshot N (see ledger.py)
    _runstore/lock            fcntl lock held by the one writing process (its PID inside)

Contract:

* A snapshot is published by creating a new manifest file (written aside, then hard-linked
  into place, so it appears whole or not at all). Readers take the newest manifest and read
  exactly the files it lists: never a directory glob, never a file that changes under them
  (every Parquet file is written once and never modified).
* Only a holder of the lock writes. Delta versions written after the newest manifest belong
  to a writer that died before publishing; `Writer` rolls those tables back (Delta `restore`)
  before writing anything, so a crash at any point loses only the unpublished work.
* Tables whose file count passes `COMPACT_FILES` are compacted (and their Delta log
  checkpointed) at commit time; `compact()` does it on demand.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa

from . import schema as schema_mod
from .errors import StoreCorrupt, StoreLocked, StoreNotFound, RunstoreError

MANIFESTS = "_runstore/manifests"
LEDGERS = "_runstore/ledger"
LOCK = "_runstore/lock"
COMPACT_FILES = 32
KEEP_MANIFESTS = 20


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class Manifest:
    """One published snapshot of the store."""

    seq: int
    tables: dict[str, dict[str, Any]]  # name -> {"version": int, "files": [rel paths]}
    ledger: str | None  # rel path of the ledger parquet, None when empty
    schema_version: int
    migrations: list[dict[str, str]] = field(default_factory=list)
    created_at: str = ""
    last_ingest: dict[str, Any] | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        data = json.loads(text)
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


def manifest_paths(root: Path) -> list[tuple[int, Path]]:
    d = root / MANIFESTS
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    out = []
    for n in names:
        if n.endswith(".json") and n[:-5].isdigit():
            out.append((int(n[:-5]), d / n))
    return sorted(out)


def read_manifest(root: Path) -> Manifest | None:
    """The newest published manifest, or None for a store with none yet."""
    paths = manifest_paths(root)
    if not paths:
        return None
    seq, path = paths[-1]
    try:
        return Manifest.from_json(path.read_text())
    except (OSError, ValueError, TypeError) as e:
        raise StoreCorrupt(
            f"cannot read the store manifest {path}: {e}. Delete that file to fall back to "
            "the previous snapshot, then run `runstore ingest` again."
        ) from e


def is_store(root: Path) -> bool:
    return (root / MANIFESTS).is_dir() and bool(manifest_paths(root))


def require_store(root: Path) -> Manifest:
    m = read_manifest(root) if (root / MANIFESTS).is_dir() else None
    if m is None:
        raise StoreNotFound(
            f"no store at {root} — run `runstore ingest PATH` first, or pass --store "
            "(or set $RUNSTORE_STORE)"
        )
    return m


def table_files(root: Path, manifest: Manifest, table: str) -> list[str]:
    """Absolute paths of the live Parquet files of `table` in this snapshot."""
    entry = manifest.tables.get(table)
    if not entry:
        return []
    return [str(root / f) for f in entry["files"]]


def read_table(root: Path, manifest: Manifest, table: str) -> pa.Table:
    """A whole table of the snapshot as Arrow (for small tables: runs, ledger)."""
    import pyarrow.parquet as pq

    files = table_files(root, manifest, table)
    if not files:
        return schema_mod.empty(table)
    target = schema_mod.schema(table)
    parts = []
    for f in files:
        try:
            parts.append(_conform(pq.ParquetFile(f).read(), target))
        except (OSError, pa.ArrowException) as e:
            raise StoreCorrupt(
                f"cannot read {f}: {e}. Run `runstore repair` to drop it from the store, then "
                "`runstore ingest` the runs again."
            ) from e
    return pa.concat_tables(parts)


def _conform(part: pa.Table, target: pa.Schema) -> pa.Table:
    """`part` with exactly `target`'s columns and types.

    Files rewritten by a Delta delete come back with `string_view` columns, which
    `concat_tables` refuses to merge with `string`; columns a file predates become nulls.
    """
    cols = [part.column(f.name).cast(f.type) if f.name in part.column_names
            else pa.nulls(part.num_rows, f.type) for f in target]
    return pa.Table.from_arrays(cols, schema=target)


class Lock:
    """An exclusive, process-lifetime lock on the store (released by the kernel on death)."""

    def __init__(self, root: Path):
        self.path = root / LOCK
        self.fd: int | None = None

    def acquire(self, timeout: float) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
                    os.close(fd)
                    raise StoreLocked(
                        f"store is locked by PID {holder} (an ingest in progress); waited "
                        f"{timeout:g} s. Try again when it finishes, or raise --lock-timeout."
                    )
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None


def _check_writable(root: Path) -> None:
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".write-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise RunstoreError(
            f"cannot write the store at {root}: {e.strerror or e}. Choose another --store "
            "or fix the directory's permissions."
        ) from e


class Writer:
    """Exclusive write access to a store: stage deletes and appends, publish snapshots."""

    def __init__(self, root: Path, *, lock_timeout: float = 60.0):
        self.root = root
        self.lock = Lock(root)
        self.lock_timeout = lock_timeout
        self.manifest: Manifest | None = None
        self._deletes: dict[str, list[str]] = {}
        self._appends: dict[str, list[pa.Table]] = {}
        self.staged_rows = 0
        self.rows_added: dict[str, int] = {}

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> "Writer":
        _check_writable(self.root)
        self.lock.acquire(self.lock_timeout)
        try:
            self.manifest = read_manifest(self.root)
            self._recover()
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.lock.release()

    def _recover(self) -> None:
        """Roll back Delta versions that no published manifest covers (a crashed writer)."""
        from deltalake import DeltaTable

        tables_dir = self.root / "tables"
        if not tables_dir.is_dir():
            return
        for name in os.listdir(tables_dir):
            path = tables_dir / name
            if not (path / "_delta_log").is_dir():
                continue
            entry = (self.manifest.tables.get(name) if self.manifest else None)
            if entry is None:
                # Created by a writer that never published: nothing of it is visible.
                shutil.rmtree(path)
                continue
            try:
                dt = DeltaTable(str(path))
            except Exception as e:  # deltalake raises its own error types
                raise StoreCorrupt(
                    f"cannot open the Delta table {path}: {e}. Run `runstore repair`."
                ) from e
            if dt.version() > entry["version"]:
                dt.restore(entry["version"])

    # -- staging -----------------------------------------------------------------------
    def delete(self, table: str, predicate: str) -> None:
        """Stage a Delta delete (predicates are built by this package from ids it made)."""
        self._deletes.setdefault(table, []).append(predicate)

    def append(self, table: str, data: pa.Table) -> None:
        if data.num_rows == 0:
            return
        self._appends.setdefault(table, []).append(data)
        self.staged_rows += data.num_rows

    @property
    def dirty(self) -> bool:
        return bool(self._deletes or self._appends)

    # -- publishing --------------------------------------------------------------------
    def commit(self, *, ledger: pa.Table | None, last_ingest: dict | None = None,
               settings: dict | None = None) -> Manifest:
        """Apply staged deletes and appends, write the ledger, publish a new manifest."""
        from deltalake import DeltaTable, write_deltalake

        assert self.manifest is not None, "store has no manifest; run migrations first"
        tables = {k: dict(v) for k, v in self.manifest.tables.items()}
        touched = set(self._deletes) | set(self._appends)
        for name in sorted(touched):
            path = str(self.root / "tables" / name)
            preds = self._deletes.get(name)
            if preds:
                # One delete per table and commit: each Delta delete rewrites the files it hits.
                DeltaTable(path).delete(" OR ".join(f"({p})" for p in preds))
            parts = self._appends.get(name)
            if parts:
                data = pa.concat_tables(parts).cast(schema_mod.schema(name))
                write_deltalake(path, data, mode="append")
                self.rows_added[name] = self.rows_added.get(name, 0) + data.num_rows
            dt = DeltaTable(path)
            if len(dt.file_uris()) > COMPACT_FILES:
                dt.optimize.compact()
                dt = DeltaTable(path)
                dt.create_checkpoint()
            tables[name] = {"version": dt.version(), "files": self._rel_files(dt)}
        self._deletes.clear()
        self._appends.clear()
        self.staged_rows = 0
        ledger_rel = self.manifest.ledger
        seq = self.manifest.seq + 1
        if ledger is not None:
            ledger_rel = f"{LEDGERS}/{seq:08d}.parquet"
            write_new_parquet(self.root / ledger_rel, ledger)
        m = Manifest(
            seq=seq,
            tables=tables,
            ledger=ledger_rel,
            schema_version=self.manifest.schema_version,
            migrations=self.manifest.migrations,
            created_at=utcnow().isoformat(),
            last_ingest=last_ingest if last_ingest is not None else self.manifest.last_ingest,
            settings=settings if settings is not None else self.manifest.settings,
        )
        self.publish(m)
        return m

    def publish(self, m: Manifest) -> None:
        publish_manifest(self.root, m)
        self.manifest = m
        self._prune()

    def _rel_files(self, dt: Any) -> list[str]:
        root = str(self.root.resolve())
        out = []
        for uri in dt.file_uris():
            p = uri[len("file://"):] if uri.startswith("file://") else uri
            out.append(os.path.relpath(os.path.realpath(p), root))
        return sorted(out)

    def _prune(self) -> None:
        """Drop manifests and ledgers older than the last KEEP_MANIFESTS snapshots."""
        paths = manifest_paths(self.root)
        for seq, path in paths[:-KEEP_MANIFESTS]:
            try:
                m = Manifest.from_json(path.read_text())
                path.unlink()
                if m.ledger and m.ledger != self.manifest.ledger:  # type: ignore[union-attr]
                    (self.root / m.ledger).unlink(missing_ok=True)
            except (OSError, ValueError):
                continue

    def compact(self, *, vacuum_hours: float | None = None) -> dict[str, int]:
        """Compact every table to few files, checkpoint its log, optionally vacuum."""
        from deltalake import DeltaTable

        assert self.manifest is not None
        tables = {k: dict(v) for k, v in self.manifest.tables.items()}
        before = {}
        for name in tables:
            path = str(self.root / "tables" / name)
            dt = DeltaTable(path)
            before[name] = len(dt.file_uris())
            dt.optimize.compact()
            dt = DeltaTable(path)
            dt.create_checkpoint()
            if vacuum_hours is not None:
                dt.vacuum(retention_hours=int(vacuum_hours), enforce_retention_duration=False,
                          dry_run=False)
            tables[name] = {"version": dt.version(), "files": self._rel_files(dt)}
        m = Manifest(**{**self.manifest.__dict__, "seq": self.manifest.seq + 1,
                        "tables": tables, "created_at": utcnow().isoformat()})
        self.publish(m)
        return before


def write_new_parquet(path: Path, table: pa.Table) -> None:
    """Write a Parquet file that did not exist before (aside, then renamed into place)."""
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, path)


def publish_manifest(root: Path, m: Manifest) -> None:
    d = root / MANIFESTS
    d.mkdir(parents=True, exist_ok=True)
    final = d / f"{m.seq:08d}.json"
    tmp = d / f".{m.seq:08d}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w") as f:
        f.write(m.to_json())
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(tmp, final)  # fails if a snapshot with this number exists: never overwrite
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def writer(root: Path, *, lock_timeout: float = 60.0) -> Iterator[Writer]:
    w = Writer(root, lock_timeout=lock_timeout)
    with w:
        yield w
