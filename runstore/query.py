"""Query connections: an in-memory DuckDB with every table and canned view of one snapshot.

Contract: `connect(root, manifest)` returns a fresh in-memory DuckDB connection on which each
public table is a view over exactly the Parquet files the snapshot lists (DuckDB's own
Parquet scan, never a directory glob), `settings` holds the store's settings (e.g.
`kl_threshold`) overridable per query (a param named like a setting overrides it; a numeric
setting refuses a non-numeric value), and every `sql/*.sql` view is created in dependency
order. No DuckDB database file is ever opened, so readers never block writers or each other.
`views()` lists the canned views parsed from their files (`parse_view`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pyarrow as pa

from . import schema as schema_mod
from . import tables
from .errors import QueryError
from .fs import S3
from .resources import sql_dir
from .sqlcheck import identifier

DEFAULT_SETTINGS: dict[str, float] = {"kl_threshold": 0.01}


@dataclass(frozen=True)
class View:
    """One canned view, parsed from its `.sql` file."""

    name: str
    description: str
    columns: tuple[tuple[str, str], ...]  # (column, comment)
    body: str  # the SELECT statement
    path: Path
    depends: tuple[str, ...]


_COLUMN_DOC = re.compile(r"^--\s*@column\s+([A-Za-z_][A-Za-z0-9_]*)\s*:?\s*(.*)$")


def parse_view(path: Path) -> View:
    """A view file: leading `--` purpose lines, `-- @column name: comment` lines, a SELECT."""
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
    return View(path.stem, " ".join(p for p in purpose if p).strip(), tuple(columns), body, path,
                _dependencies(body))


def _dependencies(body: str) -> tuple[str, ...]:
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(body, read="duckdb")
    ctes = {c.alias_or_name for c in tree.find_all(exp.CTE)}
    names = {t.name for t in tree.find_all(exp.Table)} - ctes
    return tuple(sorted(names))


@lru_cache(maxsize=4)
def _views_in(directory: str) -> tuple[View, ...]:
    views = {p.stem: parse_view(p) for p in sorted(Path(directory).glob("*.sql"))}
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


def views() -> tuple[View, ...]:
    """Every canned view, in dependency order."""
    return _views_in(str(sql_dir()))


def connect(root: tables.Root, manifest: tables.Manifest,
            params: dict[str, Any] | None = None) -> Any:
    import duckdb

    con = duckdb.connect(":memory:")
    # No progress bar: DuckDB draws one on stderr for long queries, garbling CLI output.
    con.execute("set enable_progress_bar = false")
    # Keep each Parquet footer once parsed: Store reuses one database per snapshot for many
    # queries (each on a cursor, hence `global`), which otherwise re-parse the footer of every
    # file they scan, a cost that grows with files and row groups. Safe because a store file
    # is never modified once written.
    con.execute("set global parquet_metadata_cache = true")
    if isinstance(root, S3):
        # The DuckDB wheel has no httpfs offline: s3:// files are read through fsspec.
        con.register_filesystem(root.filesystem())
    for name in schema_mod.TABLES:
        files = tables.table_files(root, manifest, name)
        if files:
            try:
                rel = con.read_parquet(files, union_by_name=True)
                missing = [f for f in schema_mod.schema(name) if f.name not in rel.columns]
                if missing:
                    # Columns a later migration added, which no live file has yet: nulls of
                    # the column's type, so queries see the current schema.
                    typed = con.from_arrow(pa.table({f.name: pa.nulls(0, f.type) for f in missing}))
                    cols = [identifier(c) for c in rel.columns] + [
                        f"cast(null as {t}) as {identifier(c)}" for c, t in zip(typed.columns, typed.types)]
                    rel = rel.project(", ".join(cols))
                rel.create_view(name)
            except Exception as e:  # duckdb's errors: name the damaged file and what to do
                damaged = tables.damaged_file(root, manifest, [name]) or tables.read_error(
                    root, e) or tables.StoreCorrupt(
                        f"reading table {name} of the store failed: {tables.one_line(e)}. If "
                        "it happens again, run `runstore repair --check`.")
                raise damaged from e
        else:
            # A real empty table, not a registered Arrow object: those are visible only to
            # the connection that registered them, not to its cursors (Store._cursor).
            con.from_arrow(schema_mod.empty(name)).create(name)
    settings = {**DEFAULT_SETTINGS, **(manifest.settings or {})}
    for k, v in (params or {}).items():
        if k in DEFAULT_SETTINGS:
            if isinstance(DEFAULT_SETTINGS[k], float) and setting_value(v)[0] is None:
                raise QueryError(f"setting {k} must be a number, got {v!r} "
                                 f"(e.g. --param {k}={DEFAULT_SETTINGS[k]})")
            settings[k] = v
    con.execute("create table settings (name varchar, value_num double, value_str varchar)")
    for k, v in settings.items():
        num, text = setting_value(v)
        con.execute("insert into settings values (?, ?, ?)", [k, num, text])
    for view in views():
        con.execute(f"create view {identifier(view.name)} as {view.body}")
    return con


def setting_value(v: Any) -> tuple[float | None, str | None]:
    try:
        return float(v), None
    except (TypeError, ValueError):
        return None, str(v)
