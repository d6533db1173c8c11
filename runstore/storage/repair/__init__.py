"""Repair: bring a damaged store back to a state every command accepts, keeping what it can.

Contract: `repair(root, sources)` mends what damage from outside leaves (a disk error, bit
rot, a file deleted or edited by hand, a copy cut short); it takes the write lock, never
touches a source, moves what it sets aside to `_runstore/quarantine/<time>/` instead of
deleting it, and publishes one new snapshot (nothing at all when the store is healthy).
`check(root, sources)` (`runstore repair --check`) finds the same damage and changes nothing.
`sources` (a `Sources`) is what repair asks of the ingest, which owns discovery and the
normalizer registry: which source files a run directory holds, and which file kinds write a
table. Stores on S3 are refused (repair them on a local copy). The newest readable manifest
is the truth; the steps (`mender.py`, with `tables.py` and `ledger.py`):

0. Places: a lock path that is not a regular file, and a file where a directory of the store
   belongs (`_runstore/manifests`, `_runstore/ledger`, `tables`, …), are set aside.
1. Manifests that cannot be read, or whose snapshot fields (numbers, tables, files, ledger) are
   invalid, are set aside; the newest good one is the snapshot to mend. Fields that do not
   change what the snapshot holds are reset in place: a setting of the wrong type is dropped
   (its default applies), invalid checksums are recomputed, an invalid migrations list is
   rebuilt from the schema version. With no good manifest left, one is rebuilt from the Delta
   tables as they are, and the ledger is rebuilt too (4).
2. Live files: every Parquet file the snapshot lists is read whole and hashed. One that is
   missing, unreadable, or whose bytes do not match the content hash recorded when it was
   written (bit rot, an edit) is removed from its table (a damaged one set aside). The sources
   whose rows it may have held (its Delta statistics bound their `source_id`s; without
   statistics, every source of a kind that writes the table) are marked `reread` in the
   ledger: the next ingest reads them whole and replaces what is left of their rows. Rows of
   sources that no longer exist cannot be read again: they are lost with the file. Live files
   with no recorded hash (written by an older runstore) get one.
3. Delta logs: a table whose log does not load, or whose state differs from the snapshot even
   after rolling back unpublished versions, gets a new log listing exactly the snapshot's live
   files (the files stay where they are; the old log is set aside). Its version restarts at 0.
4. Ledger: when it is missing, unreadable or not a ledger, it is rebuilt from the tables: one
   run entry per `runs` row and one entry per source found in the tables whose file still
   exists in its run, all marked `reread`, so the next ingest reads every source once more and
   replaces its rows (rows of sources no longer on disk are kept as they are).

Every step before the publication changes nothing a reader uses, so a kill at any point leaves
the previous snapshot answering; running `repair` again finishes the work.

`RepairReport.actions` says what was done (or, for `check`, would be), in words; `problems` the
damage found; `sources_to_reread` how many sources the next ingest will read again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...errors import StoreNotFound, UsageError
from ..lock import Lock
from ..manifest import Manifest, check_core, manifest_paths, mend
from ..versions import check_version
from .mender import Mender
from .report import RepairReport, Sources

__all__ = ["RepairReport", "Sources", "check", "repair"]


def repair(root: Path, sources: Sources, *, lock_timeout: float = 60.0,
           settings: dict[str, Any] | None = None) -> RepairReport:
    """Mend the store at `root` (see the module docstring); `sources` says which source
    files a run has and which kinds write each table; `settings`: the default of each known
    setting (a numeric one must hold a number)."""
    _open(root, "runstore repair")
    root.check_writable()
    fix = Mender(root, sources, settings or {})
    fix.lock_path()  # a directory in its place would stop the lock below
    lock = Lock(root)
    lock.acquire(lock_timeout)
    try:
        return fix.run()
    finally:
        lock.release()


def check(root: Path, sources: Sources, *,
          settings: dict[str, Any] | None = None) -> RepairReport:
    """Find what `repair` would mend, changing nothing and taking no lock: every live file of
    the newest snapshot is read whole and hashed (`report.problems`, empty when healthy)."""
    _open(root, "runstore repair --check")
    return Mender(root, sources, settings or {}, check=True).run()


def _open(root: Path, what: str) -> None:
    if root.is_remote:
        raise UsageError(
            f"{what} works on stores on local disk, not {root}: copy the store's prefix to a "
            "local directory (e.g. `aws s3 sync`), repair it there, and copy it back while "
            "nothing writes to it.")
    paths = manifest_paths(root)
    if not paths and not (root / "tables").is_dir():
        raise StoreNotFound(f"no store at {root}: nothing to repair")
    for seq, path in reversed(paths):
        m = _load_manifest(path, seq)
        if m is not None:
            check_version(m.schema_version)  # a newer runstore's store: refuse before writing
            return


def _load_manifest(path: Path, seq: int) -> Manifest | None:
    try:
        data = json.loads(path.read_text())
        check_core(data, seq=seq)
    except (OSError, ValueError):
        return None
    return mend(data)[0]

