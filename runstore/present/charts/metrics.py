"""Charts of metrics over steps: any metric (`plot_metric`), KL (`plot_kl`), reward (`plot_rewards`).

Contract: each takes a store (a `Reader`) and returns a plotly Figure drawn from one read-only
statement of `sql/statements/charts.sql` (`metric_series` over `metrics`, `kl_series` over
`metric_kl`, what `kl_steps` shows, `reward_series` over `reward_trends`), plus `run_colors`
for the colouring. `plot_metric` refuses a key no run has logged (`keys.require`,
`UnknownKey`); an empty result is `scope.no_data_error`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ...errors import QueryError
from ...query.statements import named
from ..scope import ids, no_data_error
from .lines import (DASHES, MAX_POINTS, Lines, downsample_note, floats, groups, hover_text,
                    isnull, label, layout, plotly_go, run_colors, subtitle)

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
    """One line per run and key over steps (live values of the `metrics` view); a key that no
    run in the store has logged is an `UnknownKey` error (see `keys.require`). `smooth=W`
    adds each line smoothed with runstore's one smoothing (`analysis.smooth`, the debiased
    EMA of weight W in [0, 1), as `compare` and the web UI smooth), the raw line faint."""
    from ...analysis.smooth import check_weight
    from ...query.keys import require

    weight = None if smooth is None else check_weight(smooth) or None  # 0: the raw values
    names = _check_keys(keys)
    require(store, names)
    table = metric_series(store, names, runs)
    if table.num_rows == 0:
        raise no_data_error(store, runs, f"logs a numeric value for {', '.join(names)} — "
                             "list the keys with `runstore sql \"select distinct key from "
                             "metrics order by 1\"`")
    if weight is not None:
        table = _smoothed(table, weight)
    parts = [((run, key), cols) for (run, _, key), cols in
             groups(table, ["run_label", "run_id", "key"])]
    run_names = [run for (run, _), _ in parts]
    coloring = run_colors(store, run_names, color_by, runs)
    fig = plotly_go().Figure()
    lines = Lines(fig, coloring, max_points, per_run_legend=len(set(run_names)) <= 40)
    for (run, key), cols in parts:
        dash = DASHES[names.index(key) % len(DASHES)]
        x, y = cols["step"], floats(cols["value"])
        name = run if len(names) == 1 else f"{run} · {key}"
        if weight is not None:
            lines.add(run, key, "raw", x, y, name=name, dash=dash, width=1.0, opacity=0.25,
                      legend=False)
            lines.add(run, key, "ema", x, floats(cols["smoothed"]), name=name, dash=dash,
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
    layout(fig, title, sub, xaxis="step", yaxis=label(names[0]) if len(names) == 1 else "value",
            legend_title=label(color_by) if color_by else "run")
    return fig


def _smoothed(table: Any, weight: float) -> Any:
    """`table` (run_id, run_label, key, step, value; ordered by run, key, step) with
    `smoothed`, each line's debiased EMA (`analysis.smooth.ema`)."""
    import polars as pl

    from ...analysis.smooth import ema

    df = pl.from_arrow(table)
    assert isinstance(df, pl.DataFrame)
    return df.with_columns(ema("value", weight).over(["run_id", "key"]).alias("smoothed")) \
        .to_arrow()


def kl_series(store: "Reader", runs: str | None = None,
              threshold: float | None = None) -> Any:
    """KL per run and step as the merge rules keep it (`metric_kl`, what `kl_steps` shows),
    flagged as `kl_health` flags (the statement's `over_threshold`): Arrow `run_id, run_label,
    step, v1, v2, flagged, threshold`, ordered by run and step, flagged runs last."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    params: dict[str, Any] = {"runs": ids(store, runs)}
    if threshold is not None:
        params["kl_threshold"] = threshold
    per_run = store.arrow(named("charts.kl_series"), params)  # one row per run
    value = per_run.column("threshold")[0].as_py() if per_run.num_rows else None
    # Each row's number of steps, and where its values start once the lists are flattened.
    counts = pc.list_value_length(per_run.column("steps")).to_numpy(zero_copy_only=False)
    starts = np.cumsum(counts) - counts
    flat = {c: pc.list_flatten(per_run.column(c)) for c in ("steps", "v1", "v2")}
    flagged = per_run.column("flagged").to_numpy(zero_copy_only=False).astype(bool)
    # Unflagged runs first, then by label: ordered here, where the 100-odd rows are sorted by
    # two keys and each run's values are sliced without a copy (DuckDB's ORDER BY would
    # carry the lists through its sort).
    order = pc.sort_indices(pa.table({"flagged": flagged, "run_label": per_run.column("run_label"),
                                      "run_id": per_run.column("run_id")}),
                            sort_keys=[("flagged", "ascending"), ("run_label", "ascending"),
                                       ("run_id", "ascending")]).to_numpy()
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


def step_order(steps: Any, lengths: Any) -> "Any | None":
    """The order that sorts `steps` (runs of `lengths` values one after another) by step within
    each run, keeping the runs' order and, among equal steps, the given order; None when they
    already are (the common case: the ingest writes each read of a file by step)."""
    import numpy as np

    if len(steps) < 2:
        return None
    down = np.diff(steps) < 0
    starts = np.cumsum(lengths)[:-1]  # where each run after the first begins
    down[starts[starts > 0] - 1] = False  # a run may start below the last one's end
    if not down.any():
        return None
    run = np.repeat(np.arange(len(lengths)), lengths)
    return np.lexsort((steps, run))  # stable: equal keys keep their order


def plot_kl(store: "Reader", *, runs: str | None = None, threshold: float | None = None,
            max_points: int = MAX_POINTS) -> "go.Figure":
    """KL v1 (solid) and v2 (dotted) per run, the threshold dashed, flagged runs on top."""
    table = kl_series(store, runs, threshold)
    if table.num_rows == 0:
        raise no_data_error(store, runs, "logs KL (optim/kl_sample_train_v1/v2 or the "
                                          "unprefixed names)")
    thr = float(table.column("threshold")[0].as_py())
    parts = [((run,), cols) for (run, _), cols in groups(table, ["run_label", "run_id"])]
    flagged = [run for (run,), cols in parts if bool(cols["flagged"][0])]
    coloring = run_colors(store, [run for (run,), _ in parts])
    many = len(parts) > 40
    fig = plotly_go().Figure()
    lines = Lines(fig, coloring, max_points)
    for (run,), cols in parts:  # unflagged first: later traces are drawn on top
        is_flagged = run in flagged
        x = cols["step"]
        name = ("⚑ " if is_flagged else "") + run
        for kind, column, dash in (("kl_v1", "v1", "solid"), ("kl_v2", "v2", "dot")):
            y = floats(cols[column])
            keep = ~isnull(cols[column])
            if not keep.any():
                continue
            lines.add(run, kind, kind, x[keep], y[keep], name=name, dash=dash,
                      legend=(kind == "kl_v1" or not (~isnull(cols["v1"])).any())
                      and (is_flagged or not many),
                      hover=hover_text(run, "KL " + column), width=2.4 if is_flagged else 1.2,
                      opacity=1.0 if is_flagged else 0.55, legendrank=1 if is_flagged else 1000)
    fig.add_hline(y=thr, line_dash="dash", line_color="#d62728", line_width=1.5,
                  annotation_text=f"kl_threshold {thr:g}", annotation_position="top left")
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
    layout(fig, title, sub, xaxis="step", yaxis="KL", legend_title="run")
    return fig


def reward_series(store: "Reader", runs: str | None = None) -> Any:
    """`reward_trends` rows: Arrow `run_id, run_label, step, reward, reward_ma10`, ordered."""
    return store.arrow(named("charts.reward_series"), {"runs": ids(store, runs)})


def plot_rewards(store: "Reader", *, runs: str | None = None, color_by: str | None = None,
                 max_points: int = MAX_POINTS) -> "go.Figure":
    """`reward_trends`: the reward of every step (faint) and its 10-step moving average."""
    table = reward_series(store, runs)
    if table.num_rows == 0:
        raise no_data_error(store, runs, f"logs {REWARD_KEY}")
    parts = [((run,), cols) for (run, _), cols in groups(table, ["run_label", "run_id"])]
    coloring = run_colors(store, [run for (run,), _ in parts], color_by, runs)
    fig = plotly_go().Figure()
    lines = Lines(fig, coloring, max_points, per_run_legend=len(parts) <= 40)
    for (run,), cols in parts:
        x = cols["step"]
        lines.add(run, REWARD_KEY, "reward", x, floats(cols["reward"]), width=1.0,
                  opacity=0.3, legend=False, hover=hover_text(run, "reward"))
        lines.add(run, REWARD_KEY, "reward_ma10", x, floats(cols["reward_ma10"]),
                  hover=hover_text(run, "reward_ma10"))
    sub = subtitle([f"{len(parts)} run{'s' if len(parts) != 1 else ''}"
                     + (f" matching {label(runs)}" if runs else ""),
                     "reward_ma10 (10-step mean) solid, each step's reward faint",
                     f"coloured by config {label(color_by)}" if color_by else "",
                     downsample_note(lines.reduced, max_points)])
    layout(fig, label(f"Reward ({REWARD_KEY})"), sub, xaxis="step", yaxis="reward",
            legend_title=label(color_by) if color_by else "run")
    return fig
