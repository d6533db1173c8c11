"""Views inlined into a statement (`Store(inline_views=True)`, what runstore's commands open:
`Database.statement`) answer as the created views do, create none of them, and a DuckDB error
names the line of the query as its caller wrote it.

Each canned view is read through a fresh inlining Store and held to `store.connect()`, where
every table and view is created up front (the path the inlining replaces).
"""

from __future__ import annotations

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
            assert made and not made & canned, (name, made)
    finally:
        full.close()


def test_a_statement_that_is_no_select_creates_its_views(store_dir: Path) -> None:
    store = Store(store_dir, inline_views=True)
    assert store.rows("with n as (select count(*) as n from run_labels) select n from n"
                      ).to_pylist() == store.rows("select count(*) as n from runs").to_pylist()
    assert "run_labels" in store._session._db._made  # type: ignore[union-attr]


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
    q = f"select * from ({inner}) as q"
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
])
def test_an_error_names_the_line_as_written(store_dir: Path, query: str) -> None:
    with pytest.raises(QueryError) as created:
        Store(store_dir).rows(query)
    with pytest.raises(QueryError) as inlined:
        Store(store_dir, inline_views=True).rows(query)
    assert "LINE " in str(created.value)
    assert str(inlined.value) == str(created.value)
