"""The per-read step count kept at ingest (`metric_steps`): what `run_summary`'s `n_steps` and
`last_step` add up instead of counting distinct (run, step) pairs over all of `metrics_raw`.

Contract: `summarize(rows, state, fresh)` takes the `metrics_raw` rows one read of one metrics
file produced (a chunk: the whole file, or the lines appended since the last read) and
returns the chunk's `metric_steps` row (none for a chunk without rows):

    run_id, source_id, pre_resume, n_steps, first_step, last_step (null when the chunk's rows
    have no step), steps_exact

`n_steps` is how many steps, of any key, the chunk adds to the file's distinct steps, exact
(`steps_exact`) when every step of the chunk is at least the file's largest step before it
(`state["max_step"]`, which `Metrics` keeps; absent: no step so far) — a log only grows, and
the line that repeats the last step (an evaluation logged after its training line) is counted
once. Otherwise (steps logged again below the largest, say by an old resume) `n_steps` is the
chunk's distinct steps and readers recount the file's steps from `metrics_raw`. So, for a run
whose live metrics file's rows all have `steps_exact`, its distinct live steps are the sum of
their `n_steps` and its last step their largest `last_step`.

`state` is read, not changed (the caller updates `max_step` after this). `fresh` says the
chunk starts the file: nothing came before it.

`summarize_files(paths, read)` computes the rows from stored `metrics_raw` files, one file at
a time (the migration that adds the table to an existing store): one row per (source, stored
file), exact when a source's files hold steps in increasing, separate ranges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    import pyarrow as pa

from .metric_keys import overlapping

TABLE = "metric_steps"


def _grouped(rows: "pa.Table") -> list[dict[str, Any]]:
    grouped = rows.select(["run_id", "source_id", "pre_resume", "step"]).group_by(
        ["run_id", "source_id", "pre_resume"]).aggregate([
            ("step", "count_distinct"), ("step", "min"), ("step", "max")])
    return grouped.to_pylist()


def _row(g: dict[str, Any], n_steps: int, exact: bool) -> dict[str, Any]:
    return {"run_id": g["run_id"], "source_id": g["source_id"],
            "pre_resume": bool(g["pre_resume"]), "n_steps": n_steps,
            "first_step": g["step_min"], "last_step": g["step_max"], "steps_exact": exact}


def summarize(rows: "pa.Table", state: dict[str, Any], fresh: bool) -> "pa.Table":
    """The `metric_steps` row of one chunk of `metrics_raw` rows (see the module)."""
    from ...storage import schema

    before = None if fresh else state.get("max_step")
    out = []
    for g in _grouped(rows) if rows.num_rows else []:
        first, n = g["step_min"], g["step_count_distinct"]
        if first is None or before is None:
            out.append(_row(g, n, True))
        elif first >= before:
            out.append(_row(g, n - (first == before), True))
        else:
            out.append(_row(g, n, False))
    return schema.to_arrow(TABLE, out)


def summarize_files(paths: Iterable[str], read: Any) -> "pa.Table":
    """`metric_steps` rows computed from stored `metrics_raw` files (`read(path)` gives one
    file's rows); see the module."""
    import pyarrow as pa

    from ...storage import schema

    rows: list[dict[str, Any]] = []
    for path in paths:
        part = read(path)
        if part.num_rows:
            rows += [_row(g, g["step_count_distinct"], True) for g in _grouped(part)]
    ranges: dict[Any, list[tuple[Any, Any]]] = {}
    for r in rows:
        ranges.setdefault(r["source_id"], []).append((r["first_step"], r["last_step"]))
    for r in rows:
        if overlapping(ranges[r["source_id"]]):
            r["steps_exact"] = False
    if not rows:
        return pa.Table.from_batches([], schema=schema.schema(TABLE))
    return schema.to_arrow(TABLE, rows)
