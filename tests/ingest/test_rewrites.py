"""Append-only files rewritten behind the ingest's back (issue 12, item 7).

An append always grows a file. So a file whose size did not grow but whose mtime or ctime
moved was rewritten in place, and is read again whole; so is a file that grew but is another
file now (another inode: renamed over the old one), or whose bytes before the remembered
offset changed, as far as the ledger's fingerprint can tell: all of them up to
`changes.PREFIX_HASH_MAX` (1 MiB), past it the blocks `changes.sample_ranges` places. Each test
edits one value, keeping its length (and, for the small files, the last 64 bytes), so that
only the fingerprint can notice, and checks the store against the edited file, read here
independently (`oracle` and plain `json`). `tests/ingest/test_changes.py` checks the pure parts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import oracle
import runstore
from runstore.ingest import changes
from runstore.storage.manifest import read_manifest
from runstore.storage.snapshot import open_parquet
from filekit import (EDITED_KEY, RUN, big_metrics, changed_digit, edit_early, jsonl_lines,
                     loss_digit, metric_rows_in_store, oracle_metric_rows, write_lines)
from storekit import python_m
from test_ingest import counts, expected, run_id


def stored(store: runstore.Store, rid: str, name: str) -> list[tuple]:
    """What the store holds for one file of the run, in a form `from_file` also gives."""
    if name == "metrics.jsonl":
        return metric_rows_in_store(store, rid)
    if name == "timing_spans.jsonl":
        rows = store.arrow("select step, span_idx, name, duration_s from spans "
                           "where run_id = $rid", {"rid": rid}).to_pylist()
        return sorted(tuple(r.values()) for r in rows)
    if name == "trace_events.jsonl":
        rows = store.arrow("select name, start_us, dur_us from trace_slices where run_id = $rid",
                           {"rid": rid}).to_pylist()
        return sorted(((r["name"], r["start_us"], r["dur_us"]) for r in rows),
                      key=lambda r: (r[1], r[0], -1 if r[2] is None else r[2]))
    rows = store.arrow("select seq, name, batch from checkpoints where run_id = $rid",
                       {"rid": rid}).to_pylist()
    return sorted(tuple(r.values()) for r in rows)


def from_file(path: Path) -> list[tuple]:
    """The same, read from the file with plain `json` (and `oracle`)."""
    if path.name == "metrics.jsonl":
        return oracle_metric_rows(path)
    if path.name == "timing_spans.jsonl":
        last: dict[int, list[dict[str, Any]]] = {}
        for _, o in oracle.complete_lines(path):
            last[o["step"]] = o["spans"]  # the later record of a step wins
        return sorted((step, i, s["name"], float(s["duration"]))
                      for step, spans in last.items() for i, s in enumerate(spans))
    if path.name == "trace_events.jsonl":
        return oracle.trace_slices(path)
    return sorted((line, o.get("name"), o.get("batch")) for line, o in oracle.complete_lines(path))


@pytest.mark.parametrize("name", list(EDITED_KEY))
@pytest.mark.parametrize("mtime", ["new", "restored"])
def test_same_size_edit_early_in_an_append_only_file_is_reread(
        small_tree: Path, store_path: Path, name: str, mtime: str) -> None:
    """The same size and the same last 64 bytes: before, the re-ingest kept the stale value.
    `restored`: the editor also sets the old mtime back (`os.utime`); the ctime, which nothing
    in user space can set back, still tells."""
    run = small_tree / RUN
    path = run / name
    store = runstore.open(store_path)
    store.ingest([small_tree])
    rid = run_id(store, run)
    before = stored(store, rid, name)
    st = path.stat()
    edit_early(path)
    if mtime == "restored":
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    report = store.ingest([small_tree])
    assert report.warnings == []
    assert report.bytes_read >= st.st_size  # read whole
    now = stored(store, rid, name)
    assert now == from_file(path) and now != before
    assert counts(store) == expected(small_tree)
    again = store.ingest([small_tree])
    assert again.bytes_read == 0 and not any(again.rows_added.values())


def test_touched_append_only_file_is_reread_and_loses_nothing(small_tree: Path,
                                                              store_path: Path) -> None:
    """A new mtime on an unchanged file cannot be told from a same-size rewrite: it is read
    again whole, and its rows replaced by the same rows."""
    run = small_tree / RUN
    store = runstore.open(store_path)
    store.ingest([small_tree])
    rid = run_id(store, run)
    before = stored(store, rid, "metrics.jsonl")
    os.utime(run / "metrics.jsonl")
    report = store.ingest([small_tree])
    assert report.bytes_read == (run / "metrics.jsonl").stat().st_size
    assert stored(store, rid, "metrics.jsonl") == before
    assert counts(store) == expected(small_tree)


@pytest.mark.parametrize("name", ["metrics.jsonl", "checkpoints.jsonl"])
def test_edit_and_append_in_a_small_file_is_reread(small_tree: Path, store_path: Path,
                                                    name: str) -> None:
    """Up to 1 MiB consumed, the ledger keeps a CRC-32 of every consumed byte and checks it
    when the file grew: an edit anywhere before the offset, then an append, is a rewrite."""
    run = small_tree / RUN
    path = run / name
    assert path.stat().st_size <= changes.PREFIX_HASH_MAX
    store = runstore.open(store_path)
    store.ingest([small_tree])
    rid = run_id(store, run)
    edit_early(path)
    last = json.loads(jsonl_lines(path)[-1])
    extra = {**last, "step": 10_000} if name == "metrics.jsonl" else {**last, "batch": 10_000}
    with open(path, "ab") as f:
        f.write(json.dumps(extra).encode() + b"\n")
    report = store.ingest([small_tree])
    assert report.bytes_read >= path.stat().st_size  # read whole
    assert stored(store, rid, name) == from_file(path)
    assert counts(store) == expected(small_tree)


def ledger_entry(store_path: Path, rid: str, rel_path: str) -> dict[str, Any]:
    """The newest snapshot's ledger row of one file of a run (internal), state parsed."""
    m = read_manifest(store_path)
    assert m is not None and m.ledger
    rows = [r for r in open_parquet(str(store_path / m.ledger)).read().to_pylist()
            if (r["run_id"], r["rel_path"]) == (rid, rel_path)]
    assert len(rows) == 1, rows
    return {**rows[0], "state": json.loads(rows[0]["state"])}


def loss_on_line_at(path: Path, pos: int) -> tuple[int, float]:
    """(step, loss) of the line holding byte `pos`, read with plain `json`."""
    data = path.read_bytes()
    start = data.rfind(b"\n", 0, pos) + 1
    obj = json.loads(data[start:data.index(b"\n", pos)])
    return obj["step"], obj["loss"]


def ingested_big(small_tree: Path, store_path: Path) -> tuple[runstore.Store, str, Path]:
    """The small tree with its traced run's metrics file made `big_metrics`, ingested: the
    store, the run's id and the file."""
    run = small_tree / RUN
    path = run / "metrics.jsonl"
    big_metrics(path)
    store = runstore.open(store_path)
    store.ingest([small_tree])
    return store, run_id(store, run), path


def edit_in_place(path: Path, pos: int) -> None:
    """`changed_digit` at `pos`, written into the file (`r+b`: the same inode)."""
    with open(path, "r+b") as f:
        f.seek(pos)
        old = f.read(1)
        f.seek(pos)
        f.write(changed_digit(old[0]))


def stored_loss(store: runstore.Store, rid: str, step: int) -> list[float]:
    return [r["value"] for r in store.arrow(
        "select value from metrics_raw where run_id = $rid and key = 'loss' and step = $s "
        "and not pre_resume", {"rid": rid, "s": step}).to_pylist()]


def test_edit_inside_a_sampled_block_then_append_in_a_large_file_is_reread(
        small_tree: Path, store_path: Path) -> None:
    """Past 1 MiB the ledger keeps a CRC of blocks sampled across the prefix: a same-length
    edit inside one (written in place, same inode, far from the tail), then an append, is a
    rewrite: the file is read whole and the store holds the edited value."""
    store, rid, path = ingested_big(small_tree, store_path)
    size = path.stat().st_size
    ino = path.stat().st_ino
    middle = changes.sample_ranges(size)[changes.SAMPLES // 2]
    pos = loss_digit(path.read_bytes(), True, [middle], size - changes.TAIL)
    step, _ = loss_on_line_at(path, pos)
    before = stored_loss(store, rid, step)
    edit_in_place(path, pos)
    with open(path, "ab") as f:
        f.write(json.dumps({"step": 5000, "loss": 0.5}).encode() + b"\n")
    assert path.stat().st_ino == ino
    step, loss = loss_on_line_at(path, pos)
    assert before != [loss]
    report = store.ingest([small_tree])
    assert report.bytes_read == path.stat().st_size  # read whole
    assert stored_loss(store, rid, step) == [loss]
    assert metric_rows_in_store(store, rid) == oracle_metric_rows(path)
    assert counts(store) == expected(small_tree)


def test_a_large_file_replaced_by_rename_is_reread_and_an_edit_in_place_is_not(
        small_tree: Path, store_path: Path) -> None:
    """The same kind of edit outside every sampled block and the tail, then an append: written
    in place (same inode) it is not seen, the limit docs/ingest.md states; written aside and
    renamed over the file (`os.replace`, as editors and `sed -i` do: a new inode) it is, and
    the file is read whole. Through the CLI."""
    run = small_tree / RUN
    path = run / "metrics.jsonl"
    big_metrics(path)
    assert python_m(store_path, "ingest", str(small_tree)).returncode == 0

    def edit_outside_samples() -> tuple[bytes, int]:
        data = path.read_bytes()
        size = len(data)
        pos = loss_digit(data, False, changes.sample_ranges(size), size - changes.TAIL)
        return data[:pos] + changed_digit(data[pos]) + data[pos + 1:], pos

    # In place: not noticed, only the appended line is read.
    new, pos = edit_outside_samples()
    stale_step, _ = loss_on_line_at(path, pos)
    store = runstore.open(store_path)
    rid = run_id(store, run)
    stale = stored_loss(store, rid, stale_step)
    with open(path, "r+b") as f:
        f.write(new)
    with open(path, "ab") as f:
        f.write(json.dumps({"step": 5000, "loss": 0.5}).encode() + b"\n")
    assert stale != [loss_on_line_at(path, pos)[1]]
    proc = python_m(store_path, "ingest", "-q", str(small_tree))
    assert proc.returncode == 0, proc.stderr
    assert stored_loss(runstore.open(store_path), rid, stale_step) == stale

    # Replaced: noticed by the inode, although the edit misses every sampled block.
    ino = path.stat().st_ino
    new, pos = edit_outside_samples()
    tmp = path.with_name(".metrics.jsonl.tmp")
    tmp.write_bytes(new + json.dumps({"step": 5001, "loss": 0.25}).encode() + b"\n")
    os.replace(tmp, path)
    assert path.stat().st_ino != ino
    step, loss = loss_on_line_at(path, pos)
    proc = python_m(store_path, "ingest", "-q", str(small_tree))
    assert proc.returncode == 0, proc.stderr
    store = runstore.open(store_path)
    assert stored_loss(store, rid, step) == [loss]
    assert metric_rows_in_store(store, rid) == oracle_metric_rows(path)
    assert counts(store) == expected(small_tree)


def counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Bytes of every `read_ranges` call on a local file from now on (the prefix checks and
    what the fingerprint reads back), one number per range."""
    from runstore.storage.location.local import Local
    seen: list[int] = []
    real = Local.read_ranges

    def spy(self: Local, rel: str, ranges: list[tuple[int, int]]) -> list[bytes]:
        out = real(self, rel, ranges)
        seen.extend(len(b) for b in out)
        return out

    monkeypatch.setattr(Local, "read_ranges", spy)
    return seen


def test_append_to_a_large_file_reads_the_new_bytes_and_a_few_blocks(
        small_tree: Path, store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain append past 1 MiB: only the new line is read as data, the check reads the
    sampled blocks (bounded, however big the file), and the ledger moves to the new end with
    the samples of the new offset."""
    store, rid, path = ingested_big(small_tree, store_path)
    lines_before = len(jsonl_lines(path))
    line = json.dumps({"step": 5000, "loss": 0.5, "lr": 1e-4}).encode() + b"\n"
    with open(path, "ab") as f:
        f.write(line)
    reads = counting_reads(monkeypatch)
    report = store.ingest([small_tree])
    assert report.bytes_read == len(line)
    assert report.rows_added["metrics_raw"] == 2  # loss and lr
    assert 0 < sum(reads) <= 2 * changes.SAMPLES * changes.BLOCK + changes.TAIL
    assert metric_rows_in_store(store, rid) == oracle_metric_rows(path)
    entry = ledger_entry(store_path, rid, "metrics.jsonl")
    assert entry["offset"] == path.stat().st_size and entry["lines"] == lines_before + 1
    assert entry["state"]["ino"] == path.stat().st_ino
    assert "crc" not in entry["state"] and isinstance(entry["state"]["sampled"], int)


@pytest.mark.parametrize("large", [False, True])
def test_an_entry_from_before_the_samples_keeps_reading_appends(
        small_tree: Path, store_path: Path, monkeypatch: pytest.MonkeyPatch,
        large: bool) -> None:
    """A ledger written before the inode and the sampled blocks were kept (its fingerprint:
    ctime, tail, and the CRC up to 1 MiB): an append is still read from the offset alone, not
    the whole file, and the entry then records the inode and the samples, which notice the
    next in-place edit."""
    run = small_tree / RUN
    path = run / "metrics.jsonl"
    if large:
        big_metrics(path)
    real = changes.fingerprint

    def as_before(entry: Any, *args: Any) -> None:
        real(entry, *args)
        entry.state.pop("ino", None)
        entry.state.pop("sampled", None)

    monkeypatch.setattr(changes, "fingerprint", as_before)
    store = runstore.open(store_path)
    store.ingest([small_tree])
    rid = run_id(store, run)
    state = ledger_entry(store_path, rid, "metrics.jsonl")["state"]
    assert "ino" not in state and "sampled" not in state and "tail" in state
    assert ("crc" in state) != large
    monkeypatch.undo()

    line = json.dumps({"step": 5000, "loss": 0.5}).encode() + b"\n"
    with open(path, "ab") as f:
        f.write(line)
    report = store.ingest([small_tree])
    assert report.bytes_read == len(line)
    assert metric_rows_in_store(store, rid) == oracle_metric_rows(path)
    state = ledger_entry(store_path, rid, "metrics.jsonl")["state"]
    assert state["ino"] == path.stat().st_ino
    assert ("sampled" in state) == large and ("crc" in state) != large

    size = path.stat().st_size
    ranges = changes.sample_ranges(size) or [(0, size)]
    pos = loss_digit(path.read_bytes(), True, ranges[-2:-1] if large else ranges,
                     size - changes.TAIL)
    edit_in_place(path, pos)
    with open(path, "ab") as f:
        f.write(json.dumps({"step": 5001, "loss": 0.25}).encode() + b"\n")
    report = store.ingest([small_tree])
    assert report.bytes_read == path.stat().st_size  # read whole
    assert metric_rows_in_store(store, rid) == oracle_metric_rows(path)
    assert counts(store) == expected(small_tree)
