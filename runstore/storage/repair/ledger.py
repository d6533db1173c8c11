"""Repair's ledger step: the ledger read and checked, rebuilt from the tables when it cannot be,
and the sources of every lost file marked to be read again."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ...errors import StoreCorrupt, one_line
from .. import schema as schema_mod
from ..ledger import EVAL_STORE_KIND, RUN_KIND, Entry, Ledger, LedgerDamaged, source_id_for
from ..manifest import Manifest
from ..snapshot import open_parquet, read_table, table_files
from .tables import _within

# The table's files (bound as the one parameter); `hive_partitioning` off, as the views read
# them (query/connect.py: a `key=value` directory above the store is no column).
_SCAN = "read_parquet(?, hive_partitioning = false)"

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported on first use
    from ...lazy import pyarrow as pa


class LedgerSteps:
    """Step 4 of the module docstring, as methods of the `Mender`."""

    def _ledger(self, base: Manifest, new_tables: dict[str, dict[str, Any]]) -> Ledger:
        has_rows = any(e["files"] for e in new_tables.values())
        led: Ledger | None = None
        if base.ledger and not self.rebuild_ledger:
            path = self.root / base.ledger
            try:
                led = Ledger.from_arrow(open_parquet(str(path)).read(), str(path))
            except (OSError, pa.ArrowException, StoreCorrupt) as e:
                why = ("missing" if not os.path.lexists(path)
                       else f"damaged ({e.why})" if isinstance(e, LedgerDamaged)
                       else f"unreadable ({one_line(e, 160)})")
                self._found(f"the ingest ledger {base.ledger} is {why}",
                            f"the ingest ledger {base.ledger} is {why}")
                if os.path.lexists(path) and not self.check:
                    self._set_aside(path, None)
        elif not base.ledger and has_rows and not self.rebuild_ledger:
            self._found("the snapshot lists no ingest ledger but holds rows",
                        "the snapshot lists no ingest ledger but holds rows")
        if self.check:
            return led or Ledger()
        if led is None and (has_rows or self.rebuild_ledger):
            led = self._ledger_from_tables(new_tables)
        led = led or Ledger()
        self._mark_lost(led)
        return led

    def _ledger_from_tables(self, new_tables: dict[str, dict[str, Any]]) -> Ledger:
        import duckdb

        led = Ledger()
        view = Manifest(seq=0, tables=new_tables, ledger=None, schema_version=0)
        runs = read_table(self.root, view, "runs").to_pylist()
        pairs: set[tuple[str, int]] = set()
        stores: dict[str, str] = {}  # eval store id -> its directory
        con = duckdb.connect(":memory:")
        try:
            for name in schema_mod.TABLES:
                files = table_files(self.root, view, name)
                if name == "runs" or not files:
                    continue
                # An eval store's rows are keyed by its id, as a run's are by its run_id.
                key = ("eval_store_id" if any(c == "eval_store_id" for c, _, _
                                              in schema_mod.TABLES[name]) else "run_id")
                rows = con.execute(f"select distinct {key}, source_id from {_SCAN}",
                                   [files]).fetchall()
                pairs.update((r, s) for r, s in rows if r is not None and s is not None)
                if name == "eval_runs":
                    stores.update(con.execute(
                        f"select distinct eval_store_id, eval_store from {_SCAN}",
                        [files]).fetchall())
        finally:
            con.close()
        by_run: dict[str, dict[int, tuple[str, str]]] = {}
        for sid, path in sorted(stores.items()):
            if not sid or not path:
                continue
            led.put(Entry(source_id=source_id_for(sid, ""), run_id=sid, rel_path="",
                          kind=EVAL_STORE_KIND, state={"run_name": os.path.basename(path),
                                                       "run_path": path}))
            if os.path.isdir(path):
                by_run[sid] = {source_id_for(sid, rel): (rel, kind) for rel, kind
                               in self.sources.files(path, os.path.basename(path))}
        for row in runs:
            rid = row["run_id"]
            led.put(Entry(source_id=source_id_for(rid, ""), run_id=rid, rel_path="",
                          kind=RUN_KIND, state={"run_name": row["run_name"],
                                                "run_path": row["run_path"],
                                                "layout": row["layout"],
                                                "status": row["status"], "reread": True}))
            if row["run_path"] and os.path.isdir(row["run_path"]):
                by_run[rid] = {source_id_for(rid, rel): (rel, kind) for rel, kind
                               in self.sources.files(row["run_path"], row["run_name"] or "")}
        kept = 0
        for rid, sid in sorted(pairs):
            known = by_run.get(rid, {}).get(sid)
            if known is None:
                kept += 1
                continue
            led.put(Entry(source_id=sid, run_id=rid, rel_path=known[0], kind=known[1],
                          state={"reread": True}))
        self.report.actions.append(
            f"rebuilt the ingest ledger from the tables ({len(runs)} runs); every source still "
            "on disk will be read again and replace its rows"
            + (f"; rows of {kept} sources no longer on disk are kept as they are" if kept else ""))
        return led

    def _mark_lost(self, led: Ledger) -> None:
        """Mark for re-reading every source whose rows a dropped file may have held."""
        for lost in self.lost:
            if lost.table == "runs":
                for e in led.runs():
                    if _within(e.run_id, lost.bounds):
                        e.state["reread"] = True
                continue
            kinds = self.sources.writers(lost.table)
            for e in led.entries.values():
                if e.kind in kinds and _within(e.source_id, lost.bounds):
                    e.state["reread"] = True
