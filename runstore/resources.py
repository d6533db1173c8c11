"""Where the shipped `sql/` and `migrations/` directories are, and the named statements in
`sql/statements/`.

In a wheel they live inside the package (`runstore/_sql`, `runstore/_migrations`, mapped by
the build config); in a source checkout or editable install they are the top-level
directories of the repository. Callers get a `Path` either way, or a clear error.

A statements file holds several statements, each under a `-- name: NAME` line and the
comment saying what it answers; `statement("trace.slices")` is the text of statement
`slices` of `sql/statements/trace.sql` (read once per process; a name it lacks is a
`KeyError`; `statements(file)` all of one file); `create_macros(con)` runs the `create macro`
statements of `macros.sql` on a DuckDB connection. It lives here, below every layer, because
the ingest runs some of them too (the summaries of `summaries.sql`, over each read's rows; a
run's status by its macro) and the query layer runs them all.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from .errors import RunstoreError

_PKG = Path(__file__).resolve().parent


def _find(packaged: str, top_level: str) -> Path:
    for candidate in (_PKG / packaged, _PKG.parent / top_level):
        if candidate.is_dir():
            return candidate
    raise RunstoreError(
        f"runstore's `{top_level}/` directory is missing from this installation; reinstall "
        "runstore (pip install --force-reinstall runstore)."
    )


def sql_dir() -> Path:
    return _find("_sql", "sql")


def migrations_dir() -> Path:
    return _find("_migrations", "migrations")


_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.M)
_FILES: dict[str, dict[str, str]] = {}
_LOCK = threading.Lock()


def parse_statements(text: str) -> dict[str, str]:
    """The statements of one statements file: name -> SQL. The file's header and the comment
    lines right after each `-- name:` line document it; they are not statement text."""
    marks = list(_NAME.finditer(text))
    out: dict[str, str] = {}
    for m, nxt in zip(marks, marks[1:] + [None]):
        body = text[m.end():nxt.start() if nxt else len(text)]
        lines = body.strip().splitlines()
        while lines and (lines[0].lstrip().startswith("--") or not lines[0].strip()):
            lines.pop(0)
        while lines and (lines[-1].lstrip().startswith("--") or not lines[-1].strip()):
            lines.pop()
        out[m.group(1)] = "\n".join(lines).strip().rstrip(";")
    return out


def statements(file: str) -> dict[str, str]:
    """The statements of `sql/statements/FILE.sql`, name -> SQL, in file order."""
    with _LOCK:
        if file not in _FILES:
            _FILES[file] = parse_statements((sql_dir() / "statements" / f"{file}.sql").read_text())
        return _FILES[file]


def statement(name: str) -> str:
    """The SQL of statement `file.statement` (e.g. `trace.slices`)."""
    file, _, part = name.partition(".")
    return statements(file)[part]


def create_macros(con: Any) -> None:
    """Run the `create macro` statements of `sql/statements/macros.sql` on the DuckDB
    connection `con`, in file order (a macro may call one before it): every query connection
    (`query.macros.create`) and `storage.arrow_sql`'s database, whose statements the ingest
    runs, have every macro."""
    con.execute(";\n".join(statements("macros").values()))
