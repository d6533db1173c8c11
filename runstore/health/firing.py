"""A firing: the row a health rule gives for a run, and the alert a watch or check reports.

Contract: every kind of rule (threshold rules, evaluate.py; trend rules, trends.py) reports
what fired in the same columns, `COLUMNS` (`COLUMN_TYPES` gives each one's type, as
storage.schema names types): `run_name, rule, first_step, last_step, steps_over,
longest_streak, peak, latest, status`. An `Alert` is one such row plus the run's `run_id`:
what `ingest --watch` prints and what notifications post (notify.py). Its `key()` is what
identifies the firing: the run, the rule, the step where it started firing; a firing that
ends and starts again starts at another step (or after the rule stopped firing: notify.py).

This module imports nothing else of `health`, so every module of the package can read it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..numbers import nonfinite_name
from ..printable import printable
from ..storage.schema import F64, I64, STR

# The columns of a fired row and the type of each (the check statement's).
COLUMN_TYPES = {"run_name": STR, "rule": STR, "first_step": I64, "last_step": I64,
                "steps_over": I64, "longest_streak": I64, "peak": F64, "latest": F64,
                "status": STR}
COLUMNS = tuple(COLUMN_TYPES)


@dataclass(frozen=True)
class Alert:
    """A (run, rule) that fires: one row of `runstore check`, plus the run's id.
    A `stale` rule's row has no `steps_over`/`longest_streak` (it is not about steps) and
    its `peak` is the minutes since the run's sources last changed."""

    run_id: str
    run_name: str
    rule: str
    first_step: int | None
    last_step: int | None
    steps_over: int | None
    longest_streak: int | None
    peak: float
    latest: float
    status: str | None

    def key(self) -> tuple[str, str, int | None]:
        """What identifies this firing: (run_id, rule, first_step)."""
        return self.run_id, self.rule, self.first_step

    def text(self) -> str:
        """One line for people: `FIRED run: rule since step N (peak …, latest …, …)`; a
        control character of the run's name or the rule's is shown, not obeyed
        (`printable`: a newline in a name does not split the line)."""
        if self.steps_over is None:  # stale: minutes, not steps
            at = ("with no step logged" if self.first_step is None
                  else f"at step {self.first_step}")
            return printable(
                f"FIRED {self.run_name}: {self.rule} {at} (no source "
                f"change for {_num(self.peak)} minutes, run {self.status or 'unknown'})")
        steps = f"{self.steps_over} step{'s' if self.steps_over != 1 else ''} over"
        return printable(f"FIRED {self.run_name}: {self.rule} since step {self.first_step} "
                         f"(peak {_num(self.peak)}, latest {_num(self.latest)}, {steps}, "
                         f"run {self.status or 'unknown'})")


def _num(v: float | None) -> str:
    if v is None:
        return "null"
    return f"{v:.6g}" if math.isfinite(v) else nonfinite_name(v)
