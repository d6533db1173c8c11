"""timing_spans.jsonl → `spans`: the spans of the latest record of each step, with nesting.

Contract: `normalize(data, first_line, ctx)` takes complete lines of a timing file and returns
(an Arrow table in the `spans` schema, the sorted list of steps it covers). When a step occurs
several times in the buffer (a resumed run re-does steps; the file is never truncated), only
its last record is kept; the caller deletes earlier stored rows of those steps. Nesting is
recovered from the intervals: a span's ancestors are the spans of the same step whose interval
contains it (1 µs slack for float noise) and that completed after it (spans are listed in
completion order, and a parent finishes after its children) and that has another name
(concurrent calls of one span, e.g. `policy_sample` started together, overlap without
nesting). `depth` counts ancestors; `parent` names the tightest one.

`wall_add_s` is the wall time a span adds to the union of its name's intervals in its step
(what the `slowest_spans` view sums into `wall_s`): the spans of one step and name are swept
in (wall_start_s, wall_end_s, span_idx) order, and each adds
max(wall_end_s - max(wall_start_s, the largest wall_end_s of the spans before it), 0), so the
additions of a step and name sum to the length of the union of their intervals. A span
without both wall times (null or NaN) adds null and takes no part in the sweep. Each record
is one step and a step's live spans are one record, so this per-record value is final.

The nesting is vectorised with numpy (per record, n × n masks of "p contains c"), because a
timing file of a long run holds ~100k spans and a Python loop or a SQL self-join per step
would dominate ingest time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...numbers import fits_int64
from ...storage.schema import schema
from ...storage.writer import rows_where
from .. import parse as jsonl
from .base import (Batch, Context, Output, clean_str as _clean_str, holds_negative_zero,
                   to_float)

RECORD = pa.schema([
    ("step", pa.int64()),
    ("spans", pa.list_(pa.struct([
        ("name", pa.string()),
        ("duration", pa.float64()),
        ("wall_start", pa.float64()),
        ("wall_end", pa.float64()),
    ]))),
])

EPS = 1e-6  # seconds of slack: wall_* carry float noise such as 2.384e-07
MAX_CELLS = 4_000_000  # records × n × n booleans compared at once (bounds memory)


def normalize(data: bytes, first_line: int, ctx: Context) -> tuple[pa.Table, list[int]]:
    buf = jsonl.fast_table(data, RECORD)  # None for a blank line too: line numbers must hold
    if buf is None or not _whole(buf):
        buf = _decode(data, first_line, ctx)
    # The last record of each step wins (a resumed run logs a step again).
    last: dict[int, int] = {}
    for i, step in enumerate(buf.column("step").to_pylist()):
        if step is not None:
            last[step] = i
    steps = sorted(last)
    keep = [last[s] for s in steps]
    # Usually every step appears once, in order: then there is nothing to take.
    records = buf if keep == list(range(buf.num_rows)) else buf.take(pa.array(keep, pa.int64()))
    lists = records.column("spans").combine_chunks()
    flat = pc.list_flatten(lists)
    owner = pc.list_parent_indices(lists)
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    span_idx = np.arange(len(flat)) - starts
    table = pa.table({
        "step": records.column("step").combine_chunks().take(owner),
        "name": flat.field("name"),
        "duration_s": flat.field("duration"),
        "wall_start_s": flat.field("wall_start"),
        "wall_end_s": flat.field("wall_end"),
    })
    depth, parent = _nest(table, lengths)
    n = table.num_rows
    table = table.append_column("depth", pa.array(depth, pa.int32()))
    table = table.append_column("parent", parent)
    table = table.append_column("span_idx", pa.array(span_idx, pa.int32()))
    table = table.append_column("wall_add_s", _wall_add(table, owner))
    table = table.append_column("run_id", pa.repeat(ctx.run_id, n))
    table = table.append_column("source_id", pa.repeat(ctx.source_id, n))
    return table.select(schema("spans").names).cast(schema("spans")), steps


def _whole(buf: pa.Table) -> bool:
    """Whether the fast reader's table is what the line decoder would make of the buffer:
    every record has a step and a list of spans, every span is an object with a name, and no
    time is -0.0 (pyarrow reads the integer `-0` as -0.0 in these float columns, Python as
    0; after parsing, `-0` and `-0.0` cannot be told apart)."""
    spans = buf.column("spans").combine_chunks()
    if buf.column("step").null_count or spans.null_count:
        return False
    flat = pc.list_flatten(spans)
    if flat.null_count or flat.field("name").null_count:
        return False
    return not any(holds_negative_zero(pc.struct_field(flat, f))
                   for f in ("duration", "wall_start", "wall_end"))


def _nest(table: pa.Table, lengths: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """Depth and parent name of every span, computed per record with padded n × n masks.

    Records are padded to the longest one in a chunk; chunks are sized so that the boolean
    masks stay under MAX_CELLS cells.
    """
    n_total = table.num_rows
    depth = np.zeros(n_total, np.int32)
    parent_code = np.full(n_total, -1, np.int64)
    if n_total == 0:
        return depth, pa.nulls(0, pa.string())
    names = pc.dictionary_encode(table.column("name").combine_chunks())
    codes = pc.fill_null(names.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    start = _floats(table.column("wall_start_s"))
    end = _floats(table.column("wall_end_s"))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    order = np.argsort(lengths, kind="stable")  # similar lengths together: less padding
    widths = np.maximum(lengths[order], 1).astype(np.int64)  # ascending
    pos = 0
    while pos < len(order):
        # The longest run of records from `pos` whose padded masks fit MAX_CELLS (at least
        # one): cells grow with both the count and the (ascending) width, so bisect.
        cells = np.arange(1, len(order) - pos + 1) * widths[pos:] ** 2
        stop = pos + max(1, int(np.searchsorted(cells, MAX_CELLS, side="right")))
        _nest_chunk(order[pos:stop], int(widths[stop - 1]), lengths, offsets, codes, start, end,
                    depth, parent_code)
        pos = stop
    dictionary = names.dictionary
    parent = pc.take(dictionary, pa.array(np.where(parent_code < 0, 0, parent_code)))
    parent = pc.if_else(pa.array(parent_code >= 0), parent, pa.nulls(n_total, pa.string()))
    return depth, parent


def _wall_add(table: pa.Table, owner: pa.Array) -> pa.Array:
    """Each span's addition to its (record, name) union of intervals (see the module doc).

    One sort for all records: by record, name, start, end, position. The largest end before
    each span is a cumulative maximum that must restart at every (record, name) group; ends
    are replaced by their ranks and offset by group number × n, so a plain running maximum
    never carries a value from one group into the next.
    """
    n = table.num_rows
    start = _floats(table.column("wall_start_s"))
    end = _floats(table.column("wall_end_s"))
    timed = ~(np.isnan(start) | np.isnan(end))
    out = np.full(n, np.nan)
    idx = np.flatnonzero(timed)
    if len(idx):
        rec = owner.to_numpy(zero_copy_only=False)[idx]
        names = pc.dictionary_encode(table.column("name").combine_chunks())
        code = pc.fill_null(names.indices, -1).to_numpy(zero_copy_only=False)[idx]
        s, e = start[idx], end[idx]
        # Sorted by Arrow (~5x numpy's lexsort over these keys); record and name as one key,
        # and `+ 0.0` so that -0.0 and 0.0 tie, as they compare.
        group_key = rec.astype(np.int64) * (int(code.max()) + 2) + (code.astype(np.int64) + 1)
        order = pc.sort_indices(
            pa.table({"g": group_key, "s": s + 0.0, "e": e + 0.0, "i": idx}),
            sort_keys=[("g", "ascending"), ("s", "ascending"), ("e", "ascending"),
                       ("i", "ascending")]).to_numpy()
        rec, code, s, e, idx = rec[order], code[order], s[order], e[order], idx[order]
        new_group = np.ones(len(idx), bool)
        new_group[1:] = (rec[1:] != rec[:-1]) | (code[1:] != code[:-1])
        group = np.cumsum(new_group) - 1
        ends, rank = np.unique(e, return_inverse=True)
        reach = np.maximum.accumulate(group * len(ends) + rank) - group * len(ends)
        before = np.empty(len(idx))
        before[1:] = ends[reach[:-1]]
        before[new_group] = s[new_group]  # nothing of the name before it: from its start
        with np.errstate(invalid="ignore"):  # inf - inf is NaN, as in SQL
            out[idx] = np.maximum(e - np.maximum(s, before), 0.0)
    return pa.array(out, pa.float64(), mask=~timed)


def _floats(col: pa.ChunkedArray) -> np.ndarray:
    return pc.fill_null(col.combine_chunks(), float("nan")).to_numpy(zero_copy_only=False)


def _nest_chunk(recs: np.ndarray, width: int, lengths: np.ndarray, offsets: np.ndarray,
                codes: np.ndarray, start: np.ndarray, end: np.ndarray, depth: np.ndarray,
                parent_code: np.ndarray) -> None:
    k = len(recs)
    col = np.arange(width)
    valid = col[None, :] < lengths[recs][:, None]  # (k, width)
    flat_idx = np.where(valid, offsets[recs][:, None] + col[None, :], 0)
    s = np.where(valid, start[flat_idx], np.nan)
    e = np.where(valid, end[flat_idx], np.nan)
    c = np.where(valid, codes[flat_idx], -2)
    with np.errstate(invalid="ignore"):  # inf - inf: such sizes take the general path below
        size = e - s
    if not np.isfinite(size[valid]).all():
        _nest_chunk_any(k, width, col, valid, flat_idx, s, e, c, depth, parent_code)
        return
    # The tightest ancestor is the one of least size, the smallest index on ties: rank the
    # spans of each record that way once, then take the ancestor of least rank.
    by_size = np.argsort(np.where(valid, size, np.inf), axis=1, kind="stable")
    rank = np.empty((k, width), np.int32)
    np.put_along_axis(rank, by_size, col[None, :].astype(np.int32), axis=1)
    # One child position at a time against the later positions, records along the last
    # (contiguous) axis: each comparison runs over all k records at once, and only the
    # p > child half of the n × n pairs is compared.
    # Padding has NaN times, so the containment test below already rules it out as a parent.
    sT, eT, cT, rT = (np.ascontiguousarray(a.T) for a in (s, e, c, rank))
    d = np.zeros((width, k), np.int64)
    least = np.full((width, k), width, np.int32)
    for child in range(width - 1):
        later = slice(child + 1, width)
        anc = sT[later] <= sT[child] + EPS  # a later span that contains the child
        anc &= eT[later] >= eT[child] - EPS
        anc &= cT[later] != cT[child]  # and has another name
        d[child] = anc.sum(axis=0)
        least[child] = np.where(anc, rT[later], width).min(axis=0)
    d, least = d.T, least.T
    depth[flat_idx[valid]] = d[valid]
    ri, ci = np.nonzero((d > 0) & valid)
    parent_code[flat_idx[ri, ci]] = c[ri, by_size[ri, least[ri, ci]]]


def _nest_chunk_any(k: int, width: int, col: np.ndarray, valid: np.ndarray,
                    flat_idx: np.ndarray, s: np.ndarray, e: np.ndarray, c: np.ndarray,
                    depth: np.ndarray, parent_code: np.ndarray) -> None:
    """`_nest_chunk` for records with NaN or infinite sizes: full k × width × width masks, and
    argmin's own rules (NaN first, the first of equal infinities) pick the parent."""
    # anc[r, child, p]: p completes after child, is another span name, and contains it.
    later = col[None, :] > col[:, None]  # (width, width): p index > child index
    anc = (later[None, :, :] & valid[:, None, :]
           & (c[:, None, :] != c[:, :, None])
           & (s[:, None, :] <= s[:, :, None] + EPS)
           & (e[:, None, :] >= e[:, :, None] - EPS))
    d = anc.sum(axis=2)
    with np.errstate(invalid="ignore"):
        size = np.where(anc, (e - s)[:, None, :], np.inf)
    tight = size.argmin(axis=2)  # first minimum: the smallest index on ties
    rows = flat_idx[valid]
    depth[rows] = d[valid]
    has = (d > 0) & valid
    parent_code[flat_idx[has]] = c[np.arange(k)[:, None].repeat(width, 1)[has], tight[has]]


def _decode(data: bytes, first_line: int, ctx: Context) -> pa.Table:
    """Line-by-line path: report bad lines and bad spans, keep the rest."""
    steps: list[int] = []
    spans: list[list[dict[str, Any]]] = []
    for lineno, obj in jsonl.records(data, first_line, ctx):
        if not isinstance(obj, dict):
            ctx.warn(lineno, "skipped: a timing line must be a JSON object")
            continue
        step = obj.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or not fits_int64(step):
            ctx.warn(lineno, f"skipped: `step` must be an integer, got {step!r:.40}")
            continue
        raw = obj.get("spans")
        if not isinstance(raw, list):
            ctx.warn(lineno, "skipped: `spans` must be a list")
            continue
        good = []
        for sp in raw:
            row = _span(sp)
            if row is None:
                ctx.warn(lineno, f"skipped a span with missing or wrong fields: {str(sp)[:60]}")
            else:
                good.append(row)
        steps.append(step)
        spans.append(good)
    return pa.Table.from_pydict({"step": steps, "spans": spans}, schema=RECORD)


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return to_float(v)  # ±inf past the largest double, as pyarrow's reader makes it


def _span(sp: Any) -> dict[str, Any] | None:
    if not isinstance(sp, dict) or not isinstance(sp.get("name"), str):
        return None
    row = {"name": _clean_str(sp["name"]), "duration": _num(sp.get("duration")),
           "wall_start": _num(sp.get("wall_start")), "wall_end": _num(sp.get("wall_end"))}
    if row["duration"] is None and sp.get("duration") is not None:
        return None
    return row


class Timing:
    """timing_spans.jsonl → `spans`; the ledger state keeps the largest step read, so a step a
    resumed run logs again replaces the stored one."""

    kinds = ("timing_spans",)
    tables = ("spans",)

    def normalize(self, batch: Batch) -> Output:
        out = Output()
        table, steps = normalize(batch.data, batch.first_line, batch.ctx)
        prev_max = batch.state.get("max_step")
        if prev_max is not None and steps and steps[0] <= prev_max:
            # A resumed run logs steps again (the file is never truncated): the later record
            # of a step replaces the stored one.
            out.delete("spans", rows_where(source_id=batch.ctx.source_id,
                                           step=[int(s) for s in steps if s <= prev_max]))
        out.add("spans", table)
        if steps:
            batch.state["max_step"] = max(steps[-1], prev_max if prev_max is not None
                                          else steps[-1])
        return out
