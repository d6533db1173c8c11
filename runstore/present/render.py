"""Rendering query results (Arrow tables) for people and programs.

Contract: `render(table, fmt, width=None, wide=False, whole=())` returns text for `table`,
`csv`, `json`
(one array of objects), `jsonl` and `markdown`; `write_parquet(table, path)` writes `parquet`.
`format_for(path)` names the format a file name asks for (`.json` → json, …). Floats that
are NaN or infinite are written as the bare tokens `NaN`, `Infinity`, `-Infinity` in JSON
(as the source files write them) and as text elsewhere; timestamps as ISO-8601 (those
Python's datetime cannot hold as DuckDB gives them: `infinity` as the largest datetime, year
294247 and 24:00:00 as text); whole numbers (HUGEINT) as exact JSON integers, other DECIMAL
values as JSON numbers (doubles); any other value JSON cannot hold as its text. (Values
no format holds as DuckDB means them, such as intervals, arrive as DuckDB's text already:
`Store.rows`, query/rows.py `for_printing`.)

The table format is for people: it aligns columns, shows floats with 6 significant digits,
fits `width` (the terminal's) and ends with the row count. Widths are counted in terminal
columns (`present.cutting.text_width`): a wide or full-width character (CJK, most emoji)
takes two, a combining mark none, any other character one. Two kinds of cell are never cut:
numbers (a cut number reads as another number) and the values of identifying columns
(`IDENTIFYING`: `run_name`, `run_label`, `run_id`, metric `key`s, span `name`s, `rule`s,
`compare`'s `group`, …, and the columns the caller names in `whole`, such as `compare`'s
group keys), because a cut name can no longer tell two runs apart; an identifying column's
header is never cut either. Any other header is whole while the table fits (`MAX_CELL`
bounds cells, not headers), and is cut only as far as it stays different from every other
header: keeping its start while that tells it apart (`smooth_me…` and `smooth_mi…`, never
`smoot…` twice), then in the middle as other text is while that does, for headers that
differ only near their end (`diff`'s run columns, named by run labels:
`math_rl_sweep/…/lr_1e-5` and `math_rl_sweep/…/lr_4e-5`, never `math_rl_sweep/llama-3.1-8b…`
twice). A cut header never reads as another: no other header starts with the text before
its `…` and ends with the text after (`present.cutting`). Other text gives way instead, in
this order: a cell wider than `MAX_CELL` is cut (to its column's width, where its header is
wider); the widest other text columns narrow, down to `TEXT_FLOOR` (shorter values stay
whole); headers narrow to their values; long text narrows to `LAST_FLOOR`; floats lose
digits, down to 3. Cuts are made in the middle, at `/` where the text is a path
(`math_rl_sweep/…/lr_4e-5`), so both ends stay readable. A table that still does not fit is
printed as one block of `column  value` lines per row (as psql's expanded mode does), and
its last line says so. `wide=True` cuts nothing and never switches to blocks: one line per
row, however long. `markdown` cuts no identifying value and other cells at 200 characters.

`from_polars(df)` (query/rows.py, here for the CLI) reads a polars DataFrame so too.
`from_relation(rel)` (query/rows.py) fetches a DuckDB result as `Rows` (plain Python rows)
when every column has a type whose Python values DuckDB and Arrow give alike, else as an Arrow
table; `render` takes either and gives the same text for both (a test holds them together),
so a query that needs no Arrow type is printed without importing pyarrow.

Hand-written rather than DuckDB's box renderer or rich's `Table`, which cut names at their
end and hide columns (docs/architecture.md, "Libraries").
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from datetime import date, datetime, time
from decimal import Decimal
from functools import cached_property
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any, Sequence

from ..errors import UsageError
from ..numbers import nonfinite_name
from ..printable import printable
from ..query.rows import Rows, from_polars  # noqa: F401 - the CLI prints frames through it
from .cutting import cut_header, header_widths, shorten, text_width

if TYPE_CHECKING:
    import pyarrow as pa
else:  # imported on first use: `Rows` render without it
    from ..lazy import pyarrow as pa

FORMATS = ("table", "csv", "json", "jsonl", "markdown", "parquet")
# What `-o FILE` writes when no format is given; other extensions keep the caller's default.
EXTENSIONS = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv",
              ".md": "markdown", ".markdown": "markdown", ".parquet": "parquet"}
# Columns whose values name what a row is about: shown whole in the table format. Names as the
# views, tables and commands spell them (`name` is a span's or a checkpoint's, `metric` and
# `evaluator` are eval_metrics', `table`/`column`/`view` those of `runstore schema`/`views`).
IDENTIFYING = frozenset({"run_name", "run_label", "run_id", "key", "metric", "name", "rule",
                         "split", "evaluator", "conversation_id", "table", "column", "view",
                         "group"})
MAX_CELL = 40  # widest cell (in columns) of other text columns before it is cut with …
TEXT_FLOOR = 12  # other text columns narrow down to this, values shorter than it stay whole
MIN_CELL = 6  # narrowest a header gets when fitting the terminal width
LAST_FLOOR = 8  # long text narrows this far before the table gives way to blocks
MARKDOWN_CELL = 200


def format_for(path: str | None) -> str | None:
    """The format a file name asks for by its extension (`k.json` → `json`), else None.

    >>> format_for("k.json"), format_for("out.MD"), format_for("notes.txt"), format_for(None)
    ('json', 'markdown', None, None)
    """
    return EXTENSIONS.get(os.path.splitext(path)[1].lower()) if path else None


def _numeric(table: "Rows | pa.Table") -> list[bool]:
    if isinstance(table, Rows):
        return table.numeric
    return [pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
            for t in table.schema.types]


def _plain(v: Any) -> Any:
    if isinstance(v, (datetime, date, time)):
        return v.isoformat()
    if isinstance(v, Decimal):
        # A whole number (HUGEINT, UHUGEINT, DECIMAL(p,0)) exactly; a fraction as a double
        # (DuckDB types literals like 1.5 as DECIMAL; JSON has one number type).
        return int(v) if v.is_finite() and v.as_tuple().exponent >= 0 else float(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):  # DuckDB gives an ARRAY as a tuple
        return [_plain(x) for x in v]
    return v


def _text(v: Any) -> str:
    # The common cells first: every csv cell passes here.
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else nonfinite_name(v)
    if type(v) is int or type(v) is str:
        return str(v)
    if v is None:
        return ""
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(_plain(v), allow_nan=True, ensure_ascii=False, default=str)
    return str(_plain(v))


def _by_column(table: "Rows | pa.Table") -> tuple[list[str], list[list[Any]], int]:
    """The table's column names, its values column by column (as `_pylist` gives them) and
    its number of rows. Plain rows whose names differ are read as they are; any other table
    through `_pylist`'s dicts, where the later of two columns of one name holds for both."""
    names = list(table.column_names)
    if isinstance(table, Rows) and len(set(names)) == len(names):
        # Plain rows whose names differ: their tuples are the dicts' values, in order.
        columns = [list(col) for col in zip(*table.data)] or [[] for _ in names]
        return names, columns, len(table.data)
    dicts = _pylist(table)
    return names, [[r[c] for r in dicts] for c in names], len(dicts)


# The values `_plain` returns as they are: JSON's own scalars.
_KEPT_AS_IS = frozenset({str, int, float, bool, type(None)})
_NUMBERS = frozenset({int, float, bool, type(None)})
_JSON = json.JSONEncoder(allow_nan=True, ensure_ascii=False, default=str)


def _json_rows(table: "Rows | pa.Table", indent: bool) -> list[str]:
    """Each row as JSON: the dict of its `_plain` values (one key per name, the later column
    of a name winning) as `json.dumps(row, allow_nan=True, ensure_ascii=False, default=str)`
    writes it, or, with `indent`, as it stands inside `json.dumps(rows, indent=1, ...)`. Made
    from each value's text (`_json_texts`), a column at a time: `indent` turns the C encoder
    off, and one encoder call per row builds an encoder each time."""
    names, columns, n = _by_column(table)
    keys = list(dict.fromkeys(names))
    columns = [columns[names.index(k)] for k in keys]
    if not n or not keys:
        return [" {}" if indent else "{}"] * n
    margin, between, start, end = ("  ", ",\n", " {\n", "\n }") if indent else ("", ", ", "{", "}")
    nested = _indented if indent else _JSON.encode
    fields = [[f"{margin}{encode_basestring(k)}: {t}" for t in _json_texts(col, nested)]
              for k, col in zip(keys, columns)]
    return [start + between.join(row) + end for row in zip(*fields)]


def _json_texts(column: list[Any], nested: Any) -> list[str]:
    """Each value of `column` as the JSON text `_JSON` writes for its `_plain` value: a column
    of numbers (and booleans, nulls) in one call of the C encoder, split at its `, ` (no such
    text holds one); a column of text (and nulls) by the string encoder that encoder uses
    (`encode_basestring`, as ensure_ascii=False has it); any other by `nested(_plain(value))`
    (a value `_plain` keeps, `_KEPT_AS_IS`, is not gone through)."""
    kinds = set(map(type, column))
    if kinds <= _NUMBERS:
        return _JSON.encode(column)[1:-1].split(", ")
    if kinds <= {str, type(None)}:
        return ["null" if v is None else encode_basestring(v) for v in column]
    if not kinds <= _KEPT_AS_IS:
        column = [_plain(v) for v in column]
    return [nested(v) for v in column]


def _indented(value: Any) -> str:
    """A value of a row of the `json` format as `json.dumps(rows, indent=1)` nests it: its
    lines two more spaces in."""
    text = json.dumps(value, allow_nan=True, ensure_ascii=False, indent=1, default=str)
    return text.replace("\n", "\n  ")


def _pylist(table: "Rows | pa.Table") -> list[dict[str, Any]]:
    """The rows as dicts of Python values, alike for `Rows` and Arrow. Arrow cannot make a
    Python value of a date or timestamp outside years 1-9999 (DuckDB's infinities among
    them) and makes DuckDB's end-of-day time 24:00:00 a midnight; DuckDB's own conversion,
    which `Rows` hold, gives `datetime.max` or the value's text, so such a column is read
    back through DuckDB, and one DuckDB cannot read back from Arrow either (the smallest
    HUGEINT) as DuckDB's text of each value."""
    if isinstance(table, Rows) or not any(map(_day_end, table.columns)):
        try:
            return table.to_pylist()
        except (OverflowError, ValueError):  # (a nanosecond time beyond microseconds)
            pass
    names = table.column_names
    if not names:
        return [{} for _ in range(table.num_rows)]
    columns = [_values(column) for column in table.columns]
    return [dict(zip(names, row)) for row in zip(*columns)]


def _values(column: "pa.ChunkedArray") -> list[Any]:
    """One Arrow column's values as `_pylist` makes them."""
    if not _day_end(column):
        try:
            return column.to_pylist()
        except (OverflowError, ValueError):
            pass
    import duckdb

    with duckdb.connect() as con:
        rel = con.from_arrow(pa.table({"v": column}))
        try:
            return [v for (v,) in rel.fetchall()]
        except duckdb.Error:
            return [v for (v,) in rel.project("cast(v as varchar)").fetchall()]


def _day_end(column: "pa.ChunkedArray") -> bool:
    """Whether a column holds a time of day of 24:00:00 (a top-level time column only)."""
    if not pa.types.is_time(column.type):
        return False
    import pyarrow.compute as pc

    per_day = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[column.type.unit] * 86400
    latest = pc.max(column.cast(pa.int64())).as_py()
    return latest is not None and latest >= per_day


def render(table: "Rows | pa.Table", fmt: str, *, width: int | None = None,
           wide: bool = False, whole: Sequence[str] = ()) -> str:
    """`table` as text in `fmt` (see the module); `whole` names more identifying columns."""
    if fmt == "json":
        rows = _json_rows(table, indent=True)
        return ("[\n" + ",\n".join(rows) + "\n]\n") if rows else "[]\n"
    if fmt == "jsonl":
        return "".join(row + "\n" for row in _json_rows(table, indent=False))
    if fmt == "csv":
        return _csv(table)
    if fmt == "markdown":
        return _markdown(table, IDENTIFYING.union(whole))
    if fmt == "table":
        return _table(table, width or 100, wide, IDENTIFYING.union(whole))
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


# The values whose `_text` is what the csv module writes for the value itself (`str(v)`, a
# float's repr; nothing for None): a column of only these is handed to it as it is.
_WRITTEN_AS_IS = frozenset({str, int, type(None), float})


def _csv(table: "Rows | pa.Table") -> str:
    """`table` as CSV: a header line, then each row's cells as `_text` gives them. A column
    whose every value the csv module writes as `_text` would (`_WRITTEN_AS_IS`, floats all
    finite) is passed as it is, the others cell by cell. The csv module quotes a cell holding
    a line feed but not one holding a lone carriage return, which other readers take for the
    end of a row: a row with such a cell has every cell quoted (a null as `""`)."""
    names, columns, n = _by_column(table)
    columns = [col if _as_is(col) else [_text(v) for v in col] for col in columns]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(names)
    w.writerows(zip(*columns) if names else [()] * n)
    text = buf.getvalue()
    if "\r" not in text:  # rows end in "\n": no cell holds a carriage return
        return text
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    quoted = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)
    for row in (names, *zip(*columns)):
        (quoted if _has_return(row) else w).writerow(row)
    return buf.getvalue()


def _has_return(cells: Sequence[Any]) -> bool:
    return any(type(v) is str and "\r" in v for v in cells)


def _as_is(column: list[Any]) -> bool:
    kinds = set(map(type, column))
    return kinds <= _WRITTEN_AS_IS and (
        float not in kinds or all(math.isfinite(v) for v in column if type(v) is float))


def _human(v: Any, digits: int = 6) -> str:
    # People read 6 significant digits; csv/json keep every digit for programs.
    if isinstance(v, float) and math.isfinite(v):
        return f"{v:.{digits}g}"
    return _text(v)


def cell_text(value: Any, digits: int = 6) -> str:
    """One value as the table and markdown formats write it, uncut: `digits` significant
    digits (six unless the table format needs room), NaN and ±Infinity spelled, control
    characters shown escaped.

    >>> cell_text(0.0123456789), cell_text(float("-inf")), cell_text([1, "a"])
    ('0.0123457', '-Infinity', '[1, "a"]')
    """
    return printable(_human(value, digits))


def _markdown(table: pa.Table, identifying: frozenset[str]) -> str:
    names = table.column_names
    limits = [None if n in identifying else MARKDOWN_CELL for n in names]
    # A header is a cell too: its control characters shown and its `|` escaped (a column
    # named with a newline or a `|` would break the table).
    heads = [printable(n).replace("|", "\\|") for n in names]
    out = ["| " + " | ".join(heads) + " |", "|" + "|".join("---" for _ in names) + "|"]
    for r in _pylist(table):
        out.append("| " + " | ".join(_cut_end(r[c], lim).replace("|", "\\|")
                                      for c, lim in zip(names, limits)) + " |")
    return "\n".join(out) + "\n"


def _cut_end(v: Any, limit: int | None) -> str:
    s = printable(_human(v))
    return s if limit is None or len(s) <= limit else s[: limit - 1] + "…"


class _Columns:
    """What the table format knows about each column: its header as shown (`heads`, control
    characters escaped), numeric, identifying, or other text; and, asked only when a header
    is cut, how narrow it may get keeping its start (`starts`) and at all (`distinct`), as
    `present.cutting.header_widths` has it."""

    def __init__(self, table: pa.Table, identifying: frozenset[str]):
        self.names = table.column_names
        self.heads = [printable(n) for n in self.names]
        self.numeric = _numeric(table)
        self.named = [n in identifying for n in self.names]  # values and header never cut
        self.whole = [num or named for num, named in zip(self.numeric, self.named)]

    @cached_property
    def _header_widths(self) -> list[tuple[int, int]]:
        heads = self.heads
        return [header_widths(h, heads[:i] + heads[i + 1:]) for i, h in enumerate(heads)]

    @property
    def starts(self) -> list[int]:
        return [start for start, _ in self._header_widths]

    @property
    def distinct(self) -> list[int]:
        return [narrowest for _, narrowest in self._header_widths]


class _Cells:
    """Each column's cells as the table format writes them uncut (`cell_text`, with floats
    at `digits` significant digits), made once per number of digits, and how a column's
    cells are measured (`measure`: `len` where every one is ASCII, else `text_width`)."""

    def __init__(self, table: "Rows | pa.Table"):
        names, columns, self.n = _by_column(table)
        self.values = dict(zip(names, columns))
        self._texts: dict[int, dict[str, list[str]]] = {}
        # Digits change only floats, whose text is ASCII: one look at the cells tells. A cut
        # cell adds a `…`, one column wide, so `len` still measures it.
        self.measure = {n: len if "".join(col).isascii() else text_width
                        for n, col in self(6).items()}

    def __call__(self, digits: int) -> dict[str, list[str]]:
        if digits not in self._texts:
            self._texts[digits] = {n: [cell_text(v, digits) for v in col]
                                   for n, col in self.values.items()}
        return self._texts[digits]


def _table(table: pa.Table, width: int, wide: bool, identifying: frozenset[str]) -> str:
    cols = _Columns(table, identifying)
    cells = _Cells(table)
    if wide:
        widths = [max(text_width(h), _widest(cells(6)[n], cells.measure[n], None))
                  for n, h in zip(cols.names, cols.heads)]
        return _grid(cols, cells, 6, widths, [None] * len(widths), table.num_rows)
    for digits in (6, 5, 4, 3):
        widths, limits, needed = _fit(cols, cells, digits, width)
        if needed <= width or not cells.n:
            return _grid(cols, cells, digits, widths, limits, table.num_rows)
    return _blocks(cols, cells, width, needed)


def _rows_line(n: int) -> str:
    return f"({n} row{'s' if n != 1 else ''}"


def _widest(texts: list[str], measure: Any, limit: int | None) -> int:
    """The width of the widest of `texts` cut to `limit` columns (None: uncut)."""
    widest = max(map(measure, texts), default=0)
    if limit is None or widest <= limit:
        return widest
    return max(measure(shorten(t, limit)) for t in texts)


def _pad(text: str, width: int, right: bool) -> str:
    """`text` with spaces to `width` columns: before it (`right`, numbers) or after it."""
    room = " " * (width - text_width(text))
    return room + text if right else text + room


def _grid(cols: _Columns, cells: _Cells, digits: int, widths: list[int],
          limits: list[int | None], n: int) -> str:
    texts = cells(digits)
    columns = []
    for i, (name, head, w, limit, right) in enumerate(zip(cols.names, cols.heads, widths,
                                                           limits, cols.numeric)):
        measure = cells.measure[name]
        column = texts[name]
        if limit is not None:
            column = [t if measure(t) <= limit else shorten(t, limit) for t in column]
        if measure is len:  # ASCII, and `…`s: as wide as they are long
            column = [t.rjust(w) for t in column] if right else [t.ljust(w) for t in column]
        else:
            column = [_pad(t, w, right) for t in column]
        if text_width(head) > w:
            head = cut_header(head, w, cols.starts[i])
        columns.append([_pad(head, w, right), "-" * w, *column])
    out = ["  ".join(line).rstrip() for line in zip(*columns)] or ["", ""]
    out.append(_rows_line(n) + ")")
    return "\n".join(out) + "\n"


def _blocks(cols: _Columns, cells: _Cells, width: int, needed: int) -> str:
    """One block per row, `column  value` per line: for tables too wide for the terminal."""
    texts = cells(6)
    label = max(map(text_width, cols.heads))
    room = max(width - label - 2, TEXT_FLOOR)
    out = []
    for i in range(cells.n):
        title = f"-[ row {i + 1} ]"
        out.append(title + "-" * max(0, min(width, label + 2 + room) - len(title)))
        for n, head, whole in zip(cols.names, cols.heads, cols.whole):
            cell = shorten(texts[n][i], None if whole else room)
            out.append(f"{_pad(head, label, False)}  {cell}".rstrip())
    out.append(f"{_rows_line(cells.n)}, one block each: as a table they need {needed} "
               f"columns, {width} fit; --wide prints the table anyway)")
    return "\n".join(out) + "\n"


def _fit(cols: _Columns, cells: _Cells, digits: int,
         width: int) -> tuple[list[int], list[int | None], int]:
    """Column widths for `width` columns, the cut of each column's cells (None: whole), and
    the width the lines need (more than `width` when they cannot fit). A column starts as
    wide as its header and its widest value (other text cut at MAX_CELL), and narrows only
    when the lines do not fit (`_narrow`)."""
    texts = cells(digits)
    values = [_widest(texts[c], cells.measure[c], None if whole else MAX_CELL)
              for c, whole in zip(cols.names, cols.whole)]
    widths = [max(text_width(h), v) for h, v in zip(cols.heads, values)]
    gaps = 2 * max(len(widths) - 1, 0)
    if sum(widths) + gaps > width:
        _narrow(cols, widths, values, width - gaps)
    limits: list[int | None] = [None if whole else w for w, whole in zip(widths, cols.whole)]
    return widths, limits, sum(widths) + gaps


def _narrow(cols: _Columns, widths: list[int], values: list[int], room: int) -> None:
    """Narrow `widths` (in place) towards `room` columns in all, given each column's widest
    value (`values`).

    First the widest other-text column loses one column at a time, down to TEXT_FLOOR
    (values shorter than that stay whole), so short columns stay whole while long text gives
    way; then headers are cut, down to their column's values (and MIN_CELL); then long text
    goes down to LAST_FLOOR, which beats turning the table into blocks for a few characters.
    Numbers and identifying values are never cut, nor identifying headers; no header is cut
    below its `distinct` width.
    """
    text_floors = [w if whole else min(w, max(MIN_CELL, min(v, TEXT_FLOOR)))
                   for w, v, whole in zip(widths, values, cols.whole)]
    header_floors = [min(w, max(v, MIN_CELL)) if whole else f
                     for w, v, f, whole in zip(widths, values, text_floors, cols.whole)]
    last_floors = [f if whole or v <= TEXT_FLOOR else min(f, LAST_FLOOR)
                   for f, v, whole in zip(header_floors, values, cols.whole)]
    # Identifying headers stay whole, and no header is cut so far it reads as another's.
    phases = [[w if named else min(w, max(f, d))
               for w, f, d, named in zip(widths, floors, cols.distinct, cols.named)]
              for floors in (text_floors, header_floors, last_floors)]
    for floors in phases:
        excess = sum(widths) - room
        # One column at a time, the widest first (the leftmost of equals), level by level:
        # the columns at the top level each lose one, as far as the excess goes.
        while excess > 0:
            candidates = [i for i, w in enumerate(widths) if w > floors[i]]
            if not candidates:
                break
            top = max(widths[i] for i in candidates)
            for i in [i for i in candidates if widths[i] == top][:excess]:
                widths[i] -= 1
                excess -= 1


def write_parquet(table: pa.Table, path: str) -> None:
    """`table` as a Parquet file at `path`; a column whose type Parquet cannot hold (an
    interval in a table that did not come from `Store.rows(arrow=True)`) is a `UsageError`
    naming it, before anything is written."""
    import pyarrow.parquet as pq

    for field in table.schema:
        try:
            pq.write_table(pa.table({field.name: pa.array([], field.type)}), io.BytesIO())
        except pa.ArrowNotImplementedError:
            raise UsageError(f"Parquet cannot hold column {field.name!r} ({field.type}): "
                             f"cast it in the query (as varchar, say) or choose another "
                             "format") from None
    pq.write_table(table, path)
