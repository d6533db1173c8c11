"""Views inlined into a statement (`Store(inline_views=True)`, what runstore's commands open:
`Database.statement`) answer as the created views do, create none of them, and a DuckDB error
names the line of the query as its caller wrote it.

Each canned view is read through a fresh inlining Store and held to `store.connect()`, where
every table and view is created up front (the path the inlining replaces).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import runstore
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
