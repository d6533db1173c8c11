"""Tools about timing: `slowest_spans` and `step_timeline`.

Contract: `slowest_spans` is one run's rows of the `slowest_spans` view (where its step time
goes, by rank: summed and wall seconds, shares, percentiles; `Store.run_slowest_spans`).
`step_timeline` is, without a step, the run's steps with their wall time, span count and
longest top-level span (`Store.run_step_times`: which steps were slow), and with a step, that
step's spans in start order with their nesting (`Store.step_spans`).
"""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import Field

from ...numbers import INT64_MAX, INT64_MIN
from ..args import MaxChars, Offset, Run, TextFormat, limit
from .base import Toolbox, tool
from .common import page, run_header

SpanLimit = limit(20, 1000, "span names")
StepLimit = limit(200, 5000, "steps or spans")


class TimingTools(Toolbox):
    """slowest_spans, step_timeline."""

    @tool("Slowest spans of a run")
    def slowest_spans(self, run: Run, limit: SpanLimit = 20, offset: Offset = 0,
                      format: TextFormat = "markdown", max_chars: MaxChars = None) -> str:
        """Where a run's step time goes: per span name, calls, total and wall seconds, share
        of step time, mean/p50/p95/max, ranked (the slowest_spans view). Spans nest, so
        compare names at the same depth."""
        found = self.store.resolve([run])[0]
        frame = self.store.run_slowest_spans(found.run_id)
        out = self.answer(max_chars).line(f"{frame.height} span names of {run_header(found)}, "
                                          "slowest first:")
        return out.table(*page(frame, offset, limit), fmt=format, what="span names").render()

    @tool("Step timeline of a run")
    def step_timeline(self, run: Run, step: Annotated[Optional[int], Field(
                          ge=INT64_MIN, le=INT64_MAX,
                          description="A step whose spans to show in start order; omit to list "
                                      "the steps with their wall time and longest span.",
                          examples=[12])] = None,
                      limit: StepLimit = 200, offset: Offset = 0,
                      format: TextFormat = "markdown", max_chars: MaxChars = None) -> str:
        """A run's timing per step (wall seconds, spans, longest top-level span) to find slow
        steps; with `step`, that step's spans in start order (name, depth, parent, start,
        end, seconds)."""
        found = self.store.resolve([run])[0]
        out = self.answer(max_chars)
        if step is None:
            frame = self.store.run_step_times(found.run_id)
            out.line(f"{frame.height} steps with timing spans of {run_header(found)}:")
            what = "steps"
        else:
            frame = self.store.step_spans(found.run_id, step=step)
            out.line(f"{frame.height} spans of step {step} of {run_header(found)}, in start "
                     "order (seconds from the step's first span):")
            what = "spans"
        return out.table(*page(frame, offset, limit), fmt=format, what=what).render()
