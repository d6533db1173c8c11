"""trace_events.jsonl (Chrome trace events, JSON lines) → `trace_slices`, incrementally.

Contract:

* `normalize(records, state, ctx) -> ({"trace_slices": rows}, new_state)`: `records` yields
  `(line_number, decoded_object)` for the lines appended since the last call; `state` is what the
  previous call returned (None for the start of the file). The rows are final: B/E pairs, `X`
  complete events, and B events that can no longer match (their segment ended) with
  `dur_us = null`. `new_state` is plain JSON (dicts, lists, str, numbers, null) and holds the B
  events still open plus what segment detection needs. `state` is not modified.
* `open_rows(state, ctx)`: rows (`dur_us = null`) for the B events still open in `state`. The
  caller stores them beside the final rows and replaces them after the next read, so a B that
  later finds its E is not counted twice.
* Feeding a file in any number of chunks, carrying the state, yields the same final rows (in the
  same order) and the same open rows as one call over the whole file.

Pairing: a B and an E pair when they share (segment, pid, `args.track`, name), last-in first-out.
Never by `tid`: it is a salted hash of the track name and different tracks collide on one tid.
`depth` = number of slices open on the same (segment, pid, track) when the B (or X) arrived.
`args` = the B's args updated with the E's (the E wins: `update_scope_context` adds keys such as
`step` there), minus `track` and `thread`, as JSON text; null when empty.

Segments: a resumed process appends to the same file with pids restarting at 0 and a clock that
restarts at an arbitrary value, so B/E of different processes must never pair. A new segment
starts when
  1. a `process_name` metadata event arrives for a pid whose `process_name` was already seen in
     the current segment: the writer emits metadata once per (pid, tid) per process, and fake pid
     0 exists in every process, so a repeat means a new process. (Only `process_name` is tracked:
     pids are few, while remembering every `thread_name` (pid, tid) would grow the stored state
     with every asyncio task of the run, and a repeated tid needs a repeated salted hash anyway.)
     The writer puts a B *before* its metadata, so the B just before such an `M` (when it is the
     last B/E event and has the same pid) is moved into the new segment; or
  2. a B/E/X timestamp is more than `TS_BACKSTEP_US` (1 s) below the largest timestamp of the
     segment (concurrent threads reorder events by microseconds, never by a second).
When a segment ends, its still-open B events are emitted at once as rows with `dur_us = null`.

Tolerance: events with missing or wrongly typed fields (name, ph, pid, ts, args; tid for M), or
non-finite timestamps, are reported with their line and skipped; so is an E with no open B.
Instant events (`i`/`I`) are skipped silently; other unknown `ph` values are reported and skipped.
Warnings come in line order.

How: a read's events arrive as columns (trace_events.py: pyarrow's JSON reader, or Python's
decoder for a buffer it refuses; both give the same columns), and the rules above run over
them as array operations, never event by event in Python (the trace files are the largest
JSON an ingest reads): segments are found by a running maximum of the timestamps and a walk
over the few `process_name` events (`_segments`); B/E pairing is LIFO per (segment, pid,
track, name), which is a clamped running count of open B's per key: an E pairs with the
latest B that raised the count to the level it lowers it from (`_pairs`); a depth is the
number of B's opened minus those closed before it on the same (segment, pid, track)
(`_depths`). The B events still open in `state` take part as B events before the read's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from ...storage import schema
from ...storage.writer import rows_where
from .. import parse
from .base import Batch, Context, Output, json_text
from .trace_events import B, E, M, X, Events, from_bytes, from_records

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Trace", "normalize", "open_rows", "TS_BACKSTEP_US"]

TS_BACKSTEP_US = 1_000_000.0
SMALL = 32 << 10  # bytes below which Python's decoder is the cheaper way to columns
_STATE_VERSION = 1
_ENTRY = ("line", "name", "pid", "track", "thread", "ts", "args", "depth", "segment")


class _Read:
    """One read's events after the open B's of `state`: the arrays the rules run over."""

    def __init__(self, ev: Events, state: dict) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        opened = state.get("open", [])
        k = self.k = len(opened)
        self.base_segment = int(state.get("segment", 0))
        self.kind = np.concatenate([np.full(k, B, np.int8), ev.kind])
        self.line = np.concatenate([np.array([e["line"] for e in opened], np.int64), ev.line])
        self.pid = np.concatenate([np.array([e["pid"] for e in opened], np.int64), ev.pid])
        self.ts = np.concatenate([np.array([e["ts"] for e in opened], np.float64), ev.ts])
        self.dur = np.concatenate([np.full(k, np.nan), ev.dur])
        text = {c: pa.concat_arrays([pa.array([e[c] for e in opened], pa.string()),
                                     getattr(ev, c)]) for c in ("name", "track", "thread")}
        self.name, self.track, self.thread = text["name"], text["track"], text["thread"]
        self.args = {**{i: e["args"] for i, e in enumerate(opened) if e["args"]},
                     **{k + i: a for i, a in ev.args.items()}}
        self.opened_depth = np.array([e["depth"] for e in opened], np.int64)
        self.opened_segment = np.array([e.get("segment", self.base_segment) for e in opened],
                                       np.int64)

        def codes(values: "pa.Array") -> np.ndarray:
            return np.asarray(pc.dictionary_encode(values, null_encoding="encode")
                              .indices.to_numpy(zero_copy_only=False), np.int64)

        self.name_code, self.track_code = codes(self.name), codes(self.track)
        self.pid_code = codes(pa.array(self.pid, pa.int64()))


def _combine(*codes: np.ndarray) -> np.ndarray:
    """One integer per distinct tuple of the given (non-negative) code columns: the codes
    as the digits of a mixed-radix number, made dense again only when it could overflow."""
    out = np.zeros(len(codes[0]), np.int64)
    for c in codes:
        radix = int(c.max(initial=0)) + 1
        if int(out.max(initial=0)) >= (1 << 62) // radix:
            out = np.unique(out, return_inverse=True)[1].astype(np.int64)
        out = out * radix + c
    return out


def _grouped(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stable order that sorts `key` (positions stay in order within a key), and, in
    that order, whether each element starts its key's run."""
    order = np.argsort(key, kind="stable")
    key = key[order]
    return order, np.r_[True, key[1:] != key[:-1]] if len(key) else np.zeros(0, bool)


def _segments(r: _Read, state: dict) -> tuple[np.ndarray, list[int], list[int], dict]:
    """Each position's segment; per segment that ends in this read, the position where it
    ends (its open B's are emitted there); the B's moved into a new segment; and the
    segment state after the read (segment, max_ts, meta, last_b_line)."""
    n, k = len(r.kind), r.k
    seg = np.empty(n, np.int64)
    seg[:k] = r.opened_segment
    cur = r.base_segment
    max_ts: float | None = state.get("max_ts")
    meta = set(state.get("meta", []))
    last_b = next((i for i in range(k - 1, -1, -1)
                   if int(r.line[i]) == state.get("last_b_line")), None)
    ends: list[int] = []
    moved: list[int] = []
    marks = np.flatnonzero(r.kind[k:] == M) + k
    timed = np.flatnonzero(r.kind[k:] <= X) + k  # B, E and X events, in order
    pos = k
    for nxt in [*marks.tolist(), n]:
        lo, hi = np.searchsorted(timed, [pos, nxt])
        while lo < hi:
            # Segment rule 2: a timestamp more than a second below the segment's largest.
            ts = r.ts[timed[lo:hi]]
            running = np.maximum.accumulate(np.concatenate(
                [[-np.inf if max_ts is None else max_ts], ts]))
            back = np.flatnonzero(ts < running[:-1] - TS_BACKSTEP_US)
            if not len(back):
                max_ts = float(running[-1])
                last_b = int(timed[hi - 1]) if r.kind[timed[hi - 1]] == B else None
                break
            at = int(timed[lo + back[0]])
            seg[pos:at] = cur
            ends.append(at)
            cur, pos, max_ts, meta, last_b = cur + 1, at, None, set(), None
            lo += int(back[0])
        seg[pos:nxt] = cur
        if nxt == n:
            break
        # Segment rule 1: a process_name again for a pid of this segment: a new process. The
        # B just before it (the last B/E/X event, of that pid) belongs to the new one.
        pid = int(r.pid[nxt])
        if pid in meta:
            carried = last_b if last_b is not None and int(r.pid[last_b]) == pid else None
            ends.append(nxt)
            cur, max_ts, meta, last_b = cur + 1, None, set(), None
            if carried is not None:
                seg[carried] = cur
                moved.append(carried)
                max_ts, last_b = float(r.ts[carried]), carried
        seg[nxt] = cur
        meta.add(pid)
        pos = nxt + 1
    after = {"v": _STATE_VERSION, "segment": int(cur), "max_ts": max_ts, "meta": sorted(meta),
             "last_b_line": None if last_b is None else int(r.line[last_b])}
    return seg, ends, moved, after


def _pairs(r: _Read, seg: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B positions, their E positions) of the pairs, and the positions of E events with no
    open B: LIFO per (segment, pid, track, name)."""
    be = np.flatnonzero(r.kind <= E)
    order, first = _grouped(_combine(seg[be], r.pid_code[be], r.track_code[be],
                                     r.name_code[be]))
    pos = be[order]
    step = np.where(r.kind[pos] == B, 1, -1)
    group = np.cumsum(first) - 1
    total = np.cumsum(step)
    count = total - (total - step)[first][group]  # running count per key, unclamped
    # Clamped at 0 (an E with nothing open changes nothing): the running count minus the
    # lowest it went below 0 so far; keys are kept apart by a shift larger than any count.
    shift = 2 * (len(step) + 1)
    low = np.minimum.accumulate(count - shift * group) + shift * group
    after = count - np.minimum(low, 0)
    before = np.empty_like(after)
    before[1:] = after[:-1]
    before[first] = 0
    closes = (step < 0) & (before > 0)
    level = np.where(step > 0, after, before)
    taking = np.flatnonzero((step > 0) | closes)
    chain = taking[_grouped(_combine(group[taking], level[taking]))[0]]
    ends = np.flatnonzero(closes[chain])
    return pos[chain[ends - 1]], pos[chain[ends]], pos[(step < 0) & ~closes]


def _depths(r: _Read, seg: np.ndarray, closing: np.ndarray, moved: list[int]) -> np.ndarray:
    """Each B's and X's depth: B's opened minus those closed before it on its (segment, pid,
    track); the stored one for a B still open from an earlier read, 0 for a moved B."""
    timed = np.flatnonzero(r.kind <= X)
    delta = np.zeros(len(r.kind), np.int64)
    delta[r.kind == B] = 1
    delta[closing] = -1
    order, first = _grouped(_combine(seg[timed], r.pid_code[timed], r.track_code[timed]))
    pos = timed[order]
    total = np.cumsum(delta[pos])
    start = (total - delta[pos])[first][np.cumsum(first) - 1]
    depth = np.zeros(len(r.kind), np.int64)
    depth[pos] = total - delta[pos] - start
    depth[:r.k] = r.opened_depth
    depth[moved] = 0
    return depth


def _read(ev: Events, state: dict | None, base: dict
          ) -> tuple["pa.Table", dict, list[tuple[int, str]]]:
    """The final rows of one read, the state after it and the warnings for E's with no open
    B (see the module)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    state = dict(state or {})
    if state and state.get("v") != _STATE_VERSION:
        state = {}  # unknown layout: start over rather than misread it
    r = _Read(ev, state)
    seg, ends, moved, after = _segments(r, state)
    opened, closing, stray = _pairs(r, seg)
    depth = _depths(r, seg, closing, moved)
    final = after["segment"]
    open_at_end = r.kind == B
    open_at_end[opened] = False
    unpaired = np.flatnonzero(open_at_end)
    cut = unpaired[seg[unpaired] < final]
    still = unpaired[seg[unpaired] == final]
    xs = np.flatnonzero(r.kind == X)
    # Every row: its B (or X), its E (itself for X and cut B's), and where the events would
    # have emitted it: at its E or X, or where its segment ended (before that event's own).
    src = np.concatenate([opened, xs, cut])
    end = np.concatenate([closing, xs, cut])
    emit = np.concatenate([closing, xs, np.asarray(ends, np.int64)[seg[cut] - r.base_segment]
                           if len(cut) else cut])
    tie = np.concatenate([np.ones(len(opened) + len(xs), np.int64), np.zeros(len(cut), np.int64)])
    order = np.lexsort((src, tie, emit))
    src, end = src[order], end[order]
    with np.errstate(over="ignore", invalid="ignore"):  # as Python's floats: ±inf, no error
        dur = np.concatenate([r.ts[closing] - r.ts[opened], (r.ts[xs] + r.dur[xs]) - r.ts[xs],
                              np.full(len(cut), np.nan)])[order]
    take_src, take_end = pa.array(src, pa.int64()), pa.array(end, pa.int64())
    args: list[str | None] = [None] * len(src)
    has_args = np.zeros(len(r.kind), bool)
    has_args[list(r.args)] = True
    for i in np.flatnonzero(has_args[src] | has_args[end]).tolist():
        s, e = int(src[i]), int(end[i])
        merged = {**r.args.get(s, {}), **(r.args.get(e, {}) if e != s else {})}
        args[i] = json_text(merged) if merged else None
    n = len(src)
    table = pa.table({
        "run_id": pa.array([base["run_id"]] * n, pa.string()),
        "name": r.name.take(take_src),
        "start_us": pa.array(r.ts[src], pa.float64()),
        "dur_us": pa.array(dur, pa.float64(), mask=tie[order] == 0),
        "pid": pa.array(r.pid[src], pa.int64()),
        "track": r.track.take(take_src),
        "thread": pc.coalesce(r.thread.take(take_src), r.thread.take(take_end)),
        "args": pa.array(args, pa.string()),
        "depth": pa.array(depth[src], pa.int32()),
        "segment": pa.array(seg[src], pa.int32()),
        "source_id": pa.array([base["source_id"]] * n, pa.int64()),
    }).select(schema.schema("trace_slices").names).cast(schema.schema("trace_slices"))
    after["open"] = [dict(zip(_ENTRY, (int(r.line[i]), r.name[i].as_py(), int(r.pid[i]),
                                       r.track[i].as_py(), r.thread[i].as_py(),
                                       float(r.ts[i]), r.args.get(i, {}), int(depth[i]),
                                       int(seg[i]))))
                     for i in still.tolist()]
    warnings = [(int(r.line[i]), f"E event {r.name[i].as_py()!r} on track "
                                 f"{r.track[i].as_py()!r} (pid {int(r.pid[i])}) has no open B; "
                                 "skipped") for i in stray.tolist()]
    return table, after, warnings


def normalize(records: Iterable[tuple[int, Any]], state: dict | None, ctx: Context
              ) -> tuple[dict[str, list[dict]], dict]:
    """The final rows (as dicts) and the next state of the lines `records` decodes."""
    ev = from_records(records)
    table, after, stray = _read(ev, state, ctx.base())
    for line, message in sorted(ev.warnings + stray):
        ctx.warn(line, message)
    return {"trace_slices": table.to_pylist()}, after


def open_rows(state: dict, ctx: Context) -> list[dict]:
    """Rows (dur null) for the B events still open in `state`, in arrival order."""
    if not state or state.get("v") != _STATE_VERSION:
        return []
    return [{**ctx.base(), "name": e["name"], "start_us": e["ts"], "dur_us": None,
             "pid": e["pid"], "track": e["track"], "thread": e["thread"],
             "args": json_text(e["args"]) if e["args"] else None, "depth": e["depth"],
             "segment": e.get("segment", state.get("segment", 0))}
            for e in state.get("open", [])]


class _Warnings:
    """Where the line decoder's warnings wait, to be reported in line order with the rest."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def warn(self, line: int | None, message: str) -> None:
        self.lines.append((line or 0, message))


class Trace:
    """trace_events.jsonl → `trace_slices`, incrementally: the ledger state carries the open B
    events (`trace`), stored meanwhile as null-duration rows that the next read replaces."""

    kinds = ("trace_events",)
    tables = ("trace_slices",)

    def normalize(self, batch: Batch) -> Output:
        out = Output()
        state = batch.state.get("trace")
        if state and state.get("open"):
            # Open B events were stored as null-duration rows of the current segment; this
            # read may close them, so they are replaced by what it returns.
            out.delete("trace_slices", rows_where(source_id=batch.ctx.source_id, dur_us=None,
                                                  segment=int(state.get("segment", 0))))
        # pyarrow's reader costs ~40 array operations whatever the size: small appends (the
        # usual incremental read) are cheaper through Python's decoder (the same columns).
        ev = from_bytes(batch.data, batch.first_line) if len(batch.data) >= SMALL else None
        decoding = _Warnings()
        if ev is None:
            ev = from_records(parse.records(batch.data, batch.first_line, decoding))
        table, state, stray = _read(ev, state, batch.ctx.base())
        for line, message in sorted(decoding.lines + ev.warnings + stray):
            batch.ctx.warn(line, message)
        out.add("trace_slices", table)
        out.rows({"trace_slices": open_rows(state, batch.ctx)})
        batch.state["trace"] = state
        return out
