"""The per-key summary kept at ingest (`metric_keys`): what `runstore keys` reads instead of a
scan of `metrics_raw`.

Contract: `summarize(rows, state, fresh)` takes the `metrics_raw` rows one read of one metrics
file produced (a chunk: the whole file, or the lines appended since the last read) and
returns the chunk's `metric_keys` rows, one per key the chunk logs:

    run_id, source_id, key, pre_resume, n_points (distinct non-null steps in the chunk),
    first_step, last_step (null when the chunk logs the key only without a step),
    n_numbers, n_strings (rows with a numeric / a text value), n_stepless (rows without a
    step), steps_exact, max_value (the largest numeric value, NaN left out, +Infinity kept;
    null when none), n_step_numbers (rows with a step and a numeric value, NaN included)

`max_value` and `n_step_numbers` add up over a (source, key)'s rows whatever their steps (a
largest value and a count do not depend on which write of a step wins): they answer "has the
run a KL write above the threshold?", "which runs logged a KL number?" and a run's largest
`progress/done_frac` from this summary alone (sql/kl_steps.sql, sql/run_status.sql).

Rows are only ever appended (a re-read file's rows go with its `source_id`, as every table's
do), so one (source, key) may have several rows; its distinct steps are the sum of its rows'
`n_points` when each chunk's steps of the key all come after the last step summarised before
(the normal case: a log only grows). `steps_exact` is false on a row when that cannot be
known to hold: the chunk logs the key at a step not after the key's last step so far (an old
resume logging steps again), or the file was read before the summary existed (no per-key
state for an append). Readers recount those (source, key) pairs from `metrics_raw`
(`query.keys.per_source`), so the answer is always exact and a summary row never has to be
rewritten.

`state` is the metrics file's ledger state, updated in place: `key_last` maps each key seen
to its last step (None: step-less only) — about 4 KB for a file of 100 keys. `fresh` says the
chunk starts the file (its first line is line 1).

`summarize_files(paths)` computes the same rows from stored `metrics_raw` files, one file at a
time (the migration that adds the table to an existing store); a source whose rows span
several files gets `steps_exact` false where their steps of a key overlap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    import pyarrow as pa

TABLE = "metric_keys"
STATE = "key_last"


def _grouped(rows: "pa.Table") -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    step, value = rows.column("step"), rows.column("value")
    # NaN set aside as null before the max: the summary's max is `max(value) filter (where
    # not isnan(value))`, whatever Arrow's own NaN ordering is.
    number = pc.if_else(pc.is_nan(value), pa.scalar(None, pa.float64()), value)
    table = (rows.select(["run_id", "source_id", "key", "pre_resume", "step", "value",
                          "value_str"])
             .append_column("stepless", pc.is_null(step))
             .append_column("number", number)
             .append_column("step_number", pc.and_(pc.is_valid(step), pc.is_valid(value))))
    grouped = table.group_by(["run_id", "source_id", "key", "pre_resume"]).aggregate([
        ("step", "count_distinct"), ("step", "min"), ("step", "max"), ("value", "count"),
        ("value_str", "count"), ("stepless", "sum"), ("number", "max"),
        ("step_number", "sum")])
    return grouped.to_pylist()


def _row(g: dict[str, Any], exact: bool) -> dict[str, Any]:
    return {"run_id": g["run_id"], "source_id": g["source_id"], "key": g["key"],
            "pre_resume": bool(g["pre_resume"]), "n_points": g["step_count_distinct"],
            "first_step": g["step_min"], "last_step": g["step_max"],
            "n_numbers": g["value_count"], "n_strings": g["value_str_count"],
            "n_stepless": int(g["stepless_sum"] or 0), "steps_exact": exact,
            "max_value": g["number_max"], "n_step_numbers": int(g["step_number_sum"] or 0)}


def summarize(rows: "pa.Table", state: dict[str, Any], fresh: bool) -> "pa.Table":
    """The `metric_keys` rows of one chunk of `metrics_raw` rows (see the module)."""
    from ...storage import schema

    known = state.get(STATE)
    if fresh or not isinstance(known, dict):
        # A file read from its start has seen nothing before; an append to a file read
        # before the summary existed has no per-key state: every step may be a repeat.
        known = {} if fresh else None
    out = []
    last_seen = dict(known or {})
    for g in _grouped(rows) if rows.num_rows else []:
        key, first, last = g["key"], g["step_min"], g["step_max"]
        if known is None:
            exact = first is None  # no steps: nothing to count twice
        else:
            before = known.get(key)
            exact = first is None or before is None or first > before
        out.append(_row(g, exact))
        if last is not None:
            prev = last_seen.get(key)
            last_seen[key] = last if prev is None else max(prev, last)
        else:
            last_seen.setdefault(key, None)
    if known is not None or fresh:
        state[STATE] = last_seen
    return schema.to_arrow(TABLE, out)


def overlapping(ranges: Iterable[tuple[Any, Any]]) -> bool:
    """Whether any two (first_step, last_step) ranges of stored files share a step (ranges
    without steps, first_step None, left out): their rows' step counts cannot be added."""
    spans = sorted(r for r in ranges if r[0] is not None)
    return any(b[0] <= a[1] for a, b in zip(spans, spans[1:]))


def summarize_files(paths: Iterable[str], read: Any) -> "pa.Table":
    """`metric_keys` rows computed from stored `metrics_raw` files (`read(path)` gives one
    file's rows); see the module."""
    import pyarrow as pa

    from ...storage import schema

    rows: list[dict[str, Any]] = []
    spans: dict[tuple[Any, Any], list[tuple[Any, Any]]] = {}
    for path in paths:
        part = read(path)
        if part.num_rows == 0:
            continue
        for g in _grouped(part):
            rows.append(_row(g, True))
            spans.setdefault((g["source_id"], g["key"]), []).append((g["step_min"],
                                                                     g["step_max"]))
    for r in rows:
        if overlapping(spans[(r["source_id"], r["key"])]):
            r["steps_exact"] = False
    if not rows:
        return pa.Table.from_batches([], schema=schema.schema(TABLE))
    return schema.to_arrow(TABLE, rows)
