"""The tools `runstore mcp` offers, one toolbox per subject, composed in one tuple.

Contract: `TOOLBOXES` lists every toolbox in the order their tools are offered: runs
(`list_runs`, `describe_run`, `compare_runs`), metrics (`metric_keys`, `metric_history`),
health (`check`, `doctor`), rollouts (`rollouts`,
`search_transcripts`), timing (`slowest_spans`, `step_timeline`) and SQL (`sql`, `views`).
Each tool is a typed, read-only method over `Store` (see `base`); a new tool is a method
marked `@tool` in the toolbox of its subject, or a new toolbox added here.
"""

from __future__ import annotations

from .base import State, Toolbox, tool
from .health import DoctorTools, HealthTools
from .metrics import MetricTools
from .rollouts import RolloutTools
from .runs import RunTools
from .sql import SqlTools
from .timing import TimingTools

TOOLBOXES: tuple[type[Toolbox], ...] = (RunTools, MetricTools, HealthTools, DoctorTools,
                                        RolloutTools, TimingTools, SqlTools)

__all__ = ["State", "TOOLBOXES", "Toolbox", "tool"]
