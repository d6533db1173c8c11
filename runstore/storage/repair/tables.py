"""Repair's table steps: every live file read whole and hashed, Delta logs checked and rebuilt."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...crashpoints import pause_point
from .. import integrity
from .. import schema as schema_mod
from ..failures import writing
from .report import Lost

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported on first use
    from ...lazy import pyarrow as pa


class TableSteps:
    """Steps 2 and 3 of the module docstring, as methods of the `Mender`."""

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
                self.lost.append(Lost(name, rel, why, bounds.get(rel)))
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
        live = self.root.relative_files(dt.file_uris())
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
            extra = set(self.root.relative_files(dt.file_uris())) - set(files)
        except Exception:  # deltalake's own error types: no readable old log to compare
            return
        if not extra:
            return
        bounds = _bounds(dt, name, {rel: "" for rel in extra})
        for rel in sorted(extra):
            self.lost.append(Lost(name, rel, "listed by the Delta log only", bounds.get(rel)))
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
                if self.root.relative_files(dt.file_uris()) == want:
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
                    and self.root.relative_files(dt.file_uris()) != want:
                dt.restore(entry["version"])
                pause_point("repair")
                dt = DeltaTable(str(path))
            files = self.root.relative_files(dt.file_uris())
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
        return dt if self.root.relative_files(dt.file_uris()) == sorted(good) else None

    def _rebuild_log(self, name: str, path: Path, files: list[str]) -> Any:
        """A new Delta log for `path` listing exactly `files` (which stay in place). It is
        written beside the table first and takes the old log's place only once whole: a
        write that fails (a full disk) leaves the old log as it was."""
        import pyarrow.parquet as pq
        from deltalake import DeltaTable, Schema
        from deltalake.transaction import AddAction, create_table_with_add_actions

        beside = path.parent / f".{path.name}.rebuilt-log"
        shutil.rmtree(beside, ignore_errors=True)  # one a killed repair left
        adds = []
        for rel in files:
            full = self.root / rel
            st = full.stat()
            n = pq.ParquetFile(full).metadata.num_rows
            adds.append(AddAction(os.path.relpath(full, path), st.st_size, {},
                                  int(st.st_mtime * 1000), True,
                                  json.dumps({"numRecords": n})))
        target = _file_schema(self.root, files) or schema_mod.schema(name)
        try:
            with writing(self.root, f"tables/{name}"):
                create_table_with_add_actions(str(beside), Schema.from_arrow(target), adds,
                                              mode="error")
            pause_point("repair")
            if os.path.lexists(path / "_delta_log"):
                self._set_aside(path / "_delta_log", None)
            path.mkdir(parents=True, exist_ok=True)
            os.rename(beside / "_delta_log", path / "_delta_log")
        finally:
            shutil.rmtree(beside, ignore_errors=True)
        pause_point("repair")
        self.report.actions.append(f"table {name}: rebuilt its Delta log from the snapshot "
                                   f"({len(files)} live file{'s' if len(files) != 1 else ''})")
        return DeltaTable(str(path))


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
