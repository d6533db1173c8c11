"""The timing chart (`plot_spans`): one step's spans as a Gantt chart in nesting order, over the
share of step time each top-level span takes at every step.

Contract: `spans_chart(store, run, step=None)` draws run `run` (a run_id, name or directory,
or a GLOB matching one run: `scope.one_run`) at step `step` (default: its last step with spans) from the
statements `span_steps`, `step_spans` and `span_shares` of `sql/statements/charts.sql`, read
as plain rows, as a chart's plain data (`figure.py`); `plot_spans` is it as a plotly Figure.
`nesting_order(spans)` puts one step's spans depth-first, each right below its parent (see
its docstring for the rule). Past `MAX_BARS` steps the share bars average consecutive steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ...errors import QueryError
from ...query.rows import records
from ...query.statements import named
from ..scope import one_run
from .figure import Chart, to_figure
from .lines import colors, groups, label, layout, statement_rows, subtitle

if TYPE_CHECKING:
    import numpy as np
    import plotly.graph_objects as go

    from ...query.reader import Reader

MAX_BARS = 1000  # the span-share chart averages consecutive steps past this many steps


@dataclass
class SpanRow:
    name: str
    start: float
    end: float
    duration: float
    depth: int  # the `spans.depth` column (interval containment)
    parent: str | None
    idx: int
    level: int = 0  # depth in the tree `nesting_order` builds (what the chart indents by)
    children: list["SpanRow"] = field(default_factory=list)


def nesting_order(spans: Sequence[SpanRow], eps: float = 1e-6) -> list[SpanRow]:
    """Spans of one step depth-first: each span right below its parent, siblings by start.

    A span's parent is a span named like its `parent` column that contains it and has a
    smaller `depth`: one level up when there is such a span, else the tightest. Spans without
    one are roots. Depths strictly decrease up the tree, so there are no cycles even when
    concurrent spans share one interval. `level` is set to the depth in this tree.
    """
    ordered = sorted(spans, key=lambda s: (s.start, -s.end, s.depth, s.idx))
    for s in ordered:
        s.children = []
    roots: list[SpanRow] = []
    for s in ordered:
        candidates = [] if s.parent is None else [
            p for p in ordered if p.name == s.parent and p.depth < s.depth
            and p.start <= s.start + eps and p.end >= s.end - eps]
        best = [p for p in candidates if p.depth == s.depth - 1] or candidates
        if best:
            min(best, key=lambda p: (p.end - p.start, -p.depth)).children.append(s)
        else:
            roots.append(s)
    out: list[SpanRow] = []

    def visit(s: SpanRow, level: int) -> None:
        s.level = level
        out.append(s)
        for c in s.children:
            visit(c, level + 1)

    for r in roots:
        visit(r, 0)
    return out


def span_shares(store: "Reader", run_id: str) -> Any:
    """Per step and top-level span name: seconds and share of the step's time.

    Step time is the step's `time/total` metric, or the summed duration of its top-level
    spans when the step logs none (the denominator `slowest_spans` uses, per step). Arrow
    `step, name, seconds, step_seconds, share`, ordered by step and name.
    """
    return store.arrow(named("charts.span_shares"), {"run": run_id})


def plot_spans(store: "Reader", run: str, *, step: int | None = None) -> "go.Figure":
    """`spans_chart` as a plotly Figure."""
    return to_figure(spans_chart(store, run, step=step))


def spans_chart(store: "Reader", run: str, *, step: int | None = None) -> Chart:
    """A Gantt chart of one step's spans in nesting order, over a stacked bar of the share of
    step time each top-level span takes at every step (two plots, one above the other, laid
    out as plotly's `make_subplots(rows=2, cols=1, row_heights=, vertical_spacing=,
    subplot_titles=)` lays them out: `_two_rows`)."""
    run_id, run_name = one_run(store, run)
    steps = [r["step"] for r in records(store, named("charts.span_steps"), {"run": run_id})]
    if not steps:
        raise QueryError(f"run {run_name!r} has no timing spans (timing_spans.jsonl); "
                         "`runstore sql \"select distinct r.run_name from spans join runs as r "
                         "using (run_id)\"` lists runs that have")
    if step is None:
        step = steps[-1]
    elif step not in steps:
        raise QueryError(f"run {run_name!r} has no spans at step {step}; steps with spans: "
                         f"{steps[0]}..{steps[-1]} ({len(steps)} steps)")
    rows = records(store, named("charts.step_spans"), {"run": run_id, "step": step})
    spans = nesting_order([SpanRow(r["name"], r["wall_start_s"], r["wall_end_s"],
                                   r["duration_s"], r["depth"] or 0, r["parent"], r["span_idx"])
                           for r in rows])
    columns, shares = statement_rows(store, "charts.span_shares", {"run": run_id})
    name_at, step_at = columns.index("name"), columns.index("step")
    shares = sorted(shares, key=lambda r: (r[name_at], r[step_at]))
    names = sorted({s.name for s in spans} | {r[name_at] for r in shares})
    palette = colors()
    color = {n: palette[i % len(palette)] for i, n in enumerate(names)}

    n_rows = len(spans)
    gantt_px = max(240, 16 * n_rows + 40)
    bars_px = 300
    data: list[dict[str, Any]] = []
    row_of = {id(s): i for i, s in enumerate(spans)}
    for n in names:
        mine = [s for s in spans if s.name == n]
        if not mine:
            continue
        # Rows are labelled with the names; the legend lists the stacked (top-level) ones.
        data.append({
            "type": "bar", "xaxis": "x", "yaxis": "y", "showlegend": False,
            "orientation": "h", "y": [row_of[id(s)] for s in mine], "width": 0.8,
            "x": [s.end - s.start for s in mine], "base": [s.start for s in mine],
            "name": label(n), "legendgroup": n, "marker": {"color": color[n]},
            "customdata": [[s.duration, s.depth, label(s.parent or "—")] for s in mine],
            "hovertemplate": (f"<b>{label(n)}</b><br>start %{{base:.4f}} s<br>"
                              "duration %{customdata[0]:.4f} s<br>depth %{customdata[1]}<br>"
                              "parent %{customdata[2]}<extra></extra>"),
            "meta": {"run_name": run_name, "key": n, "kind": "gantt", "step": step}})

    reduced = len(steps) > MAX_BARS
    for (n,), cols in groups(columns, shares, ["name"]):
        x, y, secs = cols["step"], _nan(cols["share"]), _nan(cols["seconds"])
        if reduced:
            x, y, secs = (v.tolist() for v in _bucket_mean(x, y, secs, steps))
        data.append({
            "type": "bar", "xaxis": "x2", "yaxis": "y2",
            "x": x, "y": y, "name": label(n), "legendgroup": n,
            "marker": {"color": color[n]}, "customdata": secs,
            "hovertemplate": (f"<b>{label(n)}</b><br>step %{{x}}<br>share %{{y:.1%}}<br>"
                              "%{customdata:.3f} s<extra></extra>"),
            "meta": {"run_name": run_name, "key": n, "kind": "share"}})
    sub = subtitle([
        f"{len(spans)} spans at step {step}, each under its parent", f"{len(steps)} steps",
        "share = span seconds / the step's time/total (or its top-level spans' sum)",
        f"bars average every {math.ceil(len(steps) / MAX_BARS)} consecutive steps"
        if reduced else ""])
    chart_layout = layout(label(f"Spans of {run_name}"), sub, xaxis="", yaxis="",
                          legend_title="top-level span", height=gantt_px + bars_px + 220)
    chart_layout["margin"]["t"] = 120
    chart_layout["barmode"] = "stack"
    indent = "› "  # tick labels are right-aligned, so spaces would not show the depth
    axes, titles = _two_rows([gantt_px, bars_px], 0.1 * 600 / (gantt_px + bars_px),
                             (label(f"step {step}: spans in nesting order"),
                              "share of step time, top-level spans, every step"))
    axes["xaxis"]["title"] = {"text": f"seconds since step {step} began"}
    axes["yaxis"].update(autorange="reversed", tickvals=list(range(n_rows)),
                         ticktext=[label(indent * s.level + s.name) for s in spans],
                         tickfont={"size": 10}, title={"text": ""})
    axes["xaxis2"]["title"] = {"text": "step"}
    axes["yaxis2"].update(title={"text": "share of step time"}, tickformat=".0%")
    chart_layout.update(axes)
    chart_layout["annotations"] = titles
    return {"data": data, "layout": chart_layout}


def _two_rows(row_heights: Sequence[float], spacing: float,
              titles: Sequence[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The axes (`xaxis`, `yaxis` on top, `xaxis2`, `yaxis2` below) and the title
    annotations of two plots in one column, computed as plotly's `make_subplots(rows=2,
    cols=1, row_heights=, vertical_spacing=, subplot_titles=)` computes them."""
    total = float(sum(row_heights))
    top, bottom = ((1.0 - spacing * 1) * (h / total) for h in row_heights)
    domains = [[bottom + spacing, bottom + spacing + top], [0.0, bottom]]
    axes = {"xaxis": {"anchor": "y", "domain": [0.0, 1.0]},
            "yaxis": {"anchor": "x", "domain": domains[0]},
            "xaxis2": {"anchor": "y2", "domain": [0.0, 1.0]},
            "yaxis2": {"anchor": "x2", "domain": domains[1]}}
    notes = [{"font": {"size": 16}, "showarrow": False, "text": text, "x": 0.5,
              "xanchor": "center", "xref": "paper", "y": domain[1], "yanchor": "bottom",
              "yref": "paper"} for text, domain in zip(titles, domains)]
    return axes, notes


def _nan(values: Sequence[Any]) -> list[float]:
    return [math.nan if v is None else float(v) for v in values]


def _bucket_mean(x: Sequence[Any], y: Sequence[float], secs: Sequence[float],
                 steps: Sequence[int]) -> tuple["np.ndarray", "np.ndarray", "np.ndarray"]:
    """Average consecutive steps into buckets so at most MAX_BARS bars remain (x: the bucket's
    first step).

    `steps` are all the run's steps with spans, in order; `x` (a span name's steps, a subset of
    them, in order) is bucketed by each step's position among them, never by its number: span
    steps need not be consecutive numbers (a trainer can log spans every 10th step), and every
    name's bars then cover the same steps, so the stacked bars line up."""
    import numpy as np

    width = math.ceil(len(steps) / MAX_BARS)
    position = np.searchsorted(np.asarray(steps), np.asarray(x))
    bucket = position // width
    keys, first = np.unique(bucket, return_index=True)

    def mean(values: Sequence[float]) -> "np.ndarray":
        """Each bucket's mean of its values that are not NaN; NaN (a gap) when it has none."""
        v = np.asarray(values, dtype=float)
        known = ~np.isnan(v)
        count = np.add.reduceat(known, first)
        total = np.add.reduceat(np.where(known, v, 0.0), first)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 0, total / count, np.nan)

    return np.asarray(steps)[keys * width], mean(y), mean(secs)
