"""The store on disk: Delta tables, the writer that publishes snapshots of them, and the lock.

Layout of a store directory::

    tables/<name>/            one Delta table per public table (Parquet files + _delta_log/)
    _runstore/manifests/N.json  snapshot N: each table's Delta version, live files and their
                              content hashes, the ledger file, schema version, migrations
                              (manifest.py reads and checks them)
    _runstore/ledger/N.parquet  the ingest ledger as of snapshot N (see ledger.py)
    _runstore/retired/*.json  when files stopped being listed by any kept snapshot (vacuum.py)
    _runstore/lock            fcntl lock held by the one writing process (its PID inside)

Contract:

* A snapshot is published by creating a new manifest file (written aside, then hard-linked
  into place, so it appears whole or not at all). Readers take the newest manifest and read
  exactly the files it lists: never a directory glob, never a file that changes under them
  (every Parquet file is written once and never modified).
* Only a holder of the lock writes. Delta versions written after the newest manifest belong
  to a writer that died before publishing; `Writer` rolls those tables back (Delta `restore`)
  before writing anything, so a crash at any point loses only the unpublished work. A table
  the snapshot lists files of but whose log is gone, or a file the rollback would need that
  is gone, stops the writer with "run `runstore repair`".
* Tables whose file count passes `COMPACT_FILES` are compacted (and their Delta log
  checkpointed) at commit time; `compact()` does it on demand. Every file a commit writes gets
  its content hash in the snapshot; a commit whose delete or compaction read a file that no
  longer matches its hash publishes nothing (integrity.py).
* Files are deleted only by `vacuum.py`, after a publish, and never one a kept snapshot lists.
* A store may also live under an `s3://bucket/prefix` (`fs.S3`; every function here takes
  either root): the same layout as objects, manifests and ledgers published with S3's
  conditional put (create-if-absent, as the hard link does locally), Delta tables written by
  deltalake's own object store, and a `Lease` object instead of the fcntl lock.
* A failed write (disk full, read-only or vanished store directory, a data file missing under
  a Delta delete) surfaces as a `RunstoreError` naming what was being written and what to do;
  nothing published before it is touched. `runstore.repair` mends what outside damage leaves.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import stat
import sys
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from . import integrity
from . import schema as schema_mod
from . import vacuum as vacuum_mod
from ..errors import StoreCorrupt, StoreLocked, RunstoreError
from .location import S3, AlreadyExists, listdir, location, rmtree, storage_options
from .manifest import (LEDGERS, MANIFESTS, Manifest, Root, bad_settings, manifest_paths, publish_manifest, read_manifest, require_store)
from .vacuum import KEEP_MANIFESTS

__all__ = ["LEDGERS", "MANIFESTS", "KEEP_MANIFESTS", "Manifest", "Root", "bad_settings",
           "manifest_paths", "publish_manifest", "read_manifest", "require_store"]

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported on first use: opening a snapshot for a query needs none of it
    from ..lazy import pyarrow as pa

LOCK = "_runstore/lock"
COMPACT_FILES = 32  # $RUNSTORE_COMPACT_FILES overrides it (tests use it to compact often)
# New files of these tables hold their rows grouped by one column (`group_rows`), so a scan
# for a few values of it (`key IN (...)`) reads few Parquet pages: DuckDB skips the others by
# the min/max statistics of the page index that deltalake writes. Compaction interleaves the
# merged files' rows in 8192-row batches; pages of at most PAGE_ROWS rows keep their min/max
# narrow there too (the default, 20,000 rows, made a `key IN` scan ~3x slower after compact).
GROUP_ROWS_BY = {"metrics_raw": "key"}
PAGE_ROWS = 8192
COMMIT_THREADS = 2  # tables written at once by a commit


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


_reached: dict[str, int] = {}


def pause_point(phase: str) -> None:
    """Test-only crash hook; a no-op unless one of two environment variables is set.

    `$RUNSTORE_TEST_POINTS=FILE` appends the name of every phase reached to FILE.
    `$RUNSTORE_TEST_PAUSE=PHASE:N[,PHASE:N...]` makes the process print `paused at PHASE:N`
    on stderr and wait the N-th time it reaches PHASE, so tests/test_crash.py can SIGKILL it
    exactly there (phases: discover, parse, migrate, recover, write, compact, ledger, publish,
    interrupted). A signal that the ingest handles (interrupts.py) ends the wait, so
    tests/test_interrupt.py can interrupt it exactly there, too.
    """
    log, pause = os.environ.get("RUNSTORE_TEST_POINTS"), os.environ.get("RUNSTORE_TEST_PAUSE")
    if not (log or pause):
        return
    n = _reached[phase] = _reached.get(phase, 0) + 1
    if log:
        with open(log, "a") as f:
            f.write(f"{phase}\n")
    if pause and f"{phase}:{n}" in pause.split(","):
        from ..ingest.interrupts import seen

        signals = seen()
        sys.stderr.write(f"paused at {phase}:{n}\n")
        sys.stderr.flush()
        while seen() == signals:
            time.sleep(0.02)


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

    where = location(path)
    # Page CRCs are checked where a file has them (the ledger, written by pyarrow); Delta's
    # writer writes none, and for those this costs nothing.
    return pq.ParquetFile(where.open() if isinstance(where, S3) else path,
                          page_checksum_verification=True)


def _exists(path: str) -> bool:
    return location(path).exists()


def read_table(root: Root, manifest: Manifest, table: str) -> pa.Table:
    """A whole table of the snapshot as Arrow (for small tables: runs, ledger)."""
    files = table_files(root, manifest, table)
    if not files:
        return schema_mod.empty(table)
    target = schema_mod.schema(table)
    parts = []
    for f in files:
        try:
            parts.append(_conform(open_parquet(f).read(), target))
        except (OSError, pa.ArrowException) as e:
            why = "missing" if not _exists(f) else f"unreadable ({one_line(e, 200)})"
            raise _damaged(f, table, why) from e
    return pa.concat_tables(parts)


def check_file(path: str) -> str | None:
    """Why a live Parquet file of the store cannot be read, or None when it can (its footer
    is checked, not every page: see `repair` for the full read)."""
    if not _exists(path):
        return "missing"
    try:
        open_parquet(path).metadata
    except (OSError, pa.ArrowException) as e:
        return f"unreadable ({one_line(e, 200)})"
    return None


def _damaged(path: str, table: str, why: str) -> StoreCorrupt:
    return StoreCorrupt(
        f"the store file {path} (table {table}) is {why}. Run `runstore repair`: it drops the "
        "file from the store, and the next `runstore ingest` re-reads the sources whose rows "
        "it held.")


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
                return _damaged(str(root / rel), name, why)
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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise IsADirectoryError(errno.EISDIR, "not a regular file")
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise RunstoreError(
                    f"cannot take the store's write lock {self.path}: {e.strerror}. Fix the "
                    "file's permissions or mount, or choose another --store.") from e
            what = ("it is a directory, not a file" if isinstance(e, IsADirectoryError)
                    else "it is a symbolic link" if e.errno == errno.ELOOP
                    else e.strerror or str(e))
            raise StoreCorrupt(
                f"cannot take the store's write lock {self.path}: {what}. Run `runstore "
                "repair`: it sets the path aside and makes a new lock file.") from e
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
                    holder = self._holder(fd)
                    os.close(fd)
                    raise StoreLocked(
                        f"store is locked by PID {holder} (an ingest in progress); waited "
                        f"{timeout:g} s. Try again when it finishes, or raise --lock-timeout."
                    )
                time.sleep(0.1)
        try:  # who holds it, for the message above; best effort (a full disk refuses it)
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError:
            pass
        self.fd = fd

    @staticmethod
    def _holder(fd: int) -> str:
        """The PID the holder wrote (it writes it just after taking the lock: wait a moment
        for it rather than report an empty file)."""
        for _ in range(20):
            text = os.pread(fd, 64, 0).decode(errors="replace").strip()
            if text:
                return text
            time.sleep(0.05)
        return "?"

    def release(self) -> None:
        if self.fd is not None:
            try:
                os.ftruncate(self.fd, 0)
            except OSError:
                pass
            os.close(self.fd)
            self.fd = None


class Lease:
    """The write lock of a store on S3, where no process-lifetime lock exists: a lease object
    `_runstore/lock` created with a conditional put (so two writers cannot both create it),
    holding the owner and an expiry. The holder renews it at every commit; a lease past its
    expiry belongs to a writer that died and is taken over (the takeover deletes it and
    races through the same conditional put, so only one taker wins)."""

    TTL_S = 600.0  # $RUNSTORE_LEASE_SECONDS overrides it

    def __init__(self, root: S3):
        self.root = root
        self.token: str | None = None
        self.ttl = float(os.environ.get("RUNSTORE_LEASE_SECONDS") or self.TTL_S)

    def _body(self) -> bytes:
        return json.dumps({"pid": os.getpid(), "host": os.uname().nodename, "token": self.token,
                           "expires": time.time() + self.ttl}).encode()

    def _current(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.root.read(LOCK))
        except FileNotFoundError:
            return None
        except ValueError:
            return {}  # being written, or garbage: treat as held until it expires

    def acquire(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        self.token = uuid.uuid4().hex
        unreadable_since: float | None = None
        while True:
            try:
                self.root.write_new(LOCK, self._body())
                return
            except AlreadyExists:
                pass
            held = self._current()
            if held is not None:
                expires = held.get("expires")
                if isinstance(expires, (int, float)) and expires < time.time():
                    self.root.delete(LOCK)  # the holder died; the conditional put decides
                    continue
                if not isinstance(expires, (int, float)):
                    # Unreadable lease: give it one TTL from when first seen.
                    if unreadable_since is None:
                        unreadable_since = time.monotonic()
                    elif time.monotonic() - unreadable_since > self.ttl:
                        self.root.delete(LOCK)
                        continue
            if time.monotonic() >= deadline:
                who = (held or {}).get("pid", "?")
                host = (held or {}).get("host")
                raise StoreLocked(
                    f"store is locked by PID {who}{f' on {host}' if host else ''} (an ingest "
                    f"in progress); waited {timeout:g} s. Try again when it finishes, or raise "
                    "--lock-timeout.")
            time.sleep(0.2)

    def renew(self) -> None:
        """Extend the lease before publishing; stop if another writer took it over meanwhile
        (this one stalled past its expiry): its unpublished work is then rolled back by the
        next writer, and the conditional put of manifests keeps the two from both publishing."""
        if self.token is None:
            return
        held = self._current()
        if held is None or held.get("token") != self.token:
            who = (held or {}).get("pid", "?")
            raise StoreLocked(
                f"this writer's lease on {self.root} expired and PID {who} took the store over; "
                "nothing of this run was published. Run the command again (and raise "
                "$RUNSTORE_LEASE_SECONDS if writes can stall that long).")
        self.root.put(LOCK, self._body())

    def release(self) -> None:
        if self.token is None:
            return
        held = self._current()
        if held is not None and held.get("token") == self.token:
            self.root.delete(LOCK)
        self.token = None


_DISK_FULL = ("No space left on device", "os error 28", "Disk quota exceeded", "os error 122")
_READ_ONLY = ("Read-only file system", "os error 30", "Permission denied", "os error 13",
              "Operation not permitted", "os error 1)")
_MISSING = ("No such file or directory", "os error 2)", "not found", "NotFound", "missing file")


_RUST_BACKTRACE = re.compile(r"\n\s*(?:Stack backtrace:\s*)?0: ")


def one_line(e: BaseException, limit: int = 300) -> str:
    """An error's text on one line, without the Rust backtrace deltalake appends when
    $RUST_BACKTRACE is set, cut to `limit` characters."""
    text = _RUST_BACKTRACE.split(str(e), maxsplit=1)[0]
    text = " ".join(text.split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_io_failure(e: BaseException) -> bool:
    """True for the errors a failed store read/write raises (OS, Arrow, deltalake, a panic in
    deltalake's Rust code), as opposed to a bug in runstore."""
    if isinstance(e, (OSError, pa.ArrowException)):
        return True
    if type(e).__name__ == "PanicException":
        return True
    try:
        from deltalake.exceptions import DeltaError
    except ImportError:  # pragma: no cover - deltalake is a dependency
        return False
    return isinstance(e, DeltaError)


def write_error(root: Root, what: str, e: BaseException) -> RunstoreError:
    """A failure to write `what` (a path inside the store) as an error that says what to do."""
    detail = one_line(e)
    code = getattr(e, "errno", None)
    where = f"{root / what}"
    if code in (errno.ENOSPC, errno.EDQUOT) or any(t in detail for t in _DISK_FULL):
        return RunstoreError(
            f"the disk holding the store is full (writing {where}: {detail}). Free some space, "
            "then run the command again: the unfinished snapshot is rolled back and nothing "
            "already committed is lost.")
    if code in (errno.EROFS, errno.EACCES, errno.EPERM) or any(t in detail for t in _READ_ONLY):
        return RunstoreError(
            f"cannot write the store at {root} (writing {where}: {detail}). Fix the directory's "
            "permissions or mount, or choose another --store; nothing committed was lost.")
    if code == errno.ENOENT or any(t in detail for t in _MISSING):
        return StoreCorrupt(
            f"a file of the store is missing (while writing {where}: {detail}). Run "
            "`runstore repair` to drop it from the store, then `runstore ingest` to re-read "
            "the sources whose rows it held.")
    return RunstoreError(
        f"writing {where} failed: {detail}. Nothing committed was lost; run the command "
        "again, and `runstore repair` if it keeps failing.")


@contextmanager
def writing(root: Root, what: str) -> Iterator[None]:
    """Run a store write; turn an I/O failure into `write_error(root, what, ...)`."""
    try:
        yield
    except RunstoreError:
        raise
    except BaseException as e:
        if not _is_io_failure(e):
            raise
        raise write_error(root, what, e) from e


def check_writable(root: Root) -> None:
    if isinstance(root, S3):
        probe = f"_runstore/.write-probe-{uuid.uuid4().hex}"
        try:
            root.put(probe, b"")
            root.delete(probe)
        except Exception as e:  # botocore/s3fs errors: bad credentials, no bucket, no network
            raise RunstoreError(
                f"cannot write the store at {root}: {one_line(e, 200)}. Check the bucket "
                "exists and the AWS credentials and endpoint (AWS_ENDPOINT_URL) in the "
                "environment.") from e
        return
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


@dataclass
class CompactReport:
    """What `Store.compact` did: each table's file count before, and the vacuum's report."""

    files_before: dict[str, int]
    vacuum: "vacuum_mod.VacuumReport | None" = None


@dataclass
class Staged:
    """Deletes (predicates) and appends (Arrow tables) per table, to commit together."""

    deletes: dict[str, list[str]]
    appends: dict[str, list[pa.Table]]


class Writer:
    """Exclusive write access to a store: stage deletes and appends, publish snapshots."""

    def __init__(self, root: Root, *, lock_timeout: float = 60.0):
        self.root = root
        self.lock: Lock | Lease = Lease(root) if isinstance(root, S3) else Lock(root)
        self.lock_timeout = lock_timeout
        self.manifest: Manifest | None = None
        self._deletes: dict[str, list[str]] = {}
        self._appends: dict[str, list[pa.Table]] = {}
        self.staged_rows = 0
        self.rows_added: dict[str, int] = {}

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> "Writer":
        from .migrate import check_version

        early = read_manifest(self.root)
        if early is not None:
            check_version(early)  # a newer runstore's store: refuse before writing a byte
        check_writable(self.root)
        self.lock.acquire(self.lock_timeout)
        try:
            self.manifest = read_manifest(self.root)
            if self.manifest is not None:
                check_version(self.manifest)  # it may have been upgraded while we waited
            self._recover()
            pause_point("locked")
        except BaseException:
            self.lock.release()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.lock.release()

    def _recover(self) -> None:
        """Roll back Delta versions that no published manifest covers (a crashed writer)."""
        self._sweep_temporaries()
        tables_dir = self.root / "tables"
        present = listdir(tables_dir)
        for name, entry in sorted((self.manifest.tables if self.manifest else {}).items()):
            if entry["files"] and "_delta_log" not in (listdir(tables_dir / name)
                                                       if name in present else []):
                # Writing now would start a new, empty table and drop the snapshot's files
                # from the next snapshot without a word.
                raise StoreCorrupt(
                    f"the Delta log {tables_dir / name / '_delta_log'} is missing, but the "
                    f"store's snapshot lists {len(entry['files'])} files of table {name}. Run "
                    "`runstore repair` (it rebuilds the table's log from the snapshot).")
        for name in present:
            path = tables_dir / name
            if "_delta_log" not in listdir(path):
                continue
            entry = (self.manifest.tables.get(name) if self.manifest else None)
            dt = self._open_table(path)
            if entry is None:
                if self.manifest is None and dt.file_uris():
                    # Tables with data but no snapshot at all: the manifests were lost, this
                    # is not a first ingest that died. Removing the tables would lose data.
                    raise StoreCorrupt(
                        f"the store at {self.root} has tables but no manifest in "
                        f"{self.root / MANIFESTS}. Run `runstore repair` to rebuild it.")
                if dt.file_uris():
                    # No writer fills a table before a snapshot lists it (migrations publish
                    # new tables empty): the snapshot lost this table's entry.
                    raise StoreCorrupt(
                        f"the store's snapshot does not list table {name}, but {path} holds "
                        "its data. Run `runstore repair` (it takes the table from its Delta "
                        "log).")
                # Created by a writer that never published: nothing of it is visible.
                with writing(self.root, f"tables/{name}"):
                    rmtree(path)
                continue
            if dt.version() == entry["version"]:
                continue
            if dt.version() > entry["version"] and self._rel_files(dt) != sorted(entry["files"]):
                for f in entry["files"]:  # a restore needs every file of the snapshot
                    if not _exists(str(self.root / f)):
                        raise _damaged(str(self.root / f), name, "missing")
                with writing(self.root, f"tables/{name}"):
                    dt.restore(entry["version"])
                pause_point("recover")
                dt = self._open_table(path)
            if self._rel_files(dt) != sorted(entry["files"]):
                # Its log lost commits the snapshot relies on: appending on top would drop
                # rows from the next snapshot without a word.
                raise StoreCorrupt(
                    f"the Delta table {path} no longer matches the store's snapshot "
                    f"(version {dt.version()}, snapshot {entry['version']}). Run "
                    "`runstore repair` (it rebuilds the table's log from the snapshot).")

    def _open_table(self, path: Any) -> Any:
        try:
            return delta_table(path)
        except Exception as e:  # deltalake raises its own error types
            raise StoreCorrupt(
                f"cannot open the Delta table {path}: {one_line(e)}. Run "
                "`runstore repair` (it rebuilds the table's log from the last snapshot).") from e

    def _sweep_temporaries(self) -> None:
        sweep_temporaries(self.root)

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
    def take_staged(self) -> Staged:
        """Hand over what is staged; the writer stages afresh from here on. Pass it to
        `commit(staged=...)`, which may then run in another thread while this one stages
        the next batch (the caller keeps one commit at a time, and holds the lock until the
        last one has returned)."""
        staged = Staged(self._deletes, self._appends)
        self._deletes, self._appends, self.staged_rows = {}, {}, 0
        return staged

    def commit(self, *, ledger: pa.Table | None, last_ingest: dict | None = None,
               settings: dict | None = None, staged: Staged | None = None) -> Manifest:
        """Apply staged deletes and appends (`staged`, or what is staged now), write the
        ledger, publish a new manifest."""
        from concurrent.futures import ThreadPoolExecutor

        assert self.manifest is not None, "store has no manifest; run migrations first"
        if isinstance(self.lock, Lease):
            self.lock.renew()  # before writing anything: stop if the lease was lost
        if staged is None:
            staged = Staged(self._deletes, self._appends)
        tables = {k: dict(v) for k, v in self.manifest.tables.items()}
        touched = sorted(set(staged.deletes) | set(staged.appends))
        # Tables are separate Delta logs: two are written at a time (the writes are Rust and
        # release the GIL), so the last, inline commit of an ingest keeps both cores busy.
        with ThreadPoolExecutor(COMMIT_THREADS, thread_name_prefix="runstore-write") as pool:
            done = [pool.submit(self._write_table, name, staged, tables.get(name))
                    for name in touched]
            for name, fut in zip(touched, done):
                tables[name] = fut.result()
        if staged.deletes is self._deletes:  # committed what was staged: start afresh
            self._deletes, self._appends, self.staged_rows = {}, {}, 0
        ledger_rel = self.manifest.ledger
        seq = self.manifest.seq + 1
        if ledger is not None:
            ledger_rel = f"{LEDGERS}/{seq:08d}.parquet"
            with writing(self.root, ledger_rel):
                write_new_parquet(self.root / ledger_rel, ledger)
            pause_point("ledger")
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

    def _write_table(self, name: str, staged: Staged,
                     before: dict[str, Any] | None) -> dict[str, Any]:
        """Apply one table's staged deletes and appends; its new manifest entry (`before`:
        the entry of the snapshot it builds on)."""
        from deltalake import write_deltalake

        path = self.root / "tables" / name
        with writing(self.root, f"tables/{name}"):
            preds = staged.deletes.get(name)
            if preds:
                # One delete per table and commit: each Delta delete rewrites the files it
                # hits.
                delta_table(path).delete(" OR ".join(f"({p})" for p in preds))
            parts = staged.appends.get(name)
            if parts:
                data = pa.concat_tables(parts).cast(schema_mod.schema(name))
                if name in GROUP_ROWS_BY:
                    data = group_rows(data, GROUP_ROWS_BY[name])
                write_deltalake(str(path), data, mode="append",
                                writer_properties=writer_properties(name),
                                storage_options=storage_options(path))
                self.rows_added[name] = self.rows_added.get(name, 0) + data.num_rows
            pause_point("write")
            dt = delta_table(path)
            if len(dt.file_uris()) > int(os.environ.get("RUNSTORE_COMPACT_FILES")
                                         or COMPACT_FILES):
                dt.optimize.compact(writer_properties=writer_properties(name))
                dt = delta_table(path)
                dt.create_checkpoint()
                pause_point("compact")
            # The delete and the compaction read the files they replaced: were any damaged,
            # their rows would come back in new files whose hashes vouch for them.
            integrity.check_removed(self.root, name, before, self._rel_files(dt))
            return integrity.entry(self.root, dt, before)

    def publish(self, m: Manifest) -> None:
        with writing(self.root, f"{MANIFESTS}/{m.seq:08d}.json"):
            publish_manifest(self.root, m)
        self.manifest = m
        pause_point("publish")
        vacuum_mod.prune(self.root)

    def _rel_files(self, dt: Any) -> list[str]:
        return rel_files(self.root, dt)

    def compact(self) -> dict[str, int]:
        """Compact every table to few files and checkpoint its log; publish the snapshot.
        Returns each table's file count before. Nothing is deleted (see `vacuum`)."""
        assert self.manifest is not None
        # Compacting reads every live file: a damaged one would be carried into new files
        # whose hashes vouch for it. So every file is checked against its hash first.
        damaged = damaged_file(self.root, self.manifest, hashes=True)
        if damaged is not None:
            raise damaged
        tables = {k: dict(v) for k, v in self.manifest.tables.items()}
        before = {}
        for name, entry in sorted(self.manifest.tables.items()):
            path = self.root / "tables" / name
            if not entry["files"] and "_delta_log" not in listdir(path):
                before[name] = 0  # a table no commit has created yet
                continue
            with writing(self.root, f"tables/{name}"):
                dt = delta_table(path)
                before[name] = len(dt.file_uris())
                dt.optimize.compact(writer_properties=writer_properties(name))
                dt = delta_table(path)
                dt.create_checkpoint()
                pause_point("compact")
                tables[name] = integrity.entry(self.root, dt, entry)
        m = Manifest(**{**self.manifest.__dict__, "seq": self.manifest.seq + 1,
                        "tables": tables, "created_at": utcnow().isoformat()})
        self.publish(m)
        return before

    def vacuum(self, hours: float) -> "vacuum_mod.VacuumReport":
        """Delete the files no snapshot needs any more (see vacuum.py); after a publish."""
        with writing(self.root, "tables (vacuum)"):
            return vacuum_mod.vacuum(self.root, hours)


def group_rows(data: pa.Table, column: str) -> pa.Table:
    """`data` stably sorted by `column`, as one chunk (deltalake writes a many-chunk table as
    8192-row batches in parallel and interleaves them; one chunk keeps the order).

    Normalized metrics arrive as long runs of one key (a run's buffer is unpivoted column by
    column), so the runs of each batch are found in place and reordered by slicing: the one
    copy made is the final single chunk, without the per-row gather of a sort.
    """
    import numpy as np
    import pyarrow.compute as pc

    if data.num_rows < 2:
        return data.combine_chunks()
    segments: list[tuple[bool, str, int, pa.RecordBatch]] = []  # sort key, then position
    for batch in data.to_batches():
        n = batch.num_rows
        if not n:
            continue
        values = batch.column(column)
        changed = pc.fill_null(pc.not_equal(values.slice(1), values.slice(0, n - 1)), True)
        starts = np.concatenate([[0], np.flatnonzero(changed.to_numpy(zero_copy_only=False)) + 1])
        ends = np.append(starts[1:], n)
        for value, a, b in zip(values.take(pa.array(starts)).to_pylist(), starts, ends):
            segments.append((value is None, value or "", len(segments),
                             batch.slice(int(a), int(b - a))))
        if len(segments) > data.num_rows // 64:  # values interleave row by row (line-by-line
            return _sort_rows(data, column)      # buffers): a sort is faster than slices
    segments.sort(key=lambda seg: seg[:3])
    return pa.Table.from_batches([seg[3] for seg in segments], schema=data.schema).combine_chunks()


def _sort_rows(data: pa.Table, column: str) -> pa.Table:
    """`group_rows` by a sort: ranks of the dictionary codes (~10x faster than the strings)."""
    import pyarrow.compute as pc

    data = data.combine_chunks()
    coded = data.column(column).chunk(0).dictionary_encode()
    ranks = pc.take(pc.rank(coded.dictionary, "ascending"), coded.indices)
    return data.take(pc.sort_indices(ranks))


# Float columns of (nearly) unique values: a dictionary page would only be built to be
# dropped (measured on the bench spans: 12% less CPU to write, 5% smaller files without it).
_NO_DICTIONARY = {"spans": ("duration_s", "wall_start_s", "wall_end_s")}


def writer_properties(table: str) -> Any:
    """Parquet settings for a table's new files (Snappy, deltalake's default codec)."""
    from deltalake import ColumnProperties, WriterProperties

    plain = {c: ColumnProperties(dictionary_enabled=False) for c in _NO_DICTIONARY.get(table, ())}
    # Without a compression WriterProperties writes uncompressed files.
    return WriterProperties(compression="SNAPPY", column_properties=plain or None,
                            data_page_row_count_limit=PAGE_ROWS if table in GROUP_ROWS_BY else None)


def sweep_temporaries(root: Root) -> None:
    """Delete the half-written temporaries (`.NAME.UUID.tmp`) a killed writer left behind: no
    reader ever opens them, and only the lock holder (the caller) creates them. (On S3 an
    object appears whole or not at all: there are none.)"""
    if isinstance(root, S3):
        return
    for sub in (MANIFESTS, LEDGERS, vacuum_mod.RETIRED):
        d = root / sub
        try:
            names = os.listdir(d)
        except (FileNotFoundError, NotADirectoryError):
            continue
        for n in names:
            if n.startswith(".") and n.endswith(".tmp"):
                try:
                    (d / n).unlink()
                except OSError:
                    pass


def delta_table(path: Any) -> Any:
    """The Delta table at a local path or under an S3 prefix."""
    from deltalake import DeltaTable

    return DeltaTable(str(path), storage_options=storage_options(path))


def rel_files(root: Root, dt: Any) -> list[str]:
    """The live files of a DeltaTable as paths relative to the store root, sorted."""
    if isinstance(root, S3):
        base = root.uri() + "/"
        return sorted(u[len(base):] if u.startswith(base) else u for u in dt.file_uris())
    base = str(root.resolve())
    out = []
    for uri in dt.file_uris():
        p = uri[len("file://"):] if uri.startswith("file://") else uri
        out.append(os.path.relpath(os.path.realpath(p), base))
    return sorted(out)


def write_new_parquet(path: Any, table: pa.Table) -> None:
    """Write a Parquet file that did not exist before (aside, then renamed into place; on S3
    with a conditional put)."""
    import pyarrow.parquet as pq

    if isinstance(path, S3):
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd", write_page_checksum=True)
        path.write_new("", sink.getvalue().to_pybytes())
        return

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        pq.write_table(table, tmp, compression="zstd", write_page_checksum=True)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def writer(root: Root, *, lock_timeout: float = 60.0) -> Iterator[Writer]:
    w = Writer(root, lock_timeout=lock_timeout)
    with w:
        yield w
