"""Forgetting runs: every row of some runs removed from every table in one new snapshot.

Contract: `forget(root, run_ids, missing=False, dry_run=False)` takes the store's write lock
and, in one commit (the writer's: a manifest that appears whole or not at all), deletes the
rows of those runs from every table the snapshot lists that holds runs' rows (`runs`, every
data table and every summary table: each carries `run_id`; an eval store's tables belong to
the eval store, `eval_store_id`, not to the runs it evaluated, and are left as they are) and
drops their ledger entries, so a later ingest of the
same directory reads it afresh, as a new run. `missing=True` adds every run whose `runs.status`
is `missing` (its directory was gone at the last ingest that looked). The runs are looked up
under the lock in the newest snapshot: an id that is no run of it is left out (a run forgotten
meanwhile), and none at all publishes nothing. `dry_run` only says what would go: a reader
of the newest snapshot, it takes no lock and writes nothing. Files are
not deleted: the old snapshots still list them until a vacuum (`runstore compact
--vacuum-hours H`) reclaims them, as after any write, so a reader of an older snapshot is
never cut off.

A kill at any point (crashpoints: `locked`, `recover`, `forget`, `write`, `ledger`,
`publish`) leaves either the snapshot before (the next writer rolls back the unpublished Delta
versions) or the one after: never some tables without the runs and others with them.
`ForgetReport` lists the runs (`run_id, run_name, run_path, status`) and the rows removed
per table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..crashpoints import pause_point
from . import ledger as ledger_mod
from . import schema
from .manifest import Manifest, Root, read_manifest
from .snapshot import read_file, read_table, table_files
from .writer import rows_where, writer

RUN_COLUMNS = ("run_id", "run_name", "run_path", "status")


@dataclass
class ForgetReport:
    """What `forget` removed (or, with `dry_run`, would remove)."""

    runs: list[dict[str, Any]] = field(default_factory=list)  # RUN_COLUMNS, by run_name
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows removed
    dry_run: bool = False
    snapshot: int | None = None  # the snapshot published (None: nothing was)

    def summary(self) -> str:
        n = len(self.runs)
        what = f"{n} run{'s' if n != 1 else ''}"
        if not n:
            return "forgot nothing: no run matched"
        if self.dry_run:
            return f"would forget {what} (dry run: nothing changed)"
        total = sum(self.rows.values())
        return (f"forgot {what}: {total} rows removed in snapshot {self.snapshot} (the files "
                "stay until `runstore compact --vacuum-hours H` reclaims them)")


def forget(root: Root, run_ids: Sequence[str], *, missing: bool = False,
           dry_run: bool = False, lock_timeout: float = 60.0) -> ForgetReport:
    """Remove every row of `run_ids` (and, with `missing`, of every missing run) from every
    table in one snapshot; see the module docstring."""
    report = ForgetReport(dry_run=dry_run)
    if dry_run:  # a reader: the newest snapshot, no lock, nothing written
        m = read_manifest(root)
        if m is not None:
            _choose(root, m, set(run_ids), missing, report)
        return report
    with writer(root, lock_timeout=lock_timeout) as w:
        m = w.manifest
        assert m is not None
        ids = _choose(root, m, set(run_ids), missing, report)
        if not ids:
            return report
        for table in report.rows:
            w.delete(table, rows_where(run_id=ids))
        led = ledger_mod.read(root, m)
        kept = ledger_mod.Ledger([e for e in led.entries.values() if e.run_id not in set(ids)])
        pause_point("forget")
        report.snapshot = w.commit(ledger=kept.to_arrow()).seq
    return report


def _choose(root: Root, m: Manifest, wanted: set[str], missing: bool,
            report: ForgetReport) -> list[str]:
    """The run_ids to forget in snapshot `m` (`wanted` that are runs of it, and with
    `missing` every missing run); fills `report.runs` and, per table, the rows they hold."""
    runs = read_table(root, m, "runs").select(list(RUN_COLUMNS)).to_pylist()
    chosen = [r for r in runs if r["run_id"] in wanted or (missing and r["status"] == "missing")]
    report.runs = sorted(chosen, key=lambda r: (r["run_name"], r["run_id"]))
    ids = sorted({r["run_id"] for r in chosen})
    if ids:
        for table in sorted(m.tables):
            n = _count(root, m, table, ids) if _of_runs(table) else 0
            if n:
                report.rows[table] = int(n)
    return ids


def _of_runs(table: str) -> bool:
    """Whether `table`'s rows belong to runs (keyed by `run_id`), not to eval stores."""
    names = [c[0] for c in schema.TABLES.get(table, ())]
    return "run_id" in names and "eval_store_id" not in names


def _count(root: Root, m: Manifest, table: str, ids: list[str]) -> int:
    """Rows of `ids` in `table` of snapshot `m` (its `run_id` column alone is read)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    value_set = pa.array(ids, type=pa.string())
    n = 0
    for f in table_files(root, m, table):
        # Files of the Delta writer may hold string_view, which is_in has no kernel for.
        column = read_file(f, table, columns=["run_id"]).column("run_id").cast(pa.string())
        n += pc.sum(pc.is_in(column, value_set=value_set)).as_py() or 0
    return int(n)
