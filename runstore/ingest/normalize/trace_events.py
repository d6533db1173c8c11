"""Trace events as columns: the lines of a `trace_events.jsonl` read, checked and kept as arrays.

Contract: `Events` holds, in file order, the events a trace's slices are made from: B, E and
X events whose fields are usable, and `process_name` metadata events (which mark a new
process, trace.py). `line`, `kind` (`B`, `E`, `X`, `M` as 0-3), `pid`, `ts` (float µs; 0 for
M), `dur` (X; NaN otherwise) are numpy arrays; `name`, `track`, `thread` are Arrow string
arrays (`track`/`thread` from `args`, as labels: a string as is, another scalar as its JSON
text, null when absent); `args` maps an event's position to its own `args` without `track`
and `thread`, for the few events that have any; `warnings` lists `(line, message)` for each
event that was skipped: missing or wrongly typed fields (name, ph, pid, ts, args; tid for M),
a non-finite timestamp, a `ph` runstore does not know. Instant events (`i`/`I`) and other
metadata are dropped without a word.

Two ways give the same `Events` for any buffer they both accept:
`from_records(records)` checks decoded lines one by one (Python's decoder; any input), and
`from_bytes(data, first_line)` reads the buffer with pyarrow's JSON reader and checks the
columns at once, or returns None when the buffer needs the first way: pyarrow refused it
(`parse.fast_table`), a column has a type the checks below do not cover (a `pid` of floats,
an `args` that is not an object, ...), it holds `null` anywhere (pyarrow cannot tell a null
inside `args` from a key that is absent), or a float column holds a -0.0 (Python reads the
integer `-0` as 0). The `args` of an event whose `args` hold more than `track` and `thread`
are decoded from its own line with Python's decoder, so their key order is the line's.
tests/ingest/test_fast_paths.py holds the two ways equal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from ...numbers import is_int64
from .. import parse
from .base import clean_str, finite, holds_negative_zero

if TYPE_CHECKING:
    import pyarrow as pa

B, E, X, M = 0, 1, 2, 3
KINDS = {"B": B, "E": E, "X": X}
DROP_ARGS = ("track", "thread")  # pairing labels, not stored in a slice's `args`
_INSTANT = frozenset({"i", "I"})


@dataclass
class Events:
    """A read's trace events as columns (see the module)."""

    line: np.ndarray
    kind: np.ndarray
    pid: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    name: "pa.Array"
    track: "pa.Array"
    thread: "pa.Array"
    args: dict[int, dict] = field(default_factory=dict)
    warnings: list[tuple[int, str]] = field(default_factory=list)


def label(value: Any) -> str | None:
    """track/thread: a string as is; another scalar as its JSON text; absent → None."""
    if value is None:
        return None
    if isinstance(value, str):
        return clean_str(value)
    return clean_str(json.dumps(value, allow_nan=True, default=str))


def from_records(records: Iterable[tuple[int, Any]]) -> Events:
    """The events of decoded lines `(line, object)`, each checked on its own."""
    import pyarrow as pa

    cols: dict[str, list] = {k: [] for k in ("line", "kind", "pid", "ts", "dur", "name",
                                             "track", "thread")}
    args: dict[int, dict] = {}
    warnings: list[tuple[int, str]] = []
    for line, ev in records:
        event = _checked(line, ev, warnings)
        if event is None:
            continue
        kind, pid, ts, dur, name, own = event
        if own:
            args[len(cols["line"])] = {k: v for k, v in own.items() if k not in DROP_ARGS}
        for col, value in zip(cols, (line, kind, pid, ts, dur, name, label(own.get("track")),
                                     label(own.get("thread")))):
            cols[col].append(value)
    return Events(
        line=np.array(cols["line"], np.int64), kind=np.array(cols["kind"], np.int8),
        pid=np.array(cols["pid"], np.int64), ts=np.array(cols["ts"], np.float64),
        dur=np.array(cols["dur"], np.float64), name=pa.array(cols["name"], pa.string()),
        track=pa.array(cols["track"], pa.string()), thread=pa.array(cols["thread"], pa.string()),
        args={i: a for i, a in args.items() if a}, warnings=warnings)


def _checked(line: int, ev: Any, warnings: list[tuple[int, str]]
             ) -> tuple[int, int, float, float, str, dict] | None:
    """(kind, pid, ts, dur, name, args) of one usable event, else None (warned, or dropped
    without a word)."""
    if not isinstance(ev, dict):
        warnings.append((line, f"trace event is a JSON {type(ev).__name__}, not an object; "
                               "skipped"))
        return None
    ph = ev.get("ph")
    if not isinstance(ph, str):
        warnings.append((line, "trace event without a string `ph`; skipped"))
        return None
    if ph in _INSTANT:
        return None
    if ph == "M":
        if not (is_int64(ev.get("pid")) and is_int64(ev.get("tid"))):
            warnings.append((line, "metadata event without integer pid/tid; skipped"))
            return None
        if ev.get("name") != "process_name":
            return None  # thread_name (or other) metadata: nothing to keep
        return M, ev["pid"], 0.0, float("nan"), "process_name", {}
    if ph not in KINDS:
        warnings.append((line, f"trace event with unsupported ph {ph!r}; skipped"))
        return None
    name, pid, ts = ev.get("name"), ev.get("pid"), ev.get("ts")
    args = ev.get("args", {})
    if args is None:
        args = {}
    dur = ev.get("dur")
    problems = [what for what, bad in (
        ("name", not isinstance(name, str)), ("pid", not is_int64(pid)),
        ("ts", not finite(ts)), ("args", not isinstance(args, dict)),
        ("dur", ph == "X" and not finite(dur))) if bad]
    if problems:
        warnings.append((line, f"trace {ph} event with missing or invalid "
                               f"{', '.join(problems)}; skipped"))
        return None
    return (KINDS[ph], pid, float(ts), float(dur) if ph == "X" else float("nan"),
            clean_str(name), args)


def from_bytes(data: bytes, first_line: int) -> Events | None:
    """The events of a buffer of complete lines read at once by pyarrow, or None when the
    buffer needs `from_records` (see the module)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if b"null" in data:
        return None
    table = parse.fast_table(data)
    if table is None:
        return None
    n = table.num_rows
    missing = pa.chunked_array([pa.nulls(n)])
    ph, name, pid, tid, ts, dur, args = (
        table.column(c) if c in table.column_names else missing
        for c in ("ph", "name", "pid", "tid", "ts", "dur", "args"))
    if not (_typed(ph, pa.types.is_string) and _typed(name, pa.types.is_string)
            and _typed(pid, pa.types.is_int64) and _typed(tid, pa.types.is_int64)
            and _typed(ts, _is_number) and _typed(dur, _is_number)
            and _typed(args, pa.types.is_struct)):
        return None
    fields = [f.name for f in args.type] if pa.types.is_struct(args.type) else []
    track, thread = (pc.struct_field(args, f) if f in fields else missing for f in DROP_ARGS)
    if not (_typed(track, pa.types.is_string) and _typed(thread, pa.types.is_string)):
        return None  # a track or thread that is not text: its label is Python's JSON text
    # Columns no line has are all null: of the type the checks below take.
    ph, name, track, thread = (c.cast(pa.string()) for c in (ph, name, track, thread))
    pid, tid = (c.cast(pa.int64()) for c in (pid, tid))
    ts, dur = (c.cast(pa.float64(), safe=False) for c in (ts, dur))
    if holds_negative_zero(ts) or holds_negative_zero(dur):
        return None

    def flag(values: "pa.ChunkedArray") -> np.ndarray:
        return np.asarray(values.fill_null(False).to_numpy(zero_copy_only=False), bool)

    def numbers(values: "pa.ChunkedArray") -> np.ndarray:
        return np.asarray(values.fill_null(0).to_numpy(zero_copy_only=False))

    line = np.arange(first_line, first_line + n, dtype=np.int64)
    kind = np.full(n, -1, np.int8)
    for text, code in KINDS.items():
        kind[flag(pc.equal(ph, text))] = code
    meta = flag(pc.equal(ph, "M"))
    meta_ok = meta & flag(pid.is_valid()) & flag(tid.is_valid())
    process = meta_ok & flag(pc.equal(name, "process_name"))
    kind[process] = M
    ts_np, dur_np = (np.array(c.fill_null(np.nan).to_numpy(zero_copy_only=False), np.float64)
                     for c in (ts, dur))
    ts_np[process] = 0.0
    slices = (kind >= B) & (kind <= X)
    problems = [("name", ~flag(name.is_valid())), ("pid", ~flag(pid.is_valid())),
                ("ts", ~np.isfinite(ts_np)), ("dur", (kind == X) & ~np.isfinite(dur_np))]
    bad = slices & np.logical_or.reduce([p for _, p in problems])
    unknown = (flag(ph.is_valid()) & (kind == -1) & ~meta
               & ~flag(pc.is_in(ph, pa.array(sorted(_INSTANT)))))
    warnings: list[tuple[int, str]] = []
    for i in np.flatnonzero(~flag(ph.is_valid()) | (meta & ~meta_ok) | unknown | bad).tolist():
        if not ph[i].is_valid:
            text = "trace event without a string `ph`; skipped"
        elif meta[i]:
            text = "metadata event without integer pid/tid; skipped"
        elif unknown[i]:
            text = f"trace event with unsupported ph {ph[i].as_py()!r}; skipped"
        else:
            what = ", ".join(w for w, p in problems if p[i])
            text = f"trace {ph[i].as_py()} event with missing or invalid {what}; skipped"
        warnings.append((int(line[i]), text))
    keep = np.flatnonzero((slices & ~bad) | process)
    own: dict[int, dict] = {}
    extra = [f for f in fields if f not in DROP_ARGS]
    if extra:
        holds = np.logical_or.reduce([flag(pc.struct_field(args, f).is_valid()) for f in extra])
        which = np.flatnonzero(holds[keep] & (kind[keep] != M))
        if len(which):
            starts = np.concatenate([[0], np.flatnonzero(
                np.frombuffer(data, np.uint8) == 0x0A) + 1])
            for at in which.tolist():
                i = keep[at]
                kept = {k: v for k, v in parse.loads(data[starts[i]:starts[i + 1]])[
                    "args"].items() if k not in DROP_ARGS}
                if kept:
                    own[at] = kept
    take = pa.array(keep, pa.int64())
    return Events(line=line[keep], kind=kind[keep], pid=numbers(pid)[keep].astype(np.int64),
                  ts=ts_np[keep], dur=dur_np[keep],
                  name=pc.take(name, take).combine_chunks(),
                  track=pc.take(track, take).combine_chunks(),
                  thread=pc.take(thread, take).combine_chunks(),
                  args=own, warnings=warnings)


def _typed(values: "pa.ChunkedArray", test: Any) -> bool:
    """Whether a column is all null or of a type `test` accepts."""
    import pyarrow as pa

    return pa.types.is_null(values.type) or test(values.type)


def _is_number(t: "pa.DataType") -> bool:
    import pyarrow as pa

    return pa.types.is_integer(t) or pa.types.is_floating(t)
