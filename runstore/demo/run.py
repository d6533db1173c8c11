"""One simulated run, the part every kind shares: processes, metrics.jsonl, checkpoints.

Contract: `_RunBuilder(spec, seed, salt=...)` simulates a run process by process (a crash and
resume makes two) and collects its files in memory; `build()` returns `{relative path: text}`.
The bytes are a pure function of `(spec, seed, salt)`: every random draw comes from one
`random.Random` seeded by them, in a fixed order. A subclass per kind (`rl.py`,
`supervised.py`) supplies `training_step` (the rows and spans of one step), `_final_rows` and
`_config`; this class owns the clock, the cumulative token/cost counters, `checkpoints.jsonl`,
`timing_spans.jsonl` and `trace_events.jsonl`.
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timezone
from typing import Any

from .encoding import _dumps, _jsonl
from .problems import Planted
from .specs import FAKE_MODULE_PATH, FAKE_RUNS_ROOT, RunSpec
from .spans import _Spans, _timing_line, _Trace


def _uuid_like(rng: random.Random) -> str:
    h = "%032x" % rng.getrandbits(128)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _clamp(x: float, lo: float, hi: float) -> float:
    return lo if x < lo else hi if x > hi else x


_BASE_EPOCH = {
    "flat": datetime(2026, 3, 13, 9, 58, 24, tzinfo=timezone.utc).timestamp(),
    "0.6": datetime(2026, 9, 2, 6, 13, 22, tzinfo=timezone.utc).timestamp(),
}


class _RunBuilder:
    """Simulates one run process by process and collects its files in memory.

    Not used directly: `tree.py` instantiates the subclass of the spec's kind.
    """

    def __init__(self, spec: RunSpec, seed: int, *, salt: str = "") -> None:
        self.spec = spec
        # str seeds hash with SHA-512 inside random: stable across processes and machines.
        self.rng = random.Random(f"{seed}|{spec.name}|{salt}")
        self.era = "0.6" if spec.kind != "rl" or spec.layout == "iteration_dirs" else "flat"
        self.model_id = _uuid_like(self.rng)
        self.log_path = f"{FAKE_RUNS_ROOT}/{spec.name}"
        self.clock = _BASE_EPOCH[self.era] + self.rng.uniform(0, 5 * 86400)
        self.files: dict[str, str] = {}
        self.checkpoint_lines: list[str] = []
        self.timing_lines: list[str] = []
        self.trace = _Trace(self.rng) if spec.trace else None
        self.cum_tokens = {"sampled": 0, "prefill_cached": 0, "prefill_uncached": 0, "trained": 0}
        self.cum_cost = 0.0
        self.snapshots: dict[str, tuple[dict[str, int], float]] = {}  # counters per checkpoint
        # A run of the `problems` scenario plants its problem through this (problems.py).
        self.planted = Planted(spec) if spec.problem is not None else None

    # -- whole run ------------------------------------------------------------------------

    def build(self) -> dict[str, str]:
        spec = self.spec
        if spec.write_config:
            self.files["config.json"] = _dumps(self._config(), indent=2)
        if spec.config_only:
            return self.files
        self.files["code.diff"] = ("### module: tinker_cookbook (not in a git repository)\n"
                                   f"module_path: {FAKE_MODULE_PATH}\n")
        if spec.empty_metrics:
            self.files["metrics.jsonl"] = ""
            return self.files
        processes = self._processes()
        per_process: list[list[tuple[int | None, str]]] = []
        for index, (start, stop) in enumerate(processes):
            self._start_process(index)
            lines: list[tuple[int | None, str]] = []
            for step in range(start, stop):
                superseded = index == 0 and len(processes) > 1 and step >= processes[1][0]
                for row in self.training_step(step, superseded=superseded):
                    lines.append((step, _dumps(row)))
            if index == len(processes) - 1 and spec.final_checkpoint:
                lines.extend((r.get("step"), _dumps(r)) for r in self._finish())
            self._end_process(index, index == len(processes) - 1)
            per_process.append(lines)
        self.files["metrics.jsonl"] = self._metrics_text(per_process)
        if self.checkpoint_lines:
            self.files["checkpoints.jsonl"] = _jsonl(self.checkpoint_lines)
        self.files["timing_spans.jsonl"] = _jsonl(self.timing_lines)
        if self.trace is not None:
            self.files["trace_events.jsonl"] = self.trace.text(spec.trace_unmatched_tail)
        logs = self._logs_log(per_process)
        if logs is not None:
            self.files["logs.log"] = logs
        return self.files

    def _processes(self) -> list[tuple[int, int]]:
        """[(first_step, stop)] per trainer process; two when the run crashed and resumed."""
        spec = self.spec
        if spec.resumed_at is None:
            return [(0, self.planted.stop(spec.steps) if self.planted else spec.steps)]
        resume = spec.resumed_at
        # Crash a few steps after the checkpoint, before the next one would have been saved.
        if spec.save_every:
            next_save = (resume // spec.save_every + 1) * spec.save_every
        else:
            next_save = spec.steps + 1
        crash = max(resume + 1, min(resume + 3, next_save - 1, spec.steps))
        return [(0, crash), (resume, spec.steps)]

    def _start_process(self, index: int) -> None:
        if index > 0:
            self.clock += self.rng.uniform(600, 3600)  # crash, then someone relaunches it
            if self.spec.write_config:
                self.files["config.json"] = _dumps(self._config(), indent=2)  # rewritten
            # The resumed process reloads its counters from the checkpoint it resumes from.
            snapshot = self.snapshots.get(f"{self.spec.resumed_at:06d}")
            if snapshot is not None:
                self.cum_tokens, self.cum_cost = dict(snapshot[0]), snapshot[1]
        if self.trace is not None:
            self.trace.new_process(self.clock - self.rng.uniform(5, 30))

    def _metrics_text(self, per_process: list[list[tuple[int | None, str]]]) -> str:
        spec = self.spec
        first = per_process[0]
        if len(per_process) > 1 and spec.resume_style == "truncate":
            resume = spec.resumed_at or 0
            copy = _jsonl(line for _, line in first)  # the file as it was at the crash
            self.files[f"metrics.jsonl.pre_resume_{resume:06d}"] = copy
            first = [(step, line) for step, line in first if step is None or step < resume]
        lines = [line for part in [first, *per_process[1:]] for _, line in part]
        lines = self._insert_stepless(lines)
        text = _jsonl(lines)
        if spec.cut_last_line and lines:
            # A process killed mid-write: half of the last line, no newline.
            text = text[: len(text) - len(lines[-1]) - 1 + len(lines[-1]) // 2]
        return text

    def _insert_stepless(self, lines: list[str]) -> list[str]:
        n = self.spec.stepless_rows
        if n <= 0:
            return lines
        out = list(lines)
        for i in range(n, 0, -1):
            pos = max(1, len(lines) * i // (n + 1))
            row = {"discarded/trajectories": self.rng.randint(0, 6),
                   "discarded/tokens": self.rng.randint(0, 5000),
                   "discarded/frac_stale": round(self.rng.random() * 0.2, 4)}
            out.insert(pos, _dumps(row))
        return out

    def take_timing_lines(self) -> list[str]:
        lines, self.timing_lines = self.timing_lines, []
        return lines

    def restore_from_row(self, row: dict[str, Any]) -> None:
        """Continue cumulative counters from an existing row (append_steps)."""
        for key in self.cum_tokens:
            value = row.get(f"tokens/cumulative/{key}")
            if isinstance(value, (int, float)) and math.isfinite(value):
                self.cum_tokens[key] = int(value)
        cost = row.get("cost/cumulative_usd")
        if isinstance(cost, (int, float)) and math.isfinite(cost):
            self.cum_cost = float(cost)

    # -- what each kind supplies ---------------------------------------------------------------

    def training_step(self, step: int, *, superseded: bool) -> list[dict[str, Any]]:
        """The metrics rows of one step (`superseded`: a step the resumed process redoes)."""
        raise NotImplementedError

    def _final_rows(self) -> list[dict[str, Any]]:
        """Rows a completed run logs after its last step, before the final checkpoint."""
        return []

    def _config(self) -> dict[str, Any]:
        """The content of config.json."""
        raise NotImplementedError

    def _logs_log(self, per_process: list[list[tuple[int | None, str]]]) -> str | None:
        """The text of logs.log, for the kinds that write one."""
        return None

    def _end_process(self, index: int, last: bool) -> None:
        """A trainer process ends (`last`: the run's last process)."""

    # -- one step and the end of the run ------------------------------------------------------

    def _close_step(self, step: int, spans: _Spans) -> None:
        self.timing_lines.append(_timing_line(step, spans.items))
        if self.trace is not None:
            self.trace.emit(spans.items)
        self.clock = max(s.end for s in spans.items) + self.rng.uniform(0.001, 0.05)

    def _finish(self) -> list[dict[str, Any]]:
        """What a completed run writes after its last step."""
        spec = self.spec
        rows = self._final_rows()
        name = "final"
        batch = spec.steps if spec.kind == "rl" else 0
        self._checkpoint(name, batch, rolling=False, final=True)
        if self.trace is not None:
            spans = _Spans(self.rng)
            t = self.clock
            spans.add("save_checkpoint_async", t, self.rng.uniform(1, 4), 0,
                      end_args=self._ckpt_args(name, rolling=False))
            self.trace.emit(spans.items)
        return rows

    # -- checkpoints ------------------------------------------------------------------------

    def _state_path(self, name: str) -> str:
        return f"tinker://{self.model_id}/weights/{name}"

    def _ckpt_args(self, name: str, *, rolling: bool) -> dict[str, Any]:
        args = {"state_path": self._state_path(name)}
        if not rolling:
            args["sampler_path"] = f"tinker://{self.model_id}/sampler_weights/{name}"
        return args

    def _checkpoint(self, name: str, batch: int, *, rolling: bool, final: bool = False) -> None:
        spec = self.spec
        record: dict[str, Any] = {"name": name, "batch": batch}
        if spec.kind != "rl":
            record["epoch"] = 1 if final else 0
        record.update(self._ckpt_args(name, rolling=rolling))
        if spec.kind == "rl" and self.era == "0.6":
            record["cumulative_tokens"] = dict(self.cum_tokens)
            record["discarded_tokens"] = {k: 0 for k in self.cum_tokens}
        if spec.kind == "sl":
            record["elapsed_tokens"] = self.cum_tokens["trained"]
        if rolling:
            record["rolling"] = True
        self.checkpoint_lines.append(_dumps(record))
        self.snapshots[name] = (dict(self.cum_tokens), self.cum_cost)

    def _save_due(self, k: int) -> tuple[bool, bool]:
        """(regular save, rolling save) for checkpoint number k."""
        spec = self.spec
        regular = spec.save_every > 0 and k > 0 and k % spec.save_every == 0
        if spec.resumed_at is not None and k == spec.resumed_at:
            regular = True  # the checkpoint the run resumes from
        rolling = (not regular and spec.rolling_save_every > 0 and k > 0
                   and k % spec.rolling_save_every == 0)
        return regular, rolling
