"""Rendering query results (Arrow tables) for people and programs.

Contract: `render(table, fmt, width=None)` returns text for `table`, `csv`, `json` (one array
of objects), `jsonl` and `markdown`; `write_parquet(table, path)` writes `parquet`. Floats that
are NaN or infinite are written as the bare tokens `NaN`, `Infinity`, `-Infinity` in JSON
(as the source files write them) and as text elsewhere; timestamps as ISO-8601. The table
format aligns columns, cuts long cells with `…`, fits the terminal width and ends with the
row count.
"""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import date, datetime
from typing import Any

import pyarrow as pa

FORMATS = ("table", "csv", "json", "jsonl", "markdown", "parquet")
MAX_CELL = 40


def _plain(v: Any) -> Any:
    if isinstance(v, (datetime, date)):
        return v.isoformat()
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
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return repr(v)
    if isinstance(v, (list, dict)):
        return json.dumps(_plain(v), allow_nan=True, ensure_ascii=False)
    return str(_plain(v))


def rows(table: pa.Table) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in r.items()} for r in table.to_pylist()]


def render(table: pa.Table, fmt: str, *, width: int | None = None) -> str:
    if fmt == "json":
        return json.dumps(rows(table), allow_nan=True, ensure_ascii=False, indent=1) + "\n"
    if fmt == "jsonl":
        return "".join(json.dumps(r, allow_nan=True, ensure_ascii=False) + "\n" for r in rows(table))
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


def _cell(v: Any, limit: int) -> str:
    s = _text(v).replace("\n", "⏎").replace("\r", "").replace("\x00", "\\0")
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
    limit = MAX_CELL
    while True:
        cells = [[_cell(r[c], limit) for c in names] for r in data]
        widths = [max([len(n)] + [len(row[i]) for row in cells]) for i, n in enumerate(names)]
        total = sum(widths) + 2 * (len(widths) - 1)
        if total <= width or limit <= 8:
            break
        limit -= 4
    numeric = [pa.types.is_integer(t) or pa.types.is_floating(t) for t in table.schema.types]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w)
                         for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(list(names)), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in cells]
    n = table.num_rows
    out.append(f"({n} row{'s' if n != 1 else ''})")
    return "\n".join(out) + "\n"


def write_parquet(table: pa.Table, path: str) -> None:
    import pyarrow.parquet as pq

    pq.write_table(table, path)
