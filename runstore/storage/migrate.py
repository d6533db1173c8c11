"""Applying schema migrations: what a migration may do to the store, and running the pending ones.

Contract: `apply(writer)` runs every pending migration (`versions.pending`) under the writer's
lock and publishes one snapshot recording each with its `applied_at`; a store whose version
is newer than this runstore knows is refused first. A migration does its work through a
`MigrationContext`: `create_table(name, columns)` and `add_columns(name, columns)`, columns
given as (name, type name) pairs with the type names of `schema.TYPES` (`string`, `int64`,
`float64`, `bool`, `list<string>`, `timestamp[us, tz=UTC]`, ...), which the context turns into
pyarrow types for new tables and into deltalake's types for added columns, and
`fill_table(name, columns, rows)`, a new table written with the rows `rows(ctx)` computes from
the snapshot the migration starts from (`table_files(name)` lists a table's live files,
`read_file(path, columns)` reads one, as those columns; a summary of another table, say,
computed by `query(sql, tables)`, SQL over Arrow tables such as the migration's frozen copy
of the statement that made the summary at its version) — the migration names such a
table in its module's `FILLS` list, so that after a kill readers ignore the unlisted table and
the next writer deletes it (`versions.filled_by_pending`) — and
`rewrite_table(name, rows)`, an existing table's rows replaced by the Arrow table `rows(ctx)`
computes from the snapshot's, cast to every column the table's log has then (a column a
migration just added, filled for the old rows, say). What a migration
does through it can run again on the same store (a migration killed before its snapshot was
published runs again on the next `migrate`): columns already in a table's log are not added
twice, and a table the snapshot already has is kept as it is. A table the run makes (created,
or filled with no rows) is put on disk when a migration first writes rows to it, else when the
last migration is done, with the columns it has by then: a new store's tables are one Delta
commit each, not one per migration (the schema is the same either way). A snapshot with no
live file (a new store's) has no row to compute from: its fills and rewrites are not computed,
as each would give no row (tests/storage/test_migrations.py runs them to hold that). Applied
migrations are never edited or renumbered.
"""

from __future__ import annotations

from typing import Any

from ..crashpoints import pause_point
from . import integrity
from .failures import writing
from .manifest import Manifest, utcnow
from .schema import arrow_type, delta_type
from .versions import Migration, check_version, pending
from .writer import Writer, delta_table


# Tables created at once by `finish`: each is a small Delta commit, made in Rust with the GIL
# released, so threads pay off on a local disk too (a new store's 19: bench/bench_new_store.py).
CREATED_AT_ONCE = 4


class MigrationContext:
    """What a migration may do to the store."""

    def __init__(self, writer: Writer):
        self.writer = writer
        self.tables: dict[str, dict[str, Any]] = {}
        # No live file in the snapshot (a new store): every fill and rewrite gives no row.
        self.blank = not holds_rows(writer.manifest)
        # Tables this run made that hold no row yet, with their columns so far: none is on
        # disk until a migration writes rows to it or the run ends (`finish`), so a new
        # store's tables are each created once, with their final columns.
        self._empty: dict[str, list[tuple[str, str]]] = {}

    def create_table(self, name: str, columns: list[tuple[str, str]]) -> None:
        known = self.writer.manifest.tables.get(name) if self.writer.manifest else None
        if known is not None:
            # The snapshot has the table already (a schema_version set back by hand, then
            # repaired): keep it as it is rather than fail on it, or lose its files.
            self.tables[name] = known
            return
        self._empty[name] = list(columns)
        self.tables[name] = {"version": None, "files": []}

    def _create(self, name: str) -> None:
        """Create table `name` of `_empty` on disk, with its columns so far."""
        from deltalake import DeltaTable
        import pyarrow as pa

        path = self.writer.root / "tables" / name
        schema = pa.schema([(c, arrow_type(t)) for c, t in self._empty.pop(name)])
        dt = DeltaTable.create(str(path), schema=schema, mode="error",
                               storage_options=path.storage_options())
        self.tables[name] = {"version": dt.version(), "files": []}
        pause_point("migrate")

    def finish(self) -> None:
        """Create on disk every table the run made that no migration wrote rows to, in
        threads (`CREATED_AT_ONCE`, more where the location's requests pay off)."""
        self.writer.root.each(self._create, list(self._empty), at_least=CREATED_AT_ONCE)

    def table_files(self, name: str) -> list[str]:
        """The live Parquet files of table `name` in the snapshot being migrated, as the
        migrations applied before this one in the same run left them (a table an earlier
        one rewrote is read as rewritten: 0008 rewrites the `runs` rows 0006 rewrote)."""
        from .snapshot import table_files

        if name in self.tables:
            return [str(self.writer.root / f) for f in self.tables[name]["files"]]
        manifest = self.writer.manifest
        return table_files(self.writer.root, manifest, name) if manifest else []

    def read_file(self, path: str, columns: list[tuple[str, str]] | None = None) -> Any:
        """One live Parquet file of the store as Arrow (its checksums verified on read); with
        `columns` ((name, type name) pairs, as `create_table` takes), exactly those columns of
        those types (`snapshot.conform`: the `string_view` columns of a file a Delta delete
        rewrote read as strings)."""
        import pyarrow as pa

        from .snapshot import conform, open_parquet

        part = open_parquet(path).read()
        if columns is None:
            return part
        return conform(part, pa.schema([(c, arrow_type(t)) for c, t in columns]))

    def query(self, sql: str, tables: dict[str, Any]) -> Any:
        """The Arrow result of `sql` over the Arrow tables `tables` (each visible under its
        key), in a DuckDB that reads nothing else (`arrow_sql`): how a migration runs the
        copy of a statement it keeps, frozen as it was at its version."""
        from .arrow_sql import run

        return run(sql, tables)

    def fill_table(self, name: str, columns: list[tuple[str, str]], rows: Any) -> None:
        """Create table `name` holding `rows(self)` (an Arrow table of these columns). Run
        again after a kill, it writes the table afresh; a snapshot that has the table keeps it."""
        import pyarrow as pa
        from deltalake import write_deltalake

        known = self.writer.manifest.tables.get(name) if self.writer.manifest else None
        if known is not None:
            self.tables[name] = known
            return
        if self.blank:  # no row to compute from: created with the rest (`finish`)
            self.create_table(name, columns)
            return
        schema = pa.schema([(c, arrow_type(t)) for c, t in columns])
        data = rows(self).cast(schema)
        if data.num_rows == 0:  # created with the rest (`finish`)
            self.create_table(name, columns)
            return
        path = self.writer.root / "tables" / name
        write_deltalake(str(path), data, mode="overwrite", schema_mode="overwrite",
                        storage_options=path.storage_options())
        pause_point("migrate")
        self.tables[name] = integrity.entry(self.writer.root, delta_table(path), None)

    def rewrite_table(self, name: str, rows: Any) -> None:
        """Replace every row of table `name` by `rows(self)`, an Arrow table with the
        table's columns (those earlier migrations added too; one it lacks is written as
        nulls); a column the table's log does not have is an error. Killed before the snapshot was published, the writer's
        recovery rolls the table back and the migration runs again from the same rows."""
        import pyarrow as pa
        from deltalake import write_deltalake

        from .layout import writer_properties

        if self.blank:  # no row before, none after
            return
        data = rows(self)
        if name in self._empty:
            if data.num_rows == 0:
                _within(name, data, [c for c, _ in self._empty[name]])
                return  # no row before, none after
            self._create(name)
        before = self.tables.get(name) or (self.writer.manifest.tables.get(name)
                                           if self.writer.manifest else None)
        path = self.writer.root / "tables" / name
        dt = delta_table(path)  # the overwrite below moves it to the version it commits
        target = pa.schema(dt.schema().to_arrow())
        _within(name, data, target.names)
        for f in target:  # a column no stored file has yet: nulls, as queries read it
            if f.name not in data.column_names:
                data = data.append_column(f, pa.nulls(data.num_rows, f.type))
        data = data.select(target.names).cast(target)
        write_deltalake(dt, data, mode="overwrite", writer_properties=writer_properties(name))
        pause_point("migrate")
        # The rows were read from the files this replaced: had any been damaged, the new
        # files' hashes must not vouch for what came of them.
        integrity.check_removed(self.writer.root, name, before,
                                self.writer.root.relative_files(dt.file_uris()))
        self.tables[name] = integrity.entry(self.writer.root, dt, before)

    def add_columns(self, name: str, columns: list[tuple[str, str]]) -> None:
        from deltalake import Field

        if name in self._empty:
            have = {c for c, _ in self._empty[name]}
            self._empty[name] += [(c, t) for c, t in columns if c not in have]
            return
        before = self.tables.get(name) or (self.writer.manifest.tables.get(name)
                                           if self.writer.manifest else None)
        dt = delta_table(self.writer.root / "tables" / name)
        # A migration killed after this alter and before its snapshot was published runs
        # again: the columns are then in the log already.
        have = {f.name for f in dt.schema().fields}
        todo = [Field(c, delta_type(t), nullable=True) for c, t in columns if c not in have]
        if todo:
            dt.alter.add_columns(todo)  # moves `dt` to the version it commits
        pause_point("migrate")
        self.tables[name] = integrity.entry(self.writer.root, dt, before)


def holds_rows(manifest: Manifest | None) -> bool:
    """Whether the snapshot `manifest` describes has a live file in any table."""
    return manifest is not None and any(t.get("files") for t in manifest.tables.values())


def _within(name: str, data: Any, columns: list[str]) -> None:
    """A ValueError when the rows `data` for table `name` have a column it lacks."""
    extra = sorted(set(data.column_names) - set(columns))
    if extra:
        raise ValueError(f"rows for table {name} have columns it lacks: {extra}")


def apply(writer: Writer) -> list[Migration]:
    """Run every pending migration; publish one snapshot. Returns what ran."""
    manifest = writer.manifest
    if manifest is not None:
        check_version(manifest.schema_version)
    todo = pending(manifest.schema_version if manifest else 0)
    if not todo:
        return []
    base = manifest or Manifest(seq=0, tables={}, ledger=None, schema_version=0)
    ctx = MigrationContext(writer)
    applied = list(base.migrations)
    for mig in todo:
        with writing(writer.root, f"tables (migration {mig.name})"):
            mig.load()(ctx)
        applied.append({"name": mig.name, "applied_at": utcnow().isoformat(), "doc": mig.doc})
    with writing(writer.root, "tables (migrations)"):
        ctx.finish()
    tables = {**base.tables, **ctx.tables}
    m = Manifest(seq=base.seq + 1, tables=tables, ledger=base.ledger,
                 schema_version=todo[-1].number, migrations=applied,
                 created_at=utcnow().isoformat(), last_ingest=base.last_ingest,
                 settings=base.settings)
    writer.publish(m)
    return todo
