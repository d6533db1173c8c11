"""Timing spans of a step and the Chrome-trace events of a run.

Contract: `_Spans` collects one step's `_Span`s (absolute epoch starts, perf_counter durations).
From them `_timing_line` makes one `timing_spans.jsonl` line, `_timing_metrics` the `time/*`
keys of a metrics row, and `_Trace.emit` the `trace_events.jsonl` lines, across process
restarts (`new_process`). Randomness comes only from the `random.Random` passed in.
"""

from __future__ import annotations

import random
import re
import zlib
from typing import Any, Sequence

from .encoding import _dumps, _jsonl


def _tid(track: str) -> int:
    """Chrome-trace tid: a stable stand-in for upstream's salted hash(track) % 1_000_000."""
    sdk = _SDK_TRACK.match(track)
    if sdk:
        return 1_000_000 + int(sdk.group(1))
    return zlib.crc32(track.encode("utf-8")) % 1_000_000


_SDK_TRACK = re.compile(r"^.+:[a-z_]+:(\d+)$")


class _Span:
    __slots__ = ("name", "start", "dur", "depth", "track", "thread", "end_args")

    def __init__(self, name: str, start: float, dur: float, depth: int, track: str,
                 thread: str, end_args: dict[str, Any] | None) -> None:
        self.name = name
        self.start = start  # absolute epoch seconds (float, so it carries time.time() noise)
        self.dur = dur  # perf_counter duration: precise, unlike end - start
        self.depth = depth
        self.track = track
        self.thread = thread
        self.end_args = end_args

    @property
    def end(self) -> float:
        return self.start + self.dur


class _Trace:
    """Chrome-trace JSON lines of one run, across process restarts."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list[str] = []
        self.base_us = 0.0
        self.origin = 0.0
        self.seen_tids: set[tuple[int, int]] = set()
        self.pids: dict[str, int] = {}

    def new_process(self, origin: float) -> None:
        # A resumed process: perf_counter restarts at an arbitrary value, pids count from 0
        # again and metadata is re-emitted.
        self.base_us = self.rng.uniform(2e8, 9e9)
        self.origin = origin
        self.seen_tids = set()
        self.pids = {}

    def emit(self, spans: Sequence[_Span]) -> None:
        events = []
        for seq, s in enumerate(spans):
            events.append((s.start, 1, s.depth, seq, "B", s))
            events.append((s.end, 0, -s.depth, seq, "E", s))
        # At equal timestamps ends come first (innermost first), then begins (outermost first).
        events.sort(key=lambda e: e[:4])
        for t, _, _, _, ph, s in events:
            pid = self.pids.setdefault(s.thread, len(self.pids))
            tid = _tid(s.track)
            args = {"track": s.track, "thread": s.thread}
            if ph == "E" and s.end_args:
                args.update(s.end_args)
            ts = self.base_us + (t - self.origin) * 1e6
            self.lines.append(_dumps({"name": s.name, "ph": ph, "pid": pid, "tid": tid,
                                      "ts": ts, "args": args, "cat": "async"}))
            if (pid, tid) not in self.seen_tids:
                first_of_pid = all(p != pid for p, _ in self.seen_tids)
                self.seen_tids.add((pid, tid))
                self.lines.append(_dumps({"name": "thread_name", "ph": "M", "pid": pid,
                                          "tid": tid, "ts": 0, "args": {"name": s.track}}))
                if first_of_pid:
                    self.lines.append(_dumps({"name": "process_name", "ph": "M", "pid": pid,
                                              "tid": 0, "ts": 0,
                                              "args": {"name": f"{s.thread} Thread"}}))

    def text(self, unmatched_tail: bool) -> str:
        lines = self.lines
        if unmatched_tail:
            # Upstream's flusher drops its last batch: end right after the final "B".
            last_b = max(i for i, line in enumerate(lines) if '"ph": "B"' in line)
            lines = lines[: last_b + 1]
        return _jsonl(lines)


def _timing_line(step: int, spans: Sequence[_Span]) -> str:
    origin = min(s.start for s in spans)
    ordered = sorted(spans, key=lambda s: (s.end, -s.depth))  # completion order
    return _dumps({"step": step, "spans": [
        {"name": s.name, "duration": s.dur, "wall_start": s.start - origin,
         "wall_end": s.end - origin} for s in ordered]})


def _timing_metrics(spans: Sequence[_Span], rng: random.Random) -> dict[str, Any]:
    """IterationWindow.get_timing_metrics(): time/<span> or time/<span>:total|:count|:mean|:max."""
    ordered = sorted(spans, key=lambda s: (s.end, -s.depth))
    by_name: dict[str, list[float]] = {}
    for s in ordered:
        by_name.setdefault(s.name, []).append(s.dur)
    out: dict[str, Any] = {}
    for name, durs in by_name.items():
        if len(durs) == 1:
            out["time/" + name] = durs[0]
        else:
            total = sum(durs)
            out[f"time/{name}:total"] = total
            out[f"time/{name}:count"] = len(durs)
            out[f"time/{name}:mean"] = total / len(durs)
            out[f"time/{name}:max"] = max(durs)
    origin = min(s.start for s in spans)
    out["time/total"] = max(s.end for s in spans) - origin - rng.random() * 5e-7
    return out


class _Spans:
    """Collects the spans of one step."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.items: list[_Span] = []

    def add(self, name: str, start: float, dur: float, depth: int, track: str = "Task-1",
            thread: str = "MainThread", end_args: dict[str, Any] | None = None) -> float:
        self.items.append(_Span(name, start, dur, depth, track, thread, end_args))
        return start + dur

    def jitter(self) -> float:
        # Spans that start "together" differ by a few hundred ns; once subtracted from an epoch
        # timestamp this becomes the 2.384185791015625e-07 noise of real files.
        return self.rng.random() * 4e-7
