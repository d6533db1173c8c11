"""Ingest: discover → ledger diff → read → normalize → commit, for every run under some paths.

Contract: `ingest(root, paths)` brings the store at `root` up to date with every run found
under `paths` and returns an `IngestReport`. It holds the store's write lock throughout, reads
only what the ledger says is new (appended bytes, changed write-once files, whole files that
shrank), replaces a re-read file's earlier rows, and publishes snapshots as it goes (after
every ~`batch_rows` staged rows and at the end), so a crash loses at most the unpublished
batch and the next ingest redoes it. Bad input never stops it: each problem becomes a warning
naming `file:line`. Sources are only ever opened for reading.

Ctrl-C (SIGINT; also SIGTERM for the CLI, see interrupts.py) keeps the work: once the runs are
discovered, the first signal stops the ingest at the next file boundary, and it publishes
what it has staged, exactly as at a batch boundary: whole files only, with the ledger entries
of exactly those files (and a `runs` row for a run cut short, so none of its rows is
orphaned). Then it raises KeyboardInterrupt carrying the report of what was kept
(`interrupts.ingest_interrupted`); the next ingest reads only the rest. A signal before
discovery ends raises it at once with nothing kept, and a second signal stops at once; either
way the crash rules above hold.

Two kinds of threads keep both cores busy, without changing what is written: files are read
and normalized ahead in `READ_THREADS` threads (results are staged in discovery order), and a
full batch is written and published in a background thread while the next one is staged
(one at a time, in order; the lock is held until the last one has returned).
"""

from __future__ import annotations

import gc
import os
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa

from . import ledger as ledger_mod
from ..storage import migrate, schema, writer as tables
from .discover import (RunDir, SourceFile, discover, discover_remote, run_holding, run_prefix_holding, source_id_for)
from ..errors import NoRuns, SourceNotFound
from ..storage.location import S3, location
from .interrupts import Interrupts, ingest_interrupted
from .ledger import Entry, Ledger
from .normalize import Context
from . import parse as jsonl
from .process import FileResult, FileTask, process_file

RUNNING_WINDOW_S = 120  # a run whose files changed this recently is `running`
TEXT_LIMIT = 8 << 20  # code.diff kept up to 8 MB
BATCH_ROWS = 4_000_000  # publish a snapshot after about this many staged rows
READ_THREADS = 2  # threads reading and normalizing the files ahead of the one being staged
READ_AHEAD_BYTES = 64 << 20  # source bytes read ahead of the staged file, at most


@dataclass
class IngestReport:
    """What one ingest did."""

    runs_new: int = 0
    runs_updated: int = 0
    runs_unchanged: int = 0
    runs_missing: int = 0
    rows_added: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    bytes_read: int = 0
    snapshots: int = 0
    empty_paths: list[str] = field(default_factory=list)  # paths given that held no run
    runs_total: int = 0  # runs discovered
    interrupted: str | None = None  # the signal that stopped the ingest (then see `kept`)
    complete: bool = False  # every run was staged and published (also when interrupted late)
    partial: tuple[str, int, int] | None = None  # (run name, files kept, files) of a run cut short

    @property
    def mb_per_s(self) -> float:
        return self.bytes_read / 1e6 / self.seconds if self.seconds > 0 else 0.0

    def kept(self) -> str:
        """How much of the runs an interrupted ingest kept, in words."""
        if self.complete:
            return f"everything was kept ({self.runs_total} runs)"
        whole = self.runs_new + self.runs_updated + self.runs_unchanged - (self.partial is not None)
        if not whole and self.partial is None:
            return "nothing new was kept (the store is as it was)"
        text = f"kept {whole} of {self.runs_total} runs whole"
        if self.partial is not None:
            name, done, total = self.partial
            text += f" and {done} of {total} files of {name}"
        return text

    def summary(self) -> str:
        rows = ", ".join(f"{k} +{v}" for k, v in sorted(self.rows_added.items()) if v) or "no rows"
        if self.interrupted:
            kept = self.kept()
            again = ("" if self.complete else "; run the same command again to continue"
                     + ("" if kept.startswith("nothing") else ": it reads only what was not kept"))
            return (f"interrupted by {self.interrupted}: {kept}, in "
                    f"{self.snapshots} snapshot{'s' if self.snapshots != 1 else ''}; rows: "
                    f"{rows}; {self.seconds:.2f} s{again}")
        return (
            f"runs: {self.runs_new} new, {self.runs_updated} updated, {self.runs_unchanged} "
            f"unchanged, {self.runs_missing} missing; rows: {rows}; {len(self.warnings)} "
            f"warning{'s' if len(self.warnings) != 1 else ''}; {self.seconds:.2f} s, "
            f"{self.bytes_read / 1e6:.1f} MB read at {self.mb_per_s:.1f} MB/s"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs_new": self.runs_new, "runs_updated": self.runs_updated,
            "runs_unchanged": self.runs_unchanged, "runs_missing": self.runs_missing,
            "rows_added": dict(self.rows_added), "warnings": len(self.warnings),
            "seconds": round(self.seconds, 3), "bytes_read": self.bytes_read,
            **({"interrupted": self.interrupted} if self.interrupted else {}),
        }


Progress = Callable[[int, int, int, str], None]  # (runs done, runs total, bytes read, run name)


def ingest(root: Path, paths: Iterable[str | os.PathLike[str]], *,
           progress: Progress | None = None, on_warning: Callable[[str], None] | None = None,
           lock_timeout: float = 60.0, batch_rows: int | None = None,
           now: float | None = None, require_runs: bool = True,
           interrupts: Interrupts | None = None) -> IngestReport:
    """Ingest every run under `paths` into the store at `root`; see the module docstring.

    A path that is a file of a run stands for that run. With `require_runs`, paths that hold
    no run at all are `NoRuns` (exit 1), raised before a new store is created and before
    anything is published; a path without runs beside paths with runs is a warning. Without
    it (`--watch` passes: runs may appear later) such paths are only listed in the report's
    `empty_paths`. `interrupts` is the signal handling to use, already entered (the CLI's also
    takes SIGTERM and exits at once on a second signal); by default SIGINT is handled for the
    duration of the call.
    """
    if interrupts is None:
        with Interrupts() as own:
            return ingest(root, paths, progress=progress, on_warning=on_warning,
                          lock_timeout=lock_timeout, batch_rows=batch_rows, now=now,
                          require_runs=require_runs, interrupts=own)
    started = time.monotonic()
    if batch_rows is None:
        # $RUNSTORE_BATCH_ROWS lets tests make a real `runstore ingest` process publish many
        # snapshots (the crash test kills it between and during them).
        batch_rows = int(os.environ.get("RUNSTORE_BATCH_ROWS") or BATCH_ROWS)
    # $RUNSTORE_READ_THREADS=0 reads every file inline (tests compare the two ways).
    threads = int(os.environ.get("RUNSTORE_READ_THREADS") or READ_THREADS)
    given = [str(p) for p in paths]
    roots = [location(p) for p in given]
    for p in roots:
        if not p.exists():
            raise SourceNotFound(f"{p} does not exist — pass a directory of runs (or one run).")
    roots = [_run_root(p) for p in roots]
    if require_runs and not tables.manifest_paths(root) \
            and not any(_holds_a_run(p) for p in roots):
        raise NoRuns(_no_runs(given, roots))  # before the writer creates the store
    report = IngestReport()
    try:
        with _arrow_memory(), _without_cyclic_gc(), \
                tables.writer(root, lock_timeout=lock_timeout) as w:
            migrate.apply(w)
            assert w.manifest is not None
            led = Ledger.from_arrow(_read_ledger(root, w.manifest))
            runs, empty = _discover_all(roots)
            report.empty_paths = [given[i] for i in empty]
            report.runs_total = len(runs)
            job = _Job(root, w, led, report, on_warning, now if now is not None else time.time(),
                       interrupts)
            interrupts.defer()  # from here a signal stops at the next whole file
            try:
                with _ReadAhead(job.tasks(runs), threads) as ahead:
                    for i, rd in enumerate(runs):
                        if interrupts.requested:
                            break
                        job.run(rd, ahead)
                        if progress and report.partial is None:  # a run cut short is not done
                            progress(i + 1, len(runs), report.bytes_read, rd.run_name)
                        if w.staged_rows >= batch_rows and not interrupts.requested:
                            job.commit(background=threads > 0)
                if interrupts.requested:
                    # Publish what is staged, as a batch boundary would; marking vanished
                    # runs `missing` waits for an ingest that sees every run.
                    report.interrupted = interrupts.requested
                    tables.pause_point("interrupted")
                else:
                    job.mark_missing({rd.run_id for rd in runs})
                    if require_runs and empty:
                        if not runs and not report.runs_missing:
                            raise NoRuns(_no_runs(given, roots))  # nothing staged: nothing published
                        for i in empty:
                            job.warn(_no_runs([given[i]], [roots[i]]))
                    report.complete = True
                report.seconds = time.monotonic() - started
                job.commit(final=True)
            except BaseException:
                job.close(quiet=True)  # the lock must outlive a commit running in the background
                raise
            job.close()
            report.rows_added = dict(w.rows_added)
    except KeyboardInterrupt as e:
        if interrupts.deferring or hasattr(e, "report"):
            raise  # a second signal: stopped at once, what is unpublished is dropped
        # Before anything was staged: nothing to keep, the store is as it was.
        report.interrupted = interrupts.requested or str(e) or "KeyboardInterrupt"
        report.seconds = time.monotonic() - started
        raise ingest_interrupted(report) from None
    report.seconds = time.monotonic() - started
    if interrupts.requested:  # also when the signal came during the last commit, or after it
        report.interrupted = interrupts.requested
        raise ingest_interrupted(report)
    return report


@contextmanager
def _arrow_memory() -> Iterator[None]:
    """pyarrow's jemalloc pool as the default one while ingesting, where the build has it.

    The default (mimalloc) hands freed pages back to the kernel so eagerly that an ingest,
    which allocates and frees a few hundred MB per run, spent ~25% more system time
    (measured: 0.70-0.84 s against 0.44-0.57 s of sys for 10 bench runs, same user time).
    """
    try:
        pool = pa.jemalloc_memory_pool()
    except NotImplementedError:  # a pyarrow built without jemalloc
        yield
        return
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    try:
        yield
    finally:
        pa.set_memory_pool(previous)


@contextmanager
def _without_cyclic_gc() -> Iterator[None]:
    """Python's cycle collector paused while ingesting (reference counting still frees).

    A logtree file decodes into thousands of dicts and lists that live until it is walked;
    every 700 allocations the collector traversed the live ones again, holding the GIL:
    ~2 s of a 16 s bench ingest (py-spy showed `gc_collect_main`; measured with and without
    in one sitting). An ingest of the 100-run bench tree leaves ~1,300 objects in cycles,
    which the collector frees once it runs again afterwards.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read_ledger(root: Path, manifest: tables.Manifest) -> pa.Table:
    if not manifest.ledger:
        return schema.empty("_ledger")
    path = root / manifest.ledger
    try:
        # not read_table: it imports pyarrow.dataset (~70 ms)
        return ledger_mod.checked(tables.open_parquet(str(path)).read(), str(path))
    except (OSError, pa.ArrowException) as e:
        from ..errors import StoreCorrupt

        raise StoreCorrupt(f"cannot read the ingest ledger {path}: {e}. Run `runstore repair`.") from e


def _discover_all(roots: list[Path | S3]) -> tuple[list[RunDir], list[int]]:
    """The runs under `roots` (each once), and the indexes of the roots holding none."""
    seen: set[str] = set()
    out: list[RunDir] = []
    empty: list[int] = []
    for i, top in enumerate(roots):
        found = False
        for rd in (discover_remote(top) if isinstance(top, S3) else discover(top)):
            found = True
            if rd.run_id in seen:
                continue
            seen.add(rd.run_id)
            if rd.run_name == ".":
                rd.run_name = Path(rd.path).name
            out.append(rd)
            tables.pause_point("discover")
        if not found:
            empty.append(i)
    return out, empty


NO_RUNS_HINT = "a run is a directory holding metrics.jsonl or config.json"


def _run_root(p: Path | S3) -> Path | S3:
    """A file of a run stands for its run (`run/metrics.jsonl` ingests `run/`): the run it
    belongs to is unambiguous, and shell completion and `find` name files as often as
    directories. Anything else is itself."""
    if isinstance(p, S3):
        prefix = run_prefix_holding(p.base[len("s3://"):])
        return S3("s3://" + prefix) if prefix else p
    if p.is_file():
        run = run_holding(str(p))
        if run is not None:
            return Path(run)
    return p


def _holds_a_run(p: Path | S3) -> bool:
    return next(iter(discover_remote(p) if isinstance(p, S3) else discover(p)), None) is not None


def _no_runs(given: list[str], roots: list[Path | S3]) -> str:
    """`no runs under empty/: a run is …`, saying `is a file` for a file that is not a run's."""
    if len(given) == 1 and isinstance(roots[0], Path) and roots[0].is_file():
        return f"{given[0]} is a file, not a run: {NO_RUNS_HINT}; pass a directory of runs"
    return f"no runs under {' or '.join(given)}: {NO_RUNS_HINT}"


class _ReadAhead:
    """Runs `process_file` for the coming files in worker threads; hands results over in order.

    The per-file work is pure (see work.py) and its heavy parts (pyarrow's JSON reader, Arrow
    compute, numpy) release the GIL, so reading the next files overlaps the staging, the
    Python-bound normalizers and the Delta writes of a commit on the main thread. Files the
    ledger has seen as they are (`ledger.unchanged`) are planned inline: a no-op re-ingest stays a
    `stat` per file. At most `READ_AHEAD_BYTES` of source files are in flight (bounds memory).
    """

    def __init__(self, tasks: Iterator[FileTask], threads: int):
        self._tasks = tasks
        self._pending: deque[tuple[FileTask, Future[FileResult] | None]] = deque()
        self._in_flight = 0
        self._pool = (ThreadPoolExecutor(threads, thread_name_prefix="runstore-read")
                      if threads > 0 else None)

    def __enter__(self) -> "_ReadAhead":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def next(self) -> tuple[FileTask, FileResult]:
        """The next task (in the order `tasks` yields them) and its result."""
        self._fill()
        task, fut = self._pending.popleft()
        if fut is None:
            return task, process_file(task)
        self._in_flight -= task.file.size
        self._fill()
        return task, fut.result()

    def _fill(self) -> None:
        while not self._pending or self._in_flight < READ_AHEAD_BYTES:
            task = next(self._tasks, None)
            if task is None:
                return
            if self._pool is None or _unchanged(task):
                self._pending.append((task, None))
            else:
                self._pending.append((task, self._pool.submit(process_file, task)))
                self._in_flight += task.file.size


def _unchanged(task: FileTask) -> bool:
    """Whether the ledger saw the file as it is now (so `process_file` only plans a skip)."""
    e = task.entry
    return e is not None and not e.state.get("reread") and ledger_mod.unchanged(e, task.file)


class _Job:
    """The state of one ingest: the ledger being updated and the counts being reported."""

    def __init__(self, root: Path, w: tables.Writer, led: Ledger, report: IngestReport,
                 on_warning: Callable[[str], None] | None, now: float,
                 interrupts: Interrupts):
        self.root, self.w, self.led, self.report = root, w, led, report
        self.on_warning = on_warning
        self.now = now
        self.interrupts = interrupts
        self.run_rows: list[dict[str, Any]] = []
        self.replace_runs: list[str] = []
        self._stored_runs: dict[str, dict[str, Any]] | None = None  # loaded when needed
        self._committer: ThreadPoolExecutor | None = None
        self._committing: Future[tables.Manifest] | None = None

    # -- per run -----------------------------------------------------------------------
    def tasks(self, runs: list[RunDir]) -> Iterator[FileTask]:
        """One task per file of every run, in order (a task carries the file's ledger entry:
        only the file's own result changes that entry, so a task can be made early)."""
        for rd in runs:
            run_name = self._run_name(rd)
            for f in rd.files:
                yield FileTask(rd.path, rd.run_id, run_name, f, self.led.get(rd.run_id, f.rel_path))

    def _run_name(self, rd: RunDir) -> str:
        prev = self.led.get(rd.run_id, "")
        return prev.state.get("run_name", rd.run_name) if prev else rd.run_name

    def run(self, rd: RunDir, ahead: _ReadAhead) -> None:
        """Stage the results of `rd`'s files, taken in order from `ahead`."""
        run_id = rd.run_id
        prev = self.led.get(run_id, "")
        run_name = self._run_name(rd)
        changed = False
        for i, f in enumerate(rd.files):
            task, res = ahead.next()
            assert task.file is f, "read-ahead out of step with the runs"
            changed |= self._apply(task, res)
            tables.pause_point("parse")
            if self.interrupts.requested and i + 1 < len(rd.files):
                # Stop between whole files. The run still gets its `runs` row (its kept rows
                # must not be orphans); the files not read keep their ledger entries, so the
                # next ingest reads them and updates the row.
                self.report.partial = (run_name, i + 1, len(rd.files))
                changed = True
                break
        newest = max((f.mtime_ns for f in rd.files), default=0)
        status = self._status(run_id, newest)
        prev_status = prev.state.get("status") if prev else None
        if prev is None:
            self.report.runs_new += 1
        elif (changed or status != prev_status or prev.state.get("layout") != rd.layout
              or prev.state.get("reread")):  # `runstore repair` lost this run's row
            self.report.runs_updated += 1
        else:
            self.report.runs_unchanged += 1
            return
        self.led.put(Entry(source_id=source_id_for(run_id, ""), run_id=run_id, rel_path="",
                           kind=ledger_mod.RUN_KIND,
                           state={"run_name": run_name, "run_path": rd.path, "layout": rd.layout,
                                  "status": status}))
        self.run_rows.append(self._run_row(rd, run_id, run_name, status, newest))
        if prev is not None:
            self.replace_runs.append(run_id)

    def _status(self, run_id: str, newest_ns: int) -> str:
        # A final checkpoint beats fresh mtimes: a copied tree of finished runs is not running.
        # (The run_status view applies the same rule at query time, and also `done_frac`.)
        ck = self.led.get(run_id, "checkpoints.jsonl")
        if ck is not None and ck.state.get("final"):
            return "completed"
        if newest_ns and self.now - newest_ns / 1e9 < RUNNING_WINDOW_S:
            return "running"
        return "idle"

    def _run_row(self, rd: RunDir, run_id: str, run_name: str, status: str,
                 newest_ns: int) -> dict[str, Any]:
        from .normalize import config as config_norm

        info: dict[str, Any] = {}
        code_diff = None
        # Problems with these files were reported when the files themselves were read.
        ctx = Context(run_id=run_id, source_id=source_id_for(run_id, "config.json"),
                      rel_path=f"{run_name}/config.json")
        for f in rd.files:
            if f.kind == "config":
                data = self._read_quiet(rd.path, f)
                if data is not None:
                    info = config_norm.summarize(data, ctx)
                if info.get("config_json") is None:
                    # Unreadable now (cut mid-rewrite?): keep what the stored row says, as
                    # the config table keeps its rows (see work.process_file).
                    info = self._stored_config(run_id) or info
            elif f.kind == "code_diff":
                data = self._read_quiet(rd.path, f)
                if data is not None:
                    code_diff = data[:TEXT_LIMIT].decode("utf-8", errors="replace")
        metrics = self.led.get(run_id, "metrics.jsonl")
        return {
            "run_id": run_id, "run_name": run_name, "run_path": rd.path,
            "kind": info.get("kind") or "unknown", "layout": rd.layout,
            "model_name": info.get("model_name"), "learning_rate": info.get("learning_rate"),
            "config": info.get("config_json"), "code_diff": code_diff, "status": status,
            "last_step": metrics.state.get("max_step") if metrics else None,
            "n_metric_rows": metrics.lines if metrics else None,
            "source_updated_at": (datetime.fromtimestamp(newest_ns / 1e9, timezone.utc)
                                  if newest_ns else None),
            "ingested_at": datetime.now(timezone.utc),
        }

    def _stored_config(self, run_id: str) -> dict[str, Any] | None:
        """The config fields of the run's stored `runs` row, None when it has none."""
        if self._stored_runs is None:
            self._wait_commit()  # read the newest snapshot
            assert self.w.manifest is not None
            rows = tables.read_table(self.root, self.w.manifest, "runs").to_pylist()
            self._stored_runs = {r["run_id"]: r for r in rows}
        row = self._stored_runs.get(run_id)
        if row is None or row["config"] is None:
            return None
        return {"kind": row["kind"], "model_name": row["model_name"],
                "learning_rate": row["learning_rate"], "config_json": row["config"]}

    @staticmethod
    def _read_quiet(run_path: str, f: SourceFile) -> bytes | None:
        try:
            return jsonl.read_span(os.path.join(run_path, f.rel_path), 0, complete_lines=False)
        except OSError:
            return None

    def warn(self, text: str) -> None:
        self.report.warnings.append(text)
        if self.on_warning is not None:
            self.on_warning(text)

    def _apply(self, task: FileTask, res: FileResult) -> bool:
        """Stage one file's result; True when the file was read."""
        for text in res.warnings:
            self.warn(text)
        self.report.bytes_read += res.bytes_read
        for table, pred in res.deletes:
            self.w.delete(table, pred)
        for table, parts in res.appends.items():
            for part in parts:
                self.w.append(table, part)
        if res.entry is not None:
            self.led.put(res.entry)
            return True
        return False

    # -- end of ingest -----------------------------------------------------------------
    def mark_missing(self, seen: set[str]) -> None:
        gone = [e for e in self.led.runs()
                if e.run_id not in seen and e.state.get("status") != "missing"
                and not _source_exists(e.state.get("run_path", ""))]
        if not gone:
            return
        self._wait_commit()  # read the newest snapshot
        assert self.w.manifest is not None
        current = tables.read_table(self.root, self.w.manifest, "runs")
        by_id = {r["run_id"]: r for r in current.to_pylist()}
        for e in gone:
            e.state["status"] = "missing"
            self.report.runs_missing += 1
            row = by_id.get(e.run_id)
            if row is not None:
                row["status"] = "missing"
                row["ingested_at"] = datetime.now(timezone.utc)
                self.run_rows.append(row)
                self.replace_runs.append(e.run_id)

    def commit(self, final: bool = False, background: bool = False) -> None:
        """Publish a snapshot of everything staged so far.

        With `background`, the Delta writes and the publishing run in a thread while this
        one stages the next batch (they are Rust and Arrow work that releases the GIL; a
        batch of 4M rows takes seconds to write). One commit runs at a time, in order: the
        next one, and anything that reads the store's newest snapshot, waits for it first.
        The ledger and report it publishes are taken now, so they match its rows exactly.
        """
        self._wait_commit()
        if self.replace_runs:
            ids = ", ".join(f"'{i}'" for i in self.replace_runs if _is_hex(i))
            self.w.delete("runs", f"run_id IN ({ids})")
        if self.run_rows:
            self.w.append("runs", schema.to_arrow("runs", self.run_rows))
        self.run_rows, self.replace_runs = [], []
        if not self.w.dirty and not final:
            return
        if not self.w.dirty and final and self.report.runs_new == self.report.runs_updated == 0 \
                and self.report.runs_missing == 0:
            return  # nothing changed: publish nothing (a no-op ingest writes no file)
        ledger = self.led.to_arrow()
        last_ingest = {"at": datetime.now(timezone.utc).isoformat(), **self.report.to_dict()}
        self.report.snapshots += 1
        if not background:
            self.w.commit(ledger=ledger, last_ingest=last_ingest)
            return
        if self._committer is None:
            self._committer = ThreadPoolExecutor(1, thread_name_prefix="runstore-commit")
        self._committing = self._committer.submit(
            self.w.commit, ledger=ledger, last_ingest=last_ingest, staged=self.w.take_staged())

    def _wait_commit(self) -> None:
        """Wait for the commit running in the background, if any; raise its error."""
        running, self._committing = self._committing, None
        if running is not None:
            running.result()

    def close(self, *, quiet: bool = False) -> None:
        """Wait for a background commit and stop its thread; `quiet` drops the commit's error
        (the caller is already raising another one)."""
        try:
            self._wait_commit()
        except BaseException:
            if not quiet:
                raise
        finally:
            if self._committer is not None:
                self._committer.shutdown(wait=True)
                self._committer = None


def _source_exists(run_path: str) -> bool:
    where = location(run_path)
    return where.exists() if isinstance(where, S3) else where.is_dir()


def _is_hex(s: str) -> bool:
    return all(c in "0123456789abcdef" for c in s)
