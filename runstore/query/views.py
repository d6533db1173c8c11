"""The canned views: one documented SELECT per `sql/*.sql` file, parsed and put in order.

Contract: `views()` lists every canned view (a `View`: name, purpose, documented columns,
body, file, what it reads), in dependency order, each parsed once per process (the files ship
with the package and do not change while it runs). `parse_view(path)` reads one file: its
leading `--` lines are the purpose, `-- @column name: comment` lines document the columns,
the rest is the SELECT (`documented(path)`: those three, without parsing the SQL);
`view_columns(name)` is one view's documented columns, from its header alone. What a view
reads comes from DuckDB's own parser (`parsetree.references_each`), on a private connection
that is confined and holds nothing, or from what that parser answered for the same body when
`tools/gen_docs.py reads` last ran (`recorded_reads`: the `READS` file beside the views, each
view's body digest and reads; an entry for another body than the file's is not used); a cycle
of views is an error; `parsed_each(paths)` parses the files not parsed yet in one call of the
parser (a connection asks it for a level of a query's view tree at a time: one call for the
views the query names, one for all they read, ...). Statements the library builds from
`sql/statements/*.sql` are not views and are not listed here. `syntax_tree(sql)` is DuckDB's
parse tree of any one statement (`json_serialize_sql`, as a dict), from that same
connection: what the doctor reads the keys a finding compares with from, without sqlglot.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..resources import sql_dir
from . import parsetree, recorded, sandbox
from .recorded import digest


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
    return _parse([path], parser)[0]


def _parse(paths: list[Path], parser: Any) -> list[View]:
    """The view files `paths`, what each reads: recorded (`READS`) for a body the record
    holds, else from one call of DuckDB's parser for all the others."""
    docs = [documented(p) for p in paths]
    depends = [recorded_reads(p.parent).get(p.stem, {}).get(digest(body))
               for p, (_, _, body) in zip(paths, docs)]
    todo = [i for i, reads in enumerate(depends) if reads is None]
    if todo:
        answers = parsetree.references_each(parser if parser is not None else _parser(),
                                            [docs[i][2] for i in todo])
        for i, reads in zip(todo, answers):
            depends[i] = list(reads)
    return [View(path.stem, description, columns, body, path, tuple(sorted(reads)))
            for path, (description, columns, body), reads in zip(paths, docs, depends)]


# The file, beside the views, of what each read when it was last generated.
READS = "view_reads.json"


def recorded_reads(directory: Path) -> dict[str, dict[str, list[str]]]:
    """`{view: {digest of its body: what it reads}}` from `directory`'s `READS` file (empty
    when there is none), read once per process (`recorded.load`). The reads of a body are a
    function of its text, so an entry is used only for the body it was recorded for: a view
    edited since is parsed."""
    return recorded.load(directory / READS)


def documented(path: Path) -> tuple[str, tuple[tuple[str, str], ...], str]:
    """A view file's purpose, documented columns and SELECT, read without parsing the SQL."""
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
    return " ".join(p for p in purpose if p).strip(), tuple(columns), body


def view_columns(name: str) -> tuple[tuple[str, str], ...]:
    """The documented `(column, comment)` pairs of the canned view `name`, in order, read from
    its file's header alone (no DuckDB parse: `runstore runs` needs only these)."""
    return documented(view_files(str(sql_dir()))[name])[1]


_parsers: list[Any] = []
_PARSER_LOCK = threading.Lock()


def _parser() -> Any:
    """A DuckDB connection that only parses (confined and holding nothing), made once."""
    with _PARSER_LOCK:
        if not _parsers:
            import duckdb

            con = duckdb.connect(":memory:")
            sandbox.confine(con, [])
            _parsers.append(con)
        return _parsers[0]


def syntax_tree(sql: str) -> dict[str, Any]:
    """DuckDB's parse tree of the one statement `sql` (`json_serialize_sql`), on a cursor of
    the parsing connection (any thread may ask); a statement DuckDB cannot parse is a
    `QueryError`."""
    import json

    from ..errors import QueryError

    cur = _parser().cursor()
    try:
        tree = parsetree.serialized(cur, sql)
    finally:
        cur.close()
    if tree is None:
        raise QueryError(f"DuckDB cannot parse this statement: {sql[:80]}")
    return json.loads(tree)


# Parsed views by file, and the ordered list by directory: the files ship with the package
# and do not change while it runs. A connection parses only the views its queries read.
_PARSED: dict[Path, View] = {}
_VIEWS: dict[str, tuple[View, ...]] = {}
_VIEWS_LOCK = threading.Lock()


def parsed(path: Path, parser: Any = None) -> View:
    """The view in `path`, parsed once per process."""
    return parsed_each([path], parser)[0]


def view_files(directory: str) -> dict[str, Path]:
    """Each view's name and file in `directory` (its `*.sql` files)."""
    return {p.stem: p for p in sorted(Path(directory).glob("*.sql"))}


def parsed_each(paths: list[Path], parser: Any = None) -> list[View]:
    """`parsed` of each of `paths`: those not parsed yet with one call of DuckDB's parser."""
    with _VIEWS_LOCK:
        todo = [p for p in paths if p not in _PARSED]
        for view in _parse(todo, parser) if todo else []:
            _PARSED[view.path] = view
        return [_PARSED[p] for p in paths]


def _views_in(directory: str, parser: Any = None) -> tuple[View, ...]:
    if directory not in _VIEWS:
        files = view_files(directory)
        _VIEWS[directory] = _ordered(dict(zip(files, parsed_each(list(files.values()),
                                                                 parser))))
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
