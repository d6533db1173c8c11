"""Schema migrations: numbered files in `migrations/`, applied in order, recorded in the store.

Contract: each `migrations/NNNN_name.py` has a one-line docstring and `migrate(ctx)`; the
store's schema version is the number of the last applied migration, and each applied one is
recorded in the manifest with its `applied_at`. `pending(manifest)` lists what would run
(read-only); `apply(writer)` runs the pending ones under the write lock and publishes one
snapshot. A store whose version is newer than the newest migration known here is refused
("upgrade runstore"). Applied migrations are never edited or renumbered. What a migration does
through `MigrationContext` can run again on the same store (a migration killed before its
snapshot was published runs again on the next `migrate`): columns already in a table's log are
not added twice, and a table the snapshot already has is kept as it is.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import integrity
from ..errors import StoreVersionError
from ..resources import migrations_dir
from .location import storage_options
from .writer import Manifest, Writer, delta_table, pause_point, utcnow, writing

NAME = re.compile(r"^(\d{4})_(\w+)\.py$")


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    doc: str
    path: Path

    def load(self) -> Callable[[Any], None]:
        spec = importlib.util.spec_from_file_location(f"runstore_migration_{self.number:04d}", self.path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.migrate


def available() -> list[Migration]:
    out = []
    for path in sorted(migrations_dir().glob("*.py")):
        m = NAME.match(path.name)
        if not m:
            continue
        doc = ""
        text = path.read_text()
        doc_match = re.match(r'\s*"""(.*?)"""', text, re.S)
        if doc_match:
            doc = doc_match.group(1).strip().splitlines()[0]
        out.append(Migration(int(m.group(1)), path.stem, doc, path))
    return out


def latest_version() -> int:
    migs = available()
    return migs[-1].number if migs else 0


def check_version(manifest: Manifest) -> None:
    latest = latest_version()
    if manifest.schema_version > latest:
        raise StoreVersionError(
            f"this store has schema version {manifest.schema_version} but this runstore only "
            f"knows up to {latest}: upgrade runstore (pip install -U runstore)."
        )


def pending(manifest: Manifest | None) -> list[Migration]:
    done = manifest.schema_version if manifest else 0
    return [m for m in available() if m.number > done]


class MigrationContext:
    """What a migration may do to the store."""

    def __init__(self, writer: Writer):
        self.writer = writer
        self.tables: dict[str, dict[str, Any]] = {}

    def create_table(self, name: str, columns: list[tuple[str, str]]) -> None:
        from deltalake import DeltaTable

        path = self.writer.root / "tables" / name
        known = self.writer.manifest.tables.get(name) if self.writer.manifest else None
        if known is not None:
            # The snapshot has the table already (a schema_version set back by hand, then
            # repaired): keep it as it is rather than fail on it, or lose its files.
            self.tables[name] = known
            return
        import pyarrow as pa

        from .schema import arrow_type

        schema = pa.schema([(c, arrow_type(t)) for c, t in columns])
        dt = DeltaTable.create(str(path), schema=schema, mode="error",
                               storage_options=storage_options(path))
        self.tables[name] = {"version": dt.version(), "files": []}
        pause_point("migrate")

    def add_columns(self, name: str, columns: list[tuple[str, str]]) -> None:
        from deltalake import Field
        from deltalake.schema import PrimitiveType

        before = self.tables.get(name) or (self.writer.manifest.tables.get(name)
                                           if self.writer.manifest else None)
        dt = delta_table(self.writer.root / "tables" / name)
        # A migration killed after this alter and before its snapshot was published runs
        # again: the columns are then in the log already.
        have = {f.name for f in dt.schema().fields}
        todo = [Field(c, PrimitiveType(t)) for c, t in columns if c not in have]
        if todo:
            dt.alter.add_columns(todo)
        pause_point("migrate")
        dt = delta_table(self.writer.root / "tables" / name)
        self.tables[name] = integrity.entry(self.writer.root, dt, before)


def apply(writer: Writer) -> list[Migration]:
    """Run every pending migration; publish one snapshot. Returns what ran."""
    manifest = writer.manifest
    if manifest is not None:
        check_version(manifest)
    todo = pending(manifest)
    if not todo:
        return []
    base = manifest or Manifest(seq=0, tables={}, ledger=None, schema_version=0)
    ctx = MigrationContext(writer)
    applied = list(base.migrations)
    for mig in todo:
        with writing(writer.root, f"tables (migration {mig.name})"):
            mig.load()(ctx)
        applied.append({"name": mig.name, "applied_at": utcnow().isoformat(), "doc": mig.doc})
    tables = {**base.tables, **ctx.tables}
    m = Manifest(seq=base.seq + 1, tables=tables, ledger=base.ledger,
                 schema_version=todo[-1].number, migrations=applied,
                 created_at=utcnow().isoformat(), last_ingest=base.last_ingest,
                 settings=base.settings)
    writer.publish(m)
    return todo
