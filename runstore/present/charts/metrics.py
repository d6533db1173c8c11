"""Charts of metrics over steps: any metric (`plot_metric`), KL (`plot_kl`), reward (`plot_rewards`).

Contract: `metric_chart`, `kl_chart` and `reward_chart` take a store (a `Reader`) and return
the chart as plain data (`figure.py`: what the CLI and the report write as HTML), drawn from
one read-only statement of `sql/statements/charts.sql` (`charts.metric_series` over
`metrics`, `kl_series` over `metric_kl`, what `kl_steps` shows, `charts.reward_series` over
`reward_trends`), read as plain rows, plus `run_colors` for the colouring; `plot_metric`,
`plot_kl` and `plot_rewards` are the same charts as plotly Figures (`figure.to_figure`).
`metric_series` and `reward_series` give those statements' rows as Arrow tables.
`plot_metric` refuses a key no run has logged (`keys.require`, `UnknownKey`); an empty
result is `scope.no_data_error`. Smoothing (`smooth=W`) computes with polars; the rest
imports neither polars, pyarrow nor numpy (numpy only to cut a line past its budget).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ...errors import QueryError
from ...query.rows import Rows
from ...query.statements import named
from ..scope import ids, no_data_error
from .figure import Chart, to_figure
from .lines import (DASHES, MAX_POINTS, Lines, downsample_note, groups, hover_text, label,
                    layout, run_colors, statement_rows, subtitle)

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ...query.reader import Reader

REWARD_KEY = "env/all/reward/total"


def metric_series(store: "Reader", keys: Sequence[str], runs: str | None = None) -> Any:
    """Live numeric values of `keys`: Arrow `run_id, run_label, key, step, value`, ordered."""
    return store.arrow(named("charts.metric_series"), {"keys": list(keys),
                                                        "runs": ids(store, runs)})


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


def plot_metric(store: "Reader", keys: str | Sequence[str], *, runs: str | None = None,
                color_by: str | None = None, smooth: float | None = None,
                max_points: int = MAX_POINTS) -> "go.Figure":
    """`metric_chart` as a plotly Figure."""
    return to_figure(metric_chart(store, keys, runs=runs, color_by=color_by, smooth=smooth,
                                  max_points=max_points))


def metric_chart(store: "Reader", keys: str | Sequence[str], *, runs: str | None = None,
                 color_by: str | None = None, smooth: float | None = None,
                 max_points: int = MAX_POINTS) -> Chart:
    """One line per run and key over steps (live values of the `metrics` view); a key that no
    run in the store has logged is an `UnknownKey` error (see `keys.require`). `smooth=W`
    adds each line smoothed with runstore's one smoothing (`analysis.smooth`, the debiased
    EMA of weight W in [0, 1), as `compare` and the web UI smooth), the raw line faint."""
    from ...analysis.smooth import check_weight
    from ...query.keys import require

    weight = None if smooth is None else check_weight(smooth) or None  # 0: the raw values
    names = _check_keys(keys)
    require(store, names)
    params = {"keys": names, "runs": ids(store, runs)}
    if weight is None:
        columns, rows = statement_rows(store, "charts.metric_series", params)
    else:
        columns, rows = _smoothed(store, params, weight)
    if not rows:
        raise no_data_error(store, runs, f"logs a numeric value for {', '.join(names)} — "
                             "list the keys with `runstore sql \"select distinct key from "
                             "metrics order by 1\"`")
    parts = [((run, key), cols) for (run, _, key), cols in
             groups(columns, rows, ["run_label", "run_id", "key"])]
    run_names = [run for (run, _), _ in parts]
    coloring = run_colors(store, run_names, color_by, runs)
    lines = Lines(coloring, max_points, per_run_legend=len(set(run_names)) <= 40)
    for (run, key), cols in parts:
        dash = DASHES[names.index(key) % len(DASHES)]
        x, y = cols["step"], cols["value"]
        name = run if len(names) == 1 else f"{run} · {key}"
        if weight is not None:
            lines.add(run, key, "raw", x, y, name=name, dash=dash, width=1.0, opacity=0.25,
                      legend=False)
            lines.add(run, key, "ema", x, cols["smoothed"], name=name, dash=dash,
                      hover=hover_text(run, key, f"EMA {weight:g}"))
        else:
            lines.add(run, key, "raw", x, y, name=name, dash=dash)
    n_runs = len(set(run_names))
    title = label(", ".join(names))
    sub = subtitle([
        f"{n_runs} run{'s' if n_runs != 1 else ''}" + (f" matching {label(runs)}" if runs else ""),
        f"line style = key ({', '.join(f'{DASHES[i % len(DASHES)]}: {label(k)}' for i, k in enumerate(names))})"
        if len(names) > 1 else "",
        f"coloured by config {label(color_by)}" if color_by else "",
        f"smoothed: debiased EMA, weight {weight:g} (raw values faint)" if weight else "",
        downsample_note(lines.reduced, max_points)])
    return {"data": lines.data,
            "layout": layout(title, sub, xaxis="step",
                             yaxis=label(names[0]) if len(names) == 1 else "value",
                             legend_title=label(color_by) if color_by else "run")}


def _smoothed(store: "Reader", params: dict[str, Any],
              weight: float) -> tuple[list[str], list[tuple[Any, ...]]]:
    """`charts.metric_series` (run_id, run_label, key, step, value; ordered by run, key, step)
    with `smoothed`, each line's debiased EMA (`analysis.smooth.ema`), as plain rows."""
    from ...analysis.smooth import ema
    from ...query.result import frame

    df = frame(store, named("charts.metric_series"), params)
    df = df.with_columns(ema("value", weight).over(["run_id", "key"]).alias("smoothed"))
    return list(df.columns), df.rows()


def kl_series(store: "Reader", runs: str | None = None,
              threshold: float | None = None) -> Rows:
    """KL per run and step as the merge rules keep it (`metric_kl`, what `kl_steps` shows),
    flagged as `kl_health` flags (the statement's `over_threshold`): plain rows
    (`query.rows.Rows`) `run_id, run_label, step, v1, v2, flagged, threshold`, ordered by run
    and step, flagged runs last (`threshold` NaN when no threshold is set)."""
    import math

    params: dict[str, Any] = {"runs": ids(store, runs)}
    if threshold is not None:
        params["kl_threshold"] = threshold
    columns, per_run = statement_rows(store, "charts.kl_series", params)  # one row per run
    at = {c: i for i, c in enumerate(columns)}
    value = per_run[0][at["threshold"]] if per_run else None
    # Unflagged runs first, then by label: ordered here, where the 100-odd rows are sorted by
    # two keys (DuckDB's ORDER BY would carry the lists through its sort).
    ordered = sorted(per_run, key=lambda r: (bool(r[at["flagged"]]), r[at["run_label"]],
                                             r[at["run_id"]]))
    steps = [s for r in ordered for s in r[at["steps"]]]
    lengths = [len(r[at["steps"]]) for r in ordered]
    which = [i for i, n in enumerate(lengths) for _ in range(n)]
    v1 = [v for r in ordered for v in r[at["v1"]]]
    v2 = [v for r in ordered for v in r[at["v2"]]]
    order = step_order(steps, lengths)
    if order is not None:
        taken = order.tolist()
        steps, v1, v2 = ([values[i] for i in taken] for values in (steps, v1, v2))
        which = [which[i] for i in taken]  # steps move within their run only
    thr = math.nan if value is None else value
    data = [(ordered[w][at["run_id"]], ordered[w][at["run_label"]], step, a, b,
             bool(ordered[w][at["flagged"]]), thr)
            for w, step, a, b in zip(which, steps, v1, v2)]
    return Rows(["run_id", "run_label", "step", "v1", "v2", "flagged", "threshold"],
                [False, False, True, True, True, False, True], data)


def step_order(steps: Sequence[int], lengths: Sequence[int]) -> "Any | None":
    """The order that sorts `steps` (runs of `lengths` values one after another) by step within
    each run, keeping the runs' order and, among equal steps, the given order (a numpy array);
    None when they already are (the common case: the ingest writes each read of a file by
    step), which is found without numpy."""
    start, unordered = 0, False
    for n in lengths:
        run = steps[start:start + n]
        if any(b < a for a, b in zip(run[:-1], run[1:])):
            unordered = True
            break
        start += n
    if not unordered:
        return None
    import numpy as np

    run_of = np.repeat(np.arange(len(lengths)), lengths)
    return np.lexsort((np.asarray(steps), run_of))  # stable: equal keys keep their order


def plot_kl(store: "Reader", *, runs: str | None = None, threshold: float | None = None,
            max_points: int = MAX_POINTS) -> "go.Figure":
    """`kl_chart` as a plotly Figure."""
    return to_figure(kl_chart(store, runs=runs, threshold=threshold, max_points=max_points))


def kl_chart(store: "Reader", *, runs: str | None = None, threshold: float | None = None,
             max_points: int = MAX_POINTS) -> Chart:
    """KL v1 (solid) and v2 (dotted) per run, the threshold dashed, flagged runs on top."""
    table = kl_series(store, runs, threshold)
    if table.num_rows == 0:
        raise no_data_error(store, runs, "logs KL (optim/kl_sample_train_v1/v2 or the "
                                          "unprefixed names)")
    thr = float(table.data[0][-1])
    parts = [((run,), cols) for (run, _), cols in
             groups(table.column_names, table.data, ["run_label", "run_id"])]
    flagged = [run for (run,), cols in parts if cols["flagged"][0]]
    coloring = run_colors(store, [run for (run,), _ in parts])
    many = len(parts) > 40
    lines = Lines(coloring, max_points)
    for (run,), cols in parts:  # unflagged first: later traces are drawn on top
        is_flagged = run in flagged
        name = ("⚑ " if is_flagged else "") + run
        has_v1 = any(v is not None for v in cols["v1"])
        for kind, column, dash in (("kl_v1", "v1", "solid"), ("kl_v2", "v2", "dot")):
            # A step without this family's value is skipped; a NaN one is drawn as a gap.
            kept = [(s, v) for s, v in zip(cols["step"], cols[column]) if v is not None]
            if not kept:
                continue
            lines.add(run, kind, kind, [s for s, _ in kept], [v for _, v in kept], name=name,
                      dash=dash, legend=(kind == "kl_v1" or not has_v1)
                      and (is_flagged or not many),
                      hover=hover_text(run, "KL " + column), width=2.4 if is_flagged else 1.2,
                      opacity=1.0 if is_flagged else 0.55, legendrank=1 if is_flagged else 1000)
    if flagged:
        shown = ", ".join(label(f) for f in flagged[:3])
        more = f" and {len(flagged) - 3} more" if len(flagged) > 3 else ""
        title = f"KL sample→train — flagged: {shown}{more}"
    else:
        title = f"KL sample→train — no run above {thr:g}"
    sub = subtitle([f"{len(parts)} run{'s' if len(parts) != 1 else ''}",
                     "v1 solid, v2 dotted", f"threshold {thr:g} dashed",
                     "flagged runs drawn on top (⚑)",
                     "NaN and ±Infinity leave gaps",
                     downsample_note(lines.reduced, max_points)])
    chart_layout = layout(title, sub, xaxis="step", yaxis="KL", legend_title="run")
    # The threshold across the plot, labelled at its left end: what plotly's
    # `Figure.add_hline(annotation_position="top left")` adds.
    chart_layout["shapes"] = [{"type": "line", "xref": "x domain", "x0": 0, "x1": 1,
                               "yref": "y", "y0": thr, "y1": thr,
                               "line": {"color": "#d62728", "dash": "dash", "width": 1.5}}]
    chart_layout["annotations"] = [{"text": f"kl_threshold {thr:g}", "showarrow": False,
                                    "xref": "x domain", "x": 0, "xanchor": "left",
                                    "yref": "y", "y": thr, "yanchor": "bottom"}]
    return {"data": lines.data, "layout": chart_layout}


def reward_series(store: "Reader", runs: str | None = None) -> Any:
    """`reward_trends` rows: Arrow `run_id, run_label, step, reward, reward_ma10`, ordered."""
    return store.arrow(named("charts.reward_series"), {"runs": ids(store, runs)})


def plot_rewards(store: "Reader", *, runs: str | None = None, color_by: str | None = None,
                 max_points: int = MAX_POINTS) -> "go.Figure":
    """`reward_chart` as a plotly Figure."""
    return to_figure(reward_chart(store, runs=runs, color_by=color_by, max_points=max_points))


def reward_chart(store: "Reader", *, runs: str | None = None, color_by: str | None = None,
                 max_points: int = MAX_POINTS) -> Chart:
    """`reward_trends`: the reward of every step (faint) and its 10-step moving average."""
    columns, rows = statement_rows(store, "charts.reward_series", {"runs": ids(store, runs)})
    if not rows:
        raise no_data_error(store, runs, f"logs {REWARD_KEY}")
    parts = [((run,), cols) for (run, _), cols in groups(columns, rows, ["run_label", "run_id"])]
    coloring = run_colors(store, [run for (run,), _ in parts], color_by, runs)
    lines = Lines(coloring, max_points, per_run_legend=len(parts) <= 40)
    for (run,), cols in parts:
        x = cols["step"]
        lines.add(run, REWARD_KEY, "reward", x, cols["reward"], width=1.0,
                  opacity=0.3, legend=False, hover=hover_text(run, "reward"))
        lines.add(run, REWARD_KEY, "reward_ma10", x, cols["reward_ma10"],
                  hover=hover_text(run, "reward_ma10"))
    sub = subtitle([f"{len(parts)} run{'s' if len(parts) != 1 else ''}"
                     + (f" matching {label(runs)}" if runs else ""),
                     "reward_ma10 (10-step mean) solid, each step's reward faint",
                     f"coloured by config {label(color_by)}" if color_by else "",
                     downsample_note(lines.reduced, max_points)])
    return {"data": lines.data,
            "layout": layout(label(f"Reward ({REWARD_KEY})"), sub, xaxis="step",
                             yaxis="reward", legend_title=label(color_by) if color_by else "run")}
