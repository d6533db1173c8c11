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

The work is one DuckDB statement over the Arrow buffer (a range self-join per step), because
a timing file of a long run holds ~100k spans and Python loops would dominate ingest time.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..parse import jsonl
from ..schema import schema
from . import Context

RECORD = pa.schema([
    ("step", pa.int64()),
    ("spans", pa.list_(pa.struct([
        ("name", pa.string()),
        ("duration", pa.float64()),
        ("wall_start", pa.float64()),
        ("wall_end", pa.float64()),
    ]))),
])

NEST_SQL = """
with rec as (
    select step, spans from buf
    where step is not null
    qualify row_number() over (partition by step order by r desc) = 1
), s as (
    select step, generate_subscripts(spans, 1) as i, unnest(spans) as sp from rec
), flat as (
    select step, cast(i - 1 as integer) as span_idx, sp.name as name,
           sp.duration as duration_s, sp.wall_start as wall_start_s, sp.wall_end as wall_end_s
    from s
)
select c.step, c.name, c.duration_s, c.wall_start_s, c.wall_end_s,
       cast(count(p.span_idx) as integer) as depth,
       arg_min(p.name, p.wall_end_s - p.wall_start_s) as parent,
       c.span_idx
from flat c
left join flat p
  on p.step = c.step and p.span_idx > c.span_idx and p.name <> c.name
 and p.wall_start_s <= c.wall_start_s + 1e-6 and p.wall_end_s >= c.wall_end_s - 1e-6
group by c.step, c.span_idx, c.name, c.duration_s, c.wall_start_s, c.wall_end_s
order by c.step, c.span_idx
"""

_con: Any = None


def _connection() -> Any:
    global _con
    if _con is None:
        import duckdb

        _con = duckdb.connect(":memory:")
    return _con


def normalize(data: bytes, first_line: int, ctx: Context) -> tuple[pa.Table, list[int]]:
    buf = None if b"\n\n" in data else jsonl.fast_table(data, RECORD)
    if buf is None:
        buf = _decode(data, first_line, ctx)
    buf = buf.append_column("r", pa.array(range(buf.num_rows), pa.int64()))
    con = _connection()
    con.register("buf", buf)
    try:
        out = con.sql(NEST_SQL).to_arrow_table()
        steps = [r[0] for r in con.execute(
            "select distinct step from buf where step is not null order by 1").fetchall()]
    finally:
        con.unregister("buf")
    n = out.num_rows
    out = out.append_column("run_id", pa.repeat(ctx.run_id, n))
    out = out.append_column("source_id", pa.repeat(ctx.source_id, n))
    return out.select(schema("spans").names).cast(schema("spans")), steps


def _decode(data: bytes, first_line: int, ctx: Context) -> pa.Table:
    """Line-by-line path: report bad lines and bad spans, keep the rest."""
    steps: list[int] = []
    spans: list[list[dict[str, Any]]] = []
    for lineno, obj in jsonl.records(data, first_line, ctx):
        if not isinstance(obj, dict):
            ctx.warn(lineno, "skipped: a timing line must be a JSON object")
            continue
        step = obj.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
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
    return float(v)


def _span(sp: Any) -> dict[str, Any] | None:
    if not isinstance(sp, dict) or not isinstance(sp.get("name"), str):
        return None
    row = {"name": sp["name"], "duration": _num(sp.get("duration")),
           "wall_start": _num(sp.get("wall_start")), "wall_end": _num(sp.get("wall_end"))}
    if row["duration"] is None and sp.get("duration") is not None:
        return None
    return row
