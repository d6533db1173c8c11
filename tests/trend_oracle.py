"""The independent computation of trend rules (drop / rise / stale) from the run files.

The expected rows come from the run files themselves: metrics.jsonl read with plain json (the
last write of a step wins; `optim/X` preferred to `X`), the EMA and the running median written
from their definitions in plain Python, file modification times from os.stat. Used by
tests/health/test_trends.py and every test that holds a command or page to the trend rules.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

import analysis_oracle as ao
import oracle
from runstore.health.trends import MIN_HISTORY  # the rule's stated constant, not its code

if TYPE_CHECKING:
    from runstore.health.trends import TrendRule

NAN = float("nan")



def family_series(run: Path, metric: str, since: int | None = None) -> list[tuple[int, float]]:
    """(step, value) in step order: per step the live number of the first spelling of the
    family that has one (`optim/X` before `X`)."""
    spellings = oracle.rule_family(metric)
    live = oracle.live_metrics(run)
    steps: dict[int, float] = {}
    for spelling in reversed(spellings):  # the preferred spelling written last, so it wins
        for (step, key), v in live.items():
            if key == spelling and ao.is_number(v):
                steps[step] = float(v)
    return sorted((s, v) for s, v in steps.items() if since is None or s >= since)


def rule_values(points: list[tuple[int, float]], kind: str, w: float) -> list[tuple[int, float]]:
    """(step, rule value) for the rule's steps (NaN where undefined)."""
    raw = [v for _, v in points]
    smoothed = ao.ema(raw, w)
    out = []
    best = None
    for i, (step, v) in enumerate(points):
        fin = math.isfinite(v)
        if kind == "drop":
            if fin:
                best = smoothed[i] if best is None else max(best, smoothed[i])
            if best is None:
                continue
            out.append((step, best - smoothed[i] if fin else NAN))
        else:
            earlier = [x for x in raw[:i] if math.isfinite(x)]
            if len(earlier) < MIN_HISTORY:
                continue
            m = statistics.median(earlier)
            out.append((step, smoothed[i] / m if fin and m > 0 else NAN))
    return out


def expected_row(points: list[tuple[int, float]], kind: str, w: float, op: str,
                 x: float) -> dict[str, Any] | None:
    vals = rule_values(points, kind, w)
    over = [(not math.isnan(v)) and (v > x if op == ">" else v >= x) for _, v in vals]
    if not any(over):
        return None
    streak = longest = 0
    for o in over:
        streak = streak + 1 if o else 0
        longest = max(longest, streak)
    over_steps = [s for (s, _), o in zip(vals, over) if o]
    return {"first_step": over_steps[0], "last_step": over_steps[-1],
            "steps_over": len(over_steps), "longest_streak": longest,
            "peak": max(v for (_, v), o in zip(vals, over) if o), "latest": vals[-1][1]}


def expected(root: Path, rule: "TrendRule", since: int | None = None) -> dict[str, dict]:
    out = {}
    for name, run in ao.runs(root).items():
        row = expected_row(family_series(run, rule.metric, since), rule.kind, rule.smoothing,
                           rule.op, rule.value)
        if row is not None:
            out[name] = row
    return out
