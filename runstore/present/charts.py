"""Plotly figures over the store's views: metrics, KL health, reward trends, step timing.

Contract
--------
* `plot_metric(store, keys, runs=, color_by=, smooth=)`, `plot_kl(store, runs=, threshold=)`,
  `plot_rewards(store, runs=, color_by=, smooth=)` and `plot_spans(store, run, step=)` return a
  `plotly.graph_objects.Figure`. Every number they draw comes from one read-only query over the
  store's tables and canned views (`Store.arrow`, values as bound parameters): `metrics`,
  `kl_steps`, `kl_health`, `reward_trends`, `spans`, `config`. Nothing is recomputed from
  source files.
* `runs` is a GLOB over `run_name` (`*` matches `/` too); `color_by` is a flattened config key
  (`learning_rate`, `dataset_builder.group_size`): runs get one colour per value of that key,
  numbers on an ordered scale, text on a qualitative palette, runs without the key in grey.
* Each line trace carries `meta = {"run_name", "key", "kind"}` (`kind`: `raw`, `ema`,
  `reward`, `reward_ma10`, `kl_v1`, `kl_v2`) so callers and tests can find it without parsing
  the (HTML-escaped) legend names.
* A line with more than `max_points` (default 5,000) points is reduced by `keep_indices`: the
  steps are cut into equal buckets and each bucket keeps its minimum and maximum (and the line
  its first and last point), so spikes, the global minimum and the global maximum survive. The
  chart's subtitle says when this happened.
* Text that plotly renders as pseudo-HTML (names, titles, hover labels) is HTML-escaped.
* Errors (`QueryError`) say what was missing and how to list what exists.

plotly and numpy are imported inside the functions that need them.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import QueryError

if TYPE_CHECKING:
    import numpy as np
    import plotly.graph_objects as go

    from ..store import Store

MAX_POINTS = 5000  # a line with more points than this is downsampled
MAX_BARS = 1000  # the span-share chart averages consecutive steps past this many steps
REWARD_KEY = "env/all/reward/total"
UNSET = "(not set)"
UNSET_COLOR = "#9e9e9e"
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
TEMPLATE = "plotly_white"


# ---------------------------------------------------------------------------------------------
# Downsampling and smoothing
# ---------------------------------------------------------------------------------------------


def keep_indices(y: Any, max_points: int = MAX_POINTS) -> "np.ndarray":
    """Indices of the points of `y` to draw: all of them, or at most `max_points`.

    Past `max_points`, the points are cut into `(max_points - 2) // 2` equal buckets; each
    bucket keeps the index of its smallest and of its largest value (NaN ignored unless the
    bucket holds nothing else), plus the first and last point. The global minimum and maximum
    are some bucket's minimum and maximum, so they are always kept.
    """
    import numpy as np

    values = np.asarray(y, dtype=float)
    n = len(values)
    if n <= max_points:
        return np.arange(n)
    if max_points < 4:
        raise ValueError("max_points must be at least 4")
    buckets = (max_points - 2) // 2
    bucket = (np.arange(n) * buckets) // n  # non-decreasing bucket id of every point
    starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
    nan = np.isnan(values)
    low = np.where(nan, np.inf, values)
    high = np.where(nan, -np.inf, values)
    mins = np.minimum.reduceat(low, starts)
    maxs = np.maximum.reduceat(high, starts)

    def first(mask: "np.ndarray") -> "np.ndarray":
        idx = np.flatnonzero(mask)
        _, at = np.unique(bucket[idx], return_index=True)
        return idx[at]

    return np.unique(np.r_[0, first(low == mins[bucket]), first(high == maxs[bucket]), n - 1])


def downsample(x: Any, y: Any, max_points: int = MAX_POINTS) -> tuple["np.ndarray", "np.ndarray", bool]:
    """`(x, y, reduced)`: the points `keep_indices` keeps, and whether any were dropped."""
    import numpy as np

    xs, ys = np.asarray(x), np.asarray(y, dtype=float)
    idx = keep_indices(ys, max_points)
    return xs[idx], ys[idx], len(idx) < len(ys)


def ema(y: Any, span: int) -> "np.ndarray":
    """Exponential moving average with alpha = 2 / (span + 1), starting at the first value.

    Non-finite values (NaN, ±Infinity) are skipped: the average carries over them unchanged
    (one Infinity would otherwise poison every later point). Points before the first finite
    value are NaN.
    """
    import numpy as np

    if span < 1:
        raise QueryError(f"--smooth must be a number of steps >= 1, got {span}")
    values = np.asarray(y, dtype=float)
    out = np.full(len(values), np.nan)
    alpha = 2.0 / (span + 1.0)
    current = math.nan
    for i, v in enumerate(values.tolist()):
        if math.isfinite(v):
            current = v if math.isnan(current) else current + alpha * (v - current)
        out[i] = current
    return out


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


def label(text: Any) -> str:
    """Text for plotly's pseudo-HTML (names, titles, hover): escaped, `%{` defused."""
    return html.escape(str(text), quote=False).replace("%{", "%&#123;")


def _go() -> Any:
    import plotly.graph_objects as go

    return go


def _palette() -> list[str]:
    from plotly.colors import qualitative

    return list(qualitative.Plotly) + list(qualitative.Alphabet)


def _runs_params(runs: str | None) -> dict[str, Any]:
    return {"runs": runs}


# `$runs is null or ...`: one statement serves both "every run" and a GLOB.
RUNS_FILTER = "($runs is null or r.run_name glob $runs)"


def no_data_error(store: "Store", runs: str | None, what: str) -> QueryError:
    """The error for an empty result: no run matched, or the matching runs lack `what`."""
    n = store.arrow(f"select count(*) as n from runs as r where {RUNS_FILTER}",
                    _runs_params(runs)).column("n")[0].as_py()
    if runs is not None and n == 0:
        return QueryError(f"no run matches --runs {runs!r} (`runstore runs` lists them; `*` "
                          "matches `/` too)")
    if n == 0:
        return QueryError("the store has no runs yet — run `runstore ingest PATH` first")
    scope = f"the {n} runs matching {runs!r}" if runs is not None else f"the store's {n} runs"
    return QueryError(f"none of {scope} {what}")


def one_run(store: "Store", run: str) -> tuple[str, str]:
    """`(run_id, run_name)` of the run named `run`, or of the one run a GLOB `run` matches."""
    rows = store.arrow("select run_id, run_name from runs where run_name = $run",
                       {"run": run}).to_pylist()
    if not rows:
        rows = store.arrow("select run_id, run_name from runs where run_name glob $run "
                           "order by run_name", {"run": run}).to_pylist()
    if len(rows) == 1:
        return rows[0]["run_id"], rows[0]["run_name"]
    if not rows:
        raise QueryError(f"no run is named or matches {run!r} (`runstore runs` lists run names)")
    names = ", ".join(r["run_name"] for r in rows[:5]) + (", ..." if len(rows) > 5 else "")
    raise QueryError(f"{run!r} matches {len(rows)} runs ({names}); give one run_name or a "
                     "narrower GLOB")


@dataclass
class Coloring:
    """Colour of each run, and the legend group (config value) it belongs to, if any."""

    color: dict[str, str]
    group: dict[str, str] = field(default_factory=dict)  # run_name -> value label
    order: list[str] = field(default_factory=list)  # value labels in legend order
    key: str | None = None


def run_colors(store: "Store", run_names: Sequence[str], color_by: str | None = None,
               runs: str | None = None) -> Coloring:
    """A colour per run: by run (palette in name order), or by the value of a config key."""
    names = sorted(set(run_names))
    if color_by is None:
        palette = _palette()
        return Coloring({n: palette[i % len(palette)] for i, n in enumerate(names)})
    rows = store.arrow(
        "select r.run_name, c.value, c.value_num, c.value_str from runs as r "
        "left join config as c on c.run_id = r.run_id and c.key = $key "
        f"where {RUNS_FILTER}", {"key": color_by, **_runs_params(runs)}).to_pylist()
    found = {r["run_name"]: r for r in rows if r["value"] is not None}
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
        palette = _palette()
        color_of = {lab: palette[i % len(palette)] for i, lab in enumerate(order)}
    group = {n: labels.get(n, UNSET) for n in names}
    if any(g == UNSET for g in group.values()):
        order.append(UNSET)
        color_of[UNSET] = UNSET_COLOR
    return Coloring({n: color_of[group[n]] for n in names}, group, order, color_by)


def _subtitle(parts: list[str]) -> str:
    return " · ".join(p for p in parts if p)


def _downsample_note(reduced: bool, max_points: int) -> str:
    if not reduced:
        return ""
    return (f"lines over {max_points:,} points downsampled to {max_points:,}, keeping each "
            "bucket's min and max")


def _layout(fig: "go.Figure", title: str, subtitle: str, *, xaxis: str, yaxis: str,
            legend_title: str | None = None, height: int = 560) -> None:
    fig.update_layout(
        template=TEMPLATE, height=height, hovermode="closest",
        title={"text": title, "subtitle": {"text": subtitle}, "x": 0.01, "xanchor": "left"},
        margin={"t": 90, "l": 70, "r": 20, "b": 50},
        xaxis_title=xaxis, yaxis_title=yaxis,
        legend={"title": {"text": legend_title or ""}, "groupclick": "togglegroup"})


def _groups(table: Any, keys: Sequence[str]) -> list[tuple[tuple[Any, ...], dict[str, "np.ndarray"]]]:
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


def _floats(values: Any) -> "np.ndarray":
    import numpy as np

    return np.array([math.nan if v is None else v for v in values.tolist()], dtype=float) \
        if values.dtype == object else values.astype(float)


def _hover(run: str, key: str | None, what: str = "value") -> str:
    head = f"<b>{label(run)}</b><br>" + (f"{label(key)}<br>" if key else "")
    return head + "step %{x}<br>" + what + " %{y:.6g}<extra></extra>"


class _Lines:
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
        self.fig.add_trace(_go().Scatter(
            x=xs, y=ys, mode="lines", name=label(legend_name), legendgroup=group,
            showlegend=show, legendrank=rank, opacity=opacity,
            line={"color": color, "dash": dash, "width": width},
            hovertemplate=hover or _hover(run, key),
            meta={"run_name": run, "key": key, "kind": kind}))


# ---------------------------------------------------------------------------------------------
# plot metric
# ---------------------------------------------------------------------------------------------


def metric_series(store: "Store", keys: Sequence[str], runs: str | None = None) -> Any:
    """Live numeric values of `keys`: Arrow `run_name, key, step, value`, ordered."""
    return store.arrow(
        "select r.run_name, m.key, m.step, m.value from metrics as m "
        "join runs as r on r.run_id = m.run_id "
        f"where list_contains($keys, m.key) and m.value is not null and {RUNS_FILTER} "
        "order by r.run_name, list_position($keys, m.key), m.step",
        {"keys": list(keys), **_runs_params(runs)})


def _check_keys(keys: str | Sequence[str]) -> list[str]:
    items = [keys] if isinstance(keys, str) else list(keys)
    out: list[str] = []
    for k in items:
        if not isinstance(k, str) or not k:
            raise QueryError(f"metric keys are non-empty strings, got {k!r}")
        if k not in out:
            out.append(k)
    if not out:
        raise QueryError("give at least one metric key, e.g. env/all/reward/total")
    return out


def plot_metric(store: "Store", keys: str | Sequence[str], *, runs: str | None = None,
                color_by: str | None = None, smooth: int | None = None,
                max_points: int = MAX_POINTS) -> "go.Figure":
    """One line per run and key over steps (live values of the `metrics` view); a key that no
    run in the store has logged is an `UnknownKey` error (see `keys.require`)."""
    from ..query.keys import require

    names = _check_keys(keys)
    require(store, names)
    table = metric_series(store, names, runs)
    if table.num_rows == 0:
        raise no_data_error(store, runs, f"logs a numeric value for {', '.join(names)} — "
                             "list the keys with `runstore sql \"select distinct key from "
                             "metrics order by 1\"`")
    parts = _groups(table, ["run_name", "key"])
    run_names = [run for (run, _), _ in parts]
    coloring = run_colors(store, run_names, color_by, runs)
    fig = _go().Figure()
    lines = _Lines(fig, coloring, max_points, per_run_legend=len(set(run_names)) <= 40)
    for (run, key), cols in parts:
        dash = DASHES[names.index(key) % len(DASHES)]
        x, y = cols["step"], _floats(cols["value"])
        name = run if len(names) == 1 else f"{run} · {key}"
        if smooth:
            lines.add(run, key, "raw", x, y, name=name, dash=dash, width=1.0, opacity=0.25,
                      legend=False)
            lines.add(run, key, "ema", x, ema(y, smooth), name=name, dash=dash,
                      hover=_hover(run, key, f"EMA({smooth})"))
        else:
            lines.add(run, key, "raw", x, y, name=name, dash=dash)
    n_runs = len(set(run_names))
    title = label(", ".join(names))
    sub = _subtitle([
        f"{n_runs} run{'s' if n_runs != 1 else ''}" + (f" matching {label(runs)}" if runs else ""),
        f"line style = key ({', '.join(f'{DASHES[i % len(DASHES)]}: {label(k)}' for i, k in enumerate(names))})"
        if len(names) > 1 else "",
        f"coloured by config {label(color_by)}" if color_by else "",
        f"EMA over {smooth} steps, raw values faint" if smooth else "",
        _downsample_note(lines.reduced, max_points)])
    _layout(fig, title, sub, xaxis="step", yaxis=label(names[0]) if len(names) == 1 else "value",
            legend_title=label(color_by) if color_by else "run")
    return fig


# ---------------------------------------------------------------------------------------------
# plot kl
# ---------------------------------------------------------------------------------------------


def kl_series(store: "Store", runs: str | None = None,
              threshold: float | None = None) -> Any:
    """KL per run and step from the `kl_steps` view (the KL merge rules live there), flagged as
    `kl_health` flags: Arrow `run_name, step, v1, v2, flagged, threshold`, flagged runs last."""
    params: dict[str, Any] = _runs_params(runs)
    if threshold is not None:
        params["kl_threshold"] = threshold
    # `kl_health where flagged` alone, not joined whole: that filter lets it read only the
    # runs that can be flagged (see kl_steps.sql).
    return store.arrow(
        "select r.run_name, k.step, k.v1, k.v2, coalesce(h.flagged, false) as flagged,"
        "  (select value_num from settings where name = 'kl_threshold') as threshold"
        " from kl_steps as k join runs as r on r.run_id = k.run_id"
        " left join (select run_id, flagged from kl_health where flagged) as h"
        "  on h.run_id = k.run_id"
        f" where {RUNS_FILTER}"
        " order by coalesce(h.flagged, false), r.run_name, k.step", params)


def plot_kl(store: "Store", *, runs: str | None = None, threshold: float | None = None,
            max_points: int = MAX_POINTS) -> "go.Figure":
    """KL v1 (solid) and v2 (dotted) per run, the threshold dashed, flagged runs on top."""
    table = kl_series(store, runs, threshold)
    if table.num_rows == 0:
        raise no_data_error(store, runs, "logs KL (optim/kl_sample_train_v1/v2 or the "
                                          "unprefixed names)")
    thr = float(table.column("threshold")[0].as_py())
    parts = _groups(table, ["run_name"])
    flagged = [run for (run,), cols in parts if bool(cols["flagged"][0])]
    coloring = run_colors(store, [run for (run,), _ in parts])
    many = len(parts) > 40
    fig = _go().Figure()
    lines = _Lines(fig, coloring, max_points)
    for (run,), cols in parts:  # unflagged first: later traces are drawn on top
        is_flagged = run in flagged
        x = cols["step"]
        name = ("⚑ " if is_flagged else "") + run
        for kind, column, dash in (("kl_v1", "v1", "solid"), ("kl_v2", "v2", "dot")):
            y = _floats(cols[column])
            keep = ~_isnull(cols[column])
            if not keep.any():
                continue
            lines.add(run, kind, kind, x[keep], y[keep], name=name, dash=dash,
                      legend=(kind == "kl_v1" or not (~_isnull(cols["v1"])).any())
                      and (is_flagged or not many),
                      hover=_hover(run, "KL " + column), width=2.4 if is_flagged else 1.2,
                      opacity=1.0 if is_flagged else 0.55, legendrank=1 if is_flagged else 1000)
    fig.add_hline(y=thr, line_dash="dash", line_color="#d62728", line_width=1.5,
                  annotation_text=f"kl_threshold {thr:g}", annotation_position="top left")
    if flagged:
        shown = ", ".join(label(f) for f in flagged[:3])
        more = f" and {len(flagged) - 3} more" if len(flagged) > 3 else ""
        title = f"KL sample→train — flagged: {shown}{more}"
    else:
        title = f"KL sample→train — no run above {thr:g}"
    sub = _subtitle([f"{len(parts)} run{'s' if len(parts) != 1 else ''}",
                     "v1 solid, v2 dotted", f"threshold {thr:g} dashed",
                     "flagged runs drawn on top (⚑)",
                     "NaN and ±Infinity leave gaps",
                     _downsample_note(lines.reduced, max_points)])
    _layout(fig, title, sub, xaxis="step", yaxis="KL", legend_title="run")
    return fig


def _isnull(values: "np.ndarray") -> "np.ndarray":
    import numpy as np

    if values.dtype == object:
        return np.array([v is None for v in values.tolist()], dtype=bool)
    return np.zeros(len(values), dtype=bool)


# ---------------------------------------------------------------------------------------------
# plot rewards
# ---------------------------------------------------------------------------------------------


def reward_series(store: "Store", runs: str | None = None) -> Any:
    """`reward_trends` rows: Arrow `run_name, step, reward, reward_ma10`, ordered."""
    return store.arrow("select r.run_name, t.step, t.reward, t.reward_ma10 "
                       "from reward_trends as t join runs as r on r.run_id = t.run_id "
                       f"where {RUNS_FILTER} order by r.run_name, t.step", _runs_params(runs))


def plot_rewards(store: "Store", *, runs: str | None = None, color_by: str | None = None,
                 max_points: int = MAX_POINTS) -> "go.Figure":
    """`reward_trends`: the reward of every step (faint) and its 10-step moving average."""
    table = reward_series(store, runs)
    if table.num_rows == 0:
        raise no_data_error(store, runs, f"logs {REWARD_KEY}")
    parts = _groups(table, ["run_name"])
    coloring = run_colors(store, [run for (run,), _ in parts], color_by, runs)
    fig = _go().Figure()
    lines = _Lines(fig, coloring, max_points, per_run_legend=len(parts) <= 40)
    for (run,), cols in parts:
        x = cols["step"]
        lines.add(run, REWARD_KEY, "reward", x, _floats(cols["reward"]), width=1.0,
                  opacity=0.3, legend=False, hover=_hover(run, "reward"))
        lines.add(run, REWARD_KEY, "reward_ma10", x, _floats(cols["reward_ma10"]),
                  hover=_hover(run, "reward_ma10"))
    sub = _subtitle([f"{len(parts)} run{'s' if len(parts) != 1 else ''}"
                     + (f" matching {label(runs)}" if runs else ""),
                     "reward_ma10 (10-step mean) solid, each step's reward faint",
                     f"coloured by config {label(color_by)}" if color_by else "",
                     _downsample_note(lines.reduced, max_points)])
    _layout(fig, label(f"Reward ({REWARD_KEY})"), sub, xaxis="step", yaxis="reward",
            legend_title=label(color_by) if color_by else "run")
    return fig


# ---------------------------------------------------------------------------------------------
# plot spans
# ---------------------------------------------------------------------------------------------


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


def span_shares(store: "Store", run_id: str) -> Any:
    """Per step and top-level span name: seconds and share of the step's time.

    Step time is the step's `time/total` metric, or the summed duration of its top-level
    spans when the step logs none (the denominator `slowest_spans` uses, per step). Arrow
    `step, name, seconds, step_seconds, share`, ordered by step and name.
    """
    return store.arrow(
        "with top as (select step, name, sum(duration_s) as seconds from spans"
        " where run_id = $run and depth = 0 group by step, name),"
        " total as (select step, value from metrics"
        " where run_id = $run and key = 'time/total' and not isnan(value)),"
        " top_sum as (select step, sum(seconds) as seconds from top group by step)"
        " select t.step, t.name, t.seconds, coalesce(tt.value, ts.seconds) as step_seconds,"
        " t.seconds / nullif(coalesce(tt.value, ts.seconds), 0) as share"
        " from top as t left join total as tt on tt.step = t.step"
        " left join top_sum as ts on ts.step = t.step"
        " order by t.step, t.name", {"run": run_id})


def plot_spans(store: "Store", run: str, *, step: int | None = None) -> "go.Figure":
    """A Gantt chart of one step's spans in nesting order, over a stacked bar of the share of
    step time each top-level span takes at every step."""
    from plotly.subplots import make_subplots

    run_id, run_name = one_run(store, run)
    steps = [r["step"] for r in store.arrow(
        "select distinct step from spans where run_id = $run order by step",
        {"run": run_id}).to_pylist()]
    if not steps:
        raise QueryError(f"run {run_name!r} has no timing spans (timing_spans.jsonl); "
                         "`runstore sql \"select distinct r.run_name from spans join runs as r "
                         "using (run_id)\"` lists runs that have")
    if step is None:
        step = steps[-1]
    elif step not in steps:
        raise QueryError(f"run {run_name!r} has no spans at step {step}; steps with spans: "
                         f"{steps[0]}..{steps[-1]} ({len(steps)} steps)")
    rows = store.arrow(
        "select name, wall_start_s, wall_end_s, duration_s, depth, parent, span_idx from spans"
        " where run_id = $run and step = $step order by span_idx",
        {"run": run_id, "step": step}).to_pylist()
    spans = nesting_order([SpanRow(r["name"], r["wall_start_s"], r["wall_end_s"],
                                   r["duration_s"], r["depth"] or 0, r["parent"], r["span_idx"])
                           for r in rows])
    shares = span_shares(store, run_id)
    names = sorted({s.name for s in spans} | set(shares.column("name").to_pylist()))
    palette = _palette()
    color = {n: palette[i % len(palette)] for i, n in enumerate(names)}

    n_rows = len(spans)
    gantt_px = max(240, 16 * n_rows + 40)
    bars_px = 300
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.1 * 600 / (gantt_px + bars_px),
                        row_heights=[gantt_px, bars_px],
                        subplot_titles=(label(f"step {step}: spans in nesting order"),
                                        "share of step time, top-level spans, every step"))
    go = _go()
    row_of = {id(s): i for i, s in enumerate(spans)}
    for n in names:
        mine = [s for s in spans if s.name == n]
        if not mine:
            continue
        # Rows are labelled with the names; the legend lists the stacked (top-level) ones.
        fig.add_trace(go.Bar(showlegend=False,
            orientation="h", y=[row_of[id(s)] for s in mine], width=0.8,
            x=[s.end - s.start for s in mine], base=[s.start for s in mine],
            name=label(n), legendgroup=n, marker={"color": color[n]},
            customdata=[[s.duration, s.depth, label(s.parent or "—")] for s in mine],
            hovertemplate=(f"<b>{label(n)}</b><br>start %{{base:.4f}} s<br>"
                           "duration %{customdata[0]:.4f} s<br>depth %{customdata[1]}<br>"
                           "parent %{customdata[2]}<extra></extra>"),
            meta={"run_name": run_name, "key": n, "kind": "gantt", "step": step}),
            row=1, col=1)
    indent = "› "  # tick labels are right-aligned, so spaces would not show the depth
    fig.update_yaxes(row=1, col=1, autorange="reversed", tickvals=list(range(n_rows)),
                     ticktext=[label(indent * s.level + s.name) for s in spans],
                     tickfont={"size": 10})
    fig.update_xaxes(row=1, col=1, title_text=f"seconds since step {step} began")

    reduced = len(steps) > MAX_BARS
    for (n,), cols in _groups(shares.sort_by([("name", "ascending"), ("step", "ascending")]),
                              ["name"]):
        x, y = cols["step"], _floats(cols["share"])
        secs = _floats(cols["seconds"])
        if reduced:
            x, y, secs = _bucket_mean(x, y, secs, len(steps))
        fig.add_trace(go.Bar(
            x=x, y=y, name=label(n), legendgroup=n,
            marker={"color": color[n]}, customdata=secs,
            hovertemplate=(f"<b>{label(n)}</b><br>step %{{x}}<br>share %{{y:.1%}}<br>"
                           "%{customdata:.3f} s<extra></extra>"),
            meta={"run_name": run_name, "key": n, "kind": "share"}), row=2, col=1)
    fig.update_layout(barmode="stack")
    fig.update_yaxes(row=2, col=1, title_text="share of step time", tickformat=".0%")
    fig.update_xaxes(row=2, col=1, title_text="step")
    sub = _subtitle([
        f"{len(spans)} spans at step {step}, each under its parent", f"{len(steps)} steps",
        "share = span seconds / the step's time/total (or its top-level spans' sum)",
        f"bars average every {math.ceil(len(steps) / MAX_BARS)} consecutive steps"
        if reduced else ""])
    _layout(fig, label(f"Spans of {run_name}"), sub, xaxis="", yaxis="",
            legend_title="top-level span", height=gantt_px + bars_px + 220)
    fig.update_layout(xaxis_title=f"seconds since step {step} began", yaxis_title="",
                      margin={"t": 120})
    return fig


def _bucket_mean(x: "np.ndarray", y: "np.ndarray", secs: "np.ndarray",
                 n_steps: int) -> tuple["np.ndarray", "np.ndarray", "np.ndarray"]:
    """Average consecutive steps into buckets so at most MAX_BARS bars remain (x = first step)."""
    import numpy as np

    width = math.ceil(n_steps / MAX_BARS)
    bucket = (np.asarray(x) // width).astype(int)
    keys, first = np.unique(bucket, return_index=True)
    bounds = list(first) + [len(x)]
    mean = lambda v: np.array([np.nanmean(v[a:b]) for a, b in zip(bounds[:-1], bounds[1:])])  # noqa: E731
    return np.asarray(x)[first], mean(y), mean(secs)


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}


def write_html(fig: "go.Figure", path: str | Path) -> Path:
    """One self-contained HTML file (plotly.js inlined: it opens with no network)."""
    out = Path(path)
    fig.write_html(out, include_plotlyjs=True, full_html=True, config=PLOTLY_CONFIG)
    return out
