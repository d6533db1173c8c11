"""Repair: bring a damaged store back to a state every command accepts, keeping what it can.

Contract: `repair(root)` mends what damage from outside leaves (a disk error, bit rot, a file
deleted or edited by hand, a copy cut short); it takes the write lock, never touches a source,
moves what it sets aside to `_runstore/quarantine/<time>/` instead of deleting it, and publishes
one new snapshot (nothing at all when the store is healthy). `check(root)` (`runstore repair
--check`) finds the same damage and changes nothing. The newest readable manifest is the truth:

0. Places: a lock path that is not a regular file, and a file where a directory of the store
   belongs (`_runstore/manifests`, `_runstore/ledger`, `tables`, …), are set aside.
1. Manifests that cannot be read, or whose snapshot fields (numbers, tables, files, ledger) are
   invalid, are set aside; the newest good one is the snapshot to mend. Fields that do not
   change what the snapshot holds are reset in place: a setting of the wrong type is dropped
   (its default applies), invalid checksums are recomputed, an invalid migrations list is
   rebuilt from the schema version. With no good manifest left, one is rebuilt from the Delta
   tables as they are, and the ledger is rebuilt too (4).
2. Live files: every Parquet file the snapshot lists is read whole and hashed. One that is
   missing, unreadable, or whose bytes do not match the content hash recorded when it was
   written (bit rot, an edit) is removed from its table (a damaged one set aside). The sources
   whose rows it may have held (its Delta statistics bound their `source_id`s; without
   statistics, every source of a kind that writes the table) are marked `reread` in the
   ledger: the next ingest reads them whole and replaces what is left of their rows. Rows of
   sources that no longer exist cannot be read again: they are lost with the file. Live files
   with no recorded hash (written by an older runstore) get one.
3. Delta logs: a table whose log does not load, or whose state differs from the snapshot even
   after rolling back unpublished versions, gets a new log listing exactly the snapshot's live
   files (the files stay where they are; the old log is set aside). Its version restarts at 0.
4. Ledger: when it is missing, unreadable or not a ledger, it is rebuilt from the tables: one
   run entry per `runs` row and one entry per source found in the tables whose file still
   exists in its run, all marked `reread`, so the next ingest reads every source once more and
   replaces its rows (rows of sources no longer on disk are kept as they are).

Every step before the publication changes nothing a reader uses, so a kill at any point leaves
the previous snapshot answering; running `repair` again finishes the work.

`RepairReport.actions` says what was done (or, for `check`, would be), in words; `problems` the
damage found; `sources_to_reread` how many sources the next ingest will read again.
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

from . import integrity
from . import schema as schema_mod
from . import writer as tables
from . import vacuum as vacuum_mod
from ..ingest.discover import scan_run, source_id_for
from ..errors import RunstoreError, StoreCorrupt, StoreNotFound
from .location import S3
from ..ingest.ledger import RUN_KIND, Entry, Ledger, LedgerDamaged
from .manifest import bad_settings, check_core, mend
from .writer import LEDGERS, MANIFESTS, Manifest, pause_point, writing

QUARANTINE = "_runstore/quarantine"
# Places of the store that must be directories when they exist.
DIRECTORIES = ("tables", MANIFESTS, LEDGERS, vacuum_mod.RETIRED)


@dataclass
class RepairReport:
    """What `repair` did (or `check` found)."""

    actions: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # damage found, one line each
    sources_to_reread: int = 0
    snapshot: int | None = None  # the manifest published, None when nothing was wrong
    checked_files: int = 0
    checked_bytes: int = 0
    check: bool = False

    def summary(self) -> str:
        if self.check:
            if self.problems:
                n = len(self.problems)
                return (f"{n} problem{'s' if n != 1 else ''} found; run `runstore repair` to "
                        "mend the store")
            return (f"the store is healthy: {self.checked_files} live file"
                    f"{'s' if self.checked_files != 1 else ''} "
                    f"({self.checked_bytes / 1e6:.1f} MB) read whole, each matching the "
                    "content hash recorded for it")
        if not self.actions:
            return "the store is healthy: nothing to repair"
        tail = (f"; the next `runstore ingest` re-reads {self.sources_to_reread} source file"
                f"{'s' if self.sources_to_reread != 1 else ''}" if self.sources_to_reread
                else "")
        return f"repaired (snapshot {self.snapshot}){tail}"


def repair(root: Path, *, lock_timeout: float = 60.0,
           settings: dict[str, Any] | None = None) -> RepairReport:
    """Mend the store at `root` (see the module docstring); `settings`: the default of each
    known setting (a numeric one must hold a number)."""
    _open(root, "runstore repair")
    tables.check_writable(root)
    fix = _Repair(root, settings or {})
    fix.lock_path()  # a directory in its place would stop the lock below
    lock = tables.Lock(root)
    lock.acquire(lock_timeout)
    try:
        return fix.run()
    finally:
        lock.release()


def check(root: Path, *, settings: dict[str, Any] | None = None) -> RepairReport:
    """Find what `repair` would mend, changing nothing and taking no lock: every live file of
    the newest snapshot is read whole and hashed (`report.problems`, empty when healthy)."""
    _open(root, "runstore repair --check")
    return _Repair(root, settings or {}, check=True).run()


def _open(root: Path, what: str) -> None:
    from .migrate import check_version

    if isinstance(root, S3):
        raise RunstoreError(
            f"{what} works on stores on local disk, not {root}: copy the store's prefix to a "
            "local directory (e.g. `aws s3 sync`), repair it there, and copy it back while "
            "nothing writes to it.")
    paths = tables.manifest_paths(root)
    if not paths and not (root / "tables").is_dir():
        raise StoreNotFound(f"no store at {root}: nothing to repair")
    for seq, path in reversed(paths):
        m = _load_manifest(path, seq)
        if m is not None:
            check_version(m)  # a newer runstore's store: refuse before writing a byte
            return


def _load_manifest(path: Path, seq: int) -> Manifest | None:
    try:
        data = json.loads(path.read_text())
        check_core(data, seq=seq)
    except (OSError, ValueError):
        return None
    return mend(data)[0]


# Store table -> the file kinds that write it (from work.KIND_TABLES).
def _kinds_of(table: str) -> set[str]:
    from ..ingest.process import KIND_TABLES

    return {k for k, ts in KIND_TABLES.items() if table in ts}


@dataclass
class _Lost:
    """A live file dropped from a table, and what its Delta statistics say it held."""

    table: str
    rel: str
    why: str
    bounds: tuple[Any, Any] | None  # (min, max) of source_id (run_id for `runs`), if known


class _Repair:
    def __init__(self, root: Path, settings: dict[str, Any], *, check: bool = False):
        self.root = root
        self.settings = settings
        self.check = check
        self.report = RepairReport(check=check)
        self.stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        self.lost: list[_Lost] = []
        self.rebuild_ledger = False

    def _found(self, problem: str, action: str | None = None) -> None:
        """Damage found: a problem for `check`; for `repair`, `action` says what it did."""
        self.report.problems.append(problem)
        if action and not self.check:
            self.report.actions.append(action)

    # -- the steps ---------------------------------------------------------------------
    def lock_path(self) -> None:
        lock = self.root / tables.LOCK
        if os.path.lexists(lock) and (os.path.islink(lock) or not os.path.isfile(lock)):
            kind = "a directory" if os.path.isdir(lock) else "not a regular file"
            self._found(f"the write lock {tables.LOCK} is {kind}",
                        f"the write lock {tables.LOCK} was {kind}: set it aside")
            if not self.check:
                self._set_aside(lock, None)

    def run(self) -> RepairReport:
        if self.check:
            self.lock_path()
        else:
            tables.sweep_temporaries(self.root)
        for rel in DIRECTORIES:
            p = self.root / rel
            if os.path.lexists(p) and not p.is_dir():
                self._found(f"{rel} is a file, not a directory",
                            f"{rel} was a file, not a directory: set it aside")
                if not self.check:
                    self._set_aside(p, None)
        base, top_seq = self._manifest()
        self._unlisted_tables(base)
        new_tables = {}
        for name in sorted(base.tables):
            new_tables[name] = self._table(name, base.tables[name])
        ledger = self._ledger(base, new_tables)
        if self.check or not self.report.actions:
            return self.report
        seq = top_seq + 1
        ledger_rel = f"{LEDGERS}/{seq:08d}.parquet"
        with writing(self.root, ledger_rel):
            tables.write_new_parquet(self.root / ledger_rel, ledger.to_arrow())
        pause_point("repair")
        m = Manifest(seq=seq, tables=new_tables, ledger=ledger_rel,
                     schema_version=base.schema_version, migrations=base.migrations,
                     created_at=tables.utcnow().isoformat(), last_ingest=base.last_ingest,
                     settings=base.settings)
        # A file listed again (a fallback to an older snapshot) must not keep the time it
        # was first unlisted: vacuum finds every unlisted file afresh.
        with writing(self.root, vacuum_mod.RETIRED):
            vacuum_mod.forget(self.root)
        with writing(self.root, f"{MANIFESTS}/{seq:08d}.json"):
            tables.publish_manifest(self.root, m)
        pause_point("publish")
        self.report.snapshot = seq
        self.report.sources_to_reread = sum(
            1 for e in ledger.entries.values() if e.kind != RUN_KIND and e.state.get("reread"))
        return self.report

    def _manifest(self) -> tuple[Manifest, int]:
        """The snapshot to mend and the highest manifest number ever used. Every manifest
        that cannot be used is set aside (an older one too: vacuum stops at any it cannot
        read, since it might list files still needed)."""
        paths = tables.manifest_paths(self.root)
        top = max((seq for seq, _ in paths), default=0)
        chosen: Manifest | None = None
        for seq, path in reversed(paths):
            try:
                data = json.loads(path.read_text())
                check_core(data, seq=seq)
            except (OSError, ValueError) as e:
                why = ("a directory, not a file" if isinstance(e, IsADirectoryError)
                       else tables.one_line(e, 160))
                later = ("; falling back to the snapshot before it" if chosen is None
                         else " (an older snapshot)")
                self._found(f"the manifest {path.name} cannot be used: {why}",
                            f"set aside the unreadable manifest {path.name} ({why}){later}")
                if not self.check:
                    self._set_aside(path, None)
                continue
            if chosen is None:
                chosen = self._mend(path.name, data)
        if chosen is not None:
            return chosen, max(top, chosen.seq)
        return self._manifest_from_tables(), top

    def _mend(self, name: str, data: dict[str, Any]) -> Manifest:
        """The manifest with its fields that do not change what it holds made valid."""
        from .migrate import available

        m, reset = mend(data)
        for key, value in bad_settings(m.settings, self.settings):
            reset[f"settings.{key}"] = f"settings.{key} is {value!r}, not a number"
            del m.settings[key]
        for key, why in reset.items():
            self._found(f"the manifest {name}: {why}",
                        f"manifest {name}: {why}; reset {key}")
        if "migrations" in reset:
            m.migrations = [{"name": mig.name, "applied_at": "",
                             "doc": f"{mig.doc} (record rebuilt by runstore repair)"}
                            for mig in available() if mig.number <= m.schema_version]
        if not m.created_at:
            m.created_at = tables.utcnow().isoformat()
        return m

    def _unlisted_tables(self, base: Manifest) -> None:
        """Add to `base` the known tables it does not list but whose Delta log exists (an
        entry lost from the manifest), as their logs have them."""
        from deltalake import DeltaTable

        for name in schema_mod.TABLES:
            path = self.root / "tables" / name
            if name in base.tables or not (path / "_delta_log").is_dir():
                continue
            try:
                dt = DeltaTable(str(path))
                entry = {"version": dt.version(), "files": tables.rel_files(self.root, dt)}
            except Exception:  # deltalake's own errors: `_table` rebuilds the log
                entry = {"version": -1, "files": []}
            self._found(f"the snapshot does not list table {name}",
                        f"table {name}: missing from the snapshot; taken from its Delta log "
                        f"({len(entry['files'])} files)")
            base.tables[name] = entry

    def _manifest_from_tables(self) -> Manifest:
        from deltalake import DeltaTable

        from .migrate import available, latest_version

        found: dict[str, dict[str, Any]] = {}
        self._found("no readable manifest", None)
        for name in sorted(os.listdir(self.root / "tables")):
            path = self.root / "tables" / name
            if name not in schema_mod.TABLES or not (path / "_delta_log").is_dir():
                continue
            try:
                dt = DeltaTable(str(path))
                found[name] = {"version": dt.version(), "files": tables.rel_files(self.root, dt)}
            except Exception:  # deltalake's own errors: no log to trust and no list of files
                if not self.check:
                    self._set_aside(path / "_delta_log", f"table {name}: neither a snapshot "
                                                         "nor a readable log lists its files; "
                                                         "it restarts empty")
                found[name] = {"version": -1, "files": []}
        for name in schema_mod.TABLES:
            found.setdefault(name, {"version": -1, "files": []})
        self.rebuild_ledger = True
        if not self.check:
            self.report.actions.append("no readable manifest: rebuilt one from the Delta "
                                       f"tables (schema version {latest_version()} assumed)")
        migrations = [{"name": m.name, "applied_at": "", "doc": f"{m.doc} (record rebuilt by "
                                                                   "runstore repair)"}
                      for m in available()]
        return Manifest(seq=0, tables=found, ledger=None, schema_version=latest_version(),
                        migrations=migrations, created_at=tables.utcnow().isoformat())

    def _table(self, name: str, entry: dict[str, Any]) -> dict[str, Any]:
        """Check a table's live files and its Delta log; the mended manifest entry."""
        path = self.root / "tables" / name
        files = list(entry["files"])
        sums = dict(entry.get("checksums") or {})
        bad = {}
        for rel in files:
            why = integrity.verify(self.root, rel, sums.get(rel))
            if why:
                bad[rel] = why
            else:
                self.report.checked_files += 1
                self.report.checked_bytes += (self.root / rel).stat().st_size
        if self.check:
            for rel, why in bad.items():
                self._found(f"table {name}: {rel} is {why}")
            if not self._log_lists(path, entry):
                self._found(f"table {name}: its Delta log does not list the snapshot's files "
                            f"at version {entry['version']}")
            unhashed = sum(1 for f in files if f not in sums and f not in bad)
            if unhashed:
                self.report.actions.append(f"table {name}: would record the content hashes of "
                                           f"{unhashed} files that have none")
            return entry
        dt = self._load(path, entry)
        if bad:
            bounds = _bounds(dt, name, bad) if dt is not None else {}
            for rel, why in bad.items():
                self.lost.append(_Lost(name, rel, why, bounds.get(rel)))
                if why != "missing":
                    self._set_aside(self.root / rel, None)
                self._found(f"table {name}: {rel} is {why}",
                            f"table {name}: dropped {rel} ({why})")
        good = [rel for rel in files if rel not in bad]
        if dt is not None and bad:
            dt = self._drop_missing(path, good)
            pause_point("repair")
        if dt is None:
            self._log_only(name, path, files)
            dt = self._rebuild_log(name, path, good)
        live = tables.rel_files(self.root, dt)
        hashed = {f: sums[f] for f in live if f in sums}
        unhashed = [f for f in live if f not in hashed]
        for f in unhashed:
            hashed[f] = integrity.digest(self.root, f)
        if unhashed:
            self.report.actions.append(f"table {name}: recorded the content hashes of "
                                       f"{len(unhashed)} live files that had none")
        return {"version": dt.version(), "files": live, "checksums": hashed}

    def _log_only(self, name: str, path: Path, files: list[str]) -> None:
        """Before a log is rebuilt from the snapshot: the files the old log lists and the
        snapshot does not (a list edited by hand, a lost log entry) leave the table, so the
        sources whose rows they may hold are read again (re-reading replaces, never adds)."""
        from deltalake import DeltaTable

        try:
            dt = DeltaTable(str(path))
            extra = set(tables.rel_files(self.root, dt)) - set(files)
        except Exception:  # deltalake's own error types: no readable old log to compare
            return
        if not extra:
            return
        bounds = _bounds(dt, name, {rel: "" for rel in extra})
        for rel in sorted(extra):
            self.lost.append(_Lost(name, rel, "listed by the Delta log only", bounds.get(rel)))
        self.report.actions.append(
            f"table {name}: its Delta log also listed {len(extra)} file"
            f"{'s' if len(extra) != 1 else ''} the snapshot does not; the sources whose rows "
            "they may hold will be read again")

    def _log_lists(self, path: Path, entry: dict[str, Any]) -> bool:
        """Whether the table's Delta log lists the snapshot's files, at the snapshot's version
        (a writer may be ahead of it meanwhile) or at its newest (as writers accept it)."""
        from deltalake import DeltaTable

        if not (path / "_delta_log").is_dir():
            return not entry["files"]
        want = sorted(entry["files"])
        for version in ((entry["version"],) if entry["version"] >= 0 else ()) + (None,):
            try:
                dt = DeltaTable(str(path), version=version)
                if tables.rel_files(self.root, dt) == want:
                    return True
            except Exception:  # deltalake's own error types: an unreadable or incomplete log
                continue
        return False

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
                pause_point("repair")
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

        if os.path.lexists(path / "_delta_log"):
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
        pause_point("repair")
        self.report.actions.append(f"table {name}: rebuilt its Delta log from the snapshot "
                                   f"({len(files)} live file{'s' if len(files) != 1 else ''})")
        return DeltaTable(str(path))

    def _ledger(self, base: Manifest, new_tables: dict[str, dict[str, Any]]) -> Ledger:
        has_rows = any(e["files"] for e in new_tables.values())
        led: Ledger | None = None
        if base.ledger and not self.rebuild_ledger:
            path = self.root / base.ledger
            try:
                led = Ledger.from_arrow(tables.open_parquet(str(path)).read(), str(path))
            except (OSError, pa.ArrowException, StoreCorrupt) as e:
                why = ("missing" if not os.path.lexists(path)
                       else f"damaged ({e.why})" if isinstance(e, LedgerDamaged)
                       else f"unreadable ({tables.one_line(e, 160)})")
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
        pause_point("repair")
        if action:
            self.report.actions.append(action)


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
