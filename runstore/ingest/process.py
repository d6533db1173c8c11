"""Reading and normalizing what is new in one source file: the per-file step of an ingest.

Contract: `process_file(task)` takes a `FileTask` (a source file as discovered and its ledger
entry, or None) and returns a `FileResult`: the new ledger entry (None when the file was
skipped), the Arrow tables to append per store table, the deletes to stage first (a re-read
file's earlier rows, steps logged again, trace events that were still open; sqlglot
conditions, see `writer.rows_where`), the warnings (`file:line: message`) and the bytes read.
What to read comes from the ledger diff (`changes.plan`); the rows from the file kind's
normalizer (`normalize.registry`); an append the normalizer cannot take alone
(`Output.reread`) is read again as the whole file, its earlier rows replaced. It never
touches the store and never writes to a source: the ingest applies results in order. A
write-once file that changed but now yields no row, only warnings (cut mid-rewrite,
garbage), is skipped instead: its earlier rows stay and the next ingest retries it. It shares nothing with other calls but what it is given, so the
ingest runs it in read-ahead threads (its heavy parts release the GIL); a pool of worker
processes did not pay on 2 cores (see docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..storage.ledger import Entry, source_id_for
from ..storage.location import location
from ..storage.writer import rows_where
from . import changes
from . import parse as jsonl
from .discover import APPEND_ONLY, SourceFile
from .normalize.base import Batch, Context, Output
from .normalize.registry import for_kind, tables_of

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp


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
    appends: dict[str, list["pa.Table"]] = field(default_factory=dict)
    deletes: list[tuple[str, "exp.Condition"]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    bytes_read: int = 0


def process_file(task: FileTask) -> FileResult:
    f, entry = task.file, task.entry
    result = FileResult(rel_path=f.rel_path, entry=None)
    ctx = Context(run_id=task.run_id, source_id=_source_id(task), rel_path=f"{task.run_name}/{f.rel_path}",
                  split=f.split, iteration=f.iteration, warnings=result.warnings,
                  file=f.rel_path, run_path=task.run_path)
    run = location(task.run_path)
    append_only = f.kind in APPEND_ONLY
    prefix_changed = False
    if entry is not None and changes.grew(entry, f):
        # Grown: an append, unless what was consumed before the offset changed too.
        try:
            seen = run.read_ranges(f.rel_path, changes.check_ranges(entry))
        except OSError:
            seen = None  # then reading the new bytes fails too, and says so
        prefix_changed = seen is not None and not changes.same_prefix(entry, seen)
    plan = changes.plan(entry, f, prefix_changed)
    if plan.action == "skip":
        return result
    read = _read(task, run, ctx, plan, result)
    if read is not None and read[1].reread and not plan.replace:
        # The normalizer cannot take this append alone: the whole file again, its earlier
        # rows replaced (a metrics append logging KL at steps logged before).
        del result.warnings[:]
        plan = changes.Plan("full", 0, 1, True)
        read = _read(task, run, ctx, plan, result)
    if read is None:
        return result
    entry, out, data = read
    result.deletes += out.deletes
    result.appends = out.appends
    if plan.replace and not append_only and result.warnings and tables_of(f.kind) \
            and not any(t.num_rows for parts in result.appends.values() for t in parts):
        # A write-once file that changed and now reads as nothing at all (cut while being
        # rewritten, or garbage): keep the rows of the version read before, and leave the
        # ledger as it was so the next ingest tries the file again.
        ctx.warn(None, "nothing in it could be read; its earlier rows are kept until it reads")
        return FileResult(rel_path=f.rel_path, entry=None, warnings=result.warnings,
                          bytes_read=result.bytes_read)
    entry.size, entry.mtime_ns = f.size, f.mtime_ns
    if append_only:
        n_lines = jsonl.count_lines(data)
        entry.offset = plan.start + len(data)
        entry.lines = plan.first_line - 1 + n_lines
        changes.fingerprint(entry, f, plan.start, data,
                            lambda ranges: run.read_ranges(f.rel_path, ranges))
    else:
        entry.offset = len(data)
        if f.ctime_ns is not None:
            entry.state["ctime"] = f.ctime_ns
    result.entry = entry
    return result


def _read(task: FileTask, run: Any, ctx: Context, plan: changes.Plan, result: FileResult
          ) -> tuple[Entry, Output, bytes] | None:
    """Read (from `run`, the run directory's location) and normalize what `plan` says of the
    task's file: (the new ledger entry, the normalizer's output, the bytes read); None when
    the file cannot be read (warned)."""
    f, entry = task.file, task.entry
    try:
        data = jsonl.read_span(run, f.rel_path, plan.start, complete_lines=f.kind in APPEND_ONLY)
    except OSError as e:
        ctx.warn(None, f"skipped: cannot read ({e.strerror or e})")
        return None
    result.bytes_read += len(data)
    result.deletes = []
    if plan.replace or entry is None:
        entry = Entry(source_id=ctx.source_id, run_id=task.run_id, rel_path=f.rel_path, kind=f.kind)
        if plan.replace:
            result.deletes += [(t, rows_where(source_id=ctx.source_id))
                               for t in tables_of(f.kind)]
    else:
        entry = Entry(**{**entry.__dict__, "state": dict(entry.state)})
    out = for_kind(f.kind).normalize(Batch(data, plan.first_line, ctx, f.kind, entry.state))
    return entry, out, data


def _source_id(task: FileTask) -> int:
    return (task.entry.source_id if task.entry is not None
            else source_id_for(task.run_id, task.file.rel_path))
