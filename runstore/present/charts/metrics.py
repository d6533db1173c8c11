"""Charts of metrics over steps: any metric (`plot_metric`), KL (`plot_kl`), reward (`plot_rewards`).

Contract: `metric_chart`, `kl_chart` and `reward_chart` take a store (a `Reader`) and return
the chart as plain data (`figure.py`: what the CLI and the report write as HTML), drawn from
one read-only statement of `sql/statements/charts.sql`, read as plain rows, one row per line:
`metric_lines` (the rows of `metric_series`, over `metrics`), `kl_series` (over `metric_kl`,
what `kl_steps` shows) and `reward_lines` (the rows of `reward_series`, over
`reward_trends`), plus `run_colors` for the colouring; `plot_metric`, `plot_kl` and
`plot_rewards` are the same charts as plotly Figures (`figure.to_figure`). `metric_series`,
`kl_series` and `reward_series` give those statements' rows as Arrow tables (`kl_series`
flattened, in the chart's order: `kl_run_order`, `step_order`).
`plot_metric` refuses a key no run has logged (`keys.require`, `UnknownKey`: asked only for
the keys that drew no line); an empty result is `scope.no_data_error`. Smoothing (`smooth=W`)
is `analysis.smooth.smoothed` over each line's values in step order; no chart here imports
polars or pyarrow (numpy only to cut a line past its budget).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ...query.statements import named
from ...storage.settings import kl_threshold
from ..scope import ids, no_data_error, scope_text
from .figure import Chart, to_figure
from .lines import (DASHES, MAX_POINTS, Lines, downsample_note, hover_text, label,
                    layout, run_colors, statement_rows, subtitle)

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from ...query.reader import Reader

REWARD_KEY = "env/all/reward/total"


def metric_series(store: "Reader", keys: Sequence[str], runs: str | None = None) -> Any:
    """Live numeric values of `keys`: Arrow `run_id, run_label, key, step, value`, ordered."""
    return store.arrow(named("charts.metric_series"), {"keys": list(keys),
                                                        "runs": ids(store, runs)})


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
    from ...analysis.smooth import check_weight, smoothed
    from ...query.keys import require
    from ...query.statements.frames import metric_keys

    weight = None if smooth is None else check_weight(smooth) or None  # 0: the raw values
    names = metric_keys(keys)
    params = {"keys": names, "runs": ids(store, runs)}
    columns, rows = statement_rows(store, "charts.metric_lines", params)  # one row per line
    at = {c: i for i, c in enumerate(columns)}
    rows = sorted(rows, key=lambda r: (r[at["run_label"]], r[at["run_id"]],
                                       names.index(r[at["key"]])))
    parts = [((r[at["run_label"]], r[at["key"]]),
              dict(zip(("step", "value"), in_step_order(r[at["step_list"]],
                                                        r[at["value_list"]]))))
             for r in rows]
    require(store, names, answered=[key for (_, key), _ in parts])
    if weight is not None:  # each line's debiased EMA, from its values in step order
        for _, cols in parts:
            cols["smoothed"] = smoothed(cols["value"], weight)
    if not parts:
        raise no_data_error(store, runs, f"logs a numeric value for {', '.join(names)} — "
                             "list the keys with `runstore sql \"select distinct key from "
                             "metrics order by 1\"`")
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
        f"{n_runs} run{'s' if n_runs != 1 else ''}"
        + (f" matching {label(scope_text(runs))}" if runs else ""),
        f"line style = key ({', '.join(f'{DASHES[i % len(DASHES)]}: {label(k)}' for i, k in enumerate(names))})"
        if len(names) > 1 else "",
        f"coloured by config {label(color_by)}" if color_by else "",
        f"smoothed: debiased EMA, weight {weight:g} (raw values faint)" if weight else "",
        downsample_note(lines.reduced, max_points)])
    return {"data": lines.data,
            "layout": layout(title, sub, xaxis="step",
                             yaxis=label(names[0]) if len(names) == 1 else "value",
                             legend_title=label(color_by) if color_by else "run")}


def _kl_params(store: "Reader", runs: str | None, threshold: float | None) -> dict[str, Any]:
    """The KL statement's params: the runs in scope, and `threshold` unless None (then the
    store's `kl_threshold` setting holds)."""
    params: dict[str, Any] = {"runs": ids(store, runs)}
    if threshold is not None:
        params["kl_threshold"] = kl_threshold(threshold)
    return params


def kl_series(store: "Reader", runs: str | None = None,
              threshold: float | None = None) -> Any:
    """KL per run and step as the merge rules keep it (`metric_kl`, what `kl_steps` shows),
    flagged as `kl_health` flags (the statement's `over_threshold`): Arrow `run_id, run_label,
    step, v1, v2, flagged, threshold`, ordered by run (`kl_run_order`) and step
    (`step_order`). `kl_chart` reads the same statement as plain rows, in the same order."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    params = _kl_params(store, runs, threshold)
    per_run = store.arrow(named("charts.kl_series"), params)  # one row per run
    value = per_run.column("threshold")[0].as_py() if per_run.num_rows else None
    # Each row's number of steps, and where its values start once the lists are flattened.
    counts = pc.list_value_length(per_run.column("steps")).to_numpy(zero_copy_only=False)
    starts = np.cumsum(counts) - counts
    flat = {c: pc.list_flatten(per_run.column(c)) for c in ("steps", "v1", "v2")}
    flagged = per_run.column("flagged").to_numpy(zero_copy_only=False).astype(bool)
    order = np.array(kl_run_order(flagged.tolist(), per_run.column("run_label").to_pylist(),
                                  per_run.column("run_id").to_pylist()), dtype=np.int64)
    # Each run's values sliced without a copy, in the runs' order.
    columns = {c: pa.chunked_array(
                   [piece for i in order for piece in values.slice(starts[i], counts[i]).chunks],
                   type=values.type)
               for c, values in flat.items()}
    lengths = counts[order]
    steps_in_order = step_order(columns["steps"].to_numpy(), lengths)
    if steps_in_order is not None:
        taken = pa.array(steps_in_order)
        columns = {c: values.take(taken) for c, values in columns.items()}
    n = int(lengths.sum())
    which = pa.array(np.repeat(order.astype(np.int32), lengths))
    return pa.table({
        "run_id": per_run.column("run_id").take(which),
        "run_label": per_run.column("run_label").take(which),
        "step": columns["steps"], "v1": columns["v1"], "v2": columns["v2"],
        "flagged": pa.array(np.repeat(flagged[order], lengths)),
        "threshold": pa.array(np.full(n, np.nan if value is None else value))})


def kl_run_order(flagged: Sequence[Any], labels: Sequence[str],
                 run_ids: Sequence[str]) -> list[int]:
    """The order the KL chart draws its runs in: unflagged runs first (later traces are drawn
    on top), then by label and run_id. Ordered here, where the 100-odd runs are sorted by a
    few keys (DuckDB's ORDER BY would carry each run's lists through its sort)."""
    return sorted(range(len(labels)), key=lambda i: (bool(flagged[i]), labels[i], run_ids[i]))


def step_order(steps: Any, lengths: Any) -> "Any | None":
    """The order that sorts `steps` (runs of `lengths` values one after another) by step within
    each run, keeping the runs' order and, among equal steps, the given order; None when they
    already are (the common case: the ingest writes each read of a file by step)."""
    import numpy as np

    steps = np.asarray(steps)
    if len(steps) < 2:
        return None
    down = np.diff(steps) < 0
    starts = np.cumsum(lengths)[:-1]  # where each run after the first begins
    down[starts[starts > 0] - 1] = False  # a run may start below the last one's end
    if not down.any():
        return None
    run = np.repeat(np.arange(len(lengths)), lengths)
    return np.lexsort((steps, run))  # stable: equal keys keep their order


def in_step_order(steps: Sequence[int], *columns: Sequence[Any]) -> list[Sequence[Any]]:
    """One line's `steps` and its `columns` (values at those steps), put in step order
    (equal steps keep their order, as `step_order` keeps them); as they are when already so.
    A run whose rows lie in several files comes in their order, not by step."""
    if sorted(steps) == list(steps):  # already so: one pass at C speed, the common case
        return [steps, *columns]
    taken = sorted(range(len(steps)), key=steps.__getitem__)  # stable
    return [[values[i] for i in taken] for values in (steps, *columns)]


def plot_kl(store: "Reader", *, runs: str | None = None, threshold: float | None = None,
            max_points: int = MAX_POINTS) -> "go.Figure":
    """`kl_chart` as a plotly Figure."""
    return to_figure(kl_chart(store, runs=runs, threshold=threshold, max_points=max_points))


def kl_chart(store: "Reader", *, runs: str | None = None, threshold: float | None = None,
             max_points: int = MAX_POINTS) -> Chart:
    """KL v1 (solid) and v2 (dotted) per run, the threshold dashed, flagged runs on top."""
    params = _kl_params(store, runs, threshold)
    columns, per_run = statement_rows(store, "charts.kl_series", params)  # one row per run
    if not per_run:
        raise no_data_error(store, runs, "logs KL (optim/kl_sample_train_v1/v2 or the "
                                          "unprefixed names)")
    at = {c: i for i, c in enumerate(columns)}
    value = per_run[0][at["threshold"]]
    thr = float("nan") if value is None else float(value)
    order = kl_run_order([r[at["flagged"]] for r in per_run], [r[at["run_label"]] for r in per_run],
                         [r[at["run_id"]] for r in per_run])
    ordered = [per_run[i] for i in order]
    flagged = [r[at["run_label"]] for r in ordered if r[at["flagged"]]]
    coloring = run_colors(store, [r[at["run_label"]] for r in ordered])
    many = len(ordered) > 40
    lines = Lines(coloring, max_points)
    for r in ordered:  # unflagged first: later traces are drawn on top
        run, steps, v1, v2 = (r[at[c]] for c in ("run_label", "steps", "v1", "v2"))
        steps, v1, v2 = in_step_order(steps, v1, v2)
        is_flagged = bool(r[at["flagged"]])
        name = ("⚑ " if is_flagged else "") + run
        has_v1 = any(v is not None for v in v1)
        for kind, column, values, dash in (("kl_v1", "v1", v1, "solid"),
                                           ("kl_v2", "v2", v2, "dot")):
            # A step without this family's value is skipped; a NaN one is drawn as a gap.
            kept = [(s, v) for s, v in zip(steps, values) if v is not None]
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
    sub = subtitle([f"{len(ordered)} run{'s' if len(ordered) != 1 else ''}",
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
    columns, parts = statement_rows(store, "charts.reward_lines", {"runs": ids(store, runs)})
    if not parts:
        raise no_data_error(store, runs, f"logs {REWARD_KEY}")
    at = {c: i for i, c in enumerate(columns)}
    coloring = run_colors(store, [r[at["run_label"]] for r in parts], color_by, runs)
    lines = Lines(coloring, max_points, per_run_legend=len(parts) <= 40)
    for r in parts:  # one row per run
        run, x = r[at["run_label"]], r[at["step_list"]]
        lines.add(run, REWARD_KEY, "reward", x, r[at["reward_list"]], width=1.0,
                  opacity=0.3, legend=False, hover=hover_text(run, "reward"))
        lines.add(run, REWARD_KEY, "reward_ma10", x, r[at["ma10_list"]],
                  hover=hover_text(run, "reward_ma10"))
    sub = subtitle([f"{len(parts)} run{'s' if len(parts) != 1 else ''}"
                     + (f" matching {label(scope_text(runs))}" if runs else ""),
                     "reward_ma10 (10-step mean) solid, each step's reward faint",
                     f"coloured by config {label(color_by)}" if color_by else "",
                     downsample_note(lines.reduced, max_points)])
    return {"data": lines.data,
            "layout": layout(label(f"Reward ({REWARD_KEY})"), sub, xaxis="step",
                             yaxis="reward", legend_title=label(color_by) if color_by else "run")}
