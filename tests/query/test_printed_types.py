"""Every DuckDB type prints as DuckDB means it, and a repeated column name loses nothing.

Each value whose type Python or Arrow cannot hold as DuckDB means it (an interval's months, a
bit string, a blob's bytes, a BIGNUM, nanoseconds, a time's UTC offset, and any nested type
holding one) is printed by `runstore sql` in every text format, sent by the worker that
answers the web UI's console and the MCP `sql` tool, and written to Parquet, as DuckDB's own
text of it. The expected text comes from DuckDB itself (`CAST(x AS VARCHAR)` on a plain
connection), never from runstore. These once printed `MonthDayNano(months=0, ...)`, a bit
string's internal bytes, `\\ufffd` for a blob's 0xFF, a time without its offset, stopped
with "unexpected ValueError" on nanoseconds, or failed to write Parquet (exit 70); every
column of DuckDB's `test_all_types()` prints in each format (its extremes stopped them all).

A HUGEINT prints exactly in JSON (it was a double: 1.7014118346046923e+38), and two columns
of one name (`select 1 as a, 2 as a`) both print, named apart as DuckDB names a subquery's
columns (the second value was printed twice, or dropped from JSON).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mcpkit
import runstore
import storekit

# (name, DuckDB expression): a value of each type that prints as text, alone and nested.
TEXT = [
    ("interval", "interval '1 month 2 days 3 microseconds'"),
    ("bit", "'10110'::bit"),
    ("blob", "'\\x00\\xFFa\\x5Cb'::blob"),
    ("bignum", "123456789012345678901234567890123456789012::bignum"),
    ("timestamp_ns", "'2020-01-01 00:00:00.123456789'::timestamp_ns"),
    ("time_ns", "'01:02:03.123456789'::time_ns"),
    ("timetz", "'01:02:03+05:30'::timetz"),
    ("interval_list", "[interval 1 month, null, interval 2 days]"),
    ("blob_struct", "{'b': '\\xFF'::blob, 'n': 1}"),
    ("interval_map", "map([1, 2], [interval 1 day, interval 1 year])"),
    ("bit_union", "union_value(k := '101'::bit)"),
    ("timetz_array", "['01:02:03+05'::timetz]::timetz[1]"),
    ("uhugeint", f"{2 ** 128 - 1}::uhugeint"),
]
# Of those, what Arrow (and so Parquet) cannot hold: the rest keep their Arrow types there.
ARROW_TEXT = {"interval", "bit", "bignum", "timetz", "interval_list", "interval_map",
              "bit_union", "timetz_array", "uhugeint"}
QUERY = "select " + ", ".join(f"{expr} as {name}" for name, expr in TEXT)


def duckdb_text() -> dict[str, str]:
    """Each value as DuckDB's own text, on a connection runstore has nothing to do with."""
    casts = ", ".join(f"cast({expr} as varchar) as {name}" for name, expr in TEXT)
    with duckdb.connect() as con:
        (row,) = con.sql(f"select {casts}").fetchall()
    return dict(zip([name for name, _ in TEXT], row))


@pytest.fixture(scope="module")
def store(shared_demo_store: Path) -> Path:
    return shared_demo_store


def sql(store: Path, *args: str) -> str:
    r = storekit.cli(store, "sql", *args)
    assert r.exit_code == 0, r.output
    return r.output


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "markdown", "table"])
def test_each_format_prints_duckdbs_text(store: Path, fmt: str) -> None:
    expected = duckdb_text()
    out = sql(store, QUERY, "-F", fmt, "--wide")
    if fmt == "csv":
        (row,) = list(csv.DictReader(io.StringIO(out)))
    elif fmt == "json":
        (row,) = json.loads(out)
    elif fmt == "jsonl":
        row = json.loads(out)
    else:
        # One row; markdown escapes a pipe, the table format shows control characters
        # escaped: none of these values hold either, so the cells are the text itself.
        lines = [line for line in out.splitlines() if line.strip()]
        if fmt == "markdown":
            cells = [c.strip() for c in lines[2].strip().strip("|").split(" | ")]
        else:
            cells = [c for c in lines[2].split("  ") if c]
            cells = [c.strip() for c in cells]
        row = dict(zip([name for name, _ in TEXT], cells))
        assert len(cells) == len(TEXT), (cells, out)
    assert row == expected


def test_parquet_holds_what_arrow_can_and_text_for_the_rest(store: Path, tmp_path: Path) -> None:
    expected = duckdb_text()
    out = tmp_path / "types.parquet"
    sql(store, QUERY, "-o", str(out))
    table = pq.read_table(out)
    assert table.column_names == [name for name, _ in TEXT]
    for name in ARROW_TEXT:
        assert table.schema.field(name).type == pa.string(), name
        assert table[name].to_pylist() == [expected[name]], name
    # What Arrow holds keeps its type, and its value is DuckDB's.
    with duckdb.connect() as con:
        want = con.sql(f"select {dict(TEXT)['blob']} as b, {dict(TEXT)['timestamp_ns']} as t") \
            .to_arrow_table()
    assert table["blob"].to_pylist() == want["b"].to_pylist() == [b"\x00\xffa\\b"]
    assert table.schema.field("timestamp_ns").type == pa.timestamp("ns")
    assert table["timestamp_ns"].cast(pa.int64()).to_pylist() == \
        want["t"].cast(pa.int64()).to_pylist()


# Columns of DuckDB's `test_all_types()` at the ends of their range that neither Arrow nor
# DuckDB's reading of Arrow makes a Python value of (a date beyond year 9999, nanoseconds
# beyond microseconds' range, the smallest HUGEINT): the whole function once stopped every
# format with "unexpected OutOfRangeException" (exit 70).
EXTREMES = ["hugeint", "uhugeint", "date", "timestamp", "timestamp_s", "timestamp_ns", "time"]


@pytest.mark.parametrize("fmt", ["csv", "json", "jsonl", "markdown", "table"])
def test_every_type_at_the_ends_of_its_range_prints(store: Path, fmt: str) -> None:
    with duckdb.connect() as con:
        names = con.sql("select * from test_all_types()").columns
        texts = con.sql("select " + ", ".join(f"cast({c} as varchar)" for c in EXTREMES)
                        + " from test_all_types()").fetchall()
    out = sql(store, "select * from test_all_types()", "-F", fmt)
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(out)))
        assert list(rows[0]) == names
        assert [tuple(r[c] or None for c in EXTREMES) for r in rows] == texts
    elif fmt in ("json", "jsonl"):
        rows = json.loads(out) if fmt == "json" else [json.loads(x) for x in out.splitlines()]
        assert [list(r) for r in rows] == [names] * len(texts)
        for r, want in zip(rows, texts):  # numbers stay numbers, the rest DuckDB's text
            assert [None if r[c] is None else str(r[c]) for c in EXTREMES] == list(want)
    else:
        assert all(t in out for row in texts for t in row if t is not None), out
    out = sql(store, "select " + ", ".join(EXTREMES) + " from test_all_types()", "-F", "csv")
    assert [tuple(v or None for v in r) for r in list(csv.reader(io.StringIO(out)))[1:]] == texts


def test_a_carriage_return_in_a_csv_cell_is_quoted(store: Path, tmp_path: Path) -> None:
    """The csv module leaves a cell with a lone carriage return unquoted, which readers take
    for the end of a row (a blob's bytes, a log line written on Windows)."""
    out = sql(store, 'select 1 as n, \'a\' || chr(13) || \'b\' as "c" union all '
              "select 2, null union all select 3, 'x\ny'", "-F", "csv")
    assert list(csv.reader(io.StringIO(out, newline=""))) == [
        ["n", "c"], ["1", "a\rb"], ["2", ""], ["3", "x\ny"]]
    (tmp_path / "out.csv").write_text(out, newline="")
    with duckdb.connect() as con:  # another reader, rows and values alike
        assert con.sql("select * from read_csv($f, header = true, all_varchar = true)",
                       params={"f": str(tmp_path / "out.csv")}).fetchall() == [
            ("1", "a\rb"), ("2", None), ("3", "x\ny")]
    named = sql(store, 'select 1 as "a' + "\r" + 'b"', "-F", "csv")
    assert list(csv.reader(io.StringIO(named, newline=""))) == [["a\rb"], ["1"]]


def test_hugeint_is_an_exact_json_number(store: Path) -> None:
    big = 2 ** 127 - 1
    out = sql(store, f"select {big}::hugeint as h, -{big}::hugeint as m, "
              "[1::hugeint, -5] as l, 1.50::decimal(30, 2) as d", "-F", "jsonl")
    row = json.loads(out)
    assert row == {"h": big, "m": -big, "l": [1, -5], "d": 1.5}
    assert isinstance(row["h"], int) and isinstance(row["l"][0], int)


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "markdown", "table"])
def test_columns_of_one_name_all_print(store: Path, fmt: str, tmp_path: Path) -> None:
    query = "select 1 as a, 2 as a, 3 as A, interval 1 day as a, 'x' as b"
    with duckdb.connect() as con:  # how DuckDB names a subquery's columns apart
        names = con.sql(f"select * from ({query})").columns
    assert len(set(names)) == 5
    out = sql(store, query, "-F", fmt, "--wide")
    values = ["1", "2", "3", "1 day", "x"]
    if fmt == "csv":
        assert out.splitlines() == [",".join(names), ",".join(values)]
    elif fmt == "jsonl":
        assert json.loads(out) == dict(zip(names, [1, 2, 3, "1 day", "x"]))
    else:
        lines = [line for line in out.splitlines() if line.strip()]
        header = [c for c in lines[0].replace("|", " ").split(" ") if c]
        row = [c for c in lines[2].replace("|", " ").split(" ") if c]
        assert header == names
        assert " ".join(row) == " ".join(values)
    parquet = tmp_path / "a.parquet"
    sql(store, query, "-o", str(parquet))
    assert pq.read_table(parquet).to_pylist() == [dict(zip(names, [1, 2, 3, "1 day", "x"]))]


def test_the_worker_sends_duckdbs_text(store: Path) -> None:
    """The process behind the web UI's SQL console and the MCP `sql` tool."""
    expected = duckdb_text()
    s = runstore.open(store)
    try:
        table, rows = s.workers().head(QUERY + ", 7 as interval", {}, rows=5, nbytes=1 << 20,
                                       text="print")
    finally:
        s.workers().close()
    assert rows == 1
    (row,) = table.to_pylist()
    assert row == {**expected, "interval_1": 7}


def test_the_mcp_sql_tool_prints_duckdbs_text(store: Path) -> None:
    expected = duckdb_text()
    picked = ["interval", "bit", "timetz", "interval_list", "bignum"]
    query = "select " + ", ".join(f"{dict(TEXT)[n]} as {n}" for n in picked)
    with mcpkit.McpSession(store) as session:
        text = session.ok("sql", {"query": query, "format": "csv"})
    (row,) = list(csv.DictReader(io.StringIO(text)))  # one table, nothing else
    assert row == {n: expected[n] for n in picked}


def test_the_web_ui_console_and_its_downloads_show_duckdbs_text(ui_server: Any) -> None:
    from ui_harness import http

    expected = duckdb_text()
    r = http(ui_server.url, "POST", "/api/sql", body={"sql": QUERY})
    assert r.status == 200, r.text
    res = r.json()
    assert res["columns"] == [name for name, _ in TEXT]
    assert dict(zip(res["columns"], res["rows"][0])) == expected
    r = http(ui_server.url, "POST", "/api/sql/download", body={"sql": QUERY, "format": "csv"})
    assert r.status == 200
    assert list(csv.DictReader(io.StringIO(r.text))) == [expected]
    r = http(ui_server.url, "POST", "/api/sql/download", body={"sql": QUERY, "format": "parquet"})
    assert r.status == 200
    table = pq.read_table(pa.BufferReader(r.body))
    for name in ARROW_TEXT:
        assert table[name].to_pylist() == [expected[name]], name
    assert table["blob"].to_pylist() == [b"\x00\xffa\\b"]
