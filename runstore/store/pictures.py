"""`Pictures`: the `Store` methods that draw — charts, the HTML report, the trace export.

Contract: each method is one call into `runstore.present` (`charts`, `report`,
`trace_export`) and returns a plotly figure, the report's path or trace events; plotly is
imported only when a method runs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .base import StoreBase

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ..analysis.runs import Scope


class Pictures(StoreBase):
    """Charts, the report and the trace export."""

    def plot_metric(self, keys: str | Sequence[str], *, runs: str | None = None,
                    color_by: str | None = None, smooth: float | None = None) -> "go.Figure":
        """One line per run and key over steps (live values of the `metrics` view).

        `runs` is a scope (`runstore.analysis.runs`: a GLOB over `run_name`, a name, run_id or
        directory); `color_by` a flattened config key (runs coloured
        by its value, with a legend); `smooth=W` adds each line smoothed with the debiased EMA
        of weight W in [0, 1) (runstore's one smoothing, as `compare` and the web UI) and
        keeps the raw line faint. Lines over 5,000 points keep each bucket's min and max (said in the subtitle).

        Example:
            >>> fig = store.plot_metric("env/all/reward/total", runs="math_rl_sweep/*",
            ...                         color_by="learning_rate", smooth=0.6)
            >>> sorted({t.meta["kind"] for t in fig.data})
            ['ema', 'raw']
        """
        from ..present import charts

        return charts.plot_metric(self, keys, runs=runs, color_by=color_by, smooth=smooth)

    def plot_kl(self, *, runs: str | None = None,
                threshold: float | None = None) -> "go.Figure":
        """KL v1/v2 per run over steps, the threshold dashed, flagged runs on top and named
        in the title (threshold: the `kl_threshold` setting unless given).

        Example:
            >>> store.plot_kl().layout.title.text
            'KL sample→train — flagged: gsm8k_tool_rl/sweep/lr_1e-3/seed_0'
        """
        from ..present import charts

        return charts.plot_kl(self, runs=runs, threshold=threshold)

    def plot_rewards(self, *, runs: str | None = None,
                     color_by: str | None = None) -> "go.Figure":
        """`reward_trends`: each step's reward (faint) and `reward_ma10` per run.

        Example:
            >>> len(store.plot_rewards(runs="gsm8k_tool_rl/*").data)
            10
        """
        from ..present import charts

        return charts.plot_rewards(self, runs=runs, color_by=color_by)

    def plot_spans(self, run: str, *, step: int | None = None) -> "go.Figure":
        """A Gantt chart of one step's spans (default: the last step) in nesting order, over
        the share of step time of each top-level span at every step.

        Example:
            >>> fig = store.plot_spans("sl/tulu3_qwen3-8b_lr2e-4", step=3)
            >>> sorted({t.meta["kind"] for t in fig.data})
            ['gantt', 'share']
        """
        from ..present import charts

        return charts.plot_spans(self, run, step=step)

    def report(self, path: str | os.PathLike[str], *, runs: "Scope" = None) -> Path:
        """Write the self-contained HTML report (summary, KL, rewards, spans, checkpoints);
        `runs` is a scope (a pattern or a list of them), as for the charts.

        Example:
            >>> store.report("report.html", runs="gsm8k_tool_rl/*")  # doctest: +SKIP
            PosixPath('report.html')
        """
        from ..present import report

        with self.one_snapshot() as snap:  # its sections' answers agree
            return report.write(snap, path, runs)

    def trace(self, run: str, *, step: int | None = None, segment: int | None = None,
              source: str = "auto") -> list[dict[str, Any]]:
        """A run's timing as Chrome trace events (Perfetto UI, chrome://tracing), from
        `trace_slices`, or from `spans` when the run has no trace (`source` forces one).

        Example:
            >>> events = store.trace("sl/tulu3_qwen3-8b_lr2e-4", step=3)
            >>> sorted({e["ph"] for e in events})
            ['M', 'X']
        """
        from ..present import trace_export as perfetto

        return perfetto.trace_events(self, run, step=step, segment=segment,
                                     source=source)  # type: ignore[arg-type]
