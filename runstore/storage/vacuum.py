"""Retention: which old manifests, ledgers and data files the store keeps, and deleting the rest.

A data file stops being used when the last manifest listing it is superseded (the next one is
published without it). Until then, and for a grace period after, someone may still read it: a
query that read the manifest before the next one appeared, `runstore repair` falling back to
an older snapshot, a writer rolling a table back to the newest snapshot (Delta `restore` needs
that snapshot's files), Spark reading a file list it was given. So, for every command and on
local disk and S3 alike:

* Nothing here deletes a file that a manifest on disk lists, nor one unlisted for less than
  the retention `max(--vacuum-hours, READER_GRACE_S)`. Only the lock holder deletes, and only
  after its own snapshot is published.
* `prune` runs after every publish: manifests beyond the newest KEEP_MANIFESTS are removed,
  oldest first. Before one goes, the files only it still listed are written to a record
  `_runstore/retired/N.json` with the time they stopped being listed (when its successor was
  published), so that time survives the manifest. Its ledger goes too, unless a kept manifest
  shares it (a snapshot that changed no ledger points at the one before).
* `vacuum(root, hours)` (`runstore compact --vacuum-hours H`) first removes the manifests
  superseded more than the retention ago (never the newest), recording what they listed the
  same way; then deletes each data file under `tables/` that no remaining manifest lists and
  whose recorded time is older than the retention. A file unlisted with no record (written by
  a writer that died before publishing, or dropped before records existed) gets one now with
  the newest manifest's time: whatever listed it was superseded by then. Ledgers no manifest
  lists are deleted, and records whose files are all gone. If any manifest cannot be read, it
  deletes nothing and says to run `runstore repair` (it cannot know what that manifest lists).
* A file listed again after it was recorded (only `repair` can do that, by falling back to an
  older snapshot) must not keep its old time: `repair` drops every record when it publishes.

Every step is a plain delete of a file nothing live needs, so a kill at any point leaves a
store that answers, with the same rows; the next vacuum finishes the work.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..crashpoints import pause_point
from ..errors import StoreCorrupt
from .manifest import LEDGERS, Manifest, Root, load, manifest_paths

KEEP_MANIFESTS = 20
READER_GRACE_S = 600.0  # $RUNSTORE_READER_GRACE_SECONDS overrides it (tests make it short)
RETIRED = "_runstore/retired"


def grace_seconds() -> float:
    return float(os.environ.get("RUNSTORE_READER_GRACE_SECONDS") or READER_GRACE_S)


def _when(iso: str, default: float) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except (TypeError, ValueError):
        return default  # unknown: as recent as `default`, so never deleted early


def _files(m: Manifest) -> set[str]:
    return {f for e in m.tables.values() for f in e["files"]}


def _record(root: Root, name: str, at: float, files: set[str]) -> None:
    body = json.dumps({"superseded_at": datetime.fromtimestamp(at, timezone.utc).isoformat(),
                       "files": sorted(files)}, indent=0).encode()
    root.put(f"{RETIRED}/{name}", body)


def _retire(root: Root, chain: list[tuple[int, Any, Manifest]], n: int, now: float) -> None:
    """Remove the oldest `n` manifests of `chain` (readable, by number), recording first the
    files each was the last to list, and their ledgers no remaining manifest shares."""
    for i in range(n):
        seq, path, m = chain[i]
        rest = chain[i + 1:]
        still = set().union(*(_files(r) for _, _, r in rest))
        gone = _files(m) - still
        if gone:
            _record(root, f"{seq:08d}.json", _when(rest[0][2].created_at, now), gone)
        path.unlink(missing_ok=True)
        if m.ledger and all(r.ledger != m.ledger for _, _, r in rest):
            root.delete(m.ledger)
        pause_point("prune")


def _chain(root: Root) -> tuple[list[tuple[int, Any, Manifest]], list[tuple[Any, str]]]:
    """Every manifest on disk that reads, by number, and those that do not (path, why)."""
    good, bad = [], []
    for seq, path in manifest_paths(root):
        try:
            good.append((seq, path, load(path, seq)))
        except (OSError, ValueError) as e:
            bad.append((path, str(e)))
    return good, bad


def prune(root: Root, keep: int = KEEP_MANIFESTS) -> None:
    """Drop manifests (and ledgers) older than the newest `keep` snapshots; best effort: a
    failure leaves them for the next writer, since nothing depends on their absence."""
    paths = manifest_paths(root)
    if len(paths) <= keep:
        return
    chain, bad = _chain(root)
    if bad:
        return  # an unreadable one may list anything: `runstore repair` sets it aside first
    try:
        _retire(root, chain, len(chain) - keep, time.time())
    except OSError:
        pass


@dataclass
class VacuumReport:
    """What `vacuum` did."""

    retention_hours: float
    files_deleted: int = 0
    bytes_deleted: int = 0
    manifests_removed: int = 0
    ledgers_deleted: int = 0
    files_kept: int = 0  # unlisted, but not for long enough
    deleted: list[str] = field(default_factory=list)

    def summary(self) -> str:
        mb = self.bytes_deleted / 1e6
        h = self.retention_hours
        span = f"{h:g} h" if h >= 1 else f"{h * 60:.3g} min"
        text = (f"vacuum: deleted {self.files_deleted} data file"
                f"{'s' if self.files_deleted != 1 else ''} ({mb:.1f} MB) no snapshot has "
                f"listed for more than {span}, {self.manifests_removed} old "
                f"snapshot{'s' if self.manifests_removed != 1 else ''} and "
                f"{self.ledgers_deleted} ledger{'s' if self.ledgers_deleted != 1 else ''}")
        if self.files_kept:
            text += (f"; kept {self.files_kept} unlisted for less than {span} (a query may "
                     "still read them)")
        return text


def _data_files(root: Root) -> dict[str, int]:
    """Every Parquet file inside a table directory (outside its Delta log, temporaries left
    out): rel path -> size."""
    out: dict[str, int] = {}
    for e in (root / "tables").walk_files(skip_dirs=("_delta_log",)):
        name = e.rel.rsplit("/", 1)[-1]
        if "/" in e.rel and name.endswith(".parquet") and not name.startswith("."):
            out[f"tables/{e.rel}"] = e.size
    return out


def _records(root: Root) -> dict[str, tuple[float, list[str]]]:
    """Record name -> (time, files); unreadable records are ignored (their files then get a
    new, later time, which only delays their deletion)."""
    out = {}
    d = root / RETIRED
    for name in d.list():
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            data = json.loads((d / name).read_text())
            files = [f for f in data["files"] if isinstance(f, str)]
            out[name] = (datetime.fromisoformat(data["superseded_at"]).timestamp(), files)
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return out


def vacuum(root: Root, hours: float, *, now: float | None = None) -> VacuumReport:
    """Delete what no manifest needs any more (see the module doc). The caller holds the write
    lock and has published its snapshot."""
    now = time.time() if now is None else now
    retention = max(hours * 3600.0, grace_seconds())
    report = VacuumReport(retention_hours=retention / 3600.0)
    chain, bad = _chain(root)
    if bad:
        path, why = bad[0]
        raise StoreCorrupt(
            f"did not vacuum: the manifest {path} cannot be read ({why}), and it may list "
            "files still in use. Run `runstore repair`, then vacuum again.")
    if not chain:
        return report
    cutoff = now - retention
    old = 0
    while old < len(chain) - 1 and _when(chain[old + 1][2].created_at, now) <= cutoff:
        old += 1
    _retire(root, chain, old, now)
    report.manifests_removed = old
    chain = chain[old:]
    listed = set().union(*(_files(m) for _, _, m in chain))
    records = _records(root)
    since: dict[str, float] = {}
    for at, files in records.values():
        for f in files:
            since[f] = max(since.get(f, at), at)
    unlisted = {f: size for f, size in _data_files(root).items() if f not in listed}
    found = {f for f in unlisted if f not in since}
    if found:
        at = _when(chain[-1][2].created_at, now)
        _record(root, f"found-{chain[-1][0]:08d}-{uuid.uuid4().hex[:8]}.json", at, found)
        since.update({f: at for f in found})
    for f in sorted(unlisted):
        if since[f] > cutoff:
            report.files_kept += 1
            continue
        pause_point("vacuum")
        root.delete(f)
        report.files_deleted += 1
        report.bytes_deleted += unlisted[f]
        report.deleted.append(f)
    ledgers = {m.ledger for _, _, m in chain}
    for name in (root / LEDGERS).list():
        rel = f"{LEDGERS}/{name}"
        if name.endswith(".parquet") and rel not in ledgers:
            root.delete(rel)
            report.ledgers_deleted += 1
    left = set(_data_files(root)) - listed
    for name, (_, files) in _records(root).items():
        if not left.intersection(files):
            root.delete(f"{RETIRED}/{name}")
    return report


def forget(root: Root) -> None:
    """Drop every record (`repair` does, when it may have listed old files again)."""
    for name in (root / RETIRED).list():
        root.delete(f"{RETIRED}/{name}")
