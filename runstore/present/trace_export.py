"""Export one run's timing as a Chrome trace (the JSON array Perfetto UI and chrome://tracing load).

Contract: `trace_events(store, run, step=None, segment=None, source="auto") -> list[dict]`.
`run` names one run (`analysis.runs`: a run_id or unique prefix, a run_name or label, its
directory, or a GLOB matching exactly one run). The events come from
`trace_slices` when the run has any (`source="trace"`), else from `spans`
(`source="spans"`; `"auto"` picks the first that has rows). The list starts with the
metadata events (`ph: "M"`: `process_name`, `process_sort_index`, `thread_name`,
`thread_sort_index`) that name every process and track, followed by the slices in time order:

* from `trace_slices`: each slice is a complete event (`ph: "X"`, `ts` and `dur` in µs as
  recorded, `args` = the slice's args; a slice whose end was recorded before its start gets
  `dur` 0 and `args.recorded_dur_us`, the negative E - B) on its (process, track): `pid`
  numbers the (segment, pid) pairs from 1, `tid` numbers the tracks of a process from 1 (never the
  recorded tid, a salted hash that collides). Slices of one track that overlap without
  nesting (the viewers would drop or mis-nest them) go to extra lanes, `<track> (lane 2)`. A slice whose end event was never written
  (`dur_us` null) becomes a lone `ph: "B"` with `args.unmatched = true`, which both viewers
  draw as running to the end of the trace ("Did not end"). A resumed run has several segments
  (a new process whose clock restarted); each becomes its own processes, and when more than
  one segment is exported, later segments are shifted to start one second after the previous
  segment ends (each process name says by how much). One segment keeps its timestamps.
* `step=N` keeps the slices whose args carry `step == N`, and the slices that start in step
  N's time window. The window is found by matching the step's timing spans (`spans`) against
  the trace: the longest span of the step is looked up by name and duration, and the offset
  that lines up the most other spans of the step (by name, start and duration) wins. It is an
  error when neither finds anything. `segment=K` keeps segment K only.
* from `spans` (no trace): one process; a `steps` track with one slice per step, then one
  track per nesting depth (`depth 0`, `depth 1`, ...; spans of one depth that overlap in time
  get extra lanes, `depth 2 (lane 2)`, so every track nests properly). Steps are laid out one
  after the other (each step's `wall_start_s`/`wall_end_s` are relative to its own start),
  in µs, each as long as its wall time (the macro `step_wall_s`, over its placed spans). A
  span without a finite `wall_start_s` and `wall_end_s` (the macro `on_timeline`) has no
  place there: it is left out, and the process name says how many were. `segment` is an
  error here: timing spans carry no process sessions.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring as _text
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Literal

from ..errors import QueryError
from ..numbers import is_int64, json_number
from ..query.rows import records
from ..query.statements import named
from .scope import one_run

if TYPE_CHECKING:
    from ..query.reader import Reader

Source = Literal["auto", "trace", "spans"]
SEGMENT_GAP_US = 1_000_000.0
# A timing span and its trace slice are the same scope measured twice: durations agree to
# clock-reading noise. 100 µs (or 0.01 %) is far above that noise and far below step gaps.
MATCH_TOLERANCE_US = 100.0


def trace_events(store: "Reader", run: str, *, step: int | None = None,
                 segment: int | None = None, source: Source = "auto") -> list[dict[str, Any]]:
    """The run's trace as Chrome trace events (see the module docstring)."""
    if step is not None and segment is not None:
        raise QueryError("give --step or --segment, not both")
    for name, value in (("step", step), ("segment", segment)):
        if value is not None and not is_int64(value):
            raise QueryError(f"{name} is a whole number, got {value!r}")
    if source not in ("auto", "trace", "spans"):
        raise QueryError(f"source must be auto, trace or spans, got {source!r}")
    run_id, run_name = one_run(store, run)
    n_slices = records(store, named("trace.slice_count"), {"run": run_id})[0]["n"]
    if source == "trace" and n_slices == 0:
        raise QueryError(f"run {run_name!r} has no trace slices (no trace_events.jsonl; the "
                         "trainer writes it with enable_trace=True); use --from spans")
    if source == "spans" or (source == "auto" and n_slices == 0):
        if segment is not None:
            raise QueryError(f"run {run_name!r} is exported from its timing spans, which have "
                             "no segments; use --step N, or no filter")
        return _from_spans(store, run_id, run_name, step)
    return _from_trace(store, run_id, run_name, step, segment)


# ---------------------------------------------------------------------------------------------
# trace_slices
# ---------------------------------------------------------------------------------------------

def _from_trace(store: "Reader", run_id: str, run_name: str, step: int | None,
                segment: int | None) -> list[dict[str, Any]]:
    if segment is not None:
        rows = records(store, named("trace.segment_slices"),
                       {"run": run_id, "segment": segment})
        if not rows:
            segs = [r["segment"]
                    for r in records(store, named("trace.segments"), {"run": run_id})]
            raise QueryError(f"run {run_name!r} has no trace segment {segment}; segments: "
                             f"{', '.join(map(str, segs))}")
    elif step is not None:
        rows = _step_slices(store, run_id, run_name, step)
    else:
        rows = records(store, named("trace.slices"), {"run": run_id})
    return _chrome_events(rows, run_name)


def _step_slices(store: "Reader", run_id: str, run_name: str, step: int) -> list[dict[str, Any]]:
    """Slices whose args say `step == N`, plus those starting in step N's matched window."""
    tagged = records(store, named("trace.step_tagged_slices"),
                     {"run": run_id, "step": step})
    window = step_window(store, run_id, step)
    inside: list[dict[str, Any]] = []
    if window is not None:
        seg, lo, hi = window
        inside = records(
            store, named("trace.window_slices"),
            {"run": run_id, "seg": seg, "lo": lo - MATCH_TOLERANCE_US,
             "hi": hi + MATCH_TOLERANCE_US})
    if not tagged and not inside:
        has_spans = records(store, named("trace.step_span_count"),
                            {"run": run_id, "step": step})[0]["n"]
        why = ("its timing spans could not be matched to the trace" if has_spans
               else "the run has no timing spans for that step")
        raise QueryError(f"step {step} of {run_name!r}: no trace slice carries args.step = {step} "
                         f"and {why}; export the whole run, or one --segment")
    seen: set[tuple[Any, ...]] = set()
    out = []
    for r in tagged + inside:
        key = (r["segment"], r["pid"], r["track"], r["name"], r["start_us"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def step_window(store: "Reader", run_id: str, step: int) -> tuple[int, float, float] | None:
    """(segment, start µs, end µs) of step N in the trace's clock, or None when undeterminable.

    The step's timing spans give its shape (names, starts relative to the step, durations);
    the trace gives absolute times. Candidates for the offset between the two are the trace
    slices named like the step's longest span with its duration; the candidate that lines up
    most of the step's spans wins (at least half of them, else None). Only spans with finite
    wall times and duration take part.
    """
    spans = records(store, named("trace.step_spans"), {"run": run_id, "step": step})
    if not spans:
        return None
    anchor = max(spans, key=lambda s: s["duration_s"])
    dur = anchor["duration_s"] * 1e6
    tol = max(MATCH_TOLERANCE_US, 1e-4 * dur)
    candidates = records(
        store, named("trace.anchor_candidates"),
        {"run": run_id, "name": anchor["name"], "lo": dur - tol, "hi": dur + tol})
    extent = spans[0]["step_wall_s"] * 1e6
    best: tuple[int, tuple[int, float, float]] | None = None
    for c in candidates:
        offset = c["start_us"] - anchor["wall_start_s"] * 1e6
        found = records(
            store, named("trace.slices_between"),
            {"run": run_id, "seg": c["segment"], "lo": offset - MATCH_TOLERANCE_US,
             "hi": offset + extent + MATCH_TOLERANCE_US})
        score = _matches(spans, found, offset)
        if best is None or score > best[0]:
            best = (score, (c["segment"], offset, offset + extent))
    if best is None or best[0] * 2 < len(spans):
        return None
    return best[1]


def _matches(spans: list[dict[str, Any]], slices: list[dict[str, Any]], offset: float) -> int:
    """How many timing spans have a slice of the same name, start (after offset) and duration."""
    by_name: dict[str, list[tuple[float, float | None]]] = defaultdict(list)
    for s in slices:
        by_name[s["name"]].append((s["start_us"], s["dur_us"]))
    n = 0
    for sp in spans:
        start = offset + sp["wall_start_s"] * 1e6
        dur = sp["duration_s"] * 1e6
        tol = max(MATCH_TOLERANCE_US, 1e-4 * dur)
        if any(abs(ts - start) <= MATCH_TOLERANCE_US and d is not None and abs(d - dur) <= tol
               for ts, d in by_name.get(sp["name"], ())):
            n += 1
    return n


class _Lanes:
    """Lanes of one track: a slice goes to the first lane where it nests properly.

    Both viewers need the slices of one thread to nest (each slice inside the one still open
    before it, or after it). Recorded tracks almost always do; a slice that overlaps an open
    sibling without nesting goes to the next lane (`<track> (lane 2)`) rather than being
    dropped or mis-nested by the viewer. An unmatched B is open to the end of the trace.
    """

    EPS_US = 1e-3  # 1 ns: float noise in recorded ends

    def __init__(self) -> None:
        self.stacks: list[list[float]] = []  # per lane: end times of the open slices

    def place(self, ts: float, end: float) -> int:
        eps = self.EPS_US
        for lane, stack in enumerate(self.stacks):
            while stack and stack[-1] <= ts + eps:
                stack.pop()
            if not stack or end <= stack[-1] + eps:
                stack.append(end)
                return lane
        self.stacks.append([end])
        return len(self.stacks) - 1


def _order(r: dict[str, Any]) -> tuple[Any, ...]:
    """Parents before children: by start, then longest first (an unmatched B is the longest)."""
    dur = r["dur_us"]
    return (r["segment"], r["start_us"],
            -_length(dur), r["depth"] or 0)


def _chrome_events(rows: list[dict[str, Any]], run_name: str) -> list[dict[str, Any]]:
    rows = sorted(rows, key=_order)
    segments = sorted({r["segment"] for r in rows})
    shift = {seg: 0.0 for seg in segments}
    if len(segments) > 1:
        end_prev: float | None = None
        for seg in segments:
            mine = [r for r in rows if r["segment"] == seg]
            first = min(r["start_us"] for r in mine)
            last = max(r["start_us"] + (0.0 if r["dur_us"] is None else _length(r["dur_us"]))
                       for r in mine)
            shift[seg] = 0.0 if end_prev is None else end_prev + SEGMENT_GAP_US - first
            end_prev = last + shift[seg]

    pids: dict[tuple[int, int], int] = {}
    threads: dict[tuple[int, int], dict[str, int]] = {}
    lanes: dict[tuple[int, str | None], _Lanes] = {}
    tids: dict[tuple[int, str | None, int], int] = {}
    per_pid: dict[int, int] = defaultdict(int)
    events: list[dict[str, Any]] = []
    for r in rows:
        seg, dur = r["segment"], r["dur_us"]
        pkey = (seg, r["pid"])
        pid = pids.get(pkey)
        if pid is None:
            pid = pids[pkey] = len(pids) + 1
            threads[pkey] = defaultdict(int)
        threads[pkey][r["thread"] or ""] += 1
        ts = r["start_us"] + shift[seg]
        length = _length(dur)
        track = r["track"]
        placer = lanes.get((pid, track))
        if placer is None:
            placer = lanes[(pid, track)] = _Lanes()
        tkey = (pid, track, placer.place(ts, ts + length))
        tid = tids.get(tkey)
        if tid is None:
            per_pid[pid] += 1
            tid = tids[tkey] = per_pid[pid]
        args = _args(r["args"]) if r["args"] else {}
        if dur is None:
            ev: dict[str, Any] = {"name": r["name"], "pid": pid, "tid": tid, "ts": ts, "ph": "B"}
            args["unmatched"] = True
        else:
            ev = {"name": r["name"], "pid": pid, "tid": tid, "ts": ts, "ph": "X", "dur": length}
            if dur < 0:
                args["recorded_dur_us"] = dur
        if args:
            ev["args"] = args
        events.append(ev)

    meta: list[dict[str, Any]] = []
    for (seg, raw_pid), pid in pids.items():
        counts = threads[(seg, raw_pid)]
        thread = max(counts, key=lambda t: counts[t]) or f"pid {raw_pid}"
        name = f"{thread} Thread"
        if len(segments) > 1:
            name += f" · segment {seg}" + (f" (clock shifted {shift[seg] / 1e6:+.3f} s)"
                                           if shift[seg] else "")
        meta += [_meta("process_name", pid, 0, name=f"{run_name} · {name}"),
                 _meta("process_sort_index", pid, 0, sort_index=pid)]
    for (pid, track, lane), tid in tids.items():
        name = track if track is not None else "(no track)"
        meta += [_meta("thread_name", pid, tid, name=name + (f" (lane {lane + 1})" if lane else "")),
                 _meta("thread_sort_index", pid, tid, sort_index=tid)]
    return meta + events


def _length(dur_us: float | None) -> float:
    """A slice's length on the timeline: its recorded `dur_us`, never below 0 (an E event
    written with a smaller ts than its B pairs into a negative one, which no viewer draws;
    the event keeps it as `args.recorded_dur_us`), and endless when it never ended (null)."""
    return math.inf if dur_us is None else max(0.0, dur_us)


def _args(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {"args": text}
    return value if isinstance(value, dict) else {"args": value}


def _meta(kind: str, pid: int, tid: int, **args: Any) -> dict[str, Any]:
    return {"name": kind, "ph": "M", "pid": pid, "tid": tid, "ts": 0, "args": args}


# ---------------------------------------------------------------------------------------------
# spans (no trace)
# ---------------------------------------------------------------------------------------------


def _from_spans(store: "Reader", run_id: str, run_name: str,
                step: int | None) -> list[dict[str, Any]]:
    # As tuples, in the statement's column order (a dict a row costs more than the layout).
    rows = store.fetch(named("trace.run_spans"), {"run": run_id, "step": step},
                       convert=lambda result: result.fetchall())
    if not rows:
        if step is not None:
            steps = records(store, named("trace.span_step_range"), {"run": run_id})[0]
            if steps["n"]:
                raise QueryError(f"run {run_name!r} has no timing spans at step {step}; steps "
                                 f"with spans: {steps['lo']}..{steps['hi']} ({steps['n']} steps)")
        raise QueryError(f"run {run_name!r} has neither trace events (trace_events.jsonl) nor "
                         "timing spans (timing_spans.jsonl) to export")
    pid = 1
    events: list[dict[str, Any]] = []
    lanes: dict[int, list[float]] = defaultdict(list)  # depth -> end µs of each lane's last span
    lane_tid: dict[tuple[int, int], int] = {}
    offset = 0.0
    by_step: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    wall_s: dict[int, float] = {}  # the step's wall time over its placed spans (0: none)
    unplaced = 0
    for r in rows:
        s, placed, step_wall = r[0], r[7], r[8]
        mine = by_step.setdefault(s, [])  # a step of left-out spans keeps its slice
        wall_s[s] = max(0.0, step_wall or 0.0)
        if placed:
            mine.append(r)
        else:
            unplaced += 1
    eps = 1e-3  # µs: float noise of relative wall times
    spanned: list[dict[str, Any]] = []  # the span events: tid a (depth, lane) until numbered
    for s, spans in by_step.items():
        extent = wall_s[s] * 1e6
        events.append({"name": f"step {s}", "ph": "X", "pid": pid, "tid": 1, "ts": offset,
                       "dur": extent, "args": {"step": s}})
        for _, name, seconds, start, finish, depth, parent, _, _ in spans:
            ts = offset + start * 1e6
            dur = max(0.0, (finish - start) * 1e6)
            depth = depth or 0
            ends = lanes[depth]
            for lane, end in enumerate(ends):  # the first lane free by ts
                if end <= ts + eps:
                    ends[lane] = ts + dur
                    break
            else:
                lane = len(ends)
                ends.append(ts + dur)
            event = {"name": name, "ph": "X", "pid": pid, "tid": (depth, lane), "ts": ts,
                     "dur": dur, "args": {"step": s, "depth": depth, "parent": parent,
                                          "duration_s": seconds}}
            events.append(event)
            spanned.append(event)
        offset += extent
    for i, key in enumerate(sorted({e["tid"] for e in spanned})):
        lane_tid[key] = i + 2
    for e in spanned:
        e["tid"] = lane_tid[e["tid"]]
    left_out = (f"; {unplaced} span{'s' if unplaced != 1 else ''} without a finite wall time "
                "left out" if unplaced else "")
    meta = [_meta("process_name", pid, 0,
                  name=f"{run_name} · timing spans (steps laid end to end{left_out})"),
            _meta("process_sort_index", pid, 0, sort_index=pid),
            _meta("thread_name", pid, 1, name="steps"),
            _meta("thread_sort_index", pid, 1, sort_index=1)]
    for (depth, lane), tid in lane_tid.items():
        name = f"depth {depth}" + (f" (lane {lane + 1})" if lane else "")
        meta += [_meta("thread_name", pid, tid, name=name),
                 _meta("thread_sort_index", pid, tid, sort_index=tid)]
    events.sort(key=lambda e: (e["ts"], -e["dur"]))
    return meta + events


def dumps(events: list[dict[str, Any]]) -> str:
    """The events as a JSON array, one event per line. Strict JSON: the viewers reject bare
    NaN/Infinity, so non-finite numbers in args are written as the strings "NaN", "Infinity".
    Each event is written as `json.dumps(event, allow_nan=False, ensure_ascii=False,
    separators=(",", ":"))` writes it; only one the strict encoder refuses is copied with its
    non-finite numbers named (a whole run has ~10^5 events, nearly all finite)."""
    lines = ",\n".join(_event_json(e) for e in events)
    return f"[\n{lines}\n]\n"


_STRICT = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
# The shapes nearly every event has: a slice without args (from the trace), a slice with args
# (from timing spans), and a metadata event.
_SLICE = ("name", "pid", "tid", "ts", "ph", "dur")
_SPAN = ("name", "ph", "pid", "tid", "ts", "dur", "args")
_META = ("name", "ph", "pid", "tid", "ts", "args")
_SPAN_ARGS = ("step", "depth", "parent", "duration_s")


def _event_json(event: dict[str, Any]) -> str:
    text = _plain(event)
    if text is not None:
        return text
    try:
        return _STRICT.encode(event)
    except ValueError:  # a non-finite float somewhere in it
        return _STRICT.encode(_finite(event))


def _plain(e: dict[str, Any]) -> str | None:
    """`_STRICT.encode(e)`, the same text, written by an f-string for the common shapes whose
    values are text, integers and finite floats (and flat args), in a third less time; None
    for any other event. `x - x == 0` holds for a finite float only."""
    keys = tuple(e)
    if keys == _SLICE:
        name, pid, tid, ts, ph, dur = e.values()
        if (type(name) is str and type(pid) is int and type(tid) is int and type(ph) is str
                and type(ts) is float and ts - ts == 0 and type(dur) is float and dur - dur == 0):
            return (f'{{"name":{_text(name)},"pid":{pid},"tid":{tid},"ts":{ts!r},'
                    f'"ph":{_text(ph)},"dur":{dur!r}}}')
    elif keys == _SPAN:
        name, ph, pid, tid, ts, dur, args = e.values()
        if (type(name) is str and type(ph) is str and type(pid) is int and type(tid) is int
                and type(ts) is float and ts - ts == 0 and type(dur) is float and dur - dur == 0
                and type(args) is dict):
            flat = _flat(args)
            if flat is not None:
                return (f'{{"name":{_text(name)},"ph":{_text(ph)},"pid":{pid},"tid":{tid},'
                        f'"ts":{ts!r},"dur":{dur!r},"args":{flat}}}')
    elif keys == _META:
        name, ph, pid, tid, ts, args = e.values()
        if (type(name) is str and type(ph) is str and type(pid) is int and type(tid) is int
                and type(ts) is int and type(args) is dict):
            flat = _flat(args)
            if flat is not None:
                return (f'{{"name":{_text(name)},"ph":{_text(ph)},"pid":{pid},"tid":{tid},'
                        f'"ts":{ts},"args":{flat}}}')
    return None


def _flat(args: dict[str, Any]) -> str | None:
    """`_STRICT.encode(args)` for a dict of text keys whose values are text, integers, finite
    floats or None; None for any other."""
    if tuple(args) == _SPAN_ARGS:  # a timing span's, written at once
        step, depth, parent, seconds = args.values()
        if (type(step) is int and type(depth) is int and type(seconds) is float
                and seconds - seconds == 0):
            if parent is None:
                return (f'{{"step":{step},"depth":{depth},"parent":null,'
                        f'"duration_s":{seconds!r}}}')
            if type(parent) is str:
                return (f'{{"step":{step},"depth":{depth},"parent":{_text(parent)},'
                        f'"duration_s":{seconds!r}}}')
    parts = []
    for key, value in args.items():
        kind = type(value)
        if kind is str:
            shown = _text(value)
        elif kind is int:
            shown = int.__repr__(value)
        elif kind is float and value - value == 0:
            shown = float.__repr__(value)
        elif value is None:
            shown = "null"
        else:
            return None
        if type(key) is not str:
            return None
        parts.append(f"{_text(key)}:{shown}")
    return "{" + ",".join(parts) + "}"


def _finite(value: Any) -> Any:
    """`value` with every number in it as JSON carries it (`numbers.json_number`)."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return json_number(value)
