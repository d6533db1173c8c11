"""Reading and normalizing what is new in one run's files: pure work, safe in a worker process.

Contract: `process_file(task)` takes a `FileTask` (a source file as discovered and its ledger
entry, or None) and returns a `FileResult`: the new ledger
entry (None when the file was skipped), the Arrow tables to append per store table, the deletes
to stage first (a re-read file's earlier rows, steps logged again, trace events that were still
open), the warnings (`file:line: message`) and the bytes read. It never touches the store and
never writes to a source: the ingest applies results in order. A write-once file that changed but now yields no
row, only warnings (cut mid-rewrite, garbage), is skipped instead: its earlier rows stay
and the next ingest retries it. Being pure, it runs in the ingest's read-ahead threads
(its heavy parts release the GIL); a pool of worker processes did not pay on 2 cores (see
docs/benchmarks.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from . import ledger as ledger_mod
from ..storage import schema
from .discover import APPEND_ONLY, SourceFile
from .ledger import Entry, Plan
from .normalize import Context
from . import parse as jsonl

# Store tables each file kind writes (a replaced file's rows are deleted from all of them).
KIND_TABLES: dict[str, tuple[str, ...]] = {
    "config": ("config",),
    "code_diff": (),
    "metrics": ("metrics_raw",),
    "metrics_pre_resume": ("metrics_raw",),
    "checkpoints": ("checkpoints",),
    "timing_spans": ("spans",),
    "trace_events": ("trace_slices",),
    "rollouts": ("trajectories", "rollout_steps"),
    "logtree": ("conversations", "messages"),
}


@dataclass
class FileTask:
    run_path: str
    run_id: str
    run_name: str
    file: SourceFile
    entry: Entry | None


@dataclass
class FileResult:
    rel_path: str
    entry: Entry | None  # None: nothing read (unchanged, or unreadable)
    appends: dict[str, list[pa.Table]] = field(default_factory=dict)
    deletes: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    bytes_read: int = 0


def process_file(task: FileTask) -> FileResult:
    f, entry = task.file, task.entry
    result = FileResult(rel_path=f.rel_path, entry=None)
    ctx = Context(run_id=task.run_id, source_id=_source_id(task), rel_path=f"{task.run_name}/{f.rel_path}",
                  split=f.split, iteration=f.iteration, warnings=result.warnings)
    full_path = os.path.join(task.run_path, f.rel_path)
    append_only = f.kind in APPEND_ONLY
    prefix_changed = False
    if entry is not None and ledger_mod.grew(entry, f):
        # Grown: an append, unless what was consumed before the offset changed too.
        start = ledger_mod.check_start(entry)
        try:
            seen = jsonl.read_tail(full_path, entry.offset, entry.offset - start)
        except OSError:
            seen = None  # then reading the new bytes fails too, and says so
        prefix_changed = seen is not None and not ledger_mod.same_prefix(entry, seen)
    plan = ledger_mod.plan(entry, f, prefix_changed)
    if plan.action == "skip":
        return result
    try:
        data = jsonl.read_span(full_path, plan.start, complete_lines=append_only)
    except OSError as e:
        ctx.warn(None, f"skipped: cannot read ({e.strerror or e})")
        return result
    result.bytes_read = len(data)
    if plan.replace or entry is None:
        entry = Entry(source_id=ctx.source_id, run_id=task.run_id, rel_path=f.rel_path, kind=f.kind)
        if plan.replace:
            result.deletes += [(t, f"source_id = {ctx.source_id}") for t in KIND_TABLES[f.kind]]
    else:
        entry = Entry(**{**entry.__dict__, "state": dict(entry.state)})
    n_lines = jsonl.count_lines(data) if append_only else 0
    _normalize(f, data, plan, entry, ctx, result)
    if plan.replace and not append_only and result.warnings and KIND_TABLES[f.kind] \
            and not any(t.num_rows for parts in result.appends.values() for t in parts):
        # A write-once file that changed and now reads as nothing at all (cut while being
        # rewritten, or garbage): keep the rows of the version read before, and leave the
        # ledger as it was so the next ingest tries the file again.
        ctx.warn(None, "nothing in it could be read; its earlier rows are kept until it reads")
        return FileResult(rel_path=f.rel_path, entry=None, warnings=result.warnings,
                          bytes_read=result.bytes_read)
    entry.size, entry.mtime_ns = f.size, f.mtime_ns
    if append_only:
        entry.offset = plan.start + len(data)
        entry.lines = plan.first_line - 1 + n_lines
        ledger_mod.fingerprint(entry, f, plan.start, data,
                               lambda end, n: jsonl.read_tail(full_path, end, n))
    else:
        entry.offset = len(data)
        if f.ctime_ns is not None:
            entry.state["ctime"] = f.ctime_ns
    result.entry = entry
    return result


def _source_id(task: FileTask) -> int:
    from .discover import source_id_for

    return task.entry.source_id if task.entry is not None else source_id_for(task.run_id, task.file.rel_path)


def _add(result: FileResult, table: str, data: pa.Table) -> None:
    if data.num_rows:
        result.appends.setdefault(table, []).append(data)


def _rows(result: FileResult, out: dict[str, list[dict[str, Any]]]) -> None:
    for table, rows in out.items():
        if rows:
            _add(result, table, schema.to_arrow(table, rows))


def _normalize(f: SourceFile, data: bytes, plan: Plan, entry: Entry, ctx: Context,
               result: FileResult) -> None:
    from .normalize import checkpoints, config, logtree, metrics, rollouts, timing, trace

    kind = f.kind
    sid = ctx.source_id
    if kind in ("metrics", "metrics_pre_resume"):
        table, last = metrics.normalize(data, plan.first_line, ctx,
                                        pre_resume=kind == "metrics_pre_resume")
        _add(result, "metrics_raw", table)
        if last is not None:
            entry.state["max_step"] = max(last, entry.state.get("max_step", last))
    elif kind == "timing_spans":
        table, steps = timing.normalize(data, plan.first_line, ctx)
        prev_max = entry.state.get("max_step")
        if prev_max is not None and steps and steps[0] <= prev_max:
            # A resumed run logs steps again (the file is never truncated): the later record
            # of a step replaces the stored one.
            redo = ", ".join(str(int(s)) for s in steps if s <= prev_max)
            result.deletes.append(("spans", f"source_id = {sid} AND step IN ({redo})"))
        _add(result, "spans", table)
        if steps:
            entry.state["max_step"] = max(steps[-1], prev_max if prev_max is not None else steps[-1])
    elif kind == "checkpoints":
        recs = list(jsonl.records(data, plan.first_line, ctx))
        _rows(result, checkpoints.normalize(recs, ctx))
        if any(isinstance(o, dict) and (o.get("name") == "final" or o.get("final") is True)
               for _, o in recs):
            entry.state["final"] = True
    elif kind == "trace_events":
        state = entry.state.get("trace")
        if state and state.get("open"):
            # Open B events were stored as null-duration rows of the current segment; this
            # read may close them, so they are replaced by what it returns.
            result.deletes.append(("trace_slices", f"source_id = {sid} AND dur_us IS NULL "
                                                   f"AND segment = {int(state.get('segment', 0))}"))
        out, state = trace.normalize(jsonl.records(data, plan.first_line, ctx), state, ctx)
        _rows(result, out)
        _rows(result, {"trace_slices": trace.open_rows(state, ctx)})
        entry.state["trace"] = state
    elif kind == "rollouts":
        _rows(result, rollouts.normalize(jsonl.records(data, plan.first_line, ctx), ctx))
    elif kind == "logtree":
        _rows(result, logtree.normalize(data, ctx))
    elif kind == "config":
        _rows(result, config.normalize(data, ctx))

