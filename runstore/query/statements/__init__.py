"""Every statement the library runs for itself: fixed ones as documented `.sql` files, the rest
as sqlglot trees.

Contract: a statement is `(sql, params)` — DuckDB SQL text and the values of its `$name`
placeholders — for `Store.arrow` / `Store.sql`, which guard it and bind the values: nothing a
user gives is ever pasted into SQL text. Statements whose text never changes live in
`sql/statements/<name>.sql`, several to a file, each under a `-- name: NAME` line and the
comment saying what it answers; `named("trace.slices")` is the text of statement `slices` of
`trace.sql` (read once per process; a name it lacks is a `KeyError`). Statements whose shape
depends on the request are built as sqlglot trees: `frames.py` (`Store.runs`,
`Store.metrics`, the key lookups) and `check.py` (`runstore check`, from
`sql/statements/check.sql`). The views in `sql/*.sql` are not statements (`views.py`).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from ...resources import sql_dir

Statement = tuple[str, dict[str, Any]]

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.M)
_FILES: dict[str, dict[str, str]] = {}
_LOCK = threading.Lock()


def parse(text: str) -> dict[str, str]:
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


def named(name: str) -> str:
    """The SQL of statement `file.statement` (e.g. `trace.slices`)."""
    file, _, statement = name.partition(".")
    with _LOCK:
        if file not in _FILES:
            _FILES[file] = parse((sql_dir() / "statements" / f"{file}.sql").read_text())
        return _FILES[file][statement]
