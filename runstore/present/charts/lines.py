"""What every chart shares: downsampling, colours, line traces, layout, files.

Contract: `keep_indices(y, max_points)` picks the points of a line to draw (at most
`max_points`: equal buckets of steps, each keeping its minimum and maximum, plus the first
and last point, so spikes and the global extremes survive); `downsample` applies it to x and
y (smoothing is `analysis.smooth`'s, the one every chart uses). `label`
escapes text for plotly's pseudo-HTML. `run_colors` gives each run a colour, by run or by the
value of a config key (numbers on an ordered scale, text on a qualitative palette, runs
without the key in grey). `Lines` adds line traces that carry `meta = {"run_name", "key",
"kind"}` (`run_name` holds the run's `run_label`) and remembers whether any was
downsampled; `groups` splits an ordered Arrow table into runs of equal keys as numpy columns; `write_html` writes one self-contained file.
plotly and numpy are imported inside the functions that need them.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ...analysis.runs import scope_ids
from ...errors import QueryError
from ...query.statements import named

if TYPE_CHECKING:
    import numpy as np
    import plotly.graph_objects as go

    from ...query.reader import Reader

MAX_POINTS = 5000  # a line with more points than this is downsampled
UNSET = "(not set)"
UNSET_COLOR = "#9e9e9e"
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
TEMPLATE = "plotly_white"


def keep_indices(y: Any, max_points: int = MAX_POINTS) -> "np.ndarray":
    """Indices of the points of `y` to draw: all of them, or at most `max_points`.

    Past `max_points`, the points are cut into `(max_points - 2) // 2` equal buckets; each
    bucket keeps the index of its smallest and of its largest value (NaN ignored unless the
    bucket holds nothing else), plus the first and last point. The global minimum and maximum
    are some bucket's minimum and maximum, so they are always kept.
    """
    import numpy as np

    values = np.asarray(y, dtype=float)
    if len(values) <= max_points:
        return np.arange(len(values))  # nothing to cut, whatever max_points is
    return np.flatnonzero(keep_mask(values, np.array([0]), np.array([len(values)]), max_points))


def keep_mask(values: "np.ndarray", run_start: "np.ndarray", run_len: "np.ndarray",
              max_points: int) -> "np.ndarray":
    """Which of `values` to draw, for lines laid end to end (line k is
    `values[run_start[k]:run_start[k] + run_len[k]]`, each sorted by x): `keep_indices`'
    buckets within every line at once (each (line, bucket) one contiguous segment, reduced with
    numpy's `reduceat`); a line of at most `max_points` points keeps them all. The one
    implementation of min/max downsampling (the web UI's lines use it too)."""
    import numpy as np

    total = len(values)
    if total == 0:
        return np.zeros(0, dtype=bool)
    if max_points < 4:
        raise ValueError("max_points must be at least 4")
    buckets = (max_points - 2) // 2
    run_of = np.repeat(np.arange(len(run_start)), run_len)
    local = np.arange(total) - run_start[run_of]
    n = run_len[run_of]
    # Short lines: every point is its own bucket, so every point is kept.
    bucket = np.where(n > max_points, (local * buckets) // np.maximum(n, 1), local)
    boundary = np.r_[True, (run_of[1:] != run_of[:-1]) | (bucket[1:] != bucket[:-1])]
    seg_start = np.flatnonzero(boundary)
    seg_of = np.cumsum(boundary) - 1
    nan = np.isnan(values)
    low = np.where(nan, np.inf, values)
    high = np.where(nan, -np.inf, values)
    mins = np.minimum.reduceat(low, seg_start)
    maxs = np.maximum.reduceat(high, seg_start)

    def first(mask: "np.ndarray") -> "np.ndarray":
        idx = np.flatnonzero(mask)
        if not len(idx):
            return idx
        seg = seg_of[idx]  # non-decreasing: the first index of each segment starts a new value
        return idx[np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])]

    keep = np.zeros(total, dtype=bool)
    keep[first((low == mins[seg_of]) & ~nan)] = True
    keep[first((high == maxs[seg_of]) & ~nan)] = True
    keep[seg_start[np.logical_and.reduceat(nan, seg_start)]] = True  # NaN-only: its first
    keep[run_start] = True
    keep[run_start + run_len - 1] = True
    return keep


def downsample(x: Any, y: Any, max_points: int = MAX_POINTS) -> tuple["np.ndarray", "np.ndarray", bool]:
    """`(x, y, reduced)`: the points `keep_indices` keeps, and whether any were dropped."""
    import numpy as np

    xs, ys = np.asarray(x), np.asarray(y, dtype=float)
    idx = keep_indices(ys, max_points)
    return xs[idx], ys[idx], len(idx) < len(ys)


def label(text: Any) -> str:
    """Text for plotly's pseudo-HTML (names, titles, hover): escaped, `%{` defused."""
    return html.escape(str(text), quote=False).replace("%{", "%&#123;")


def plotly_go() -> Any:
    import plotly.graph_objects as go

    return go


def colors() -> list[str]:
    from plotly.colors import qualitative

    return list(qualitative.Plotly) + list(qualitative.Alphabet)


@dataclass
class Coloring:
    """Colour of each run, and the legend group (config value) it belongs to, if any."""

    color: dict[str, str]
    group: dict[str, str] = field(default_factory=dict)  # run_label -> value label
    order: list[str] = field(default_factory=list)  # value labels in legend order
    key: str | None = None


def run_colors(store: "Reader", run_names: Sequence[str], color_by: str | None = None,
               runs: str | None = None) -> Coloring:
    """A colour per run (by its `run_label`): by run (palette in label order), or by the value
    of a config key."""
    names = sorted(set(run_names))
    if color_by is None:
        palette = colors()
        return Coloring({n: palette[i % len(palette)] for i, n in enumerate(names)})
    scope = scope_ids(store, runs)  # type: ignore[arg-type]
    rows = store.arrow(named("charts.run_config"), {"key": color_by, "runs": scope}).to_pylist()
    found = {r["run_label"]: r for r in rows if r["value"] is not None}
    if not any(n in found for n in names):
        raise QueryError(f"no plotted run has the config key {color_by!r} — list the keys with "
                         "`runstore sql \"select distinct key from config order by 1\"`")
    values = {n: found[n] for n in names if n in found}
    numeric = all(v["value_num"] is not None and v["value_str"] is None for v in values.values())
    labels = {n: (v["value_str"] if v["value_str"] is not None else v["value"])
              for n, v in values.items()}
    if numeric:
        by_label = {labels[n]: v["value_num"] for n, v in values.items()}
        order = sorted(by_label, key=lambda lab: by_label[lab])
        from plotly.colors import sample_colorscale

        stops = [0.45] if len(order) == 1 else [0.9 * i / (len(order) - 1) for i in range(len(order))]
        color_of = dict(zip(order, sample_colorscale("Viridis", stops)))
    else:
        order = sorted(set(labels.values()))
        palette = colors()
        color_of = {lab: palette[i % len(palette)] for i, lab in enumerate(order)}
    group = {n: labels.get(n, UNSET) for n in names}
    if any(g == UNSET for g in group.values()):
        order.append(UNSET)
        color_of[UNSET] = UNSET_COLOR
    return Coloring({n: color_of[group[n]] for n in names}, group, order, color_by)


def subtitle(parts: list[str]) -> str:
    return " · ".join(p for p in parts if p)


def downsample_note(reduced: bool, max_points: int) -> str:
    if not reduced:
        return ""
    return (f"lines over {max_points:,} points downsampled to {max_points:,}, keeping each "
            "bucket's min and max")


def layout(fig: "go.Figure", title: str, subtitle: str, *, xaxis: str, yaxis: str,
            legend_title: str | None = None, height: int = 560) -> None:
    fig.update_layout(
        template=TEMPLATE, height=height, hovermode="closest",
        title={"text": title, "subtitle": {"text": subtitle}, "x": 0.01, "xanchor": "left"},
        margin={"t": 90, "l": 70, "r": 20, "b": 50},
        xaxis_title=xaxis, yaxis_title=yaxis,
        legend={"title": {"text": legend_title or ""}, "groupclick": "togglegroup"})


def groups(table: Any, keys: Sequence[str]) -> list[tuple[tuple[Any, ...], dict[str, "np.ndarray"]]]:
    """Split an ordered Arrow table into runs of equal `keys`; each part as numpy columns."""
    import numpy as np

    n = table.num_rows
    if n == 0:
        return []
    # A column with nulls becomes an object array holding None: to_numpy() would turn a null
    # float into NaN, and a NaN value (drawn as a gap) is not a missing one (not drawn at all).
    cols = {c: (np.array(col.to_pylist(), dtype=object) if col.null_count
                else col.to_numpy(zero_copy_only=False))
            for c, col in zip(table.column_names, table.columns)}
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in keys:
        change[1:] |= cols[k][1:] != cols[k][:-1]
    starts = np.flatnonzero(change).tolist() + [n]
    out = []
    for a, b in zip(starts[:-1], starts[1:]):
        out.append((tuple(cols[k][a] for k in keys), {c: v[a:b] for c, v in cols.items()}))
    return out


def floats(values: Any) -> "np.ndarray":
    import numpy as np

    return np.array([math.nan if v is None else v for v in values.tolist()], dtype=float) \
        if values.dtype == object else values.astype(float)


def hover_text(run: str, key: str | None, what: str = "value") -> str:
    head = f"<b>{label(run)}</b><br>" + (f"{label(key)}<br>" if key else "")
    return head + "step %{x}<br>" + what + " %{y:.6g}<extra></extra>"


class Lines:
    """Collects line traces, downsampling each one and remembering whether any was reduced."""

    def __init__(self, fig: "go.Figure", coloring: Coloring, max_points: int, *,
                 per_run_legend: bool = True) -> None:
        self.fig = fig
        self.coloring = coloring
        self.max_points = max_points
        self.per_run_legend = per_run_legend
        self.reduced = False
        self.legend_seen: set[str] = set()

    def add(self, run: str, key: str, kind: str, x: Any, y: Any, *, name: str | None = None,
            dash: str = "solid", width: float = 1.6, opacity: float = 1.0, legend: bool = True,
            hover: str | None = None, legendrank: int | None = None) -> None:
        xs, ys, reduced = downsample(x, y, self.max_points)
        self.reduced |= reduced
        color = self.coloring.color[run]
        if self.coloring.key is not None:
            group = self.coloring.group[run]
            legend_name = f"{self.coloring.key} = {group}"
            show = legend and group not in self.legend_seen
            if show:
                self.legend_seen.add(group)
            rank = 1000 + self.coloring.order.index(group)
        else:
            group = run
            legend_name = name if name is not None else run
            show = legend and self.per_run_legend
            rank = legendrank if legendrank is not None else 1000
        self.fig.add_trace(plotly_go().Scatter(
            x=xs, y=ys, mode="lines", name=label(legend_name), legendgroup=group,
            showlegend=show, legendrank=rank, opacity=opacity,
            line={"color": color, "dash": dash, "width": width},
            hovertemplate=hover or hover_text(run, key),
            meta={"run_name": run, "key": key, "kind": kind}))


def isnull(values: "np.ndarray") -> "np.ndarray":
    import numpy as np

    if values.dtype == object:
        return np.array([v is None for v in values.tolist()], dtype=bool)
    return np.zeros(len(values), dtype=bool)


PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}


def write_html(fig: "go.Figure", path: str | Path) -> Path:
    """One self-contained HTML file (plotly.js inlined: it opens with no network)."""
    out = Path(path)
    fig.write_html(out, include_plotlyjs=True, full_html=True, config=PLOTLY_CONFIG)
    return out
