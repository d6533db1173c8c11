"""The fast path of a query (issue 13, "a command that answers in a blink") gives the same
answers as the full path, stays inside the sandbox, and imports nothing it does not need.

The fast path: a connection creates only the tables and views a query names (all of them
for catalog introspection), the guard asks DuckDB's parser (no sqlglot), the CLI prints plain
rows where they render exactly as Arrow would (no pyarrow), and `store.sql` hands DuckDB's
result to polars through the Arrow C stream (no pyarrow). Each shortcut is held here against
the path it replaces: every view and table answered lazily equals the answer of a connection
with everything created; plain rows render byte for byte like the Arrow table in every format
(a hypothesis differential test over every type they take); `store.sql` frames equal
`pl.from_arrow(store.arrow(...))`. The sandbox is checked on the fast path itself (a query
that creates no view at all), and a real `runstore sql` process is checked to import neither
pyarrow, polars, numpy nor sqlglot.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import runstore
from runstore.present import render as output
from runstore.query.rows import from_polars, from_relation
from runstore.query.views import views
from conftest import examples

HEAVY = ("pyarrow", "polars", "numpy", "sqlglot", "pandas", "deltalake")


@pytest.fixture(scope="module")
def store_dir(shared_demo_store: Path) -> Path:
    return shared_demo_store


def names() -> list[str]:
    from runstore.storage import schema

    return [*schema.TABLES, "settings", "kl_keys", *(v.name for v in views())]


def test_lazy_connection_answers_like_the_full_one(store_dir: Path) -> None:
    import polars as pl

    """Each table and view through a fresh Store (its database creates only what the query
    needs) against `store.connect()` (everything created up front)."""
    full = runstore.open(store_dir).connect()
    try:
        for name in names():
            q = f'select * from "{name}" order by all'
            want = full.sql(q).to_arrow_table()
            store = runstore.open(store_dir)  # a fresh database for each: lazy from nothing
            got = store.arrow(q)
            # Floating sums may differ in the last digit: DuckDB adds in parallel, in any order.
            assert_frame_equal(pl.from_arrow(got), pl.from_arrow(want),  # type: ignore[arg-type]
                               check_exact=False, rel_tol=1e-12)
            assert store._session._db is not None and name in store._session._db._made
    finally:
        full.close()


def sqlglot_direct(body: str) -> set[str]:
    """The tables and views a view body reads, by sqlglot (a second parser: the connection
    uses DuckDB's)."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(body, read="duckdb")
    return {t.name for t in tree.find_all(exp.Table)} - {c.alias_or_name
                                                         for c in tree.find_all(exp.CTE)}


def sqlglot_reads(name: str) -> set[str]:
    """`name` and everything it reads, transitively."""
    bodies = {v.name: v.body for v in views()}
    if name not in bodies:
        return {name}
    return {name}.union(*(sqlglot_reads(d) for d in sqlglot_direct(bodies[name])))


def test_view_dependencies_agree_with_sqlglot() -> None:
    for v in views():
        assert set(v.depends) == sqlglot_direct(v.body), v.name


def test_lazy_connection_creates_only_what_is_needed(store_dir: Path) -> None:
    store = runstore.open(store_dir)
    store.sql("select 1")
    assert store._session._db is not None and store._session._db._made == set()
    store.sql("with runs as (select 1 as x) select * from runs")  # a CTE, not the table
    assert store._session._db._made == set()
    store.sql("select count(*) from kl_health")
    assert store._session._db._made == sqlglot_reads("kl_health")
    store.sql("select count(*) from run_summary")
    assert store._session._db._made == sqlglot_reads("kl_health") | sqlglot_reads("run_summary")
    # Catalog introspection sees everything, whatever was created before.
    shown = set(store.sql("show tables")["name"].to_list())
    assert shown == set(names())
    assert store.sql("select count(*) as n from information_schema.tables").item() == \
        len(names())


def test_sandbox_holds_on_the_fast_path(store_dir: Path, tmp_path: Path) -> None:
    """A query that creates no view at all runs on the same confined connection."""
    secret = tmp_path / "secret.txt"
    secret.write_text("hush\n")
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    for q, code, want in (
            ("select current_setting('enable_external_access') as a, "
             "current_setting('lock_configuration') as b, "
             "current_setting('temp_directory') as t", 0, "a,b,t\nFalse,True,\n"),
            (f"select * from read_text('{secret}')", 2, "refused"),
            ("select * from enable_logging(level='trace', storage='file', "
             f"storage_path='{tmp_path / 'log'}')", 2, "only runs queries")):
        proc = subprocess.run([sys.executable, "-m", "runstore", "--store", str(store_dir),
                               "sql", q, "-F", "csv"], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=120)
        assert proc.returncode == code, proc.stderr
        assert want in (proc.stdout if code == 0 else proc.stderr)
        assert "hush" not in proc.stdout + proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["secret.txt"]  # no .tmp, no log


@pytest.mark.parametrize("args,heavy", [
    (["sql", "select 1"], set()),
    (["sql", "select run_name from kl_health where flagged"], set()),
    (["sql", "select * from runs"], set()),  # TIMESTAMP WITH TIME ZONE rows are plain
    (["sql", "select * from kl_health", "-F", "json"], set()),
    (["sql", "select {'a': 1} as s"], {"pyarrow", "numpy"}),  # a STRUCT: Arrow renders it
])
def test_cli_sql_imports_only_what_it_needs(store_dir: Path, args: list[str],
                                            heavy: set[str]) -> None:
    code = ("import sys\n"
            "from click.testing import CliRunner\n"
            "from runstore.cli import main\n"
            f"r = CliRunner().invoke(main, ['--store', {str(store_dir)!r}, *{args!r}])\n"
            "assert r.exit_code == 0, r.output\n"
            f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert set(filter(None, out.stdout.strip().split(","))) == heavy


def test_store_sql_needs_no_pyarrow(store_dir: Path) -> None:
    code = ("import sys, runstore\n"
            f"s = runstore.open({str(store_dir)!r})\n"
            "assert s.sql('select run_name from kl_health where flagged').height == 1\n"
            f"print(','.join(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120)
    assert set(out.stdout.strip().split(",")) == {"polars"}


def test_store_sql_frames_equal_the_arrow_path(store_dir: Path) -> None:
    import polars as pl

    store = runstore.open(store_dir)
    for name in names():
        q = f'select * from "{name}" order by all'
        assert_frame_equal(store.sql(q), pl.from_arrow(store.arrow(q)),  # type: ignore[arg-type]
                           check_exact=False, rel_tol=1e-12)


@pytest.mark.slow
def test_views_render_alike_from_rows_and_from_arrow(store_dir: Path) -> None:
    """Every table and view of the demo store, in every text format, both ways."""
    con = runstore.open(store_dir).connect()
    try:
        for name in names():
            arrow = con.sql(f'select * from "{name}" order by all').to_arrow_table()
            # The same values both ways (running the view twice could sum floats in another
            # order): the rows come from DuckDB reading back the Arrow result.
            fast = from_relation(con.from_arrow(arrow))
            assert isinstance(fast, output.Rows), name  # every table and view prints plain
            for fmt in ("table", "csv", "json", "jsonl", "markdown"):
                assert output.render(fast, fmt, width=120) == output.render(arrow, fmt,
                                                                            width=120), \
                    (name, fmt)
    finally:
        con.close()


# ---------------------------------------------------------------------------------------------
# Rows against Arrow, for every type the rows path takes (hypothesis)

SAFE_TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=30)
TZ = dt.timezone.utc
COLUMN_TYPES = {
    "BOOLEAN": (pa.bool_(), st.booleans()),
    "TINYINT": (pa.int8(), st.integers(-128, 127)),
    "SMALLINT": (pa.int16(), st.integers(-2**15, 2**15 - 1)),
    "INTEGER": (pa.int32(), st.integers(-2**31, 2**31 - 1)),
    "BIGINT": (pa.int64(), st.integers(-2**63, 2**63 - 1)),
    "UTINYINT": (pa.uint8(), st.integers(0, 255)),
    "UBIGINT": (pa.uint64(), st.integers(0, 2**64 - 1)),
    "FLOAT": (pa.float32(), st.floats(width=32)),
    "DOUBLE": (pa.float64(), st.floats()),
    "VARCHAR": (pa.string(), SAFE_TEXT),
    "BLOB": (pa.binary(), st.binary(max_size=20)),
    "DATE": (pa.date32(), st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))),
    "TIME": (pa.time64("us"), st.times()),
    "TIMESTAMP": (pa.timestamp("us"), st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30))),
    "TIMESTAMP WITH TIME ZONE": (pa.timestamp("us", tz="UTC"),
                                 st.datetimes(dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30),
                                              timezones=st.just(TZ))),
    "DECIMAL(18,3)": (pa.decimal128(18, 3), st.decimals(-10**14, 10**14, places=3,
                                                        allow_nan=False, allow_infinity=False)),
    "DECIMAL(38,0)": (pa.decimal128(38, 0), st.decimals(-10**37, 10**37, places=0,
                                                        allow_nan=False, allow_infinity=False)),
    "VARCHAR[]": (pa.list_(pa.string()), st.lists(st.none() | SAFE_TEXT, max_size=3)),
    "DOUBLE[]": (pa.list_(pa.float64()), st.lists(st.none() | st.floats(), max_size=3)),
}


@st.composite
def results(draw: st.DrawFn) -> tuple[list[str], pa.Table]:
    picked = draw(st.lists(st.sampled_from(sorted(COLUMN_TYPES)), min_size=1, max_size=5))
    n = draw(st.integers(0, 6))
    arrays, names_ = [], []
    for i, typ in enumerate(picked):
        arrow_type, values = COLUMN_TYPES[typ]
        arrays.append(pa.array(draw(st.lists(st.none() | values, min_size=n, max_size=n)),
                               type=arrow_type))
        names_.append(draw(st.sampled_from([f"c{i}", f"col {i}", f"x{i}|y", "dup"])))
    return picked, pa.table(arrays, names=[f"a{i}" for i in range(len(arrays))]), names_


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(results(), st.sampled_from([20, 60, 100, 200]))
def test_rows_render_exactly_like_arrow(drawn: tuple, width: int) -> None:
    picked, data, labels = drawn
    con = duckdb.connect()
    try:
        con.register("data", data)
        cols = ", ".join(f'cast(a{i} as {t}) as "{labels[i]}"' for i, t in enumerate(picked))
        q = f"select {cols} from data"
        fast = from_relation(con.sql(q))
        assert isinstance(fast, output.Rows), picked
        arrow = con.sql(q).to_arrow_table()
        for fmt in ("table", "csv", "json", "jsonl", "markdown"):
            assert output.render(fast, fmt, width=width) == output.render(arrow, fmt,
                                                                          width=width), fmt
    finally:
        con.close()


# The types whose polars frames print as plain rows (`from_polars`); the others go through
# Arrow, as they do from DuckDB.
POLARS_PLAIN = {"BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "UBIGINT",
                "FLOAT", "DOUBLE", "VARCHAR"}


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(results(), st.sampled_from([20, 60, 100, 200]))
def test_polars_rows_render_exactly_like_arrow(drawn: tuple, width: int) -> None:
    """A polars frame (what `runstore compare` prints) as plain rows renders as its Arrow
    table does, in every format; a frame of plain types is read without Arrow."""
    import polars as pl

    picked, data, _ = drawn
    df = pl.from_arrow(data)
    assert isinstance(df, pl.DataFrame)
    fast = from_polars(df)
    assert isinstance(fast, output.Rows) == (set(picked) <= POLARS_PLAIN), picked
    arrow = df.to_arrow()
    for fmt in ("table", "csv", "json", "jsonl", "markdown"):
        assert output.render(fast, fmt, width=width, whole=["a0"]) == \
            output.render(arrow, fmt, width=width, whole=["a0"]), fmt


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(results(), st.data())
def test_rows_slice_and_select_as_arrow_does(drawn: tuple, data: st.DataObject) -> None:
    """`Rows.slice` and `Rows.select` give what `pa.Table.slice` / `select` give (callers such
    as `runstore check` use either table alike)."""
    picked, table, _ = drawn
    con = duckdb.connect()
    try:
        con.register("data", table)
        q = "select " + ", ".join(f"cast(a{i} as {t}) as a{i}" for i, t in enumerate(picked)) \
            + " from data"
        rows, arrow = from_relation(con.sql(q)), con.sql(q).to_arrow_table()
        assert isinstance(rows, output.Rows)
        offset = data.draw(st.integers(0, arrow.num_rows + 1))
        length = data.draw(st.none() | st.integers(0, arrow.num_rows + 1))
        names = data.draw(st.lists(st.sampled_from(arrow.column_names), min_size=1,
                                   unique=True))
        for got, want in ((rows.slice(offset, length), arrow.slice(offset, length)),
                          (rows.select(names), arrow.select(names)),
                          (rows.slice(offset).select(names), arrow.slice(offset).select(names))):
            assert got.column_names == want.column_names and got.num_rows == want.num_rows
            assert repr(got.to_pylist()) == repr(want.to_pylist())  # NaN compares by text
        with pytest.raises(KeyError):
            rows.select(["no such column"])
    finally:
        con.close()


@pytest.mark.parametrize("sql", ["select 1::hugeint as h", "select {'a': 1} as s",
                                 "select map {'k': 1} as m", "select uuid() as u",
                                 "select interval 1 day as i", "select 'a'::enum('a') as e",
                                 "select [{'a': 1}] as l"])
def test_other_types_take_the_arrow_path(sql: str) -> None:
    con = duckdb.connect()
    try:
        assert isinstance(from_relation(con.sql(sql)), pa.Table)
    finally:
        con.close()


def test_decimal_values_are_the_same_decimals() -> None:
    """The rows path must not turn DuckDB's DECIMAL into floats (JSON shows them as numbers
    either way, but the table and CSV show their digits)."""
    con = duckdb.connect()
    try:
        rows = from_relation(con.sql("select 1.50 as d, 0.1::decimal(3,2) as e"))
        assert isinstance(rows, output.Rows)
        assert rows.data == [(decimal.Decimal("1.50"), decimal.Decimal("0.10"))]
    finally:
        con.close()
