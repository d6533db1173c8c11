"""The ingest ledger as the store keeps it: one entry per source file read, and the ids.

Contract: one `Entry` per (run, file) with the size and mtime seen at the last read, the byte
offset consumed (append-only files stop at the last complete newline), the number of complete
lines consumed, and a small JSON `state` that the ingest and the file's normalizer carry
between reads (see `ingest.changes`); one extra entry per run (`rel_path` "" and kind
`RUN_KIND`) remembers the run's name, path, layout and status, and one per eval store (kind
`EVAL_STORE_KIND`, keyed by the store's id as a run's entries are by its run_id) its name
and path. `run_id_for(path)` and
`source_id_for(run_id, rel_path)` are the stable ids that key entries and rows: the same
directory or file gets the same id whatever path reached it.

A snapshot's ledger is one Parquet file (`_runstore/ledger/N.parquet`, with page CRCs),
written by `write(root, rel, ledger)` before the manifest that names it is published, and
read by `read(root, manifest)`. What is read back is checked (`checked`, `Ledger.from_arrow`):
a file that is not a ledger (a missing column, a wrong type, an empty key, a `state` that is
not a JSON object) is a `LedgerDamaged` naming the file and saying to run `runstore repair`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import StoreCorrupt
from . import schema
from .manifest import Manifest, Root
from .snapshot import open_parquet

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported on first use: a query's connection needs none of it
    from ..lazy import pyarrow as pa

RUN_KIND = "run"
EVAL_STORE_KIND = "eval_store"  # the entry of an eval store (a unit of files that is not a run)


def run_id_for(resolved_path: str) -> str:
    """Stable run id: the same directory gets the same id whatever path reached it."""
    return hashlib.sha1(resolved_path.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def source_id_for(run_id: str, rel_path: str) -> int:
    """Stable 63-bit id of one source file of one run."""
    digest = hashlib.sha1(f"{run_id}/{rel_path}".encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


@dataclass
class Entry:
    source_id: int
    run_id: str
    rel_path: str
    kind: str
    size: int = 0
    mtime_ns: int = 0
    offset: int = 0
    lines: int = 0
    state: dict[str, Any] = field(default_factory=dict)


class Ledger:
    """All entries, keyed by (run_id, rel_path)."""

    def __init__(self, entries: list[Entry] | None = None):
        self.entries: dict[tuple[str, str], Entry] = {}
        for e in entries or []:
            self.entries[(e.run_id, e.rel_path)] = e

    @classmethod
    def from_arrow(cls, table: pa.Table, where: str = "of the newest snapshot") -> "Ledger":
        """The ledger in `table` (as read from the store: checked, see `checked`)."""
        entries = []
        for i, row in enumerate(checked(table, where).to_pylist()):
            try:
                state = json.loads(row["state"]) if row["state"] else {}
            except ValueError:
                state = None
            if not isinstance(state, dict):
                raise _damaged(where, f"row {i + 1}: state is not a JSON object")
            row["state"] = state
            entries.append(Entry(**row))
        return cls(entries)

    def to_arrow(self) -> pa.Table:
        rows = []
        for e in self.entries.values():
            row = dict(e.__dict__)
            row["state"] = json.dumps(e.state, allow_nan=True) if e.state else None
            rows.append(row)
        return schema.to_arrow("_ledger", rows)

    def get(self, run_id: str, rel_path: str) -> Entry | None:
        return self.entries.get((run_id, rel_path))

    def put(self, entry: Entry) -> None:
        self.entries[(entry.run_id, entry.rel_path)] = entry

    def runs(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.kind == RUN_KIND]


class LedgerDamaged(StoreCorrupt):
    """A ledger file that reads but is not a ledger; `why` says what is wrong with it."""

    def __init__(self, where: str, why: str):
        super().__init__(f"the ingest ledger {where} is damaged: {why}. Run `runstore repair` "
                         "(it rebuilds the ledger from the tables; the next ingest then reads "
                         "every source again).")
        self.why = why


def _damaged(where: str, why: str) -> LedgerDamaged:
    return LedgerDamaged(where, why)


def checked(table: pa.Table, where: str) -> pa.Table:
    """`table` with exactly the ledger's columns and types; a `StoreCorrupt` naming `where`
    (the file) when it is not a ledger runstore wrote: a column missing or of another type,
    or an empty key. (`Ledger.from_arrow` checks that each `state` is a JSON object.)"""
    target = schema.schema("_ledger")
    missing = [f.name for f in target if f.name not in table.column_names]
    if missing:
        raise _damaged(where, f"it has no column {', '.join(missing)}")
    try:
        out = table.select(target.names).cast(target)
    except (pa.ArrowException, ValueError) as e:
        raise _damaged(where, f"a column has the wrong type ({e})") from e
    for name in ("source_id", "run_id", "rel_path", "kind"):
        if out.column(name).null_count:
            raise _damaged(where, f"column {name} has empty values")
    return out


def read(root: Root, manifest: Manifest) -> Ledger:
    """The ledger of snapshot `manifest` (empty when it lists none), checked."""
    if not manifest.ledger:
        return Ledger()
    path = root / manifest.ledger
    try:
        # not snapshot.read_table: it would import pyarrow.dataset (~70 ms)
        table = checked(open_parquet(str(path)).read(), str(path))
    except (OSError, pa.ArrowException) as e:
        raise StoreCorrupt(f"cannot read the ingest ledger {path}: {e}. Run `runstore repair`.") from e
    return Ledger.from_arrow(table)


def write(root: Root, rel: str, ledger: pa.Table) -> None:
    """Write a ledger file that no snapshot lists yet (see `Location.write_unpublished`)."""
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(ledger, sink, compression="zstd", write_page_checksum=True)
    root.write_unpublished(rel, sink.getvalue().to_pybytes())
