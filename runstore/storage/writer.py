"""The writer: exclusive write access to a store, staging deletes and appends, publishing snapshots.

Layout of a store directory::

    tables/<name>/            one Delta table per public table (Parquet files + _delta_log/)
    _runstore/manifests/N.json  snapshot N: each table's Delta version, live files and their
                              content hashes, the ledger file, schema version, migrations
                              (manifest.py reads and checks them)
    _runstore/ledger/N.parquet  the ingest ledger as of snapshot N (ledger.py)
    _runstore/retired/*.json  when files stopped being listed by any kept snapshot (vacuum.py)
    _runstore/lock            the write lock (lock.py)

Contract:

* A snapshot is published by creating a new manifest file, which appears whole or not at all
  (`Location.create`). Readers take the newest manifest and read exactly the files it lists
  (snapshot.py): never a directory glob, never a file that changes under them (every
  Parquet file is written once and never modified).
* Only a holder of the lock writes. Delta versions written after the newest manifest belong
  to a writer that died before publishing; `Writer` rolls those tables back (Delta `restore`)
  and deletes its ledger files past the newest snapshot before writing anything, so a crash
  at any point loses only the unpublished work. A table the snapshot lists files of but whose
  log is gone, or a file the rollback would need that is gone, stops the writer with "run
  `runstore repair`".
* `delete(table, predicate)` stages a Delta delete: `predicate` is a sqlglot condition
  (`rows_where`), rendered as SQL text only when the delete runs; `append(table, data)`
  stages Arrow rows. `commit` applies what is staged (two tables at a time on disk, the
  location's `requests_at_once` on S3), writes the ledger, and publishes. Tables whose file
  count passes `COMPACT_FILES`, or `SMALL_COMPACT_FILES` for a table under
  `SMALL_TABLE_BYTES`, are compacted (and their Delta log checkpointed) at commit time, two
  at a time wherever the store lives (`COMPACTIONS_AT_ONCE`: each reads a whole table);
  `compact()` does it on demand. Every file a commit writes gets its content hash in the
  snapshot; a commit whose delete or compaction read a file that no longer matches its hash
  publishes nothing (integrity.py). New files are laid out by layout.py.
* Data files are deleted only by vacuum.py, after a publish, and never one a kept snapshot lists.
* A store may also live under an `s3://bucket/prefix`: the same layout as objects, Delta
  tables written by deltalake's own object store, and a lease instead of the fcntl lock
  (location.py and lock.py hold the differences).
* A failed write (disk full, read-only or vanished store directory, a data file missing under
  a Delta delete) surfaces as a `RunstoreError` naming what was being written and what to do
  (failures.py); nothing published before it is touched. repair.py mends what outside damage
  leaves.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from ..crashpoints import pause_point
from ..errors import StoreCorrupt
from ..waits import awaited
from . import fingerprint, integrity
from . import ledger as ledger_mod
from . import schema as schema_mod
from . import vacuum as vacuum_mod
from .failures import writing
from .layout import GROUP_ROWS_BY, group_rows, writer_properties
from .lock import Lease, Lock, lock_for
from .manifest import (LEDGERS, MANIFESTS, Manifest, Root, publish_manifest, read_manifest,
                       utcnow)
from .snapshot import damaged_file, delta_table, left_unpublished, open_delta
from .versions import check_version

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp
else:  # imported on first use: opening a snapshot for a query needs none of it
    from ..lazy import pyarrow as pa

COMPACT_FILES = 32  # $RUNSTORE_COMPACT_FILES overrides it (tests use it to compact often)
# A table under SMALL_TABLE_BYTES is compacted once it has more than SMALL_COMPACT_FILES files:
# every scan of a table opens each of its files, which for a small table (a row per run or
# per run and key) costs more than reading its rows, and an ingest that publishes a snapshot
# every few million rows writes a file into each table each time (docs/benchmarks.md).
SMALL_TABLE_BYTES = 1 << 20
SMALL_COMPACT_FILES = 4
COMMIT_THREADS = 2  # tables written at once by a commit (more where requests are round trips)
# Compactions at once, wherever the store lives: each reads and rewrites a whole table, so more
# at once would raise the writer's peak memory, not just its requests in flight.
COMPACTIONS_AT_ONCE = COMMIT_THREADS


def _should_compact(dt: Any) -> bool:
    """Whether a commit compacts this Delta table: past `COMPACT_FILES` files (or
    `$RUNSTORE_COMPACT_FILES`, which then decides alone), or past `SMALL_COMPACT_FILES`
    when its live files add up to less than `SMALL_TABLE_BYTES`."""
    n = len(dt.file_uris())
    override = os.environ.get("RUNSTORE_COMPACT_FILES")
    if override:
        return n > int(override)
    if n > COMPACT_FILES:
        return True
    if n <= SMALL_COMPACT_FILES:
        return False
    sizes = pa.table(dt.get_add_actions(flatten=True)).column("size_bytes")
    return sum(sizes.to_pylist()) < SMALL_TABLE_BYTES


def rows_where(**columns: Any) -> "exp.Condition":
    """The rows whose columns hold the given values, as a sqlglot condition for a Delta
    delete: a value is `column = value`, a list `column IN (...)`, None `IS NULL`. Values
    become literals that sqlglot writes (strings quoted and escaped by it), never text pasted
    into the predicate. (The nodes are made directly, without the copies sqlglot's builder
    helpers make: an ingest may stage thousands.)

    >>> rows_where(source_id=7, step=[1, 2]).sql()
    'source_id = 7 AND step IN (1, 2)'
    >>> rows_where(run_id=["ab'c"], dur_us=None).sql()
    "run_id IN ('ab''c') AND dur_us IS NULL"
    """
    from sqlglot import exp

    def literal(v: Any) -> exp.Literal:
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise TypeError(f"a delete predicate takes integers and strings, got {v!r}")
        return exp.Literal.string(v) if isinstance(v, str) else exp.Literal.number(v)

    out: exp.Expression | None = None
    for name, value in columns.items():
        col = exp.Column(this=exp.Identifier(this=name))
        if value is None:
            part: exp.Expression = exp.Is(this=col, expression=exp.Null())
        elif isinstance(value, (list, tuple)):
            part = exp.In(this=col, expressions=[literal(v) for v in value])
        else:
            part = exp.EQ(this=col, expression=literal(value))
        out = part if out is None else exp.And(this=out, expression=part)
    assert out is not None, "rows_where needs a column"
    return out


def _any_of(predicates: Sequence["exp.Condition"]) -> str:
    """One Delta delete predicate selecting the rows any of `predicates` selects:
    `(p1) OR (p2) OR ...`, as sqlglot writes it."""
    from sqlglot import exp

    out: exp.Expression = exp.Paren(this=predicates[0])
    for p in predicates[1:]:
        out = exp.Or(this=out, expression=exp.Paren(this=p))
    return out.sql()


@dataclass
class CompactReport:
    """What `Store.compact` did: each table's file count before, and the vacuum's report."""

    files_before: dict[str, int]
    vacuum: "vacuum_mod.VacuumReport | None" = None


@dataclass
class Staged:
    """Deletes (sqlglot conditions) and appends (Arrow tables) per table, to commit together."""

    deletes: dict[str, list["exp.Condition"]]
    appends: dict[str, list[pa.Table]]


class Writer:
    """Exclusive write access to a store: stage deletes and appends, publish snapshots."""

    def __init__(self, root: Root, *, lock_timeout: float = 60.0,
                 stop: Callable[[], str | None] | None = None):
        self.root = root
        self.lock: Lock | Lease = lock_for(root)
        self.lock_timeout = lock_timeout
        self.stop = stop  # polled while waiting for the lock (lock.py)
        self.manifest: Manifest | None = None
        self._deletes: dict[str, list["exp.Condition"]] = {}
        self._appends: dict[str, list[pa.Table]] = {}
        self.staged_rows = 0
        self.staged_bytes = 0  # Arrow bytes staged (a capture row holds whole token lists)
        self.rows_added: dict[str, int] = {}
        self._compacting = threading.BoundedSemaphore(COMPACTIONS_AT_ONCE)

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> "Writer":
        early = read_manifest(self.root)
        if early is not None:
            check_version(early.schema_version)  # a newer runstore's store: refuse before writing a byte
        self.root.check_writable()
        self.lock.acquire(self.lock_timeout, stop=self.stop)
        try:
            self.manifest = read_manifest(self.root)
            if self.manifest is not None:
                check_version(self.manifest.schema_version)  # it may have been upgraded while we waited
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
        self.root.sweep_temporaries((MANIFESTS, LEDGERS, vacuum_mod.RETIRED))
        self._drop_unpublished_ledgers()
        tables_dir = self.root / "tables"
        present = tables_dir.list()
        for name, entry in sorted((self.manifest.tables if self.manifest else {}).items()):
            if entry["files"] and "_delta_log" not in ((tables_dir / name).list()
                                                       if name in present else []):
                # Writing now would start a new, empty table and drop the snapshot's files
                # from the next snapshot without a word.
                raise StoreCorrupt(
                    f"the Delta log {tables_dir / name / '_delta_log'} is missing, but the "
                    f"store's snapshot lists {len(entry['files'])} files of table {name}. Run "
                    "`runstore repair` (it rebuilds the table's log from the snapshot).")
        for name in present:
            path = tables_dir / name
            if "_delta_log" not in path.list():
                continue
            entry = (self.manifest.tables.get(name) if self.manifest else None)
            if entry is None:
                version = self.manifest.schema_version if self.manifest else 0
                if left_unpublished(path, name, version):
                    # A writer killed before publishing created (or, a migration, filled)
                    # this table: nothing of it is visible, and it is written again.
                    with writing(self.root, f"tables/{name}"):
                        path.rmtree()
                    continue
                if self.manifest is None:
                    # Tables with data but no snapshot at all: the manifests were lost, this
                    # is not a first ingest that died. Removing the tables would lose data.
                    raise StoreCorrupt(
                        f"the store at {self.root} has tables but no manifest in "
                        f"{self.root / MANIFESTS}. Run `runstore repair` to rebuild it.")
                raise StoreCorrupt(
                    f"the store's snapshot does not list table {name}, but {path} holds "
                    "its data. Run `runstore repair` (it takes the table from its Delta "
                    "log).")
            dt = open_delta(path)
            if dt.version() == entry["version"]:
                continue
            if dt.version() > entry["version"] and self._rel_files(dt) != sorted(entry["files"]):
                for f in entry["files"]:  # a restore needs every file of the snapshot
                    if not (self.root / f).exists():
                        raise integrity.damaged(self.root, f, name, "missing")
                with writing(self.root, f"tables/{name}"):
                    dt.restore(entry["version"])
                pause_point("recover")
                dt = open_delta(path)
            if self._rel_files(dt) != sorted(entry["files"]):
                # Its log lost commits the snapshot relies on: appending on top would drop
                # rows from the next snapshot without a word.
                raise StoreCorrupt(
                    f"the Delta table {path} no longer matches the store's snapshot "
                    f"(version {dt.version()}, snapshot {entry['version']}). Run "
                    "`runstore repair` (it rebuilds the table's log from the snapshot).")

    def _drop_unpublished_ledgers(self) -> None:
        """Delete the ledger files past the newest snapshot: a writer killed between writing
        its ledger and publishing left them, no snapshot lists them, and on S3 (where a ledger
        is a create-once put) one would refuse every later commit of that snapshot number."""
        if self.manifest is None:
            return  # no snapshot to compare with: the ledgers may be all `repair` has left
        for name in (self.root / LEDGERS).list():
            seq = name.removesuffix(".parquet")
            if seq.isdigit() and int(seq) > self.manifest.seq:
                with writing(self.root, f"{LEDGERS}/{name}"):
                    self.root.delete(f"{LEDGERS}/{name}")

    # -- staging -----------------------------------------------------------------------
    def delete(self, table: str, predicate: "exp.Condition") -> None:
        """Stage a Delta delete of the rows `predicate` (a sqlglot condition, see
        `rows_where`) selects."""
        self._deletes.setdefault(table, []).append(predicate)

    def append(self, table: str, data: pa.Table) -> None:
        if data.num_rows == 0:
            return
        self._appends.setdefault(table, []).append(data)
        self.staged_rows += data.num_rows
        self.staged_bytes += data.nbytes

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
        self.staged_bytes = 0
        return staged

    def commit(self, *, ledger: pa.Table | None, last_ingest: dict | None = None,
               settings: dict | None = None, staged: Staged | None = None,
               stamp: bool = False) -> Manifest:
        """Apply staged deletes and appends (`staged`, or what is staged now), write the
        ledger, publish a new manifest; with `stamp`, its `last_ingest` (given) records the
        fingerprint of the files it was published over (fingerprint.py)."""
        from concurrent.futures import ThreadPoolExecutor

        assert self.manifest is not None, "store has no manifest; run migrations first"
        if isinstance(self.lock, Lease):
            self.lock.renew()  # before writing anything: stop if the lease was lost
        if staged is None:
            staged = Staged(self._deletes, self._appends)
        tables = {k: dict(v) for k, v in self.manifest.tables.items()}
        touched = sorted(set(staged.deletes) | set(staged.appends))
        # Tables are separate Delta logs: two are written at a time (the writes are Rust and
        # release the GIL), so the last, inline commit of an ingest keeps both cores busy; on
        # S3, where each of a table's requests waits a round trip, as many as pay off.
        threads = max(COMMIT_THREADS, self.root.requests_at_once)
        with ThreadPoolExecutor(threads, thread_name_prefix="runstore-write") as pool:
            done = [pool.submit(self._write_table, name, staged, tables.get(name))
                    for name in touched]
            for name, fut in zip(touched, done):
                tables[name] = awaited(fut)  # a signal is heard meanwhile (waits.py)
        if staged.deletes is self._deletes:  # committed what was staged: start afresh
            self._deletes, self._appends, self.staged_rows = {}, {}, 0
            self.staged_bytes = 0
        ledger_rel = self.manifest.ledger
        seq = self.manifest.seq + 1
        if ledger is not None:
            ledger_rel = ledger_path(seq)
            with writing(self.root, ledger_rel):
                ledger_mod.write(self.root, ledger_rel, ledger)
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
        if stamp:
            _stamp(self.root, m)
        self.publish(m)
        return m

    def _write_table(self, name: str, staged: Staged,
                     before: dict[str, Any] | None) -> dict[str, Any]:
        """Apply one table's staged deletes and appends; its new manifest entry (`before`:
        the entry of the snapshot it builds on)."""
        from deltalake import write_deltalake

        path = self.root / "tables" / name
        with writing(self.root, f"tables/{name}"):
            # The table's log is read once: its delete, append and compaction each move this
            # object to the version they commit (on S3, every open lists the log and reads
            # each commit since the last checkpoint).
            dt = delta_table(path)
            preds = staged.deletes.get(name)
            if preds:
                # One delete per table and commit: each Delta delete rewrites the files it
                # hits.
                dt.delete(_any_of(preds))
            parts = staged.appends.get(name)
            if parts:
                data = pa.concat_tables(parts).cast(schema_mod.schema(name))
                if name in GROUP_ROWS_BY:
                    data = group_rows(data, GROUP_ROWS_BY[name])
                write_deltalake(dt, data, mode="append",
                                writer_properties=writer_properties(name))
                self.rows_added[name] = self.rows_added.get(name, 0) + data.num_rows
            pause_point("write")
            if _should_compact(dt):
                with self._compacting:
                    dt.optimize.compact(writer_properties=writer_properties(name))
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
        return self.root.relative_files(dt.file_uris())

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
        # A valid fingerprint is carried forward (a compaction changes no row and no ledger
        # entry); one already stale (a damaged ledger compaction does not read) stays so.
        carried = fingerprint.holds(self.root, self.manifest)
        before = {}
        for name, entry in sorted(self.manifest.tables.items()):
            path = self.root / "tables" / name
            if not entry["files"] and "_delta_log" not in path.list():
                before[name] = 0  # a table no commit has created yet
                continue
            with writing(self.root, f"tables/{name}"):
                dt = delta_table(path)
                before[name] = len(dt.file_uris())
                dt.optimize.compact(writer_properties=writer_properties(name))
                dt.create_checkpoint()
                pause_point("compact")
                tables[name] = integrity.entry(self.root, dt, entry)
        m = Manifest(**{**self.manifest.__dict__, "seq": self.manifest.seq + 1,
                        "tables": tables, "created_at": utcnow().isoformat()})
        if carried:
            _stamp(self.root, m)
        self.publish(m)
        return before

    def vacuum(self, hours: float) -> "vacuum_mod.VacuumReport":
        """Delete the files no snapshot needs any more (see vacuum.py); after a publish."""
        with writing(self.root, "tables (vacuum)"):
            return vacuum_mod.vacuum(self.root, hours)



def _stamp(root: Root, m: Manifest) -> None:
    """Record in `m.last_ingest` the fingerprint of the store files `m` is published over."""
    m.last_ingest = {**(m.last_ingest or {}), fingerprint.KEY: fingerprint.of(root, m)}


def ledger_path(seq: int) -> str:
    """The ledger file a commit publishing snapshot `seq` writes."""
    return f"{LEDGERS}/{seq:08d}.parquet"


@contextmanager
def writer(root: Root, *, lock_timeout: float = 60.0,
           stop: Callable[[], str | None] | None = None) -> Iterator[Writer]:
    w = Writer(root, lock_timeout=lock_timeout, stop=stop)
    with w:
        yield w
