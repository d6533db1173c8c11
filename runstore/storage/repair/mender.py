"""The steps of a repair in order (`Mender.run`): places, manifests, tables, ledger, publish."""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...crashpoints import pause_point
from ...errors import one_line
from .. import ledger as ledger_file
from ..ledger import RUN_KIND
from .. import schema as schema_mod
from .. import vacuum as vacuum_mod
from ..failures import writing
from ..lock import LOCK
from ..manifest import (LEDGERS, MANIFESTS, Manifest, check_core, manifest_paths, mend,
                        publish_manifest, utcnow)
from ..settings import bad_settings
from ..versions import available, latest_version
from .ledger import LedgerSteps
from .report import DIRECTORIES, QUARANTINE, RepairReport, Sources, Lost
from .tables import TableSteps


class Mender(TableSteps, LedgerSteps):
    """One repair (or check) of one store: the steps of the module docstring in order."""

    def __init__(self, root: Path, sources: Sources, settings: dict[str, Any], *,
                 check: bool = False):
        self.root = root
        self.sources = sources
        self.settings = settings
        self.check = check
        self.report = RepairReport(check=check)
        self.stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        self.lost: list[Lost] = []
        self.rebuild_ledger = False

    def _found(self, problem: str, action: str | None = None) -> None:
        """Damage found: a problem for `check`; for `repair`, `action` says what it did."""
        self.report.problems.append(problem)
        if action and not self.check:
            self.report.actions.append(action)

    # -- the steps ---------------------------------------------------------------------
    def lock_path(self) -> None:
        lock = self.root / LOCK
        if os.path.lexists(lock) and (os.path.islink(lock) or not os.path.isfile(lock)):
            kind = "a directory" if os.path.isdir(lock) else "not a regular file"
            self._found(f"the write lock {LOCK} is {kind}",
                        f"the write lock {LOCK} was {kind}: set it aside")
            if not self.check:
                self._set_aside(lock, None)

    def run(self) -> RepairReport:
        if self.check:
            self.lock_path()
        else:
            self.root.sweep_temporaries((MANIFESTS, LEDGERS, vacuum_mod.RETIRED))
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
            ledger_file.write(self.root, ledger_rel, ledger.to_arrow())
        pause_point("repair")
        m = Manifest(seq=seq, tables=new_tables, ledger=ledger_rel,
                     schema_version=base.schema_version, migrations=base.migrations,
                     created_at=utcnow().isoformat(), last_ingest=base.last_ingest,
                     settings=base.settings)
        # A file listed again (a fallback to an older snapshot) must not keep the time it
        # was first unlisted: vacuum finds every unlisted file afresh.
        with writing(self.root, vacuum_mod.RETIRED):
            vacuum_mod.forget(self.root)
        with writing(self.root, f"{MANIFESTS}/{seq:08d}.json"):
            publish_manifest(self.root, m)
        pause_point("publish")
        self.report.snapshot = seq
        self.report.sources_to_reread = sum(
            1 for e in ledger.entries.values() if e.kind != RUN_KIND and e.state.get("reread"))
        return self.report

    def _manifest(self) -> tuple[Manifest, int]:
        """The snapshot to mend and the highest manifest number ever used. Every manifest
        that cannot be used is set aside (an older one too: vacuum stops at any it cannot
        read, since it might list files still needed)."""
        paths = manifest_paths(self.root)
        top = max((seq for seq, _ in paths), default=0)
        chosen: Manifest | None = None
        for seq, path in reversed(paths):
            try:
                data = json.loads(path.read_text())
                check_core(data, seq=seq)
            except (OSError, ValueError) as e:
                why = ("a directory, not a file" if isinstance(e, IsADirectoryError)
                       else one_line(e, 160))
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
            m.created_at = utcnow().isoformat()
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
                entry = {"version": dt.version(), "files": self.root.relative_files(dt.file_uris())}
            except Exception:  # deltalake's own errors: `_table` rebuilds the log
                entry = {"version": -1, "files": []}
            self._found(f"the snapshot does not list table {name}",
                        f"table {name}: missing from the snapshot; taken from its Delta log "
                        f"({len(entry['files'])} files)")
            base.tables[name] = entry

    def _manifest_from_tables(self) -> Manifest:
        from deltalake import DeltaTable

        found: dict[str, dict[str, Any]] = {}
        self._found("no readable manifest", None)
        for name in sorted(os.listdir(self.root / "tables")):
            path = self.root / "tables" / name
            if name not in schema_mod.TABLES or not (path / "_delta_log").is_dir():
                continue
            try:
                dt = DeltaTable(str(path))
                found[name] = {"version": dt.version(), "files": self.root.relative_files(dt.file_uris())}
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
                        migrations=migrations, created_at=utcnow().isoformat())

    def _set_aside(self, path: Path, action: str | None) -> None:
        """Move `path` under the quarantine directory, keeping its place in the store."""
        dest = self.root / QUARANTINE / self.stamp / path.relative_to(self.root)
        with writing(self.root, QUARANTINE):
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), str(dest))
        pause_point("repair")
        if action:
            self.report.actions.append(action)
