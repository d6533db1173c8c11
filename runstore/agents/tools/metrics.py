"""Tools about metrics: `metric_keys` and `metric_history`.

Contract: `metric_keys` is `runstore keys` (`Store.keys`: every key some run in scope logged,
with run and point counts, first and last step, type; `like` searches). `metric_history` is
`Store.history`: each (run, key) line of live values on the x axis asked for, optionally
smoothed with the project's one smoothing, reduced server-side to `max_points` per line by
min/max buckets (spikes survive); the answer first lists the lines with how many points each
had and kept, and says how many were dropped in all and how to see them (a narrower x range,
or a larger `max_points`).
"""

from __future__ import annotations

from typing import Annotated, Optional, Union

from pydantic import Field

from ...errors import UsageError
from ..answer import UNPAGED, Page
from ..args import MaxChars, Offset, Runs, TextFormat, limit
from .base import Toolbox, tool
from .common import Smooth, X, page, said

KeyLimit = limit(100, 2000, "keys")
PointLimit = limit(2000, 20000, "points")
MOST_KEYS = 10

Keys = Annotated[Union[str, list[str]], Field(
    description=f"Metric keys (1 to {MOST_KEYS}), exactly as logged; `metric_keys` lists them.",
    examples=[["env/all/reward/total", "optim/kl_sample_train_v1"], "optim/entropy"])]
Like = Annotated[Optional[str], Field(
    description="Only keys containing this text (any case), or matching it as an ILIKE pattern "
                "when it holds a %.", examples=["kl", "env/%/reward/total"])]
MaxPoints = Annotated[int, Field(
    ge=4, le=2000, description="Most points per line (a run and a key): a longer line keeps, "
                               "for equal buckets of its points, each bucket's minimum and "
                               "maximum, plus its first and last point.", examples=[100])]
Bound = Annotated[Optional[float], Field(
    description="Only points with x at or above (x_min) / at or below (x_max) this value: "
                "zoom in to see a window at full resolution.", examples=[20])]


class MetricTools(Toolbox):
    """metric_keys, metric_history."""

    @tool("List metric keys")
    def metric_keys(self, like: Like = None, runs: Runs = None, limit: KeyLimit = 100,
                    offset: Offset = 0, format: TextFormat = "markdown",
                    max_chars: MaxChars = None) -> str:
        """The metric keys the runs logged (as `runstore keys`), with how many runs log each,
        live points, first and last step and type (number/string/both). Search with `like`."""
        frame = self.store.keys(runs=runs, like=like)
        out = self.answer(max_chars).line(
            f"{frame.height} metric key{'s' if frame.height != 1 else ''}"
            + (f" containing {said(like)}" if like and "%" not in like else
               f" matching {said(like)}" if like else "") + ":")
        return out.table(*page(frame, offset, limit), fmt=format, what="keys").render()

    @tool("Metric history")
    def metric_history(self, keys: Keys, runs: Runs = None, x: X = "step",
                       smooth: Smooth = None, max_points: MaxPoints = 100,
                       x_min: Bound = None, x_max: Bound = None, limit: PointLimit = 2000,
                       offset: Offset = 0, format: TextFormat = "markdown",
                       max_chars: MaxChars = None) -> str:
        """Metric values over steps (or wall time) for runs × keys, downsampled on the server
        so spikes survive (each bucket keeps its min and max), optionally smoothed. Says how
        many points were dropped; zoom with x_min/x_max for full resolution."""
        import polars as pl

        names = [keys] if isinstance(keys, str) else list(keys)
        if not 1 <= len(names) <= MOST_KEYS:
            raise UsageError(f"give 1 to {MOST_KEYS} keys, got {len(names)}")
        h = self.store.history(names, runs=runs, x=x, smooth=smooth, max_points=max_points,
                               x_min=x_min, x_max=x_max)
        lines = (h.group_by("run_id", "run_label", "key", maintain_order=True)
                 .agg(points=pl.col("n_points").first(), shown=pl.len()))
        dropped = int((lines["points"] - lines["shown"]).sum() or 0)
        out = self.answer(max_chars)
        where = "" if x_min is None and x_max is None else \
            f", {x} in [{'' if x_min is None else x_min}, {'' if x_max is None else x_max}]"
        out.line(f"## {len(lines)} lines (run × key) on x={x}{where}"
                 + (f", smoothed {smooth}" if smooth is not None else ""))
        out.table(*page(lines, 0, lines.height), fmt=format, what="lines", more=UNPAGED)
        for key, why in self._no_line(names, set(lines["key"].to_list()), runs):
            out.line(f"No line for {key}: {why}.")
        if dropped:
            out.line(f"Downsampled: {dropped:,} of {int(lines['points'].sum()):,} points dropped "
                     f"(lines over max_points={max_points} keep each bucket's min and max, and "
                     "their first and last point). For every point of a window, ask with "
                     "x_min/x_max, or a larger max_points.")
        points = h.drop("run_id", "n_points")
        out.line("## points")
        out.table(points.slice(offset, limit).to_arrow(), Page(offset, limit, points.height),
                  fmt=format, what="points")
        return out.render()

    def _no_line(self, names: list[str], drawn: set[str], runs: Runs) -> list[tuple[str, str]]:
        """Why each key asked for has no line: no run in scope logs it, or only as text."""
        missing = [k for k in dict.fromkeys(names) if k not in drawn]
        if not missing:
            return []
        found = self.store.keys(runs=runs)
        types = dict(zip(found["key"].to_list(), found["type"].to_list()))
        return [(k, "no run in scope logs it" if k not in types else
                 "its values are text, not numbers (the `metrics` view's value_str holds them)"
                 if types[k] == "string" else "no numeric point in scope on this x axis or window")
                for k in missing]
