"""The Python API takes any value: a wrong type is runstore's error saying what to give.

Each call below once raised Python's own TypeError or AttributeError from deep inside
(`extract_statements(): incompatible function arguments`, `'int' object is not iterable`,
`'NoneType' object has no attribute 'lower'`), or was taken for something else (a step of
1.5 searched for, an iteration past int64 sent to DuckDB). Each is now a `RunstoreError`
naming the argument, in process and through a worker (`isolated=True`) alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

import runstore

RUN = "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"

CALLS: list[tuple[str, Callable[[Any], Any], str]] = [
    ("sql bytes", lambda s: s.sql(b"select 1"), "a query is text (a str), got bytes"),
    ("sql bytes isolated", lambda s: s.sql(b"select 1", isolated=True), "got bytes"),
    ("arrow None", lambda s: s.arrow(None), "a query is text (a str), got NoneType"),
    ("sql params list", lambda s: s.sql("select $x", params=[1]),
     "params is a mapping of names to values"),
    ("sql params list isolated", lambda s: s.sql("select $x", params=[1], isolated=True),
     "params is a mapping"),
    ("sql params str", lambda s: s.sql("select $x", params="x=1"), "got str"),
    ("table None", lambda s: s.table(None), "a table or view is named by text, got None"),
    ("schema 5", lambda s: s.schema(5), "named by text, got 5"),
    ("messages groups int", lambda s: s.messages(RUN, iteration=0, groups=5),
     "groups is a list of whole numbers, got 5"),
    ("messages groups text", lambda s: s.messages(RUN, iteration=0, groups="01"),
     "groups is a list of whole numbers"),
    ("trajectories past int64", lambda s: s.trajectories(RUN, iteration=2 ** 63),
     f"give a whole number from {-2 ** 63} to {2 ** 63 - 1}"),
    ("trace step 1.5", lambda s: s.trace(RUN, step=1.5), "step is a whole number, got 1.5"),
    ("trace segment True", lambda s: s.trace(RUN, segment=True), "segment is a whole number"),
]


@pytest.mark.parametrize("call, message", [(c, m) for _, c, m in CALLS],
                         ids=[name for name, _, _ in CALLS])
def test_a_wrong_type_is_runstores_error(shared_demo_store: Path, call: Callable[[Any], Any],
                                         message: str) -> None:
    with runstore.open(shared_demo_store) as store:
        with pytest.raises(runstore.RunstoreError) as err:
            call(store)
    assert message in str(err.value)


def test_a_mapping_that_is_not_a_dict_binds_as_one(shared_demo_store: Path) -> None:
    from types import MappingProxyType

    with runstore.open(shared_demo_store) as store:
        got = store.fetch("select $a + $b", MappingProxyType({"a": 1, "b": 2}),
                          convert=lambda r: r.fetchall())
    assert got == [(3,)]


# A query that fails as its rows are read (not as it is planned): each way of reading it
# gives DuckDB's own error, which names what went wrong.
FAILING_AS_IT_RUNS = [
    ("select count(*) as n from range(10) t(x) where x >= -9223372036854775805 - 10",
     "Overflow in subtraction of INT64"),
    ("select cast(x as utinyint) as n from range(250, 260) t(x)", "Conversion Error"),
]


@pytest.mark.parametrize("query, message", FAILING_AS_IT_RUNS, ids=["overflow", "cast"])
@pytest.mark.parametrize("how", ["sql", "arrow", "rows"])
def test_a_query_failing_as_it_runs_says_why(shared_demo_store: Path, how: str, query: str,
                                             message: str) -> None:
    """Read into polars, such a failure was taken for a type polars cannot hold ("cast the
    column, or use store.arrow()"): it is the query's error, as every other reader says."""
    store = runstore.open(shared_demo_store)
    with pytest.raises(runstore.errors.QueryError) as got:
        getattr(store, how)(query)
    assert message in str(got.value) and "polars" not in str(got.value), got.value
