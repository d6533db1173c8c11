"""`Writing`: the `Store` methods that change a store, each under its write lock.

Contract: `check_writable` says before any work whether a writer could write the store;
`ingest` → `runstore.ingest`; `compact`, `migrate`, `set_setting` →
`storage.writer`; `forget` → `storage.forget` (its RUNs resolved by `analysis.runs`); `repair` → `storage.repair` (`repair(check=True)` only reads and takes no
lock). Each takes the store's write lock for its duration and publishes at most one snapshot
at a time, so a reader sees the state before or after a commit, never half of one.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..errors import UsageError
from ..storage import settings as settings_mod
from .base import StoreBase

if TYPE_CHECKING:
    from ..ingest.report import IngestReport, Progress
    from ..storage.forget import ForgetReport
    from ..storage.repair import RepairReport
    from ..storage.writer import CompactReport


class Writing(StoreBase):
    """Ingest, compact, repair, migrate and settings."""

    def check_writable(self) -> None:
        """Say now, as every writer would before writing anything, when this store cannot be
        written at its location (a `UsageError` or `IOFailure` naming why); for a new local
        store, its directory is made."""
        from ..storage.location import location

        location(self.path).check_writable()

    def ingest(self, paths: Iterable[str | os.PathLike[str]] | str, *,
               progress: "Progress | None" = None, on_warning: Any = None,
               lock_timeout: float = 60.0, require_runs: bool = True,
               interrupts: Any = None, prefix: str | None = None,
               signals: Sequence[str] = ("SIGINT",),
               exit_at_once: bool = False) -> "IngestReport":
        """Ingest every run under `paths` (incrementally); returns what was done.

        `prefix` names the runs new to the store `PREFIX/<path relative to the path given>`,
        so trees of the same layout (two clusters' `runs/`) get names of their own; a run
        keeps the name it was first ingested under. A name this ingest gives to a second run
        is a warning (both runs are kept, told apart by run_id, shown as `name [run_id
        prefix]`).

        A path that is a file of a run ingests that run. Paths that hold no run raise
        `NoRuns` (and create no store), unless `require_runs=False` (watching: runs may
        appear later); one without runs beside others with runs is a warning.

        Ctrl-C (SIGINT, in the main thread) publishes what was read whole, then raises
        KeyboardInterrupt whose `report` attribute is the IngestReport of what was kept; a
        second Ctrl-C stops at once. `signals` names the signals handled so (`runstore
        ingest`: SIGINT and SIGTERM); with `exit_at_once` the second one ends the process
        with status 130 (as safe as `kill -9`) instead of raising. `interrupts` replaces that
        handling (`ingest.interrupts`, already entered)."""
        from ..ingest.interrupts import Interrupts
        from ..ingest.run import ingest

        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        if interrupts is None:
            with Interrupts(tuple(signals), exit_at_once=exit_at_once) as own:
                return ingest(self.path, list(paths), progress=progress,
                              on_warning=on_warning, lock_timeout=lock_timeout,
                              require_runs=require_runs, interrupts=own, prefix=prefix)
        return ingest(self.path, list(paths), progress=progress, on_warning=on_warning,
                      lock_timeout=lock_timeout, require_runs=require_runs,
                      interrupts=interrupts, prefix=prefix)

    def forget(self, runs: "str | Iterable[str]" = (), *, eval_stores: Iterable[str] = (),
               missing: bool = False, dry_run: bool = False,
               lock_timeout: float = 60.0) -> "ForgetReport":
        """Remove every row of `runs` (each RUN names one run: a run_id or unique prefix, a
        run_name, the run's directory, or a GLOB matching one run; see `resolve`), of
        `eval_stores` (each names one eval store: its id or a unique prefix, its name, its
        directory, or a GLOB matching one) and, with `missing`, of every run whose directory
        was gone at the last ingest and every eval store whose directory is gone now, from
        every table, in one new snapshot; their ledger entries go too, so ingesting the same
        directory again reads it afresh. `dry_run` only reports what would go. The files
        stay on disk until a vacuum (`compact(vacuum_hours=...)`). Returns a `ForgetReport`
        (`runs`, `eval_stores`, `rows` removed per table, `summary()`).

        Example:
            >>> store.forget(["sl/*"], dry_run=True).summary()
            'would forget 1 run (dry run: nothing changed)'
        """
        from ..analysis.runs import resolve, resolve_eval_stores
        from ..storage import ledger
        from ..storage.forget import eval_stores as stores_of
        from ..storage.forget import forget

        none = isinstance(runs, (tuple, list)) and not runs  # the default: no RUN named
        no_evals = isinstance(eval_stores, (tuple, list)) and not eval_stores
        if none and no_evals and not missing:
            raise UsageError("name the runs to forget (RUN...) or the eval stores "
                             "(eval_stores=, --eval-store), or pass missing=True / --missing")
        m = self.manifest()
        # `resolve` checks what was given (a pattern or a list of them; None, a number or
        # bytes are refused naming it) and resolves each to one run.
        ids = [] if none else [r.run_id for r in resolve(self, runs)]  # type: ignore[arg-type]
        evals = [] if no_evals else resolve_eval_stores(
            stores_of(ledger.read(self.path, m)), eval_stores)  # type: ignore[arg-type]
        return forget(self.path, ids, eval_store_ids=evals, missing=missing, dry_run=dry_run,
                      lock_timeout=lock_timeout)

    def compact(self, *, vacuum_hours: float | None = None,
                lock_timeout: float = 60.0) -> "CompactReport":
        """Rewrite every table into few files and publish the snapshot; with `vacuum_hours`,
        then delete the files no kept snapshot lists and none has listed for that many hours
        (at least `vacuum.READER_GRACE_S`, for queries still reading an older snapshot).
        Returns each table's file count before (`files_before`) and what the vacuum deleted
        (`vacuum`, a `vacuum.VacuumReport`)."""
        from ..storage.writer import CompactReport, writer
        from .inputs import vacuum_hours as checked_hours

        hours = None if vacuum_hours is None else checked_hours(vacuum_hours)

        self.manifest()
        with writer(self.path, lock_timeout=lock_timeout) as w:
            report = CompactReport(w.compact())
            if hours is not None:
                report.vacuum = w.vacuum(hours)
        return report

    def repair(self, *, check: bool = False, lock_timeout: float = 60.0) -> "RepairReport":
        """Mend a damaged store (missing, corrupt or bit-rotten files, a broken Delta log,
        manifest, ledger or lock); returns what was done. With `check=True`, change nothing:
        read every live file in full and report what is damaged (`report.problems`). See
        docs/reliability.md.

        Example:
            >>> store.repair(check=True).problems
            []
        """
        from ..ingest.discover import source_files
        from ..ingest.normalize.registry import kinds_writing
        from ..storage.repair import Sources
        from ..storage.repair import check as check_store
        from ..storage.repair import repair

        sources = Sources(writers=kinds_writing, files=source_files)
        defaults = settings_mod.DEFAULT_SETTINGS
        if check:
            return check_store(self.path, sources, settings=defaults)
        return repair(self.path, sources, lock_timeout=lock_timeout, settings=defaults)

    def pending_migrations(self) -> list[Any]:
        """The migrations this store has not applied yet, in order (`name`, `doc`); the
        applied ones are in `manifest().migrations`. Reads only.

        Example:
            >>> store.pending_migrations()
            []
        """
        from ..storage.versions import pending

        return list(pending(self.manifest().schema_version))

    def migrate(self, *, lock_timeout: float = 60.0) -> list[str]:
        """Apply pending schema migrations; returns their names."""
        from ..storage import migrate as migrate_mod
        from ..storage.writer import writer

        self.manifest()
        with writer(self.path, lock_timeout=lock_timeout) as w:
            return [m.name for m in migrate_mod.apply(w)]

    def set_setting(self, name: str, value: float | str, *, lock_timeout: float = 60.0) -> None:
        """Store a setting (e.g. `kl_threshold`) that every later query sees by default.

        A query can still override it with a param of the same name. Known settings:
        `kl_threshold` (a number; 0.01 unless set).
        """
        from ..storage.writer import writer

        value = settings_mod.coerce(name, value)
        self.manifest()
        with writer(self.path, lock_timeout=lock_timeout) as w:
            assert w.manifest is not None
            w.commit(ledger=None, settings={**w.manifest.settings, name: value})
