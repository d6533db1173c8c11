"""The ingest ledger: what was read from which source file, and what is new since.

Contract: one `Entry` per (run, file) with the size and mtime seen at the last read, the byte
offset consumed (append-only files stop at the last complete newline, so a cut last line is
read next time), the number of complete lines consumed (so warnings name the right line), and
a small JSON `state` a normalizer carries between reads, beside the file's fingerprint: its
ctime (local files), the last `TAIL` bytes before the offset, and a CRC-32 of everything
before the offset while that is at most `PREFIX_HASH_MAX` bytes. One extra entry per run
(`rel_path` "" and kind "run") remembers the run's name, path, layout and status.

`plan(entry, file, prefix_changed)` decides what to read: nothing when `unchanged` (same size,
mtime — on S3 the object's change token — and ctime), the new bytes of an append-only file
that grew with the bytes before its offset as they were, else the whole file: the first read,
a write-once file that changed, an append-only file that kept its size or shrank (an append
always grows a file, so it was rewritten in place), one that grew but whose bytes before the
offset changed (`prefix_changed`, from `same_prefix`), or an entry `runstore repair` marked
with `state["reread"]` because some of its rows were lost; the whole file then replaces what is
left of its rows. docs/ingest.md says what this notices and what it cannot.
The ledger is saved as one Parquet file per snapshot by `tables.Writer.commit`.
What is read back is checked (`checked`, `Ledger.from_arrow`): a file that is not a
ledger (a missing column, a wrong type, an empty key, a `state` that is not a JSON object) is
a `LedgerDamaged` naming the file and saying to run `runstore repair`.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import pyarrow as pa

from ..storage import schema
from .discover import APPEND_ONLY, SourceFile
from ..errors import StoreCorrupt

Action = Literal["skip", "append", "full"]
RUN_KIND = "run"
TAIL = 64  # bytes before the offset remembered to notice a file rewritten behind our back
# Up to this offset a CRC-32 of every consumed byte is kept, and checked (by reading them all
# again) whenever the file grew: sound for small files, and bounded in cost. Checking every
# file so would read the whole of each growing file at every ingest (docs/ingest.md).
PREFIX_HASH_MAX = 1 << 20


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


def unchanged(entry: Entry | None, f: SourceFile) -> bool:
    """Whether `f` looks as it did when `entry` was recorded: the same size and mtime (on S3,
    the object's change token) and, for a local file whose ctime the entry knows, the same
    ctime. Nothing in user space sets a ctime back: `os.utime` restoring an mtime moves it."""
    if entry is None or (entry.size, entry.mtime_ns) != (f.size, f.mtime_ns):
        return False
    ctime = entry.state.get("ctime")
    return f.ctime_ns is None or ctime is None or ctime == f.ctime_ns


def check_start(entry: Entry) -> int:
    """Where the bytes `same_prefix` compares begin: all of the consumed prefix when the entry
    holds its CRC, else the last `TAIL` bytes before the offset."""
    return 0 if "crc" in entry.state else max(0, entry.offset - TAIL)


def same_prefix(entry: Entry, seen: bytes) -> bool:
    """Whether `seen`, the file's bytes from `check_start(entry)` to the remembered offset,
    are what was consumed."""
    if "crc" in entry.state:
        return zlib.crc32(seen) == entry.state["crc"]
    tail = entry.state.get("tail")
    return tail is None or seen[-TAIL:].hex() == tail


def fingerprint(entry: Entry, f: SourceFile, start: int, data: bytes,
                read_before: Callable[[int, int], bytes]) -> None:
    """Record in `entry` (whose offset now ends `data`, read from `start`) what the next
    ingest compares: the ctime, the tail and, while the offset is small enough, the CRC-32
    of the prefix, carried on from the one before when `data` was an append.
    `read_before(end, n)` gives the file's `n` bytes before `end`: the tail when `data` is
    shorter than it, the bytes before `start` when the ledger was written before the CRC."""
    if f.ctime_ns is not None:
        entry.state["ctime"] = f.ctime_ns
    if entry.offset == 0:
        return
    tail = data[-TAIL:] if len(data) >= TAIL else read_before(entry.offset, TAIL)
    entry.state["tail"] = tail.hex()
    if entry.offset > PREFIX_HASH_MAX:
        entry.state.pop("crc", None)
        return
    if start == 0:
        before = 0
    elif "crc" in entry.state:
        before = entry.state["crc"]
    else:
        before = zlib.crc32(read_before(start, start))
    entry.state["crc"] = zlib.crc32(data, before)


def plan(entry: Entry | None, f: SourceFile, prefix_changed: bool = False) -> Plan:
    """What to read of `f` given what the ledger remembers of it.

    `prefix_changed` is `not same_prefix(...)` for an append-only file that grew (the caller
    reads those bytes only then).
    """
    if entry is None:
        return Plan("full", 0, 1, False)
    if entry.state.get("reread"):
        return Plan("full", 0, 1, True)  # `runstore repair` lost some of this file's rows
    append_only = f.kind in APPEND_ONLY
    if unchanged(entry, f):
        return (Plan("skip", entry.offset, entry.lines + 1, False) if append_only
                else Plan("skip", 0, 1, False))
    if append_only and f.size > entry.size and f.size >= entry.offset and not prefix_changed:
        return Plan("append", entry.offset, entry.lines + 1, False)
    return Plan("full", 0, 1, True)


def grew(entry: Entry | None, f: SourceFile) -> bool:
    """Whether `plan` would read `f` from the offset if its bytes before it are unchanged (the
    caller then reads them for `same_prefix`)."""
    return (entry is not None and f.kind in APPEND_ONLY and entry.offset > 0
            and not entry.state.get("reread") and not unchanged(entry, f)
            and f.size > entry.size and f.size >= entry.offset)
