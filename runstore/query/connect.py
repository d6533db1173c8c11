"""Query connections: a sandboxed in-memory DuckDB over one snapshot's tables and views.

Contract: `Database(root, manifest, params, allow_read)` is an in-memory DuckDB connection
that DuckDB's own sandbox (`sandbox.confine`) restricts, before anything is registered on it,
to reading the snapshot's live Parquet files (and the paths in `allow_read`), with its
configuration locked. `ensure(names)` then creates what a query reads (every table and view
for None), each once: a public table is a view over exactly the Parquet files the snapshot
lists (DuckDB's own Parquet scan, never a directory glob; columns a later migration added
read as typed nulls), `settings` a view of the store's settings (e.g. `kl_threshold`),
overridable per query (a param named like a setting overrides it; a numeric setting refuses a
non-numeric value), and every `sql/*.sql` view after what it depends on. Everything is a
view, nothing a base table, so no statement can change what a later query sees. `cursor()`
gives one query its own cursor (`sandbox.cursor`). `connect()` returns such a connection with
everything created. No DuckDB database file is ever opened, so readers never block writers
or each other. Building one imports neither pyarrow nor sqlglot unless a table has no file
yet or lacks a column (their types come from `schema`).

`views()` lists the canned views parsed from their files (`parse_view`), in dependency
order; what each depends on comes from DuckDB's parser (`sqlcheck.references`).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ..storage import schema as schema_mod
from . import sandbox, guard as sqlcheck
from ..storage import writer as tables
from ..errors import QueryError
from ..storage.location import S3
from ..resources import sql_dir
from .guard import identifier

DEFAULT_SETTINGS: dict[str, float] = {"kl_threshold": 0.01}
SETTINGS = "settings"


@dataclass(frozen=True)
class View:
    """One canned view, parsed from its `.sql` file."""

    name: str
    description: str
    columns: tuple[tuple[str, str], ...]  # (column, comment)
    body: str  # the SELECT statement
    path: Path
    depends: tuple[str, ...]  # tables and views it reads, sorted


_COLUMN_DOC = re.compile(r"^--\s*@column\s+([A-Za-z_][A-Za-z0-9_]*)\s*:?\s*(.*)$")


def parse_view(path: Path, parser: Any = None) -> View:
    """A view file: leading `--` purpose lines, `-- @column name: comment` lines, a SELECT.

    `parser` is a DuckDB connection to read its dependencies with (a private one if None).
    """
    lines = path.read_text().splitlines()
    purpose: list[str] = []
    columns: list[tuple[str, str]] = []
    body_start = 0
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped.startswith("--"):
            if stripped:
                body_start = i
                break
            continue
        m = _COLUMN_DOC.match(stripped)
        if m:
            columns.append((m.group(1), m.group(2).strip()))
        elif not columns:
            purpose.append(stripped[2:].strip())
    body = "\n".join(lines[body_start:]).strip().rstrip(";")
    depends = sqlcheck.references(parser if parser is not None else _parser(), body)
    return View(path.stem, " ".join(p for p in purpose if p).strip(), tuple(columns), body, path,
                tuple(sorted(depends)))


_parsers: list[Any] = []


def _parser() -> Any:
    """A DuckDB connection that only parses (confined and holding nothing), made once."""
    if not _parsers:
        import duckdb

        con = duckdb.connect(":memory:")
        sandbox.confine(con, [])
        _parsers.append(con)
    return _parsers[0]


# Parsed views by file, and the ordered list by directory: the files ship with the package
# and do not change while it runs. A connection parses only the views its queries read.
_PARSED: dict[Path, View] = {}
_VIEWS: dict[str, tuple[View, ...]] = {}
_VIEWS_LOCK = threading.Lock()


def _view(path: Path, parser: Any = None) -> View:
    with _VIEWS_LOCK:
        if path not in _PARSED:
            _PARSED[path] = parse_view(path, parser)
        return _PARSED[path]


def _view_files(directory: str) -> dict[str, Path]:
    return {p.stem: p for p in sorted(Path(directory).glob("*.sql"))}


def _views_in(directory: str, parser: Any = None) -> tuple[View, ...]:
    if directory not in _VIEWS:
        _VIEWS[directory] = _ordered({name: _view(path, parser)
                                      for name, path in _view_files(directory).items()})
    return _VIEWS[directory]


def _ordered(views: dict[str, View]) -> tuple[View, ...]:
    ordered: list[View] = []
    done: set[str] = set()

    def visit(name: str, trail: tuple[str, ...]) -> None:
        if name in done or name not in views:
            return
        if name in trail:
            raise ValueError(f"views depend on each other in a cycle: {' -> '.join(trail + (name,))}")
        for dep in views[name].depends:
            visit(dep, trail + (name,))
        done.add(name)
        ordered.append(views[name])

    for name in views:
        visit(name, ())
    return tuple(ordered)


def views(parser: Any = None) -> tuple[View, ...]:
    """Every canned view, in dependency order."""
    return _views_in(str(sql_dir()), parser)


def settings_for(manifest: tables.Manifest, params: dict[str, Any] | None) -> dict[str, Any]:
    """The settings one query sees: the defaults, the store's, then its params' overrides."""
    settings = {**DEFAULT_SETTINGS, **(manifest.settings or {})}
    for k, v in (params or {}).items():
        if k in DEFAULT_SETTINGS:
            if isinstance(DEFAULT_SETTINGS[k], float) and setting_value(v)[0] is None:
                raise QueryError(f"setting {k} must be a number, got {v!r} "
                                 f"(e.g. --param {k}={DEFAULT_SETTINGS[k]})")
            settings[k] = v
    return settings


class Database:
    """One sandboxed in-memory DuckDB over one snapshot; tables and views made on demand."""

    def __init__(self, root: tables.Root, manifest: tables.Manifest,
                 params: dict[str, Any] | None = None, *, allow_read: Iterable[str] | None = None):
        import duckdb

        self.root, self.manifest = root, manifest
        self.settings = settings_for(manifest, params)
        self.files = {name: tables.table_files(root, manifest, name) for name in schema_mod.TABLES}
        extra_files, extra_dirs = sandbox.allowances(allow_read)
        self.con = duckdb.connect(":memory:")
        try:
            if isinstance(root, S3):
                # The DuckDB wheel has no httpfs offline: s3:// files are read through fsspec.
                self.con.register_filesystem(root.filesystem())
            sandbox.confine(self.con, [f for fs in self.files.values() for f in fs] + extra_files,
                            extra_dirs)
        except BaseException:
            self.con.close()
            raise
        self._view_files = _view_files(str(sql_dir()))
        self._made: set[str] = set()
        self._lock = threading.Lock()

    def close(self) -> None:
        self.con.close()

    def cursor(self) -> Any:
        return sandbox.cursor(self.con)

    def view(self, name: str) -> View:
        return _view(self._view_files[name], self.con)

    def needs(self, names: Iterable[str] | None) -> list[str]:
        """What reading `names` needs created, in creation order (everything for None or
        for a name that is none of ours: a system view, a file, ...)."""
        known = {*self.files, SETTINGS, *self._view_files}
        wanted = None if names is None else {n.lower() for n in names}
        if wanted is None or not wanted <= known:
            wanted = known
        todo: list[str] = []

        def visit(name: str, trail: tuple[str, ...]) -> None:
            if name in todo or name not in known:
                return
            if name in trail:
                raise ValueError(f"views depend on each other in a cycle: "
                                 f"{' -> '.join(trail + (name,))}")
            for dep in self.view(name).depends if name in self._view_files else ():
                visit(dep, trail + (name,))
            todo.append(name)

        for name in [*self.files, SETTINGS, *self._view_files]:  # a stable order
            if name in wanted:
                visit(name, ())
        return todo

    def ensure(self, names: Iterable[str] | None = None) -> None:
        """Create the tables and views reading `names` needs (all for None)."""
        with self._lock:
            for name in self.needs(names):
                if name in self._made:
                    continue
                if name in self.files:
                    self._table(name)
                elif name == SETTINGS:
                    self._settings()
                else:
                    self.con.execute(f"create view {identifier(name)} as {self.view(name).body}")
                self._made.add(name)

    def _table(self, name: str) -> None:
        files = self.files[name]
        if not files:
            # A view of no rows, not a table: a base table could be written to.
            cols = ", ".join(f"cast(null as {typ}) as {identifier(col)}"
                             for col, typ in schema_mod.duckdb_columns(name))
            self.con.sql(f"select {cols} limit 0").create_view(name)
            return
        try:
            rel = self.con.read_parquet(files, union_by_name=True)
            missing = [(c, t) for c, t in schema_mod.duckdb_columns(name) if c not in rel.columns]
            if missing:
                # Columns a later migration added, which no live file has yet: nulls of the
                # column's type, so queries see the current schema.
                rel = rel.project(", ".join([identifier(c) for c in rel.columns] + [
                    f"cast(null as {t}) as {identifier(c)}" for c, t in missing]))
            rel.create_view(name)
        except Exception as e:  # duckdb's errors: name the damaged file and what to do
            damaged = tables.damaged_file(self.root, self.manifest, [name]) or tables.StoreCorrupt(
                f"reading table {name} of the store failed: {tables.one_line(e)}. If it "
                "happens again, run `runstore repair --check`.")
            raise damaged from e

    def _settings(self) -> None:
        # Values travel as bound parameters; DuckDB folds them into the view as constants.
        rows, params = [], {}
        for i, (k, v) in enumerate(self.settings.items()):
            num, text = setting_value(v)
            rows.append(f"select $n{i} as name, cast($v{i} as double) as value_num, "
                        f"cast($s{i} as varchar) as value_str")
            params.update({f"n{i}": k, f"v{i}": num, f"s{i}": text})
        self.con.sql(" union all ".join(rows), params=params).create_view(SETTINGS)


def connect(root: tables.Root, manifest: tables.Manifest, params: dict[str, Any] | None = None,
            *, allow_read: Iterable[str] | None = None) -> Any:
    """A confined DuckDB connection with every table and view of the snapshot created."""
    db = Database(root, manifest, params, allow_read=allow_read)
    try:
        db.ensure(None)
    except BaseException:
        db.close()
        raise
    return db.con


def setting_value(v: Any) -> tuple[float | None, str | None]:
    try:
        return float(v), None
    except (TypeError, ValueError):
        return None, str(v)
