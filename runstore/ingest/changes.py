"""What is new in a source file since the ledger's entry for it (the ledger diff).

Contract: a file's ledger entry (`storage.ledger.Entry`) holds the size and mtime seen at the
last read, the byte offset consumed (append-only files stop at the last complete newline, so
a cut last line is read next time), the number of complete lines consumed (so warnings name
the right line), and in its `state`, beside what the file's normalizer carries between reads,
the file's fingerprint (`fingerprint` records it after each read of an append-only file):

* its ctime and inode number (local files; S3 objects have neither);
* the last `TAIL` bytes before the offset (hex);
* while the offset is at most `PREFIX_HASH_MAX` bytes, a CRC-32 of everything before it
  (`crc`); past that, a CRC-32 of `SAMPLES` blocks of `BLOCK` bytes spread evenly over the
  prefix (`sampled`; `sample_ranges(offset)` says where: the first block starts at byte 0,
  the last ends at the offset, so it holds the tail). All of it is some 200 bytes of JSON.

`plan(entry, file, prefix_changed)` decides what to read: nothing when `unchanged` (same size,
mtime — on S3 the object's change token — and ctime), the new bytes of an append-only file
that grew, is the same file (`replaced`: the inode, where both sides know it) and whose bytes
before the offset are as they were, else the whole file: the first read, a write-once file
that changed, an append-only file that kept its size or shrank (an append always grows a
file, so it was rewritten in place), one that grew but is another file now (written aside and
renamed over the old one: editors, `sed -i`) or whose checked bytes before the offset changed
(`prefix_changed`), or an entry `runstore repair` marked with `state["reread"]` because some
of its rows were lost; the whole file then replaces what is left of its rows.

The prefix check of a grown file is split so that the caller does the reading:
`check_ranges(entry)` names the byte ranges to read (the whole prefix up to 1 MiB, else the
sampled blocks, at most `SAMPLES * BLOCK` bytes; the tail alone for an entry written before
the samples existed), and `same_prefix(entry, blocks)` compares what was read, reading
nothing. So an in-place edit before the offset of a file that grew is noticed always when the
offset is at most 1 MiB, and past that when it touches a sampled block (or the tail, or shifts
the bytes after it); an edit elsewhere is not. docs/ingest.md says what this notices and what
it cannot.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable, Iterable, Literal

from ..storage.ledger import Entry
from .discover import APPEND_ONLY, SourceFile

Action = Literal["skip", "append", "full"]
Range = tuple[int, int]  # [start, end) byte offsets in a file
TAIL = 64  # bytes before the offset remembered to notice a file rewritten behind our back
# Up to this offset a CRC-32 of every consumed byte is kept, and checked (by reading them all
# again) whenever the file grew: sound for small files, and bounded in cost. Checking every
# file so would read the whole of each growing file at every ingest (docs/ingest.md).
PREFIX_HASH_MAX = 1 << 20
# Past it, blocks sampled across the prefix: 32 x 2 KiB = 64 KiB read per check, however big
# the file. Many small blocks rather than a few large ones: an edit that touches every line
# (a tool rewriting one key throughout) meets one for sure while lines are under BLOCK / 2
# (a block then holds a whole line). They never overlap: PREFIX_HASH_MAX >> SAMPLES * BLOCK.
SAMPLES = 32
BLOCK = 2048


@dataclass(frozen=True)
class Plan:
    action: Action
    start: int  # byte offset to read from
    first_line: int  # number of the first line read (1-based)
    replace: bool  # the file's earlier rows must be deleted first


def unchanged(entry: Entry | None, f: SourceFile) -> bool:
    """Whether `f` looks as it did when `entry` was recorded: the same size and mtime (on S3,
    the object's change token) and, for a local file whose ctime the entry knows, the same
    ctime. Nothing in user space sets a ctime back: `os.utime` restoring an mtime moves it.
    The inode is not asked: some file systems (FUSE mounts without stable inode numbers) give
    a file another one now and then, and every unchanged file would then be read again."""
    if entry is None or (entry.size, entry.mtime_ns) != (f.size, f.mtime_ns):
        return False
    ctime = entry.state.get("ctime")
    return f.ctime_ns is None or ctime is None or ctime == f.ctime_ns


def replaced(entry: Entry, f: SourceFile) -> bool:
    """Whether `f` is another file than the one `entry` recorded: its inode number changed
    (a file written aside and renamed over it, or deleted and made again under a new number).
    False when either side does not know it: on S3, or for an entry recorded before the ledger
    kept inodes (it records the inode at its next read, without reading the file again)."""
    ino = entry.state.get("ino")
    return f.ino is not None and ino is not None and ino != f.ino


def sample_ranges(offset: int) -> list[Range]:
    """The blocks whose CRC-32 the ledger keeps for a prefix of `offset` bytes: none up to
    `PREFIX_HASH_MAX` (the CRC of the whole prefix is kept), else `SAMPLES` blocks of `BLOCK`
    bytes evenly spread over [0, offset), the first at 0, the last ending at `offset`."""
    if offset <= PREFIX_HASH_MAX:
        return []
    last = offset - BLOCK
    return [(s, s + BLOCK) for s in (i * last // (SAMPLES - 1) for i in range(SAMPLES))]


def sample_crc(blocks: Iterable[bytes]) -> int:
    """One CRC-32 over the sampled blocks in order: any change inside them changes it (a
    CRC-32 misses no change of up to 32 consecutive bits, and others with odds of 2^-32), and
    one number is all the ledger needs, since any mismatch means reading the file whole."""
    crc = 0
    for block in blocks:
        crc = zlib.crc32(block, crc)
    return crc


def check_ranges(entry: Entry) -> list[Range]:
    """The bytes `same_prefix` compares: the whole consumed prefix when the entry holds its
    CRC, else the sampled blocks, else (an entry written before the samples) the last `TAIL`
    bytes before the offset."""
    if "crc" in entry.state:
        return [(0, entry.offset)]
    if "sampled" in entry.state:
        return sample_ranges(entry.offset)
    return [(max(0, entry.offset - TAIL), entry.offset)]


def same_prefix(entry: Entry, blocks: list[bytes]) -> bool:
    """Whether `blocks`, the file's bytes at `check_ranges(entry)` now, are what was consumed.
    A block cut short (the file is shorter than the offset now) is a change."""
    ranges = check_ranges(entry)
    if len(blocks) != len(ranges) or any(len(b) != e - s for b, (s, e) in zip(blocks, ranges)):
        return False
    if "crc" in entry.state:
        return zlib.crc32(blocks[0]) == entry.state["crc"]
    if "sampled" in entry.state:
        return sample_crc(blocks) == entry.state["sampled"]
    tail = entry.state.get("tail")
    return tail is None or blocks[0][-TAIL:].hex() == tail


def fingerprint(entry: Entry, f: SourceFile, start: int, data: bytes,
                read_ranges: Callable[[list[Range]], list[bytes]]) -> None:
    """Record in `entry` (whose offset now ends `data`, read from `start`) what the next
    ingest compares: the ctime and inode, the tail and, while the offset is small enough, the
    CRC-32 of the prefix, carried on from the one before when `data` was an append, else the
    CRC of the blocks sampled for the new offset. `read_ranges(ranges)` gives the file's bytes
    at `ranges`; it is asked only for what `data` does not hold: the tail when `data` is
    shorter than it, sampled blocks before `start`, the bytes before `start` when the ledger
    was written before the CRC."""
    if f.ctime_ns is not None:
        entry.state["ctime"] = f.ctime_ns
    if f.ino is not None:
        entry.state["ino"] = f.ino
    if entry.offset == 0:
        return
    tail = data[-TAIL:] if len(data) >= TAIL else read_ranges([(max(0, entry.offset - TAIL),
                                                               entry.offset)])[0]
    entry.state["tail"] = tail.hex()
    if entry.offset > PREFIX_HASH_MAX:
        entry.state.pop("crc", None)
        entry.state["sampled"] = sample_crc(_bytes_at(sample_ranges(entry.offset), start, data,
                                                      read_ranges))
        return
    entry.state.pop("sampled", None)
    if start == 0:
        before = 0
    elif "crc" in entry.state:
        before = entry.state["crc"]
    else:
        before = zlib.crc32(read_ranges([(0, start)])[0])
    entry.state["crc"] = zlib.crc32(data, before)


def _bytes_at(ranges: list[Range], start: int, data: bytes,
              read_ranges: Callable[[list[Range]], list[bytes]]) -> list[bytes]:
    """The bytes at `ranges`: from `data` (the file from `start`) where it holds them, the
    rest with one `read_ranges` call."""
    missing = [r for r in ranges if r[0] < start]
    read = iter(read_ranges(missing) if missing else [])
    return [next(read) if s < start else data[s - start:e - start] for s, e in ranges]


def plan(entry: Entry | None, f: SourceFile, prefix_changed: bool = False) -> Plan:
    """What to read of `f` given what the ledger remembers of it.

    `prefix_changed` is `not same_prefix(...)` for an append-only file that `grew` (the
    caller reads those bytes only then).
    """
    if entry is None:
        return Plan("full", 0, 1, False)
    if entry.state.get("reread"):
        return Plan("full", 0, 1, True)  # `runstore repair` lost some of this file's rows
    append_only = f.kind in APPEND_ONLY
    if unchanged(entry, f):
        return (Plan("skip", entry.offset, entry.lines + 1, False) if append_only
                else Plan("skip", 0, 1, False))
    if append_only and f.size > entry.size and f.size >= entry.offset and not prefix_changed \
            and not replaced(entry, f):
        return Plan("append", entry.offset, entry.lines + 1, False)
    return Plan("full", 0, 1, True)


def grew(entry: Entry | None, f: SourceFile) -> bool:
    """Whether `plan` would read `f` from the offset if its bytes before it are unchanged (the
    caller then reads `check_ranges` for `same_prefix`)."""
    return (entry is not None and f.kind in APPEND_ONLY and entry.offset > 0
            and not entry.state.get("reread") and not unchanged(entry, f)
            and f.size > entry.size and f.size >= entry.offset and not replaced(entry, f))
