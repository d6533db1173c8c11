"""metrics.jsonl (and its `pre_resume` copies) → `metrics_raw`, one row per (line, key).

Contract: `normalize(data, first_line, ctx, pre_resume=False)` takes complete lines of a
metrics file starting at line `first_line` and returns an Arrow table in the `metrics_raw`
schema, plus the largest step seen (or None). Numbers go to `value` as doubles, with NaN and
±Infinity kept: an integer as the double nearest to it (beyond ±2^53 not every integer has
one of its own; beyond the largest double it is ±inf, as `1e400` is), never as text;
strings and booleans (`true`/`false`) go to `value_str`; nested values go to `value_str` as
JSON text; nulls are skipped. A line without `step` gives rows with a null step. `seq` is the
line number, so a later write of the same (step, key) has a larger seq.

Speed matters here (metrics are most of the bytes): the whole buffer is first handed to
pyarrow's JSON reader and unpivoted column by column; only buffers it refuses (type changes,
bad lines, duplicate keys, nested values) go through the line-by-line decoder, which reports
each bad line. The two paths give the same rows for any input (tests/ingest/test_fast_paths.py):
where pyarrow's reading differs from Python's (`-0`, see `_negative_zero`), the buffer takes
the line decoder.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...numbers import INT64_MAX, INT64_MIN
from ...storage.schema import empty, schema
from .. import parse as jsonl
from .. import progress, run_facts, summaries
from .base import (Batch, Context, Output, clean_str as _clean_str, holds_negative_zero,
                   to_float)

SMALL = 128 << 10  # bytes below which the line decoder is the faster path


def normalize(data: bytes, first_line: int, ctx: Context, *, pre_resume: bool = False
              ) -> tuple[pa.Table, int | None]:
    # Unpivoting costs ~0.1 ms per column whatever the row count, so small appends (the
    # usual incremental read) are faster through the line decoder.
    table = _fast(data, first_line, ctx, pre_resume) if len(data) >= SMALL else None
    if table is None:
        table = _slow(data, first_line, ctx, pre_resume)
    steps = table.column("step")
    last = pc.max(steps).as_py() if table.num_rows else None
    return table, last


def _fast(data: bytes, first_line: int, ctx: Context, pre_resume: bool) -> pa.Table | None:
    # fast_table refuses a buffer with a blank line (which would shift the line numbers;
    # the slow path counts them).
    wide = jsonl.fast_table(data)
    if wide is None:
        return None
    n = wide.num_rows
    if "step" in wide.column_names:
        step = wide.column("step")
        if not pa.types.is_integer(step.type) and not pa.types.is_null(step.type):
            return None
        step = step.cast(pa.int64())
    else:
        step = pa.nulls(n, pa.int64())
    seq = pa.array(range(first_line, first_line + n), pa.int64())
    # Unpivot in one go: every key's column of values (or of texts) end to end, then one
    # filter drops the nulls. Rows come out key by key, in the order of the wide columns.
    keys, values, texts, masks = [], [], [], []
    for name in wide.column_names:
        if name == "step":
            continue
        col = wide.column(name)
        typ = col.type
        if pa.types.is_null(typ):
            continue
        if pa.types.is_integer(typ):
            # Unchecked: an integer beyond ±2^53 gets the nearest double (as `float(int)`
            # rounds it) instead of an error that would stop the ingest.
            value = pc.cast(col, pa.float64(), safe=False)
            value_str = pa.nulls(n, pa.string())
        elif pa.types.is_floating(typ):
            if _negative_zero(col):
                return None
            value, value_str = col.cast(pa.float64()), pa.nulls(n, pa.string())
        elif pa.types.is_string(typ) or pa.types.is_large_string(typ):
            value, value_str = pa.nulls(n, pa.float64()), col.cast(pa.string())
        elif pa.types.is_boolean(typ):
            value, value_str = pa.nulls(n, pa.float64()), pc.if_else(col, "true", "false")
        else:
            return None  # nested values: rare, let the line decoder turn them into JSON text
        keys.append(name)
        values.append(value)
        texts.append(value_str)
        masks.append(pc.is_valid(col))
    if not keys:
        return empty("metrics_raw")
    mask = _chain(masks)
    kept = pc.sum(mask).as_py() or 0
    if not kept:
        return empty("metrics_raw")
    key_index = np.repeat(np.arange(len(keys), dtype=np.int32), n)
    key = pa.DictionaryArray.from_arrays(key_index, pa.array(keys, pa.string()))
    table = pa.table({
        "run_id": pa.repeat(ctx.run_id, kept),
        "step": pc.filter(_chain([step] * len(keys)), mask),
        "key": pc.filter(key, mask).cast(pa.string()),
        "value": pc.filter(_chain(values), mask),
        "value_str": pc.filter(_chain(texts), mask),
        "seq": pc.filter(_chain([seq] * len(keys)), mask),
        "pre_resume": pa.repeat(pre_resume, kept),
        "source_id": pa.repeat(ctx.source_id, kept),
    })
    return table.cast(schema("metrics_raw"))


def _negative_zero(col: pa.ChunkedArray) -> bool:
    """Whether a float column holds a -0.0. Python reads the integer `-0` as 0, pyarrow as
    -0.0 in a column of floats (as 0 in one of integers), and after parsing `-0` and `-0.0`
    cannot be told apart: such a (rare) buffer is left to the line decoder."""
    return holds_negative_zero(col)


def _chain(parts: list[pa.Array | pa.ChunkedArray]) -> pa.Array:
    """Arrays and chunked arrays of one type, end to end, as one array."""
    chunks: list[pa.Array] = []
    for part in parts:
        chunks.extend(part.chunks if isinstance(part, pa.ChunkedArray) else [part])
    return pa.concat_arrays(chunks)


def _slow(data: bytes, first_line: int, ctx: Context, pre_resume: bool) -> pa.Table:
    cols: dict[str, list[Any]] = {k: [] for k in ("step", "key", "value", "value_str", "seq")}
    for lineno, obj in jsonl.records(data, first_line, ctx):
        if not isinstance(obj, dict):
            ctx.warn(lineno, f"skipped: a metrics line must be a JSON object, not {type(obj).__name__}")
            continue
        step = obj.get("step")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
            if isinstance(step, float) and step.is_integer():
                step = int(step)
            else:
                ctx.warn(lineno, f"skipped: `step` must be an integer, got {step!r:.40}")
                continue
        if step is not None and not INT64_MIN <= step <= INT64_MAX:
            ctx.warn(lineno, f"skipped: `step` {str(step)[:24]}... does not fit 64 bits")
            continue
        for key, v in obj.items():
            if key == "step" or v is None:
                continue
            num, text = _split_value(v)
            cols["step"].append(step)
            cols["key"].append(key)
            cols["value"].append(num)
            cols["value_str"].append(text)
            cols["seq"].append(lineno)
    n = len(cols["key"])
    try:
        keys = pa.array(cols["key"], pa.string())
        texts = pa.array(cols["value_str"], pa.string())
    except UnicodeEncodeError:  # a lone surrogate somewhere: clean every string, then retry
        keys = pa.array([_clean_str(k) for k in cols["key"]], pa.string())
        texts = pa.array([t if t is None else _clean_str(t) for t in cols["value_str"]],
                         pa.string())
    return pa.table({
        "run_id": pa.array([ctx.run_id] * n, pa.string()),
        "step": pa.array(cols["step"], pa.int64()),
        "key": keys,
        "value": pa.array(cols["value"], pa.float64()),
        "value_str": texts,
        "seq": pa.array(cols["seq"], pa.int64()),
        "pre_resume": pa.array([pre_resume] * n, pa.bool_()),
        "source_id": pa.array([ctx.source_id] * n, pa.int64()),
    }, schema=schema("metrics_raw"))


def _split_value(v: Any) -> tuple[float | None, str | None]:
    if isinstance(v, bool):
        return None, "true" if v else "false"
    if isinstance(v, (int, float)):
        return to_float(v), None  # pyarrow's reader rounds alike (tests/ingest/test_fast_paths.py)
    if isinstance(v, str):
        return None, v
    return None, json.dumps(v, allow_nan=True)


class Metrics:
    """metrics.jsonl and its `pre_resume` copies → `metrics_raw`, and the summaries kept
    beside it: `metric_keys`, `metric_steps`, `metric_kl` (ingest/summaries.py: the
    statements of sql/statements/summaries.sql over each read's rows; a read that cannot be
    merged alone asks for the whole file, `Output.reread`). The ledger state keeps the
    largest step (the `runs` row's `last_step`, and what a read's steps are compared with),
    each key's last step (for the summaries), the live file's largest `progress/done_frac`
    (the `runs` row's `done_frac`, ingest/progress.py) and the run's total cost and tokens as
    the statement `totals.run_totals` answers over the reads so far (the `runs` row's
    `cost_usd`, `tokens_sampled`, `tokens_trained`, ingest/run_facts.py)."""

    kinds = ("metrics", "metrics_pre_resume")
    tables = ("metrics_raw", "metric_keys", "metric_steps", "metric_kl")

    def normalize(self, batch: Batch) -> Output:
        out = Output()
        pre_resume = batch.kind == "metrics_pre_resume"
        table, last = normalize(batch.data, batch.first_line, batch.ctx, pre_resume=pre_resume)
        found = summaries.of_read(table, batch.state, fresh=batch.first_line == 1)
        if found is None:
            out.reread = True
            return out
        out.add("metrics_raw", table)
        for name, rows in found.items():
            out.add(name, rows)
        if not pre_resume:  # the `runs` row reads the live file's state
            progress.note_metrics(batch.state, found["metric_keys"])
            run_facts.note_metrics(batch.state, table)  # the run's total cost and tokens
        if last is not None:
            batch.state["max_step"] = max(last, batch.state.get("max_step", last))
        return out
