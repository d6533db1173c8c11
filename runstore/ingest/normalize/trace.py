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
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from ...numbers import is_int64
from ...storage.writer import rows_where
from .base import Batch, Context, Output, clean_str as _clean_str, finite, json_text

__all__ = ["Trace", "normalize", "open_rows", "TS_BACKSTEP_US"]

TS_BACKSTEP_US = 1_000_000.0
_STATE_VERSION = 1
_INSTANT = frozenset({"i", "I"})
_DROP_ARGS = ("track", "thread")


def _args_text(args: dict) -> str | None:
    return json_text(args) if args else None


def _label(value: Any) -> str | None:
    """track/thread: a string as is; another scalar as its text; absent → None."""
    if value is None:
        return None
    if isinstance(value, str):
        return _clean_str(value)
    return _clean_str(json.dumps(value, allow_nan=True, default=str))


_is_int = is_int64
_is_finite_number = finite  # huge integers are not: they have no float value


class _Pairer:
    """Working form of the state: open B events indexed for pairing and depth."""

    def __init__(self, state: dict | None) -> None:
        state = state or {}
        if state and state.get("v") != _STATE_VERSION:
            state = {}  # unknown layout: start over rather than misread it
        self.segment: int = int(state.get("segment", 0))
        self.max_ts: float | None = state.get("max_ts")
        # pids whose `process_name` metadata was seen in the current segment
        self.meta: set[int] = set(state.get("meta", []))
        # Open B entries: dicts {line, name, pid, track, thread, ts, args, depth}; a list in
        # arrival order plus stacks per pairing key and counts per (pid, track).
        self.open: list[dict] = []
        self.stacks: dict[tuple, list[dict]] = {}
        self.track_open: dict[tuple, int] = {}
        for entry in state.get("open", []):
            self._push(dict(entry))
        # Line of the last B/E/X event when it was a B (candidate to move on a segment break).
        self.last_b_line: int | None = state.get("last_b_line")

    # -- open-set primitives --------------------------------------------------------------

    def _push(self, entry: dict) -> None:
        self.open.append(entry)
        self.stacks.setdefault((entry["pid"], entry["track"], entry["name"]), []).append(entry)
        tkey = (entry["pid"], entry["track"])
        self.track_open[tkey] = self.track_open.get(tkey, 0) + 1

    def _remove(self, entry: dict) -> None:
        key = (entry["pid"], entry["track"], entry["name"])
        stack = self.stacks[key]
        if stack[-1] is entry:  # the common case: an E closes the innermost B of its key
            stack.pop()
        else:
            for i in range(len(stack) - 1, -1, -1):
                if stack[i] is entry:
                    del stack[i]
                    break
        if not stack:
            del self.stacks[key]
        tkey = (entry["pid"], entry["track"])
        self.track_open[tkey] -= 1
        if not self.track_open[tkey]:
            del self.track_open[tkey]
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i] is entry:
                del self.open[i]
                break

    def depth_for(self, pid: int, track: str | None) -> int:
        return self.track_open.get((pid, track), 0)

    # -- segments -------------------------------------------------------------------------

    def close_segment(self, out: list[dict], base: dict) -> None:
        """End the current segment: its open B events can never match now."""
        out.extend(self.row(entry, None, None, base) for entry in self.open)
        self.open = []
        self.stacks = {}
        self.track_open = {}
        self.segment += 1
        self.max_ts = None
        self.meta = set()
        self.last_b_line = None

    # -- rows -----------------------------------------------------------------------------

    def row(self, entry: dict, end_ts: float | None, end_args: dict | None, base: dict) -> dict:
        args = dict(entry["args"])
        thread = entry["thread"]
        if end_args is not None:
            for k, v in end_args.items():
                if k not in _DROP_ARGS:
                    args[k] = v
            if thread is None:
                thread = _label(end_args.get("thread"))
        return {
            **base,
            "name": entry["name"],
            "start_us": entry["ts"],
            "dur_us": None if end_ts is None else end_ts - entry["ts"],
            "pid": entry["pid"],
            "track": entry["track"],
            "thread": thread,
            "args": _args_text(args),
            "depth": entry["depth"],
            "segment": entry.get("segment", self.segment),
        }

    def to_state(self) -> dict:
        return {
            "v": _STATE_VERSION,
            "segment": self.segment,
            "max_ts": self.max_ts,
            "meta": sorted(self.meta),
            "open": [dict(e) for e in self.open],
            "last_b_line": self.last_b_line,
        }


def _validate(line: int, ev: Any, ctx: Context) -> str | None:
    """The event's ph when its common fields are usable, else None (after a warning)."""
    if not isinstance(ev, dict):
        ctx.warn(line, f"trace event is a JSON {type(ev).__name__}, not an object; skipped")
        return None
    ph = ev.get("ph")
    if not isinstance(ph, str):
        ctx.warn(line, "trace event without a string `ph`; skipped")
        return None
    return ph


def normalize(
    records: Iterable[tuple[int, Any]], state: dict | None, ctx: Context
) -> tuple[dict[str, list[dict]], dict]:
    base = ctx.base()
    p = _Pairer(state)
    out: list[dict] = []

    for line, ev in records:
        ph = _validate(line, ev, ctx)
        if ph is None:
            continue
        if ph in _INSTANT:
            continue

        if ph == "M":
            pid, tid = ev.get("pid"), ev.get("tid")
            if not (_is_int(pid) and _is_int(tid)):
                ctx.warn(line, "metadata event without integer pid/tid; skipped")
                continue
            if ev.get("name") != "process_name":
                continue  # thread_name (or other) metadata: nothing to keep
            if pid in p.meta:
                # A repeated process_name for this pid: a new process is appending.
                moved: dict | None = None
                if p.last_b_line is not None:
                    for entry in reversed(p.open):
                        if entry["line"] == p.last_b_line:
                            if entry["pid"] == pid:
                                moved = entry
                            break
                if moved is not None:
                    p._remove(moved)
                p.close_segment(out, base)
                if moved is not None:
                    moved = {**moved, "depth": p.depth_for(moved["pid"], moved["track"]), "segment": p.segment}
                    p._push(moved)
                    p.max_ts = moved["ts"]
                    p.last_b_line = moved["line"]
            p.meta.add(pid)
            continue

        if ph not in ("B", "E", "X"):
            ctx.warn(line, f"trace event with unsupported ph {ph!r}; skipped")
            continue

        name, pid, ts = ev.get("name"), ev.get("pid"), ev.get("ts")
        args = ev.get("args", {})
        if args is None:
            args = {}
        problems = []
        if not isinstance(name, str):
            problems.append("name")
        if not _is_int(pid):
            problems.append("pid")
        if not _is_finite_number(ts):
            problems.append("ts")
        if not isinstance(args, dict):
            problems.append("args")
        dur = ev.get("dur")
        if ph == "X" and not _is_finite_number(dur):
            problems.append("dur")
        if problems:
            ctx.warn(line, f"trace {ph} event with missing or invalid {', '.join(problems)}; skipped")
            continue
        ts = float(ts)

        # Segment rule 2: the clock went back by more than a second.
        if p.max_ts is not None and ts < p.max_ts - TS_BACKSTEP_US:
            p.close_segment(out, base)
        p.max_ts = ts if p.max_ts is None else max(p.max_ts, ts)

        track = _label(args.get("track"))
        name = _clean_str(name)  # the same spelling for B entries and E lookups
        if ph == "E":
            p.last_b_line = None
            stack = p.stacks.get((pid, track, name))
            if not stack:
                ctx.warn(line, f"E event {name!r} on track {track!r} (pid {pid}) has no open B; skipped")
                continue
            entry = stack[-1]
            p._remove(entry)
            out.append(p.row(entry, ts, args, base))
            continue

        own_args = {k: v for k, v in args.items() if k not in _DROP_ARGS}
        entry = {
            "line": line,
            "name": name,
            "pid": pid,
            "track": track,
            "thread": _label(args.get("thread")),
            "ts": ts,
            "args": own_args,
            "depth": p.depth_for(pid, track),
            "segment": p.segment,
        }
        if ph == "X":
            p.last_b_line = None
            out.append(p.row(entry, ts + float(dur), None, base))
            continue
        p._push(entry)
        p.last_b_line = line

    return {"trace_slices": out}, p.to_state()


def open_rows(state: dict, ctx: Context) -> list[dict]:
    """Rows (dur_us null) for the B events still open in `state`, in arrival order."""
    p = _Pairer(state)
    base = ctx.base()
    return [p.row(entry, None, None, base) for entry in p.open]


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
        rows, state = normalize(batch.records(), state, batch.ctx)
        out.rows(rows)
        out.rows({"trace_slices": open_rows(state, batch.ctx)})
        batch.state["trace"] = state
        return out
