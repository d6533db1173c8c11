"""Repair: bring a damaged store back to a state every command accepts, keeping what it can.

Contract: `repair(root)` mends what damage from outside leaves (a disk error, a file deleted by
hand, a copy cut short); it takes the write lock, never touches a source, moves what it sets
aside to `_runstore/quarantine/<time>/` instead of deleting it, and publishes one new snapshot
(nothing at all when the store is healthy). The newest readable manifest is the truth:

1. Manifests that cannot be read are set aside; the newest readable one is the snapshot to
   mend. With none readable (or none left), one is rebuilt from the Delta tables as they are,
   and the ledger is rebuilt too (4).
2. Live files: every Parquet file the snapshot lists is read whole. One that is missing or
   unreadable is removed from its table (a corrupt one set aside). The sources whose rows it
   may have held (its Delta statistics bound their `source_id`s; without statistics, every
   source of a kind that writes the table) are marked `reread` in the ledger: the next ingest
   reads them whole and replaces what is left of their rows. Rows of sources that no longer
   exist cannot be read again: they are lost with the file.
3. Delta logs: a table whose log does not load, or whose state differs from the snapshot even
   after rolling back unpublished versions, gets a new log listing exactly the snapshot's live
   files (the files stay where they are; the old log is set aside). Its version restarts at 0.
4. Ledger: when it is missing or unreadable, it is rebuilt from the tables: one run entry per
   `runs` row and one entry per source found in the tables whose file still exists in its run,
   all marked `reread`, so the next ingest reads every source once more and replaces its rows
   (rows of sources no longer on disk are kept as they are).

`RepairReport.actions` says what was done, in words; `sources_to_reread` how many sources the
next ingest will read again.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa

from . import schema as schema_mod
from . import tables
from .discover import scan_run, source_id_for
from .errors import RunstoreError, StoreNotFound
from .fs import S3
from .ledger import RUN_KIND, Entry, Ledger
from .tables import LEDGERS, MANIFESTS, Manifest, writing

QUARANTINE = "_runstore/quarantine"


@dataclass
class RepairReport:
    """What `repair` did."""

    actions: list[str] = field(default_factory=list)
    sources_to_reread: int = 0
    snapshot: int | None = None  # the manifest published, None when nothing was wrong

    def summary(self) -> str:
        if not self.actions:
            return "the store is healthy: nothing to repair"
        tail = (f"; the next `runstore ingest` re-reads {self.sources_to_reread} source file"
                f"{'s' if self.sources_to_reread != 1 else ''}" if self.sources_to_reread
                else "")
        return f"repaired (snapshot {self.snapshot}){tail}"


def repair(root: Path, *, lock_timeout: float = 60.0) -> RepairReport:
    """Mend the store at `root` (see the module docstring)."""
    from .migrate import check_version

    if isinstance(root, S3):
        raise RunstoreError(
            f"runstore repair works on stores on local disk, not {root}: copy the store's "
            "prefix to a local directory (e.g. `aws s3 sync`), repair it there, and copy it "
            "back while nothing writes to it.")
    paths = tables.manifest_paths(root)
    tables_dir = root / "tables"
    if not paths and not tables_dir.is_dir():
        raise StoreNotFound(f"no store at {root}: nothing to repair")
    readable = _newest_readable(paths)
    if readable is not None:
        check_version(readable[1])  # a newer runstore's store: refuse before writing a byte
    tables.check_writable(root)
    lock = tables.Lock(root)
    lock.acquire(lock_timeout)
    try:
        return _Repair(root).run()
    finally:
        lock.release()


def _newest_readable(paths: list[tuple[int, Path]]) -> tuple[Path, Manifest] | None:
    for _, path in reversed(paths):
        m = _load_manifest(path)
        if m is not None:
            return path, m
    return None


def _load_manifest(path: Path) -> Manifest | None:
    try:
        m = Manifest.from_json(path.read_text())
    except (OSError, ValueError, TypeError):
        return None
    ok = isinstance(m.tables, dict) and all(
        isinstance(e, dict) and isinstance(e.get("version"), int)
        and isinstance(e.get("files"), list) for e in m.tables.values())
    return m if ok and isinstance(m.seq, int) else None


# Store table -> the file kinds that write it (from work.KIND_TABLES).
def _kinds_of(table: str) -> set[str]:
    from .work import KIND_TABLES

    return {k for k, ts in KIND_TABLES.items() if table in ts}


@dataclass
class _Lost:
    """A live file dropped from a table, and what its Delta statistics say it held."""

    table: str
    rel: str
    why: str
    bounds: tuple[Any, Any] | None  # (min, max) of source_id (run_id for `runs`), if known


class _Repair:
    def __init__(self, root: Path):
        self.root = root
        self.report = RepairReport()
        self.stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        self.lost: list[_Lost] = []
        self.rebuild_ledger = False

    # -- the steps ---------------------------------------------------------------------
    def run(self) -> RepairReport:
        tables.sweep_temporaries(self.root)
        base, top_seq = self._manifest()
        new_tables = {}
        for name in sorted(base.tables):
            new_tables[name] = self._table(name, base.tables[name])
        ledger = self._ledger(base, new_tables)
        changed = bool(self.report.actions)
        if not changed:
            return self.report
        seq = top_seq + 1
        ledger_rel = f"{LEDGERS}/{seq:08d}.parquet"
        with writing(self.root, ledger_rel):
            tables.write_new_parquet(self.root / ledger_rel, ledger.to_arrow())
        m = Manifest(seq=seq, tables=new_tables, ledger=ledger_rel,
                     schema_version=base.schema_version, migrations=base.migrations,
                     created_at=tables.utcnow().isoformat(), last_ingest=base.last_ingest,
                     settings=base.settings)
        with writing(self.root, f"{MANIFESTS}/{seq:08d}.json"):
            tables.publish_manifest(self.root, m)
        self.report.snapshot = seq
        self.report.sources_to_reread = sum(
            1 for e in ledger.entries.values() if e.kind != RUN_KIND and e.state.get("reread"))
        return self.report

    def _manifest(self) -> tuple[Manifest, int]:
        """The snapshot to mend and the highest manifest number ever used."""
        paths = tables.manifest_paths(self.root)
        top = max((seq for seq, _ in paths), default=0)
        for seq, path in reversed(paths):
            m = _load_manifest(path)
            if m is not None:
                return m, max(top, m.seq)
            self._set_aside(path, f"set aside the unreadable manifest {path.name}; falling back "
                                  "to the snapshot before it")
        return self._manifest_from_tables(), top

    def _manifest_from_tables(self) -> Manifest:
        from deltalake import DeltaTable

        from .migrate import available, latest_version

        found: dict[str, dict[str, Any]] = {}
        for name in sorted(os.listdir(self.root / "tables")):
            path = self.root / "tables" / name
            if name not in schema_mod.TABLES or not (path / "_delta_log").is_dir():
                continue
            try:
                dt = DeltaTable(str(path))
                found[name] = {"version": dt.version(), "files": tables.rel_files(self.root, dt)}
            except Exception:  # deltalake's own errors: no log to trust and no list of files
                self._set_aside(path / "_delta_log", f"table {name}: neither a snapshot nor "
                                                     "a readable log lists its files; it "
                                                     "restarts empty")
                found[name] = {"version": -1, "files": []}
        for name in schema_mod.TABLES:
            found.setdefault(name, {"version": -1, "files": []})
        self.rebuild_ledger = True
        self.report.actions.append("no readable manifest: rebuilt one from the Delta tables "
                                   f"(schema version {latest_version()} assumed)")
        migrations = [{"name": m.name, "applied_at": "", "doc": f"{m.doc} (record rebuilt by "
                                                                   "runstore repair)"}
                      for m in available()]
        return Manifest(seq=0, tables=found, ledger=None, schema_version=latest_version(),
                        migrations=migrations)

    def _table(self, name: str, entry: dict[str, Any]) -> dict[str, Any]:
        """Check a table's live files and its Delta log; the mended manifest entry."""
        path = self.root / "tables" / name
        files = list(entry["files"])
        bad = {}
        for rel in files:
            why = _read_whole(self.root / rel)
            if why:
                bad[rel] = why
        dt = self._load(path, entry)
        if bad:
            bounds = _bounds(dt, name, bad) if dt is not None else {}
            for rel, why in bad.items():
                self.lost.append(_Lost(name, rel, why, bounds.get(rel)))
                if why != "missing":
                    self._set_aside(self.root / rel, None)
                self.report.actions.append(f"table {name}: dropped {rel} ({why})")
        good = [rel for rel in files if rel not in bad]
        if dt is not None and bad:
            dt = self._drop_missing(path, good)
        if dt is None:
            dt = self._rebuild_log(name, path, good)
        return {"version": dt.version(), "files": tables.rel_files(self.root, dt)}

    def _load(self, path: Path, entry: dict[str, Any]) -> Any:
        """The table's Delta state, rolled back to `entry`; None when it cannot be made to
        list exactly the files the entry lists (or the log does not load)."""
        from deltalake import DeltaTable

        if not (path / "_delta_log").is_dir():
            return None
        want = sorted(entry["files"])
        try:
            dt = DeltaTable(str(path))
            if entry["version"] >= 0 and dt.version() > entry["version"] \
                    and tables.rel_files(self.root, dt) != want:
                dt.restore(entry["version"])
                dt = DeltaTable(str(path))
            files = tables.rel_files(self.root, dt)
        except Exception:  # deltalake's own error types: an unreadable or incomplete log
            return None
        if entry["version"] >= 0 and files != want:
            return None
        return dt

    def _drop_missing(self, path: Path, good: list[str]) -> Any:
        """Remove the files that no longer exist from the table's log (Delta's own repair);
        the table, or None when it then does not list exactly `good`."""
        from deltalake import DeltaTable

        try:
            DeltaTable(str(path)).repair()
            dt = DeltaTable(str(path))
        except Exception:  # deltalake's own error types: rebuild the log instead
            return None
        return dt if tables.rel_files(self.root, dt) == sorted(good) else None

    def _rebuild_log(self, name: str, path: Path, files: list[str]) -> Any:
        """A new Delta log for `path` listing exactly `files` (which stay in place)."""
        import pyarrow.parquet as pq
        from deltalake import DeltaTable, Schema
        from deltalake.transaction import AddAction, create_table_with_add_actions

        if (path / "_delta_log").exists():
            self._set_aside(path / "_delta_log", None)
        path.mkdir(parents=True, exist_ok=True)
        adds = []
        for rel in files:
            full = self.root / rel
            st = full.stat()
            n = pq.ParquetFile(full).metadata.num_rows
            adds.append(AddAction(os.path.relpath(full, path), st.st_size, {},
                                  int(st.st_mtime * 1000), True,
                                  json.dumps({"numRecords": n})))
        target = _file_schema(self.root, files) or schema_mod.schema(name)
        with writing(self.root, f"tables/{name}"):
            create_table_with_add_actions(str(path), Schema.from_arrow(target), adds,
                                          mode="error")
        self.report.actions.append(f"table {name}: rebuilt its Delta log from the snapshot "
                                   f"({len(files)} live file{'s' if len(files) != 1 else ''})")
        return DeltaTable(str(path))

    def _ledger(self, base: Manifest, new_tables: dict[str, dict[str, Any]]) -> Ledger:
        has_rows = any(e["files"] for e in new_tables.values())
        led: Ledger | None = None
        if base.ledger and not self.rebuild_ledger:
            path = self.root / base.ledger
            try:
                import pyarrow.parquet as pq

                led = Ledger.from_arrow(pq.ParquetFile(path).read())
            except (OSError, pa.ArrowException, ValueError, TypeError) as e:
                why = "missing" if not path.exists() else "unreadable"
                self.report.actions.append(f"the ingest ledger {base.ledger} is {why} "
                                           f"({tables.one_line(e, 120)})")
                if path.exists():
                    self._set_aside(path, None)
        elif not base.ledger and has_rows and not self.rebuild_ledger:
            self.report.actions.append("the snapshot lists no ingest ledger but holds rows")
        if led is None and (has_rows or self.rebuild_ledger):
            led = self._ledger_from_tables(new_tables)
        led = led or Ledger()
        self._mark_lost(led)
        return led

    def _ledger_from_tables(self, new_tables: dict[str, dict[str, Any]]) -> Ledger:
        import duckdb

        led = Ledger()
        view = Manifest(seq=0, tables=new_tables, ledger=None, schema_version=0)
        runs = tables.read_table(self.root, view, "runs").to_pylist()
        pairs: set[tuple[str, int]] = set()
        con = duckdb.connect(":memory:")
        try:
            for name in schema_mod.TABLES:
                files = tables.table_files(self.root, view, name)
                if name == "runs" or not files:
                    continue
                rows = con.execute("select distinct run_id, source_id from read_parquet(?)",
                                   [files]).fetchall()
                pairs.update((r, s) for r, s in rows if r is not None and s is not None)
        finally:
            con.close()
        by_run: dict[str, dict[int, tuple[str, str]]] = {}
        for row in runs:
            rid = row["run_id"]
            led.put(Entry(source_id=source_id_for(rid, ""), run_id=rid, rel_path="",
                          kind=RUN_KIND, state={"run_name": row["run_name"],
                                                "run_path": row["run_path"],
                                                "layout": row["layout"],
                                                "status": row["status"], "reread": True}))
            if row["run_path"] and os.path.isdir(row["run_path"]):
                rd = scan_run(row["run_path"], row["run_name"] or "")
                by_run[rid] = {source_id_for(rid, f.rel_path): (f.rel_path, f.kind)
                               for f in rd.files}
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
            kinds = _kinds_of(lost.table)
            for e in led.entries.values():
                if e.kind in kinds and _within(e.source_id, lost.bounds):
                    e.state["reread"] = True

    def _set_aside(self, path: Path, action: str | None) -> None:
        """Move `path` under the quarantine directory, keeping its place in the store."""
        dest = self.root / QUARANTINE / self.stamp / path.relative_to(self.root)
        with writing(self.root, QUARANTINE):
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), str(dest))
        if action:
            self.report.actions.append(action)


def _read_whole(path: Path) -> str | None:
    """None when every row group of a Parquet file reads; else why not."""
    import pyarrow.parquet as pq

    if not path.exists():
        return "missing"
    try:
        f = pq.ParquetFile(path)
        for i in range(f.num_row_groups):
            f.read_row_group(i)
    except (OSError, pa.ArrowException) as e:
        return f"unreadable: {tables.one_line(e, 120)}"
    return None


def _bounds(dt: Any, table: str, bad: dict[str, str]) -> dict[str, tuple[Any, Any]]:
    """(min, max) of `source_id` (`run_id` for `runs`) of each bad file, from the Delta log's
    statistics; files without statistics are left out (every source counts then)."""
    column = "run_id" if table == "runs" else "source_id"
    try:
        actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    except Exception:  # statistics are an optimisation: without them every source counts
        return {}
    out = {}
    for a in actions:
        rel = os.path.normpath(os.path.join("tables", table, a["path"]))
        lo, hi = a.get(f"min.{column}"), a.get(f"max.{column}")
        if rel in bad and lo is not None and hi is not None:
            out[rel] = (lo, hi)
    return out


def _within(value: Any, bounds: tuple[Any, Any] | None) -> bool:
    return bounds is None or bounds[0] <= value <= bounds[1]


def _file_schema(root: Path, files: list[str]) -> pa.Schema | None:
    """The schema the live files share (view types widened to plain ones), or None."""
    import pyarrow.parquet as pq

    if not files:
        return None
    s = pq.read_schema(root / files[0])
    fields = []
    for f in s:
        t = f.type
        if t == pa.string_view() or pa.types.is_large_string(t):
            t = pa.string()
        fields.append(pa.field(f.name, t, nullable=True))
    return pa.schema(fields)
