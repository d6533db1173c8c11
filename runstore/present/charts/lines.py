"""What every chart shares: downsampling, colours, line traces, layout, the rows they read.

Contract: `keep_indices(y, max_points)` picks the points of a line to draw (at most
`max_points`: equal buckets of steps, each keeping its minimum and maximum, plus the first
and last point, so spikes and the global extremes survive); `downsample` applies it to x and
y (smoothing is `analysis.smooth`'s, the one every chart uses). `label`
escapes text for plotly's pseudo-HTML. `run_colors` gives each run a colour, by run or by the
value of a config key (numbers on an ordered scale, NaN last; text on a qualitative palette;
runs without the key in grey): plotly's `Plotly` and `Alphabet` palettes and its `Viridis` scale,
sampled as `plotly.colors.sample_colorscale` samples it, written out here so a chart is made
without importing plotly. `Lines` adds line traces (plain dicts, `figure.py`) that carry
`meta = {"run_name", "key", "kind"}` (`run_name` holds the run's `run_label`) and remembers
whether any was downsampled; `layout` is a chart's layout; `statement_rows` reads a
statement as plain rows and `groups` splits ordered rows into runs of equal keys as lists.
numpy is imported only to cut a line longer than its budget (`keep_indices`); plotly is not
imported here.
"""

from __future__ import annotations

import html
import math
from bisect import bisect_left
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ...analysis.groups import comparable, value_labels
from ...analysis.runs import scope_ids
from ...errors import QueryError
from ...query.rows import from_relation
from ...query.statements import named

if TYPE_CHECKING:
    import numpy as np

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


def downsample(x: Any, y: Any, max_points: int = MAX_POINTS) -> tuple[list[Any], list[Any], bool]:
    """`(x, y, reduced)`: the points `keep_indices` keeps, as lists, and whether any were
    dropped (a line within the budget is kept whole without numpy)."""
    if len(y) <= max_points:
        return list(x), list(y), False
    idx = keep_indices([math.nan if v is None else v for v in y], max_points).tolist()
    return [x[i] for i in idx], [y[i] for i in idx], len(idx) < len(y)


def label(text: Any) -> str:
    """Text for plotly's pseudo-HTML (names, titles, hover): escaped, `%{` defused."""
    return html.escape(str(text), quote=False).replace("%{", "%&#123;")


# plotly.colors.qualitative.Plotly and .Alphabet, and plotly.colors.sequential.Viridis.
PLOTLY = ("#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692",
          "#B6E880", "#FF97FF", "#FECB52")
ALPHABET = ("#AA0DFE", "#3283FE", "#85660D", "#782AB6", "#565656", "#1C8356", "#16FF32",
            "#F7E1A0", "#E2E2E2", "#1CBE4F", "#C4451C", "#DEA0FD", "#FE00FA", "#325A9B",
            "#FEAF16", "#F8A19F", "#90AD1C", "#F6222E", "#1CFFCE", "#2ED9FF", "#B10DA1",
            "#C075A6", "#FC1CBF", "#B00068", "#FBE426", "#FA0087")
VIRIDIS = ("#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779",
           "#6ece58", "#b5de2b", "#fde725")


def colors() -> list[str]:
    return list(PLOTLY) + list(ALPHABET)


def sample_viridis(points: Sequence[float]) -> list[str]:
    """`plotly.colors.sample_colorscale("Viridis", points)`: each point in [0, 1] as the
    `rgb(r, g, b)` between the scale's two nearest colours, computed as plotly computes it
    (components in [0, 1], then times 255 rounded half to even from their shortest text)."""
    from decimal import ROUND_HALF_EVEN, Decimal

    scale = [i * (1.0 / (len(VIRIDIS) - 1)) for i in range(len(VIRIDIS))]
    rgb = [tuple(int(c[i:i + 2], 16) / 255.0 for i in (1, 3, 5)) for c in VIRIDIS]
    out = []
    for point in points:
        high = bisect_left(scale, point)
        low = high - 1  # plotly's own indexing: at 0 this is the last colour, weighted 0
        t = (point - scale[low]) / (scale[high] - scale[low])
        mixed = [a + t * float(b - a) for a, b in zip(rgb[low], rgb[high])]
        parts = [int(Decimal(str(c * 255.0)).quantize(Decimal("1"), rounding=ROUND_HALF_EVEN))
                 for c in mixed]
        out.append("rgb(%s, %s, %s)" % tuple(parts))
    return out


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
    rows = store.fetch(named("charts.run_config"), {"key": color_by, "runs": scope},
                       convert=from_relation).to_pylist()
    found = {r["run_label"]: r for r in rows if r["value"] is not None}
    if not any(n in found for n in names):
        raise QueryError(f"no plotted run has the config key {color_by!r} — list the keys with "
                         "`runstore sql \"select distinct key from config order by 1\"`")
    values = {n: found[n] for n in names if n in found}
    numeric = all(v["value_num"] is not None and v["value_str"] is None for v in values.values())
    # Equal values share a label, so a colour: as `compare` groups and labels them (the one
    # rule, `groups.comparable`: 1 and 1.0 alike, 2**60 and 2**60 + 1 apart); text bare.
    shown = value_labels((v["value"], v["value_num"]) for v in values.values())
    labels = {n: (v["value_str"] if v["value_str"] is not None
                  else shown[comparable(v["value"], v["value_num"])])
              for n, v in values.items()}
    if numeric:
        by_label = {labels[n]: v["value_num"] for n, v in values.items()}
        # NaN compares false with every number, so a sort by value alone leaves it (and the
        # numbers around it) out of order: it goes after every number.
        order = sorted(by_label, key=lambda lab: (math.isnan(by_label[lab]), by_label[lab]))
        stops = [0.45] if len(order) == 1 else [0.9 * i / (len(order) - 1) for i in range(len(order))]
        color_of = dict(zip(order, sample_viridis(stops)))
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


def layout(title: str, subtitle: str, *, xaxis: str, yaxis: str,
           legend_title: str | None = None, height: int = 560) -> dict[str, Any]:
    """A chart's layout: plotly_white, the title and its subtitle, axis titles, the legend."""
    return {
        "template": TEMPLATE, "height": height, "hovermode": "closest",
        "title": {"text": title, "subtitle": {"text": subtitle}, "x": 0.01, "xanchor": "left"},
        "margin": {"t": 90, "l": 70, "r": 20, "b": 50},
        "xaxis": {"title": {"text": xaxis}}, "yaxis": {"title": {"text": yaxis}},
        "legend": {"title": {"text": legend_title or ""}, "groupclick": "togglegroup"}}


def statement_rows(store: "Reader", name: str, params: dict[str, Any]) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The statement `name`'s column names and rows, as plain Python values (no pyarrow for
    plain column types: `query.rows.from_relation`)."""
    result = store.fetch(named(name), params, convert=from_relation)
    if hasattr(result, "data"):
        return list(result.column_names), result.data
    columns = [c.to_pylist() for c in result.columns]
    return list(result.column_names), list(zip(*columns))


def groups(names: Sequence[str], rows: Sequence[tuple[Any, ...]],
           keys: Sequence[str]) -> list[tuple[tuple[Any, ...], dict[str, list[Any]]]]:
    """Split ordered rows (of columns `names`) into runs of equal `keys`; each part as lists."""
    at = [list(names).index(k) for k in keys]
    key = itemgetter(*at)
    marks = list(map(key, rows))
    starts = [0] + [i for i in range(1, len(rows)) if marks[i] != marks[i - 1]] + [len(rows)]
    out: list[tuple[tuple[Any, ...], dict[str, list[Any]]]] = []
    for a, b in zip(starts[:-1], starts[1:]):
        if a == b:
            continue
        columns = zip(*rows[a:b])
        out.append((tuple(rows[a][j] for j in at),
                    {c: list(values) for c, values in zip(names, columns)}))
    return out


def hover_text(run: str, key: str | None, what: str = "value") -> str:
    head = f"<b>{label(run)}</b><br>" + (f"{label(key)}<br>" if key else "")
    return head + "step %{x}<br>" + what + " %{y:.6g}<extra></extra>"


class Lines:
    """Collects line traces, downsampling each one and remembering whether any was reduced."""

    def __init__(self, coloring: Coloring, max_points: int, *,
                 per_run_legend: bool = True) -> None:
        self.data: list[dict[str, Any]] = []
        self.coloring = coloring
        self.max_points = max_points
        self.per_run_legend = per_run_legend
        self.reduced = False
        self.legend_seen: set[str] = set()

    def add(self, run: str, key: str, kind: str, x: Sequence[Any], y: Sequence[Any], *,
            name: str | None = None, dash: str = "solid", width: float = 1.6,
            opacity: float = 1.0, legend: bool = True, hover: str | None = None,
            legendrank: int | None = None) -> None:
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
        self.data.append({
            "type": "scatter", "x": xs, "y": ys, "mode": "lines", "name": label(legend_name),
            "legendgroup": group, "showlegend": show, "legendrank": rank, "opacity": opacity,
            "line": {"color": color, "dash": dash, "width": width},
            "hovertemplate": hover or hover_text(run, key),
            "meta": {"run_name": run, "key": key, "kind": kind}})

