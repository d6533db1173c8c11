"""The ingest ledger: what was read from which source file, and what is new since.

Contract: one `Entry` per (run, file) with the size and mtime seen at the last read, the byte
offset consumed (append-only files stop at the last complete newline, so a cut last line is
read next time), the number of complete lines consumed (so warnings name the right line), and
a small JSON `state` a normalizer carries between reads. One extra entry per run (`rel_path`
"" and kind "run") remembers the run's name, path, layout and status. `plan(entry, file)`
decides what to read: nothing, the new bytes, or the whole file (first read, a write-once
file that changed, an append-only file that shrank or whose bytes before the offset changed,
or an entry `runstore repair` marked with `state["reread"]` because some of its rows were lost:
the whole file is then read again and replaces what is left of its rows).
The ledger is saved as one Parquet file per snapshot by `tables.Writer.commit`. What is read back
is checked (`checked`, `Ledger.from_arrow`): a file that is not a ledger (a missing column, a
wrong type, an empty key, a `state` that is not a JSON object) is a `LedgerDamaged` naming the
file and saying to run `runstore repair`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa

from . import schema
from .discover import APPEND_ONLY, SourceFile
from .errors import StoreCorrupt

Action = Literal["skip", "append", "full"]
RUN_KIND = "run"
TAIL = 64  # bytes before the offset remembered to notice a file rewritten behind our back


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


@dataclass(frozen=True)
class Plan:
    action: Action
    start: int  # byte offset to read from
    first_line: int  # number of the first line read (1-based)
    replace: bool  # the file's earlier rows must be deleted first


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


def plan(entry: Entry | None, f: SourceFile, tail: bytes | None = None) -> Plan:
    """What to read of `f` given what the ledger remembers of it.

    `tail` is the file's current bytes just before the remembered offset (the caller reads
    them only for append-only files that grew); a mismatch means the file was rewritten.
    """
    if entry is None:
        return Plan("full", 0, 1, False)
    if entry.state.get("reread"):
        return Plan("full", 0, 1, True)  # `runstore repair` lost some of this file's rows
    if f.kind in APPEND_ONLY:
        if f.size < entry.offset:
            return Plan("full", 0, 1, True)  # truncated (e.g. metrics on resume)
        if tail is not None and entry.state.get("tail") not in (None, tail.hex()):
            return Plan("full", 0, 1, True)
        if f.size == entry.offset or (f.size == entry.size and f.mtime_ns == entry.mtime_ns):
            return Plan("skip", entry.offset, entry.lines + 1, False)
        return Plan("append", entry.offset, entry.lines + 1, False)
    if f.size == entry.size and f.mtime_ns == entry.mtime_ns:
        return Plan("skip", 0, 1, False)
    return Plan("full", 0, 1, True)
