"""Schema migrations: numbered files in `migrations/`, applied in order, recorded in the store.

Contract: each `migrations/NNNN_name.py` has a one-line docstring and `migrate(ctx)`; the
store's schema version is the number of the last applied migration, and each applied one is
recorded in the manifest with its `applied_at`. `pending(manifest)` lists what would run
(read-only); `apply(writer)` runs the pending ones under the write lock and publishes one
snapshot. A store whose version is newer than the newest migration known here is refused
("upgrade runstore"). Applied migrations are never edited or renumbered.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .errors import StoreVersionError
from .resources import migrations_dir
from .fs import storage_options
from .tables import Manifest, Writer, delta_table, pause_point, utcnow, writing

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

        dt = delta_table(self.writer.root / "tables" / name)
        dt.alter.add_columns([Field(c, PrimitiveType(t)) for c, t in columns])
        dt = delta_table(self.writer.root / "tables" / name)
        self.tables[name] = {"version": dt.version(), "files": self.writer._rel_files(dt)}


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
