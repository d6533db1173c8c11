"""Ingest: discover → ledger diff → read → normalize → commit, for every run under some paths.

Contract: `ingest(root, paths)` brings the store at `root` up to date with every run found
under `paths` and returns an `IngestReport`. It holds the store's write lock throughout, reads
only what the ledger says is new (appended bytes, changed write-once files, whole files that
shrank), replaces a re-read file's earlier rows, and publishes snapshots as it goes (after
every ~`batch_rows` staged rows and at the end), so a crash loses at most the unpublished
batch and the next ingest redoes it (a batch is ~`batch_rows` rows or `BATCH_BYTES` of them,
whichever comes first, so memory stays bounded however wide the rows). Bad input never stops
it: each problem becomes a warning naming `file:line`. Sources are only ever opened for
reading. When the runs are as the store's last complete ingest saw them and nothing would
change (unchanged.py: a `stat` of each source and the manifest), it returns at once: no lock,
no ledger, no table, nothing heavy imported.

Ctrl-C (SIGINT; also SIGTERM for the CLI, see interrupts.py) keeps the work: once the runs are
discovered, the first signal stops the ingest at the next file boundary, and it publishes
what it has staged, exactly as at a batch boundary: whole files only, with the ledger entries
of exactly those files (and a `runs` row for a run cut short, so none of its rows is
orphaned). Then it raises KeyboardInterrupt carrying the report of what was kept
(`interrupts.ingest_interrupted`); the next ingest reads only the rest. A signal before
discovery ends raises it at once with nothing kept, and a second signal stops at once; either
way the crash rules above hold.

Two kinds of threads keep both cores busy, without changing what is written: files are read
and normalized ahead in `READ_THREADS` threads (readahead.py; results are staged in
discovery order), and a full batch is written and published in a background thread while
the next one is staged (job.py; one at a time, in order; the lock is held until the last one
has returned). The stages: discover.py (what is a run), changes.py (what is new),
process.py (read and normalize one file), job.py (stage and publish), report.py.
"""

from __future__ import annotations

import gc
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..crashpoints import pause_point
from ..errors import NoRuns, SourceNotFound
from ..storage.location import Location, location
from ..storage.manifest import Root, manifest_paths, read_manifest
from . import names, unchanged
from ..printable import escaped
from .discover import RunDir, discover, run_holding, unstorable_warning
from .interrupts import Interrupts, ingest_interrupted
from .report import NO_RUNS_HINT, IngestReport, Progress

BATCH_ROWS = 4_000_000  # publish a snapshot after about this many staged rows
# ... or this many bytes of them: rows of the token-level capture hold whole token lists.
BATCH_BYTES = 1 << 30
READ_THREADS = 2  # threads reading and normalizing the files ahead of the one being staged


def ingest(root: Root, paths: Iterable[str | os.PathLike[str]], *,
           progress: Progress | None = None, on_warning: Callable[[str], None] | None = None,
           lock_timeout: float = 60.0, batch_rows: int | None = None,
           now: float | None = None, require_runs: bool = True,
           interrupts: Interrupts | None = None, prefix: str | None = None) -> IngestReport:
    """Ingest every run under `paths` into the store at `root`; see the module docstring.

    `prefix` names a run found for the first time `PREFIX/<path relative to the path given>`
    (`names.prefixed`); a run already in the store keeps the name it has (its ledger entry),
    so an ingest with or without the prefix never renames a run (`forget` it, then ingest it
    again, to rename it). A run name that this ingest gives to a second run is a warning
    (`names.shared_names`): both runs stay, each itself, shown with a run_id prefix.

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
                          require_runs=require_runs, interrupts=own, prefix=prefix)
    started = time.monotonic()
    if batch_rows is None:
        # $RUNSTORE_BATCH_ROWS lets tests make a real `runstore ingest` process publish many
        # snapshots (the crash test kills it between and during them).
        batch_rows = int(os.environ.get("RUNSTORE_BATCH_ROWS") or BATCH_ROWS)
    # $RUNSTORE_READ_THREADS=0 reads every file inline (tests compare the two ways).
    threads = int(os.environ.get("RUNSTORE_READ_THREADS") or READ_THREADS)
    given = [str(p) for p in paths]
    prefix = names.check_prefix(prefix)
    roots = [location(p) for p in given]
    for p in roots:
        if not p.exists():
            raise SourceNotFound(f"{p} does not exist — pass a directory of runs (or one run).")
    roots = [_run_root(p) for p in roots]
    unstored: list[str] = []  # runs and eval stores whose names cannot be stored
    if require_runs and not manifest_paths(root) \
            and not any(_holds_a_run(p, unstored) for p in roots):
        raise NoRuns(_no_runs(given, roots, unstored))  # before the writer creates the store
    report = IngestReport()
    try:
        quick = _unchanged(root, roots, now)
        if quick is not None:  # nothing would change: no lock taken, nothing written
            quick.seconds = time.monotonic() - started
            if progress:
                progress(quick.runs_total, quick.runs_total, 0, "")
            return quick
        # Imported here: a no-op ingest (above) needs none of it.
        from ..storage import ledger, migrate, schema
        from ..storage.snapshot import read_table, table_files
        from ..storage.writer import writer
        from .job import Job
        from .progress import seed as seed_progress
        from .readahead import ReadAhead
        from .run_facts import seed as seed_totals

        with _arrow_memory(), _without_cyclic_gc(), \
                writer(root, lock_timeout=lock_timeout,
                       stop=lambda: interrupts.requested) as w:
            migrate.apply(w)
            assert w.manifest is not None
            led = ledger.read(root, w.manifest)
            manifest = w.manifest
            seeded = seed_progress(led, lambda table: read_table(root, manifest, table))
            seeded |= seed_totals(led, table_files(root, manifest, "metrics_raw"))
            per_root: list[list[str]] = []  # of each root, what discovery skipped
            runs, empty = _discover_all(roots, prefix, per_root)
            skipped = [name for names_ in per_root for name in names_]
            report.empty_paths = [given[i] for i in empty]
            report.runs_total = sum(rd.kind == "run" for rd in runs)
            report.eval_stores = len(runs) - report.runs_total
            job = Job(root, w, led, report, on_warning, now if now is not None else time.time(),
                      interrupts, ledger_changed=seeded)
            for name in skipped:
                job.warn(unstorable_warning(name))
            interrupts.defer()  # from here a signal stops at the next whole file
            try:
                with ReadAhead(job.tasks(runs), threads) as ahead:
                    done = 0  # runs staged (eval stores are not runs: as the report counts)
                    for rd in runs:
                        if interrupts.requested:
                            break
                        job.run(rd, ahead)
                        if rd.kind == "run" and report.partial is None:  # not one cut short
                            done += 1
                            if progress:
                                progress(done, report.runs_total, report.bytes_read, rd.run_name)
                        if (w.staged_rows >= batch_rows or w.staged_bytes >= BATCH_BYTES) \
                                and not interrupts.requested:
                            job.commit(background=threads > 0)
                if interrupts.requested:
                    # Publish what is staged, as a batch boundary would; marking vanished
                    # runs `missing` waits for an ingest that sees every run.
                    report.interrupted = interrupts.requested
                    pause_point("interrupted")
                else:
                    job.mark_missing({rd.run_id for rd in runs})
                    if require_runs and empty:
                        if not runs and not report.runs_missing:
                            raise NoRuns(_no_runs(given, roots, skipped))  # nothing published
                        for i in empty:
                            job.warn(_no_runs([given[i]], [roots[i]], per_root[i]))
                    report.complete = True
                report.seconds = time.monotonic() - started
                job.commit(final=True)
            except BaseException:
                job.close(quiet=True)  # the lock must outlive a commit running in the background
                raise
            job.close()
            if report.runs_new:
                for text in names.shared_names(read_table(root, w.manifest, "runs").to_pylist(),
                                               job.new_runs):
                    job.warn(text)
            # Rows read from the sources; a summary kept beside them is not news to report.
            report.rows_added = {t: n for t, n in w.rows_added.items()
                                 if t not in schema.SUMMARY_TABLES}
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


def _unchanged(root: Root, roots: list[Location], now: float | None) -> IngestReport | None:
    """The report of this ingest when the runs under `roots` are as the store's last complete
    ingest saw them and nothing would change (unchanged.py), else None."""
    manifest = read_manifest(root)
    if manifest is None or manifest.last_ingest is None:
        return None
    per_root: list[list[str]] = []
    runs, empty = _discover_all(roots, skipped=per_root)
    if empty or any(per_root) or any(rd.unstorable for rd in runs):
        return None  # the whole path says what it skips, every time
    return unchanged.check(root, manifest, runs, now)


@contextmanager
def _arrow_memory() -> Iterator[None]:
    """pyarrow's jemalloc pool as the default one while ingesting, where the build has it.

    The default (mimalloc) hands freed pages back to the kernel so eagerly that an ingest,
    which allocates and frees a few hundred MB per run, spent ~25% more system time
    (measured: 0.70-0.84 s against 0.44-0.57 s of sys for 10 bench runs, same user time).
    """
    import pyarrow as pa

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


def _discover_all(roots: list[Location], prefix: str | None = None,
                  skipped: list[list[str]] | None = None) -> tuple[list[RunDir], list[int]]:
    """The runs under `roots` (each once, named under `prefix` when given), and the indexes
    of the roots holding none; `skipped` gets, for each root, the list of those there whose
    names cannot be stored."""
    seen: set[str] = set()
    out: list[RunDir] = []
    empty: list[int] = []
    for i, top in enumerate(roots):
        found = False
        mine: list[str] = []
        if skipped is not None:
            skipped.append(mine)
        for rd in discover(top, mine):
            found = True
            if rd.run_id in seen:
                continue
            seen.add(rd.run_id)
            if rd.run_name == ".":
                rd.run_name = Path(rd.path).name
            elif rd.run_name.startswith("./"):  # the eval store of a run given itself
                rd.run_name = Path(rd.path).parent.name + rd.run_name[1:]
            rd.run_name = names.prefixed(prefix, rd.run_name)
            out.append(rd)
            pause_point("discover")
        if not found:
            empty.append(i)
    return out, empty


def _run_root(p: Location) -> Location:
    """A file of a run stands for its run (`run/metrics.jsonl` ingests `run/`): the run it
    belongs to is unambiguous, and shell completion and `find` name files as often as
    directories. Anything else is itself."""
    if p.is_file():
        run = run_holding(p)
        if run is not None:
            return run
    return p


def _holds_a_run(p: Location, skipped: list[str]) -> bool:
    """Whether `p` holds a run or an eval store (something to ingest); what the walk skipped
    for its name goes to `skipped` (all of it, when there is none)."""
    return next(iter(discover(p, skipped)), None) is not None


def _no_runs(given: list[str], roots: list[Location], skipped: list[str]) -> str:
    """`no runs under empty/: a run is …`, saying `is a file` for a file that is not a run's,
    and why when the runs there have paths that cannot be stored (`skipped`, as the walk of
    `roots` found them)."""
    under = " or ".join(escaped(g) for g in given)
    if skipped:
        return (f"no run under {under} can be stored: the paths of {len(skipped)} are not "
                f"UTF-8 (first: {escaped(skipped[0])}); rename the directories to ingest them")
    if len(given) == 1 and roots[0].is_file():
        return f"{under} is a file, not a run: {NO_RUNS_HINT}; pass a directory of runs"
    return f"no runs under {under}: {NO_RUNS_HINT}"
