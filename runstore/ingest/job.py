"""One ingest's state: staging each run's file results, its `runs` row, and publishing snapshots.

Contract: a `Job` holds the writer, the ledger being updated and the report being counted.
`tasks(runs)` yields one `FileTask` per file of every run, in order; `run(rd, ahead)` stages the
results of one run's files (taken in order from the read-ahead) and its `runs` row (its name,
layout, kind and config fields, code diff, final checkpoint and largest `progress/done_frac`
(progress.py), status: the macro `run_status_at` as of the ingest, the rule the view
`run_status` applies as of a query), counting the run as new, updated or unchanged; an
interrupt between two files stops it there, the run's row still staged. A file the ledger knows
that the run's directory no longer holds keeps its rows (nothing stored is lost) and is warned
of once: its entry is marked `gone` until it is there again.
`mark_missing(seen)` marks runs whose directory is gone. `commit(final=, background=)` publishes
a snapshot of what is staged (the ledger and report taken at that moment, so they match its rows
exactly), in a background thread while the next batch is staged when asked; one commit runs at a
time, in order. The final commit of a complete ingest records in `last_ingest` what the next one
compares to tell a no-op from `stat` alone (unchanged.py): the runs discovered, until when no
run's status can change, how many runs the ledger knows that this ingest did not see, and (the
writer's `stamp`) the fingerprint of the store files the snapshot is published over.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from ..crashpoints import pause_point
from ..storage import arrow_sql, schema
from ..storage.ledger import RUN_KIND, Entry, Ledger, source_id_for
from ..storage.location import gone, location
from ..storage.manifest import Manifest, Root
from ..storage.snapshot import read_table
from ..storage.writer import Writer, ledger_path, rows_where
from ..waits import awaited
from . import parse as jsonl
from . import progress, run_facts, unchanged
from .discover import EVAL_STORE, RunDir, SourceFile, unstorable_warning
from .interrupts import Interrupts
from .normalize import config
from .normalize.base import Context
from .normalize.code_diff import text as code_diff_text
from .process import FileResult, FileTask
from .readahead import ReadAhead
from .report import IngestReport

# A run's status as of the ingest, and until when it stays `running` (sql/statements/macros.sql).
STATUS_SQL = ("select run_status_at(false, $final::boolean, $done::double, "
              "$updated::timestamptz, $at::timestamptz), "
              "epoch(running_until($updated::timestamptz))")


class Job:
    """The state of one ingest: the ledger being updated and the counts being reported."""

    def __init__(self, root: Root, w: Writer, led: Ledger, report: IngestReport,
                 on_warning: Callable[[str], None] | None, now: float,
                 interrupts: Interrupts, *, ledger_changed: bool = False):
        self.root, self.w, self.led, self.report = root, w, led, report
        # The ledger differs from the snapshot's before anything is staged (progress.seed):
        # the final commit publishes it even when no run changed.
        self.ledger_changed = ledger_changed
        self.on_warning = on_warning
        self.now = now
        self.interrupts = interrupts
        self.run_rows: list[dict[str, Any]] = []
        self.replace_runs: list[str] = []
        self.new_runs: set[str] = set()  # run_ids this ingest added to the store
        self._stored_runs: dict[str, dict[str, Any]] | None = None  # loaded when needed
        self._known: dict[str, list[str]] | None = None  # run_id -> its files in the ledger
        self._committer: ThreadPoolExecutor | None = None
        self._committing: Future[Manifest] | None = None
        # What a complete ingest records for the next one to compare (unchanged.py): the
        # runs discovered, until when no status can change, the known runs it did not see.
        self.runs: list[RunDir] = []
        self.stable_until = float("inf")
        self.elsewhere = 0

    # -- per run -----------------------------------------------------------------------
    def tasks(self, runs: list[RunDir]) -> Iterator[FileTask]:
        """One task per file of every run, in order (a task carries the file's ledger entry:
        only the file's own result changes that entry, so a task can be made early)."""
        self.runs = runs
        for rd in runs:
            run_name = self._run_name(rd)
            for f in rd.files:
                yield FileTask(rd.path, rd.run_id, run_name, f, self.led.get(rd.run_id, f.rel_path))

    def _run_name(self, rd: RunDir) -> str:
        prev = self.led.get(rd.run_id, "")
        return prev.state.get("run_name", rd.run_name) if prev else rd.run_name

    def run(self, rd: RunDir, ahead: ReadAhead) -> None:
        """Stage the results of `rd`'s files, taken in order from `ahead` (and, for a run,
        its `runs` row; an eval store has none)."""
        run_id = rd.run_id
        prev = self.led.get(run_id, "")
        run_name = self._run_name(rd)
        for rel in rd.unstorable:
            self.warn(unstorable_warning(f"{run_name}/{rel}"))
        changed = self._files(rd, run_name, ahead)
        if self.report.partial is None:  # an interrupted run has not been seen whole
            self._gone(rd, run_name)
        if rd.kind == EVAL_STORE:
            self.report.eval_stores_read += 1
            if prev is None or prev.state.get("run_path") != rd.path:
                # Its name (what warnings call its files) is kept like a run's.
                self.led.put(Entry(source_id=source_id_for(run_id, ""), run_id=run_id,
                                   rel_path="", kind=EVAL_STORE,
                                   state={"run_name": run_name, "run_path": rd.path}))
                self.ledger_changed = True
            return
        newest = max((f.mtime_ns for f in rd.files), default=0)
        facts = progress.columns(self.led, run_id)
        status, running_until = arrow_sql.row(STATUS_SQL, {
            "final": facts["final_checkpoint"], "done": facts["done_frac"],
            "updated": updated_at(newest), "at": datetime.fromtimestamp(self.now, timezone.utc)})
        if status == "running":  # turns idle then, without a file changing
            self.stable_until = min(self.stable_until, running_until)
        prev_status = prev.state.get("status") if prev else None
        tmp_files = rd.tmp_files or None
        if prev is None:
            self.report.runs_new += 1
            self.new_runs.add(run_id)
        elif (changed or status != prev_status or prev.state.get("layout") != rd.layout
              or prev.state.get("tmp_files") != tmp_files
              or prev.state.get("reread")):  # `runstore repair` lost this run's row
            self.report.runs_updated += 1
        else:
            self.report.runs_unchanged += 1
            return
        self.led.put(Entry(source_id=source_id_for(run_id, ""), run_id=run_id, rel_path="",
                           kind=RUN_KIND,
                           state={"run_name": run_name, "run_path": rd.path, "layout": rd.layout,
                                  "status": status, "tmp_files": tmp_files}))
        self.run_rows.append(self._run_row(rd, run_id, run_name, status, newest,
                                           {**facts, **run_facts.columns(self.led, run_id),
                                            "tmp_files": tmp_files}))
        if prev is not None:
            self.replace_runs.append(run_id)

    def _files(self, rd: RunDir, run_name: str, ahead: ReadAhead) -> bool:
        """Stage the results of `rd`'s files; True when any was read."""
        changed = False
        for i, f in enumerate(rd.files):
            task, res = ahead.next()
            assert task.file is f, "read-ahead out of step with the runs"
            changed |= self._apply(task, res)
            pause_point("parse")
            if self.interrupts.requested and i + 1 < len(rd.files):
                # Stop between whole files. A run still gets its `runs` row (its kept rows
                # must not be orphans); the files not read keep their ledger entries, so the
                # next ingest reads them and updates the row.
                self.report.partial = (run_name, i + 1, len(rd.files))
                self.report.partial_run = rd.kind == "run"
                return True
        return changed

    def _gone(self, rd: RunDir, run_name: str) -> None:
        """Warn once of each file the ledger knows for `rd` that its directory no longer holds
        (deleted, or made a directory): its rows stay, and its entry says `gone` so the next
        ingest does not warn again; a file that is there again loses the mark."""
        if self._known is None:
            self._known = defaultdict(list)
            for run_id, rel in self.led.entries:
                if rel:
                    self._known[run_id].append(rel)
        here = {f.rel_path for f in rd.files}
        for rel in self._known.get(rd.run_id, ()):
            e = self.led.get(rd.run_id, rel)
            if e is None:
                continue
            if rel in here and e.state.get("gone"):
                state = {k: v for k, v in e.state.items() if k != "gone"}
            elif rel not in here and not e.state.get("gone"):
                drop = ("" if rd.kind == EVAL_STORE else
                        f" (to drop them: runstore forget {rd.run_id}, then ingest again)")
                self.warn(f"{run_name}/{rel}: no longer in its directory; the rows read from it "
                          f"stay in the store{drop}")
                state = {**e.state, "gone": True}
            else:
                continue
            self.led.put(replace(e, state=state))
            self.ledger_changed = True

    def _run_row(self, rd: RunDir, run_id: str, run_name: str, status: str,
                 newest_ns: int, facts: dict[str, Any]) -> dict[str, Any]:
        info: dict[str, Any] = {}
        code_diff = None
        # Problems with these files were reported when the files themselves were read.
        ctx = Context(run_id=run_id, source_id=source_id_for(run_id, "config.json"),
                      rel_path=f"{run_name}/config.json")
        for f in rd.files:
            if f.kind == "config":
                data = self._read_quiet(rd.path, f)
                if data is not None:
                    info = config.summarize(data, ctx)
                if info.get("config_json") is None:
                    # Unreadable now (cut mid-rewrite?): keep what the stored row says, as
                    # the config table keeps its rows (see process.process_file).
                    info = self._stored_config(run_id) or info
            elif f.kind == "code_diff":
                data = self._read_quiet(rd.path, f)
                if data is not None:
                    code_diff = code_diff_text(data)
        metrics = self.led.get(run_id, "metrics.jsonl")
        return {
            "run_id": run_id, "run_name": run_name, "run_path": rd.path,
            "kind": info.get("kind") or "unknown", "layout": rd.layout,
            "model_name": info.get("model_name"), "learning_rate": info.get("learning_rate"),
            "config": info.get("config_json"), "code_diff": code_diff, "status": status,
            "last_step": metrics.state.get("max_step") if metrics else None,
            "n_metric_rows": metrics.lines if metrics else None,
            "source_updated_at": updated_at(newest_ns),
            "ingested_at": datetime.now(timezone.utc),
            **facts,
        }

    def _stored_config(self, run_id: str) -> dict[str, Any] | None:
        """The config fields of the run's stored `runs` row, None when it has none."""
        if self._stored_runs is None:
            self._wait_commit()  # read the newest snapshot
            assert self.w.manifest is not None
            rows = read_table(self.root, self.w.manifest, "runs").to_pylist()
            self._stored_runs = {r["run_id"]: r for r in rows}
        row = self._stored_runs.get(run_id)
        if row is None or row["config"] is None:
            return None
        return {"kind": row["kind"], "model_name": row["model_name"],
                "learning_rate": row["learning_rate"], "config_json": row["config"]}

    @staticmethod
    def _read_quiet(run_path: str, f: SourceFile) -> bytes | None:
        try:
            return jsonl.read_span(location(run_path), f.rel_path, 0, complete_lines=False)
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
        unseen = [e for e in self.led.runs()
                  if e.run_id not in seen and e.state.get("status") != "missing"]
        gone_runs = [e for e in unseen if gone(e.state.get("run_path", ""))]
        self.elsewhere = len(unseen) - len(gone_runs)
        if not gone_runs:
            return
        self._wait_commit()  # read the newest snapshot
        assert self.w.manifest is not None
        current = read_table(self.root, self.w.manifest, "runs")
        by_id = {r["run_id"]: r for r in current.to_pylist()}
        for e in gone_runs:
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
            # Run ids are hex digests runstore made; anything else is left alone.
            ids = [i for i in self.replace_runs if _is_hex(i)]
            self.w.delete("runs", rows_where(run_id=ids))
        if self.run_rows:
            self.w.append("runs", schema.to_arrow("runs", self.run_rows))
        self.run_rows, self.replace_runs = [], []
        if not self.w.dirty and not final:
            return
        if not self.w.dirty and final and self.report.runs_new == self.report.runs_updated == 0 \
                and self.report.runs_missing == 0 and not self.ledger_changed:
            return  # nothing changed: publish nothing (a no-op ingest writes no file)
        ledger = self.led.to_arrow()
        self.ledger_changed = False
        last_ingest = {"at": datetime.now(timezone.utc).isoformat(), **self.report.to_dict()}
        stamp = final and self.report.complete and not self.report.interrupted
        if stamp:
            assert self.w.manifest is not None
            last_ingest[unchanged.KEY] = unchanged.record(
                self.runs, ledger_path(self.w.manifest.seq + 1), self.stable_until,
                self.elsewhere)
        self.report.snapshots += 1
        if not background:
            self.w.commit(ledger=ledger, last_ingest=last_ingest, stamp=stamp)
            return
        if self._committer is None:
            self._committer = ThreadPoolExecutor(1, thread_name_prefix="runstore-commit")
        self._committing = self._committer.submit(
            self.w.commit, ledger=ledger, last_ingest=last_ingest, staged=self.w.take_staged(),
            stamp=stamp)

    def _wait_commit(self) -> None:
        """Wait for the commit running in the background, if any; raise its error."""
        running, self._committing = self._committing, None
        if running is not None:
            awaited(running)

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


def _is_hex(s: str) -> bool:
    return all(c in "0123456789abcdef" for c in s)


def updated_at(newest_ns: int) -> datetime | None:
    """`runs.source_updated_at` of a run whose newest file changed at `newest_ns` (0: none)."""
    return datetime.fromtimestamp(newest_ns / 1e9, timezone.utc) if newest_ns else None
