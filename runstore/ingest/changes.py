"""What is new in a source file since the ledger's entry for it (the ledger diff).

Contract: a file's ledger entry (`storage.ledger.Entry`) holds the size and mtime seen at the
last read, the byte offset consumed (append-only files stop at the last complete newline, so
a cut last line is read next time), the number of complete lines consumed (so warnings name
the right line), and in its `state`, beside what the file's normalizer carries between reads,
the file's fingerprint: its ctime (local files), the last `TAIL` bytes before the offset, and
a CRC-32 of everything before the offset while that is at most `PREFIX_HASH_MAX` bytes
(`fingerprint` records it after each read).

`plan(entry, file, prefix_changed)` decides what to read: nothing when `unchanged` (same size,
mtime — on S3 the object's change token — and ctime), the new bytes of an append-only file
that grew with the bytes before its offset as they were, else the whole file: the first read,
a write-once file that changed, an append-only file that kept its size or shrank (an append
always grows a file, so it was rewritten in place), one that grew but whose bytes before the
offset changed (`prefix_changed`, from `same_prefix`), or an entry `runstore repair` marked
with `state["reread"]` because some of its rows were lost; the whole file then replaces what is
left of its rows. docs/ingest.md says what this notices and what it cannot.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable, Literal

from ..storage.ledger import Entry
from .discover import APPEND_ONLY, SourceFile

Action = Literal["skip", "append", "full"]
TAIL = 64  # bytes before the offset remembered to notice a file rewritten behind our back
# Up to this offset a CRC-32 of every consumed byte is kept, and checked (by reading them all
# again) whenever the file grew: sound for small files, and bounded in cost. Checking every
# file so would read the whole of each growing file at every ingest (docs/ingest.md).
PREFIX_HASH_MAX = 1 << 20


@dataclass(frozen=True)
class Plan:
    action: Action
    start: int  # byte offset to read from
    first_line: int  # number of the first line read (1-based)
    replace: bool  # the file's earlier rows must be deleted first


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
