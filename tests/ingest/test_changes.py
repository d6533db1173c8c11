"""The ledger diff's pure parts (`runstore.ingest.changes`): where the sampled blocks lie, what
the fingerprint records, what `same_prefix` notices, and what `plan` makes of an inode.

The files here are bytes in memory (a seeded random prefix); `tests/ingest/test_rewrites.py`
does the same on real files through a real ingest. Each property is checked against the bytes
themselves: a change is made at a known position, and the answer expected follows from whether
that position lies in what the ledger keeps a check of.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runstore.ingest import changes
from runstore.ingest.discover import SourceFile
from runstore.storage.ledger import Entry
from conftest import examples

BIG = changes.PREFIX_HASH_MAX


def entry_at(offset: int, state: dict | None = None) -> Entry:
    return Entry(source_id=1, run_id="r", rel_path="metrics.jsonl", kind="metrics",
                 size=offset, mtime_ns=1, offset=offset, state=dict(state or {}))


def source(size: int, ino: int | None = 7, mtime_ns: int = 2) -> SourceFile:
    return SourceFile("metrics.jsonl", "metrics", size, mtime_ns, ctime_ns=None, ino=ino)


def reader(data: bytes):
    return lambda ranges: [data[s:e] for s, e in ranges]


def recorded(data: bytes, start: int) -> Entry:
    """The entry after reading `data` whole from 0 (`start` == 0), or up to `start` and then
    the rest as an append (the CRC carried on, the samples of the new offset taken)."""
    e = entry_at(0)
    if start:
        e.offset = start
        changes.fingerprint(e, source(start), 0, data[:start], reader(data))
    e.offset = len(data)
    changes.fingerprint(e, source(len(data)), start, data[start:], reader(data))
    return e


def blocks(data: bytes, e: Entry) -> list[bytes]:
    return [data[s:e_] for s, e_ in changes.check_ranges(e)]


@settings(max_examples=examples(300), deadline=None)
@given(offset=st.one_of(st.integers(1, 1 << 40), st.integers(BIG - 10, BIG + 10_000)))
def test_sample_ranges_lie_in_the_prefix_spread_from_first_to_last_block(offset: int) -> None:
    ranges = changes.sample_ranges(offset)
    assert ranges == changes.sample_ranges(offset)  # deterministic: from the offset alone
    if offset <= BIG:
        assert ranges == []  # the whole prefix is checked instead
        return
    assert len(ranges) == changes.SAMPLES
    assert all(e - s == changes.BLOCK and 0 <= s < e <= offset for s, e in ranges)
    assert ranges[0][0] == 0 and ranges[-1][1] == offset  # the first block, the one at the tail
    assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:]))  # in order, disjoint
    gap = max(b[0] - a[0] for a, b in zip(ranges, ranges[1:]))
    assert gap <= -(-(offset - changes.BLOCK) // (changes.SAMPLES - 1)) + 1  # evenly spread


@settings(max_examples=examples(60), deadline=None)
@given(size=st.one_of(st.integers(1, 5000), st.integers(BIG - 100, 3 * BIG)),
       seed=st.integers(0, 2**32), split=st.floats(0, 1), where=st.floats(0, 1),
       xor=st.integers(1, 255))
def test_any_byte_changed_in_a_checked_range_is_noticed_and_nothing_else(
        size: int, seed: int, split: float, where: float, xor: int) -> None:
    data = random.Random(seed).randbytes(size)
    start = int(split * size)
    e = recorded(data, start)
    assert e.state == recorded(data, 0).state  # read in two steps or whole: the same record
    ranges = changes.check_ranges(e)
    assert sum(b - a for a, b in ranges) <= max(BIG, changes.SAMPLES * changes.BLOCK)
    assert changes.same_prefix(e, blocks(data, e))  # unchanged: never flagged

    # One byte changed inside a checked range (its first, its last, one between): always
    # noticed. The blocks are edited as read, which is the file edited at that position.
    seen = blocks(data, e)
    for i, (s, end) in enumerate(ranges):
        for j in {0, end - s - 1, int(where * (end - s)) % (end - s)}:
            block = bytearray(seen[i])
            block[j] ^= xor
            assert not changes.same_prefix(e, [*seen[:i], bytes(block), *seen[i + 1:]]), s + j

    # Past 1 MiB, a byte outside every sampled block is not looked at (the documented limit).
    if size > BIG:
        pos = min(size - 1, int(where * size))
        if all(not s <= pos < e_ for s, e_ in ranges):
            edited = bytearray(data)
            edited[pos] ^= xor
            assert changes.same_prefix(e, blocks(bytes(edited), e))

    # A file now shorter than the offset gives a cut block: a change.
    short = data[: size - 1]
    assert not changes.same_prefix(e, blocks(short, e))


@settings(max_examples=examples(40), deadline=None)
@given(size=st.integers(BIG + 1, 2 * BIG), seed=st.integers(0, 2**32), where=st.floats(0, 1))
def test_an_entry_from_before_the_samples_is_checked_by_its_tail(size: int, seed: int,
                                                                   where: float) -> None:
    """An entry written before the samples (past 1 MiB: ctime and tail only) compares the
    tail, as it did: an edit there is noticed, the rest is not looked at."""
    data = random.Random(seed).randbytes(size)
    e = recorded(data, 0)
    del e.state["sampled"]
    assert changes.check_ranges(e) == [(size - changes.TAIL, size)]
    assert changes.same_prefix(e, blocks(data, e))
    pos = size - changes.TAIL + int(where * changes.TAIL) % changes.TAIL
    edited = bytearray(data)
    edited[pos] ^= 1
    assert not changes.same_prefix(e, blocks(bytes(edited), e))


def test_the_state_stays_small() -> None:
    """What the docstring says: some 200 bytes of JSON for a file past 1 MiB."""
    import json
    data = random.Random(1).randbytes(BIG + 12345)
    e = recorded(data, 0)
    changes.fingerprint(e, SourceFile("metrics.jsonl", "metrics", len(data), 1,
                                      ctime_ns=1_700_000_000_123_456_789, ino=2**40),
                        0, data, reader(data))
    assert set(e.state) == {"ctime", "ino", "tail", "sampled"}
    assert len(json.dumps(e.state)) < 250


@pytest.mark.parametrize(("recorded_ino", "now_ino", "action"), [
    (7, 7, "append"),     # the same file, grown
    (7, 8, "full"),       # renamed over: another file
    (None, 8, "append"),  # an entry from before inodes were kept: recorded at this read
    (7, None, "append"),  # no inode now (S3): the change token and the prefix check decide
])
def test_a_grown_file_with_another_inode_is_read_whole(recorded_ino: int | None,
                                                       now_ino: int | None, action: str) -> None:
    state = {"tail": "00" * changes.TAIL} if recorded_ino is None else {
        "tail": "00" * changes.TAIL, "ino": recorded_ino}
    e = entry_at(BIG + 10, state)
    f = source(BIG + 100, ino=now_ino)
    assert changes.grew(e, f) == (action == "append")
    p = changes.plan(e, f, prefix_changed=False)
    assert (p.action, p.replace) == (action, action == "full")
    assert p.start == (e.offset if action == "append" else 0)


def test_an_unchanged_file_is_skipped_whatever_its_inode() -> None:
    """`unchanged` does not ask the inode (unstable on some FUSE mounts), so a no-op ingest
    never reads a file again for it."""
    e = entry_at(BIG + 10, {"ino": 7})
    assert changes.plan(e, source(BIG + 10, ino=8, mtime_ns=1)).action == "skip"
