"""Rendering query results (Arrow tables) for people and programs.

Contract: `render(table, fmt, width=None)` returns text for `table`, `csv`, `json` (one array
of objects), `jsonl` and `markdown`; `write_parquet(table, path)` writes `parquet`. Floats that
are NaN or infinite are written as the bare tokens `NaN`, `Infinity`, `-Infinity` in JSON
(as the source files write them) and as text elsewhere; timestamps as ISO-8601; DECIMAL
values as JSON numbers; any other value JSON cannot hold as its text. The table format aligns
columns, cuts long text cells with `…` (narrowing the widest text columns first), fits the
terminal width and ends with the row count; it and `markdown`, being for people, show floats
with 6 significant digits. Numbers are never cut: when the table is still too wide, floats
are shown with fewer significant digits, down to 3, and past that the lines overflow.

`from_relation(rel)` fetches a DuckDB result as `Rows` (plain Python rows) when every column
has a type whose Python values DuckDB and Arrow give alike, else as an Arrow table; `render`
takes either and gives the same text for both (a test holds them together), so a query that
needs no Arrow type is printed without importing pyarrow.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported on first use: `Rows` render without it
    from .lazy import pyarrow as pa

FORMATS = ("table", "csv", "json", "jsonl", "markdown", "parquet")
MAX_CELL = 40  # longest cell of the table format before it is cut with …
MIN_CELL = 6  # narrowest a column gets when fitting the terminal width


# DuckDB types whose Python values (`fetchall`) are exactly what Arrow's `to_pylist` gives for
# the same result; DECIMAL(p,s) and lists of these too. Others (HUGEINT comes back from Arrow
# as a Decimal, STRUCT, MAP, UUID, INTERVAL, ...) take the Arrow path.
_INTEGERS = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
             "UBIGINT"}
_PLAIN = _INTEGERS | {"FLOAT", "DOUBLE", "BOOLEAN", "VARCHAR", "DATE", "TIME", "TIMESTAMP",
                      "TIMESTAMP WITH TIME ZONE", "BLOB", '"NULL"'}
_DECIMAL = re.compile(r"DECIMAL\(\d+,\d+\)")


def _plain_type(typ: str) -> bool:
    if typ.endswith("[]"):
        return _plain_type(typ[:-2])
    return typ in _PLAIN or bool(_DECIMAL.fullmatch(typ))


@dataclass(frozen=True)
class Rows:
    """A query result as plain Python rows (see `from_relation`)."""

    column_names: list[str]
    numeric: list[bool]  # integer, floating or decimal columns
    data: list[tuple[Any, ...]]

    @property
    def num_rows(self) -> int:
        return len(self.data)

    def to_pylist(self) -> list[dict[str, Any]]:
        return [dict(zip(self.column_names, row)) for row in self.data]


def from_relation(rel: Any) -> "Rows | pa.Table":
    """A DuckDB relation's result: `Rows` when every column type allows, else Arrow."""
    types = [str(t) for t in rel.types]
    if not all(_plain_type(t) for t in types):
        return rel.to_arrow_table()
    numeric = [t in _INTEGERS or t in ("FLOAT", "DOUBLE") or bool(_DECIMAL.fullmatch(t))
               for t in types]
    return Rows(list(rel.columns), numeric, rel.fetchall())


def _numeric(table: "Rows | pa.Table") -> list[bool]:
    if isinstance(table, Rows):
        return table.numeric
    return [pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            for t in table.schema.types]


def _plain(v: Any) -> Any:
    if isinstance(v, (datetime, date, time)):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)  # DuckDB types literals like 1.5 as DECIMAL; JSON has one number type
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return repr(v)
    if isinstance(v, (list, dict)):
        return json.dumps(_plain(v), allow_nan=True, ensure_ascii=False, default=str)
    return str(_plain(v))


def rows(table: pa.Table) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in r.items()} for r in table.to_pylist()]


def render(table: "Rows | pa.Table", fmt: str, *, width: int | None = None) -> str:
    if fmt == "json":
        return json.dumps(rows(table), allow_nan=True, ensure_ascii=False, indent=1,
                          default=str) + "\n"
    if fmt == "jsonl":
        return "".join(json.dumps(r, allow_nan=True, ensure_ascii=False, default=str) + "\n"
                       for r in rows(table))
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(table.column_names)
        for r in table.to_pylist():
            w.writerow([_text(r[c]) for c in table.column_names])
        return buf.getvalue()
    if fmt == "markdown":
        return _markdown(table)
    if fmt == "table":
        return _table(table, width or 100)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def _human(v: Any, digits: int = 6) -> str:
    # People read 6 significant digits; csv/json keep every digit for programs.
    if isinstance(v, float) and math.isfinite(v):
        return f"{v:.{digits}g}"
    return _text(v)


# Control characters in cells (ANSI escapes and NULs occur in real transcripts) would move the
# cursor or recolour a terminal; people see them escaped instead.
_CONTROLS = {c: f"\\x{c:02x}" for c in range(32) if chr(c) not in "\n\r\t"}
_CONTROLS.update({ord("\n"): "⏎", ord("\r"): "", ord("\t"): " ", 0: "\\0", 0x7F: "\\x7f"})


def _cell(v: Any, limit: int, digits: int = 6) -> str:
    s = _human(v, digits).translate(_CONTROLS)
    return s if len(s) <= limit else s[: max(1, limit - 1)] + "…"


def _markdown(table: pa.Table) -> str:
    names = table.column_names
    out = ["| " + " | ".join(names) + " |", "|" + "|".join("---" for _ in names) + "|"]
    for r in table.to_pylist():
        out.append("| " + " | ".join(_cell(r[c], 200).replace("|", "\\|") for c in names) + " |")
    return "\n".join(out) + "\n"


def _table(table: pa.Table, width: int) -> str:
    names = table.column_names
    data = table.to_pylist()
    numeric = _numeric(table)
    for digits in (6, 5, 4, 3):
        widths, fits = _fit(names, data, numeric, width, digits)
        if fits:
            break
    cells = [[_cell(r[c], w, digits) for c, w in zip(names, widths)] for r in data]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line([_cell(n, w) for n, w in zip(names, widths)]), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in cells]
    n = table.num_rows
    out.append(f"({n} row{'s' if n != 1 else ''})")
    return "\n".join(out) + "\n"


def _fit(names: list[str], data: list[dict[str, Any]], numeric: list[bool], width: int,
         digits: int) -> tuple[list[int], bool]:
    """Column widths for `width` characters, and whether they fit.

    The widest text column loses one character at a time (down to MIN_CELL), so short
    columns stay whole while long text gives way; then numeric columns' headers are cut,
    never their values (a cut number reads as a different number).
    """
    values = [max([0] + [len(_cell(r[c], MAX_CELL, digits)) for r in data]) for c in names]
    widths = [min(max(len(n), v), MAX_CELL) for n, v in zip(names, values)]
    floors = [max(v, MIN_CELL) if num else MIN_CELL for v, num in zip(values, numeric)]
    gaps = 2 * max(len(widths) - 1, 0)
    for shrinkable in ([not num for num in numeric], [True] * len(widths)):
        while sum(widths) + gaps > width:
            candidates = [i for i, ok in enumerate(shrinkable) if ok and widths[i] > floors[i]]
            if not candidates:
                break
            widest = max(candidates, key=lambda i: widths[i])
            widths[widest] -= 1
    return widths, sum(widths) + gaps <= width


def write_parquet(table: pa.Table, path: str) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path)
