"""Forgetting runs and eval stores: every row of them removed from every table in one snapshot.

Contract: `forget(root, run_ids, eval_store_ids=(), missing=False, dry_run=False)` takes the
store's write lock and, in one commit (the writer's: a manifest that appears whole or not at
all), deletes the rows of those runs from every table the snapshot lists that holds runs' rows
(`runs`, every data table and every summary table: each carries `run_id`), the rows of those
eval stores from the eval store's tables (keyed by `eval_store_id`: forgetting a run leaves the
eval stores that evaluated it as they are, and forgetting an eval store leaves the runs), and
drops their ledger entries, so a later ingest of the same directory reads it afresh, as new.
`missing=True` adds every run whose `runs.status` is `missing` (its directory was gone at the
last ingest that looked) and every eval store whose directory is gone now (an eval store has
no `runs` row to hold a status; a moved one is ingested again under its new directory, and
this forgets the copy the old one left). Runs and eval stores are looked up under the lock in
the newest snapshot: an id that is none of it is left out (forgotten meanwhile), and none at
all publishes nothing. `eval_stores(ledger)` lists the eval stores a snapshot's ledger holds
(`analysis.runs.resolve_eval_stores` finds the one each pattern names). `dry_run` only
says what would go: a reader of the newest snapshot, it takes no lock and writes nothing.
Files are not deleted: the old snapshots still list them until a vacuum (`runstore compact
--vacuum-hours H`) reclaims them, as after any write, so a reader of an older snapshot is
never cut off.

A kill at any point (crashpoints: `locked`, `recover`, `forget`, `write`, `ledger`,
`publish`) leaves either the snapshot before (the next writer rolls back the unpublished Delta
versions) or the one after: never some tables without the runs and others with them.
`ForgetReport` lists the runs (`run_id, run_name, run_path, status`), the eval stores
(`EVAL_COLUMNS`) and the rows removed per table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ..crashpoints import pause_point
from . import ledger as ledger_mod
from . import schema
from .location import gone
from .manifest import Manifest, Root, read_manifest
from .snapshot import read_file, read_table, table_files
from .writer import rows_where, writer

RUN_COLUMNS = ("run_id", "run_name", "run_path", "status")
EVAL_COLUMNS = ("eval_store_id", "name", "eval_store")  # id, name in the tree, directory


@dataclass
class ForgetReport:
    """What `forget` removed (or, with `dry_run`, would remove)."""

    runs: list[dict[str, Any]] = field(default_factory=list)  # RUN_COLUMNS, by run_name
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows removed
    dry_run: bool = False
    snapshot: int | None = None  # the snapshot published (None: nothing was)
    eval_stores: list[dict[str, Any]] = field(default_factory=list)  # EVAL_COLUMNS, by name

    def summary(self) -> str:
        what = " and ".join(_counted(n, thing) for n, thing in
                            ((len(self.runs), "run"), (len(self.eval_stores), "eval store"))
                            if n or (thing == "run" and not self.eval_stores))
        if not self.runs and not self.eval_stores:
            return "forgot nothing: no run matched"
        if self.dry_run:
            return f"would forget {what} (dry run: nothing changed)"
        total = sum(self.rows.values())
        return (f"forgot {what}: {total} rows removed in snapshot {self.snapshot} (the files "
                "stay until `runstore compact --vacuum-hours H` reclaims them)")


def _counted(n: int, thing: str) -> str:
    return f"{n} {thing}{'s' if n != 1 else ''}"


def forget(root: Root, run_ids: Sequence[str], *, eval_store_ids: Sequence[str] = (),
           missing: bool = False, dry_run: bool = False,
           lock_timeout: float = 60.0) -> ForgetReport:
    """Remove every row of `run_ids` and `eval_store_ids` (and, with `missing`, of every
    missing run and gone eval store) from every table in one snapshot; see the module."""
    report = ForgetReport(dry_run=dry_run)
    wanted = set(run_ids), set(eval_store_ids)
    if dry_run:  # a reader: the newest snapshot, no lock, nothing written
        m = read_manifest(root)
        if m is not None:
            _choose(root, m, ledger_mod.read(root, m), *wanted, missing, report)
        return report
    with writer(root, lock_timeout=lock_timeout) as w:
        m = w.manifest
        assert m is not None
        led = ledger_mod.read(root, m)
        ids, evals = _choose(root, m, led, *wanted, missing, report)
        if not ids and not evals:
            return report
        for table in report.rows:
            if _of_runs(table):
                w.delete(table, rows_where(run_id=ids))
            else:
                w.delete(table, rows_where(eval_store_id=evals))
        dropped = set(ids) | set(evals)
        kept = ledger_mod.Ledger([e for e in led.entries.values() if e.run_id not in dropped])
        pause_point("forget")
        report.snapshot = w.commit(ledger=kept.to_arrow()).seq
    return report


def _choose(root: Root, m: Manifest, led: ledger_mod.Ledger, wanted: set[str],
            wanted_evals: set[str], missing: bool,
            report: ForgetReport) -> tuple[list[str], list[str]]:
    """The run_ids and eval_store_ids to forget in snapshot `m` (its ledger `led`: those
    wanted that it holds; with `missing`, every missing run and gone eval store); fills
    `report.runs`, `report.eval_stores` and, per table, the rows they hold."""
    runs = read_table(root, m, "runs").select(list(RUN_COLUMNS)).to_pylist()
    chosen = [r for r in runs if r["run_id"] in wanted or (missing and r["status"] == "missing")]
    report.runs = sorted(chosen, key=lambda r: (r["run_name"], r["run_id"]))
    ids = sorted({r["run_id"] for r in chosen})
    stores = eval_stores(led) if wanted_evals or missing else []
    report.eval_stores = [s for s in stores if s["eval_store_id"] in wanted_evals
                          or (missing and gone(s["eval_store"]))]
    evals = sorted(s["eval_store_id"] for s in report.eval_stores)
    for table in sorted(m.tables):
        column, these = ("run_id", ids) if _of_runs(table) else ("eval_store_id", evals)
        n = _count(root, m, table, column, these) if these and _keyed(table, column) else 0
        if n:
            report.rows[table] = int(n)
    return ids, evals


def eval_stores(led: ledger_mod.Ledger) -> list[dict[str, Any]]:
    """The eval stores a snapshot's ledger `led` holds (`EVAL_COLUMNS`, by name): an eval
    store with no eval run yet is one too."""
    return sorted(({"eval_store_id": e.run_id, "name": e.state.get("run_name", ""),
                    "eval_store": e.state.get("run_path", "")}
                   for e in led.entries.values() if e.kind == ledger_mod.EVAL_STORE_KIND),
                  key=lambda s: (s["name"], s["eval_store_id"]))


def _of_runs(table: str) -> bool:
    """Whether `table`'s rows belong to runs (keyed by `run_id`), not to eval stores."""
    return _keyed(table, "run_id") and not _keyed(table, "eval_store_id")


def _keyed(table: str, column: str) -> bool:
    return any(c[0] == column for c in schema.TABLES.get(table, ()))


def _count(root: Root, m: Manifest, table: str, column: str, ids: list[str]) -> int:
    """Rows of `ids` in `table` of snapshot `m` (its `column` alone is read)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    value_set = pa.array(ids, type=pa.string())
    n = 0
    for f in table_files(root, m, table):
        # Files of the Delta writer may hold string_view, which is_in has no kernel for.
        values = read_file(f, table, columns=[column]).column(column).cast(pa.string())
        n += pc.sum(pc.is_in(values, value_set=value_set)).as_py() or 0
    return int(n)
