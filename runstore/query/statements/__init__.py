"""Every statement the library runs for itself: fixed ones as documented `.sql` files, the rest
as sqlglot trees.

Contract: a statement is `(sql, params)` — DuckDB SQL text and the values of its `$name`
placeholders — for `Store.arrow` / `Store.sql`, which guard it and bind the values: nothing a
user gives is ever pasted into SQL text. Statements whose text never changes live in
`sql/statements/<name>.sql`, several to a file, each under a `-- name: NAME` line and the
comment saying what it answers; `named("trace.slices")` is the text of statement `slices` of
`trace.sql` (read once per process; a name it lacks is a `KeyError`; the reading is
`resources.statement`, which the ingest uses too). Statements whose shape
depends on the request are built as sqlglot trees or joined from fixed pieces of text:
`frames.py` (`Store.runs`, `Store.metrics`, the key lookups), `bands.py` (`compare`'s bands)
and `check.py` (`runstore check`, from `sql/statements/check.sql`). The views in `sql/*.sql` are not statements (`views.py`).
"""

from __future__ import annotations

from typing import Any

from ...resources import parse_statements as parse, statement as named

__all__ = ["Statement", "named", "parse"]

Statement = tuple[str, dict[str, Any]]
