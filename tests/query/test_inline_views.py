"""Views inlined into a statement (`Store(inline_views=True)`, what runstore's commands open:
`Database.statement`) answer as the created views do, create none of them (nor the tables,
`settings` and `kl_keys` a store's statement reads, but a linked table), and a DuckDB error
names the line of the query as its caller wrote it.

Each canned view is read through a fresh inlining Store and held to `store.connect()`, where
every table and view is created up front (the path the inlining replaces).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import runstore
from conftest import examples
from runstore.errors import QueryError
from runstore.query.connect import LINKED
from runstore.query.views import views
from runstore.store import Store


@pytest.fixture(scope="module")
def store_dir(shared_demo_store: Path) -> Path:
    return shared_demo_store


def test_inlined_views_answer_like_created_ones(store_dir: Path) -> None:
    canned = {v.name for v in views()}
    full = runstore.open(store_dir).connect()
    try:
        for name in sorted(canned):
            q = f'select * from "{name}" order by all'
            want = full.sql(q).to_arrow_table()
            store = Store(store_dir, inline_views=True)  # a fresh database for each
            got = store.arrow(q)
            # Floating sums may differ in the last digit: DuckDB adds in parallel, in any order.
            assert_frame_equal(pl.from_arrow(got), pl.from_arrow(want),  # type: ignore[arg-type]
                               check_exact=False, rel_tol=1e-12)
            made = store._session._db._made  # type: ignore[union-attr]
            # Made only: a table with a column resolved when queried, and what that reads.
            assert made <= {*LINKED, "checkpoints"}, (name, made)
    finally:
        full.close()


@pytest.mark.parametrize("query,inlined", [
    ("with n as (select count(*) as n from run_labels) select n from n", True),
    ("with recursive n as (select count(*) as n from run_labels) select n from n", False),
    ("from run_labels select count(*) as n", False),
    ("(select count(*) as n from run_labels)", False),
])
def test_a_statement_that_is_no_select_creates_its_views(store_dir: Path, query: str,
                                                         inlined: bool) -> None:
    """A statement starting with WITH (not RECURSIVE) gets its views at the head of its
    list; any other that is no SELECT creates them."""
    store = Store(store_dir, inline_views=True)
    assert store.rows(query).to_pylist() == store.rows("select count(*) as n from runs"
                                                       ).to_pylist()
    made = store._session._db._made  # type: ignore[union-attr]
    assert ("run_labels" not in made) if inlined else ("run_labels" in made), made


@pytest.mark.parametrize("name", ["main.kl_health", "memory.main.kl_health",
                                  '"main"."run_summary"', "memory.run_labels"])
def test_a_view_named_with_its_schema_or_catalog_is_read_as_created(store_dir: Path,
                                                                    name: str) -> None:
    """A CTE has no schema: a qualified view name makes the statement create what it reads,
    and it answers as the Python API's created views do."""
    q = f"select count(*) as n from {name}"
    want = runstore.open(store_dir).rows(q).to_pylist()
    assert Store(store_dir, inline_views=True).rows(q).to_pylist() == want
    assert want[0]["n"] > 0


@pytest.mark.parametrize("inline", [True, False])
def test_a_cte_named_like_a_view_covers_only_its_scope(store_dir: Path, inline: bool) -> None:
    """A subquery's CTE named `kl_health` shadows the view inside the subquery only: outside
    it, `kl_health` is the view (it was left uncreated, "does not exist"), with the views
    inlined or created."""
    q = ("select count(*) as n, max(s.a) as a from kl_health, "
         "(select * from (with kl_health as (select 7 as a) select a from kl_health)) as s")
    got = Store(store_dir, inline_views=inline).rows(q).to_pylist()
    full = runstore.open(store_dir).connect()
    try:
        n = full.execute("select count(*) from kl_health").fetchone()[0]
    finally:
        full.close()
    assert got == [{"n": n, "a": 7}] and n > 0


# Names a query may give its CTEs or read: views, tables, and one of neither.
NAMES = ["kl_health", "run_labels", "runs", "metric_keys", "mine"]


@st.composite
def scoped_query(draw: st.DrawFn, depth: int = 0) -> str:
    """A query whose CTEs (in subqueries, at any depth) may be named like a view or table
    and may read a name defined before them, after them, by themselves or outside."""
    ctes = draw(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(NAMES)),
                         max_size=2, unique_by=lambda c: c[0]))
    head = ("with " + ", ".join(f"{name} as (select count(*) as n from {reads})"
                                for name, reads in ctes) + " ") if ctes else ""
    body = f"select count(*) as n from {draw(st.sampled_from(NAMES))}"
    if depth < 2 and draw(st.booleans()):
        body += f", ({draw(scoped_query(depth + 1))}) as s{depth}"
    return head + body


def answer(run: Any) -> Any:
    try:
        return sorted(run())
    except QueryError as e:
        return ("error", type(e).__name__)


@pytest.fixture(scope="module")
def everything(store_dir: Path) -> Any:
    """A connection with every table and view created up front."""
    con = runstore.open(store_dir).connect()
    yield con
    con.close()


@settings(max_examples=examples(30), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inner=scoped_query())
def test_names_resolve_as_with_every_view_created(store_dir: Path, everything: Any,
                                                  inner: str) -> None:
    """Whatever CTEs a query's subqueries define, a name outside their scope is the view or
    table: the inlined views and the ones created on demand answer as a connection with
    every table and view created up front (a query reading `mine`, none of ours, fails the
    same way everywhere)."""
    # As a subquery, and as the statement itself: one starting with WITH gets the views
    # and tables at the head of its list, unless its own CTEs are named like one of them.
    for q in (f"select * from ({inner}) as q", inner):
        try:
            want: Any = sorted(everything.execute(q).fetchall())
        except Exception as e:  # noqa: BLE001 - DuckDB's own error: which kind
            want = ("error", type(e).__name__)
        for inline in (True, False):
            got = answer(lambda: [tuple(r.values()) for r in
                                  Store(store_dir, inline_views=inline).rows(q).to_pylist()])
            if isinstance(want, tuple):
                assert isinstance(got, tuple), (q, inline, got)
            else:
                assert got == want, (q, inline)


@pytest.mark.parametrize("query", [
    "select no_such_column from run_summary",
    "select run_label,\n  no_such_column\nfrom run_summary",
    "select *\nfrom kl_health\nwhere\n  1 + 'x' > 0 and no_such_column",
    "with a as (select * from run_summary)\nselect no_such_column\nfrom a",
    "  with a as (select * from kl_health where no_such_column) select * from a",
    "with a as (select * from kl_health where no_such_column) select * from a, a as b, a as c, "
    "a as d, a as e, a as f, a as g, a as h where 1 = 1 and 2 = 2 and 3 = 3 and 4 = 4",
    "\nwith a as (select * from runs),\n  b as (select * from a join kl_health using (run_id))"
    "\nselect no_such_column from b",
])
def test_an_error_names_the_line_as_written(store_dir: Path, query: str) -> None:
    """Also where the views came at the head of the query's own WITH (its `with` blanked:
    the caret stays under the same column)."""
    with pytest.raises(QueryError) as created:
        Store(store_dir).rows(query)
    with pytest.raises(QueryError) as inlined:
        Store(store_dir, inline_views=True).rows(query)
    assert "LINE " in str(created.value)
    assert str(inlined.value) == str(created.value)


V1 = Path(__file__).parents[1] / "fixtures" / "store_v1"


def lacking(store_dir: Path, table: str) -> bool:
    """Whether a live file of `table` lacks a column the schema has (pyarrow's footer)."""
    import pyarrow.parquet as pq

    from runstore.storage import schema

    want = {c for c, _ in schema.duckdb_columns(table)}
    return any(not want <= set(pq.read_schema(store_dir / f).names)
               for f in read_manifest_files(store_dir, table))


def same_tables(store_dir: Path) -> set[str]:
    """Each table read by a statement of an inlining Store, held to the created table: the
    same columns in the same order, the same rows; the tables read inline (not made)."""
    from runstore.storage import schema

    full = runstore.open(store_dir).connect()
    inline: set[str] = set()
    try:
        for table in schema.TABLES:
            q = f'select * from "{table}"'
            want = full.sql(q).to_arrow_table()
            store = Store(store_dir, inline_views=True)
            got = store.arrow(q)
            assert got.column_names == want.column_names, table
            assert got.schema == want.schema, table
            assert sorted(map(repr, got.to_pylist())) == sorted(map(repr, want.to_pylist())), table
            if table not in store._session._db._made:  # type: ignore[union-attr]
                inline.add(table)
    finally:
        full.close()
    return inline


def test_tables_read_inline_answer_as_created_over_old_and_new_files(
        tmp_path: Path, small_tree: Path) -> None:
    """A table a statement reads inline (its files hold the schema's columns between them)
    answers as its created view does: on a store written at schema version 1, where no file
    has the columns later migrations added (made as before: those columns are typed nulls),
    and on that store migrated and ingested into, where old files lack columns new ones
    have (read inline, the old files' rows null in them)."""
    from runstore.storage import schema

    store_dir = tmp_path / "store_v1"
    shutil.copytree(V1, store_dir)
    old = same_tables(store_dir)
    assert "runs" not in old and lacking(store_dir, "runs")  # made: typed nulls
    store = runstore.open(store_dir)
    store.migrate()
    store.ingest([small_tree])
    mixed = same_tables(store_dir)
    assert "trajectories" in mixed and lacking(store_dir, "trajectories")  # old and new files
    with_files = {t for t in schema.TABLES if read_manifest_files(store_dir, t)}
    assert with_files - set(LINKED) <= mixed


def read_manifest_files(store_dir: Path, table: str) -> list[str]:
    from runstore.storage.manifest import read_manifest

    manifest = read_manifest(store_dir)
    assert manifest is not None
    return list(manifest.tables.get(table, {}).get("files", []))


@pytest.mark.parametrize("param", ["runstore_files_runs", "runstore_kl_key", "files", "names",
                                   "kl_threshold"])
def test_a_param_named_like_runstores_own_is_the_callers(store_dir: Path, param: str) -> None:
    """The params runstore binds for what it reads inline are its own: a query's param of
    the same name (or of the names they had before) is the query's, and a param named like
    a setting overrides the setting, inlined or created."""
    q = (f"select count(*) filter (where max_kl_v1 > ${param}) as n, count(*) as runs "
         "from kl_health")
    params = {param: 0.005}
    want = runstore.open(store_dir).connect().execute(
        "select count(*) filter (where max_kl_v1 > 0.005), count(*) from kl_health").fetchall()
    assert 0 < want[0][0] < want[0][1]
    for inline in (True, False):
        got = Store(store_dir, inline_views=inline).rows(q, params).to_pylist()
        assert [(r["n"], r["runs"]) for r in got] == want, inline
    flagged = ("select count(*) as n from kl_health where flagged")
    for inline in (True, False):
        over = Store(store_dir, inline_views=inline).rows(flagged, {"kl_threshold": 1e9})
        assert over.to_pylist() == [{"n": 0}], inline


def test_the_top_level_columns_read_from_the_footers_are_pyarrows(store_dir: Path) -> None:
    """Which columns a file's footer holds at the top level (`connect._top_level`, from
    DuckDB's flattened `parquet_schema`, nested columns' children included) is what
    pyarrow's footer reader says, for every live file of the demo store: lists and structs
    (`runs.tmp_files`, ...) among them."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from runstore.query.connect import _top_level
    from runstore.storage import schema

    files = [str(store_dir / f) for t in schema.TABLES
             for f in read_manifest_files(store_dir, t)]
    rows = duckdb.connect().execute("select file_name, name, num_children "
                                    "from parquet_schema($f)", {"f": files}).fetchall()
    assert any(pa.types.is_nested(field.type)  # nested columns are there
               for f in files for field in pq.read_schema(f))
    assert _top_level(rows) == {f: pq.read_schema(f).names for f in files}
