"""Whether an ingest would change nothing, from the sources' `stat` and a few small store files.

Contract: a complete ingest records in its last snapshot's `last_ingest` (`record`) what a
later one compares: the `signature` of what it discovered (each run's id, name, layout, kind
and leftover temporary files, and each file's path, kind, size, mtime and ctime: what
`changes.unchanged` compares, so the same files give the same signature), the ledger file the
snapshot names, the time until which no run's status can change (`stable_until`: a `running`
run turns `idle` at the macro `running_until` of its newest file's time; none before), and how
many runs the ledger knows that this ingest did not see and are not `missing` (`elsewhere`:
one of them may have vanished since); the writer adds the fingerprint of the store files the
snapshot was published over (storage/fingerprint.py).

`check(root, manifest, runs, now)` returns, for the runs an ingest discovered, the report of an
ingest that changes nothing when that ingest would change nothing: the snapshot's schema is
current (no migration pending), its ledger is the one recorded (no ingest, repair or forget
has written another since), the signature is the same (no file appeared, vanished or
changed, no run was renamed or moved), every run's status is as stored (`now` before
`stable_until`) and no run was left unseen (`elsewhere` is 0); and then, holding the store's
write lock (storage/lock.py, taken without waiting), the newest snapshot is still that one
and the store's fingerprint is the one recorded: no Delta log entry added, lost or damaged,
no ledger replaced or damaged (its bytes are hashed), no table directory appeared or went.
Otherwise None, and the ingest takes its whole path, which reads and writes what has changed
and reports what it meets exactly as it would without this shortcut: a lock another writer
holds (it waits, then gives up naming the holder), a lock path that is not a file, a damaged
ledger or log. So this shortcut never answers "unchanged" over a damaged or locked store.
It reads the manifest (JSON), `stat`s the sources and reads the ledger and each table's log
tail: no Parquet decoder, no Delta table, no pyarrow import, nothing written but the lock's
holder line. A store that cannot be written is refused as a writing ingest refuses it.
tests/ingest/test_ingest_unchanged.py holds the two paths to the same answer.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Iterable

from ..errors import RunstoreError
from ..storage import fingerprint
from ..storage.lock import lock_for
from ..storage.manifest import Manifest, Root, read_manifest
from ..storage.versions import check_version, pending
from .discover import EVAL_STORE, RunDir
from .report import IngestReport

KEY = "unchanged"  # where `record` puts its facts in `last_ingest`


def signature(runs: Iterable[RunDir]) -> str:
    """The digest of what an ingest compares of the discovered runs and files."""
    h = hashlib.sha256()
    for rd in runs:
        h.update(f"run\0{rd.run_id}\0{rd.run_name}\0{rd.layout}\0{rd.kind}\0"
                 f"{chr(1).join(rd.tmp_files)}\n".encode("utf-8", "surrogateescape"))
        for f in rd.files:
            h.update(f"{f.rel_path}\0{f.kind}\0{f.size}\0{f.mtime_ns}\0{f.ctime_ns}\n"
                     .encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def record(runs: list[RunDir], ledger: str, stable_until: float, elsewhere: int
           ) -> dict[str, Any]:
    """What `check` compares, as `last_ingest[KEY]` of a complete ingest's last snapshot."""
    return {"signature": signature(runs), "ledger": ledger,
            "stable_until": None if stable_until == float("inf") else stable_until,
            "elsewhere": elsewhere}


def check(root: Root, manifest: Manifest | None, runs: list[RunDir], now: float | None
          ) -> IngestReport | None:
    """The report of an ingest of the discovered `runs` that changes nothing, or None when
    it might change something (see the module)."""
    facts = (manifest.last_ingest or {}).get(KEY) if manifest is not None else None
    if not isinstance(facts, dict) or not runs:
        return None
    check_version(manifest.schema_version)
    until = facts.get("stable_until")
    if (pending(manifest.schema_version) or facts.get("ledger") != manifest.ledger
            or facts.get("elsewhere") != 0
            or (until is not None and (time.time() if now is None else now) >= until)
            or facts.get("signature") != signature(runs)):
        return None
    root.check_writable()  # as a writing ingest does: a store it cannot write is an error
    lock = lock_for(root)
    try:
        lock.acquire(0)  # held by another writer, or no lock file: the whole path says so
    except (RunstoreError, OSError):
        return None
    try:
        newest = read_manifest(root)
        if newest is None or newest.seq != manifest.seq or not fingerprint.holds(root, newest):
            return None
    except (RunstoreError, OSError):
        return None
    finally:
        lock.release()
    n = sum(rd.kind != EVAL_STORE for rd in runs)  # an eval store is no run (run.py)
    return IngestReport(runs_unchanged=n, runs_total=n, eval_stores=len(runs) - n,
                        complete=True)
