"""CSV and JSON write whole columns at once only where that gives the text of each value.

Hypothesis over columns of one kind of value (floats with and without NaN/±Infinity, whole
numbers of any size, text with quotes, commas and line breaks, booleans) or of many kinds
(decimals, dates, lists, dicts, bytes), each with or without nulls, under names JSON escapes:
`render(rows, "csv")` equals every cell through `_text` one by one, and `json` and `jsonl`
equal `json.dumps` of the rows as dicts of `_plain` values (with `indent=1` for `json`).
`printable`, which every table cell goes through, equals its translation table's work.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

from hypothesis import given, settings, strategies as st

from conftest import examples
from runstore.present.render import _plain, _text, render
from runstore.printable import CONTROLS, printable
from runstore.query.rows import Rows

SCALARS = {
    "finite": st.floats(allow_nan=False, allow_infinity=False),
    "float": st.floats(),
    "int": st.integers(min_value=-2**70, max_value=2**70),
    "text": st.text(alphabet='ab,"\n\r ;é\\{}[]:', max_size=6),
    "bool": st.booleans(),
    "mixed": st.one_of(
        st.floats(), st.integers(), st.text(max_size=4), st.booleans(),
        st.decimals(allow_nan=False, allow_infinity=False, places=3),  # DuckDB's have neither
        st.dates(),
        st.datetimes(timezones=st.just(timezone.utc)),
        st.lists(st.one_of(st.integers(), st.floats(), st.text(max_size=3)), max_size=3),
        st.dictionaries(st.text(max_size=2), st.one_of(
            st.floats(), st.lists(st.integers(), max_size=2)), max_size=2),
        st.binary(max_size=3)),
}


@st.composite
def tables(draw: st.DrawFn) -> tuple[list[str], list[tuple[Any, ...]]]:
    width = draw(st.integers(1, 5))
    n = draw(st.integers(0, 8))
    columns = []
    for _ in range(width):
        kind = SCALARS[draw(st.sampled_from(sorted(SCALARS)))]
        cell = st.one_of(kind, st.none()) if draw(st.booleans()) else kind
        columns.append(draw(st.lists(cell, min_size=n, max_size=n)))
    # DuckDB names every column apart (`a`, `a_1`): no result repeats a name.
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "é \"x\"", "a, b", "{", "d: e"]),
                          min_size=width, max_size=width, unique=True))
    return names, [tuple(col[i] for col in columns) for i in range(n)]


def reference(names: list[str], data: list[tuple[Any, ...]]) -> str:
    """The csv module's CSV of each cell's text, row by row; a row with a lone carriage
    return in a cell (which the csv module leaves unquoted) with every cell quoted."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    quoted = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)
    for row in [names, *([_text(v) for v in row] for row in data)]:
        (quoted if any("\r" in c for c in row) else w).writerow(row)
    return buf.getvalue()


@settings(max_examples=examples(500), deadline=None)
@given(tables())
def test_csv_writes_every_cell_as_its_text(table: tuple[list[str], list[tuple[Any, ...]]]) -> None:
    names, data = table
    rows = Rows(names, [False] * len(names), data)
    out = render(rows, "csv")
    assert out == reference(names, data)
    # Read back, every row is a row and every cell its text (a carriage return in a cell once
    # ended the row for every reader).
    assert list(csv.reader(io.StringIO(out, newline=""))) == [
        names, *([_text(v) for v in row] for row in data)]


@settings(max_examples=examples(500), deadline=None)
@given(tables())
def test_json_writes_every_row_as_json_dumps_does(
        table: tuple[list[str], list[tuple[Any, ...]]]) -> None:
    names, data = table
    rows = Rows(names, [False] * len(names), data)
    plain = [{c: _plain(v) for c, v in zip(names, row)} for row in data]
    assert render(rows, "json") == json.dumps(plain, allow_nan=True, ensure_ascii=False,
                                              indent=1, default=str) + "\n"
    assert render(rows, "jsonl") == "".join(
        json.dumps(r, allow_nan=True, ensure_ascii=False, default=str) + "\n" for r in plain)


def test_rows_without_columns_or_rows() -> None:
    for names, data in (([], []), ([], [(), ()]), (["a"], [])):
        rows = Rows(names, [False] * len(names), data)
        assert render(rows, "csv") == reference(names, data)
        plain = [dict(zip(names, row)) for row in data]
        assert render(rows, "json") == json.dumps(plain, indent=1) + "\n"
        assert render(rows, "jsonl") == "".join(json.dumps(r) + "\n" for r in plain)


def test_non_finite_floats_are_named_in_a_column_of_floats() -> None:
    rows = Rows(["x", "d"], [True, False],
                [(1.5, date(2024, 1, 2)), (float("nan"), None), (float("-inf"), None),
                 (-0.0, datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc)),
                 (1e-05, Decimal("1.50"))])
    assert render(rows, "csv").splitlines() == [
        "x,d", "1.5,2024-01-02", "NaN,", "-Infinity,", "-0.0,2024-01-02T03:04:05+00:00",
        "1e-05,1.50"]


@settings(max_examples=examples(1000), deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=12))
def test_printable_returns_printable_text_as_it_is_and_translates_the_rest(text: str) -> None:
    """`printable` skips the translation for text Python calls printable: it must be text
    the translation leaves as it is. Every character the table maps is one Python does not
    call printable, and any text comes out as the translation gives it."""
    assert not any(chr(c).isprintable() for c in CONTROLS)
    assert printable(text) == text.translate(CONTROLS)


@settings(max_examples=examples(300), deadline=None)
@given(tables(), st.lists(st.text(alphabet="ab|\n\r\t\x1b ", min_size=1, max_size=5),
                          min_size=5, max_size=5, unique=True))
def test_markdown_is_one_line_a_row_whatever_the_names_hold(
        table: tuple[list[str], list[tuple[Any, ...]]], odd: list[str]) -> None:
    """A markdown table is a header line, a rule line and a line per row, each with a cell
    per column, whatever the column names hold (`|`, newlines, escapes)."""
    names, data = table
    names = odd[:len(names)]
    rows = Rows(names, [False] * len(names), data)
    lines = render(rows, "markdown").splitlines()
    assert len(lines) == 2 + len(data)
    for line in lines:
        # cells: the `|` not escaped by a backslash split them
        cells = [c for c in line.replace("\\|", "").split("|")][1:-1]
        assert len(cells) == len(names), (line, names)
