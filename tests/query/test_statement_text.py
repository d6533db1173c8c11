"""The read commands' statements, joined from fixed text, against the same requests built by
sqlglot (how they were built before: `query.statements.frames` keeps sqlglot out of a short
command's start-up).

For drawn requests (kind, a scope of run_ids, columns, metric keys) each text statement
(`runs_query`, `logged_keys_query`, `count_runs_query`, `in_scope`, the trend rules'
`run_status_query` and `family_series_query`, and `compare`'s `scoped_runs_query`,
`config_rows_query` and `metric_values_query`) is parsed by sqlglot and
compared with the tree sqlglot builds for the same request, identifiers unquoted: one
statement. Then both run on the demo store and must answer the same rows (a difference the
parse hides would show there). A column is quoted in the text, or refused when run_summary has
no such column. `family_lists_query` answers `family_series_query`'s rows, grouped by run and
put in step order here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings, strategies as st
from sqlglot import exp

import runstore
from runstore.errors import UsageError
from runstore.query.statements import frames
from conftest import examples


def built_in_scope(column: Any) -> Any:
    return exp.func("list_contains", exp.Placeholder(this="runs"), column)


def built_runs(kind: str | None, runs: Sequence[str] | None,
               columns: Sequence[str] | None) -> str:
    query = exp.select("*") if columns is None else exp.select(*(exp.column(c)
                                                                 for c in columns))
    query = query.from_("run_summary")
    if kind is not None:
        query = query.where(exp.column("kind").eq(exp.Placeholder(this="kind")))
    if runs is not None:
        query = query.where(built_in_scope(exp.column("run_id")))
    return query.order_by(exp.column("run_label"), exp.column("run_id")).sql(dialect="duckdb")


def built_logged_keys(keys: Sequence[str] | None, runs: Sequence[str] | None,
                      summarised: bool) -> str:
    query = exp.select("key", "run_id").distinct().from_(
        "metric_keys" if summarised else "metrics_raw")
    if keys is not None:
        query = query.where(exp.func("list_contains", exp.Placeholder(this="keys"),
                                     exp.column("key")))
    if runs is not None:
        query = query.where(built_in_scope(exp.column("run_id")))
    return query.sql(dialect="duckdb")


def built_count_runs(runs: Sequence[str] | None) -> str:
    query = exp.select(exp.alias_(exp.Count(this=exp.Star()), "n")).from_("runs")
    if runs is not None:
        query = query.where(built_in_scope(exp.column("run_id")))
    return query.sql(dialect="duckdb")


def built_run_status(runs: Sequence[str] | None) -> str:
    """health.trends' statement as it was built before it became text."""
    r = lambda name: exp.column(name, table="r")  # noqa: E731
    query = (exp.select(r("run_id"), exp.alias_(exp.column("run_label", table="s"), "run_name"),
                        exp.column("status", table="s"), r("last_step"),
                        exp.alias_(exp.func("epoch_us", r("source_updated_at")),
                                   "source_updated_us"))
             .from_(exp.table_("runs", alias="r"))
             .join(exp.table_("run_status", alias="s"),
                   on=exp.column("run_id", table="s").eq(r("run_id"))))
    if runs is not None:
        query = query.where(built_in_scope(r("run_id")))
    return query.sql(dialect="duckdb")


def built_family_series(runs: Sequence[str] | None, since_step: bool) -> str:
    """health.trends' statement as it was built before it became text (its conditions in
    one AND: sqlglot brackets the ones given before a later `.where`, the same condition)."""
    m = lambda name: exp.column(name, table="m")  # noqa: E731
    keys = exp.Placeholder(this="keys")
    value = exp.func("arg_min", m("value"), exp.func("list_position", keys, m("key")))
    conditions = [exp.func("list_contains", keys.copy(), m("key")),
                  m("value").is_(exp.null()).not_()]
    if runs is not None:
        conditions.append(built_in_scope(m("run_id")))
    if since_step:
        conditions.append(m("step") >= exp.Placeholder(this="since_step"))
    return (exp.select(m("run_id"), m("step"), exp.alias_(value, "value"))
            .from_(exp.table_("metrics", alias="m")).where(*conditions)
            .group_by(m("run_id"), m("step")).sql(dialect="duckdb"))


def built_scoped_runs(columns: Sequence[str], runs: Sequence[str] | None) -> str:
    """analysis.runs.scoped_runs' statement as it was built before it became text."""
    query = (exp.select(*[exp.column(c, table="l" if c in ("run_name", "run_label") else "r")
                          for c in columns])
             .from_(exp.table_("runs", alias="r"))
             .join(exp.table_("run_labels", alias="l"),
                   on=exp.column("run_id", table="l").eq(exp.column("run_id", table="r"))))
    if runs is not None:
        query = query.where(built_in_scope(exp.column("run_id", table="r")))
    return query.order_by(exp.column("run_label", table="l")).sql(dialect="duckdb")


def built_config_rows(runs: Sequence[str] | None, keys: bool) -> str:
    """analysis.groups' config statement as it was built before it became text."""
    query = exp.select("run_id", "key", "value", "value_num", "value_str").from_("config")
    if runs is not None:
        query = query.where(built_in_scope(exp.column("run_id")))
    if keys:
        query = query.where(exp.func("list_contains", exp.Placeholder(this="keys"),
                                     exp.column("key")))
    return query.sql(dialect="duckdb")


def built_metric_values(n_keys: int) -> str:
    """analysis.compare's values statement as it was built before it became text (its
    conditions in one AND, as for `built_family_series`)."""
    m = lambda name: exp.column(name, table="m")  # noqa: E731
    position = exp.func("list_position", exp.Placeholder(this="ids"), m("run_id"))
    return (exp.select(exp.alias_(position - 1, "_run"),
                       exp.alias_(exp.func("list_extract", exp.Placeholder(this="codes"),
                                           position.copy()), "_g"),
                       m("step"), m("key"), m("value"))
            .from_(exp.table_("metrics", alias="m"))
            .where(m("key").isin(*(exp.Placeholder(this=f"k{i}") for i in range(n_keys))),
                   m("value").is_(exp.null()).not_(),
                   exp.func("list_contains", exp.Placeholder(this="ids"), m("run_id")))
            .sql(dialect="duckdb"))


def same_statement(text: str, built: str) -> None:
    def tree(sql: str) -> str:
        parsed = sqlglot.parse_one(sql, read="duckdb")
        for ident in parsed.find_all(exp.Identifier):
            ident.set("quoted", False)
        return parsed.sql(dialect="duckdb")

    assert tree(text) == tree(built), (text, built)


@pytest.fixture(scope="module")
def store(shared_demo_store: Path) -> runstore.Store:
    return runstore.open(shared_demo_store)


@pytest.fixture(scope="module")
def facts(store: runstore.Store) -> dict[str, list[str]]:
    return {"ids": store.sql("select run_id from runs order by 1")["run_id"].to_list(),
            "keys": store.sql("select distinct key from metric_keys order by 1")["key"].to_list(),
            "columns": frames.summary_columns()}


def rows(store: runstore.Store, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted(map(repr, store.rows(sql, params).to_pylist()))  # type: ignore[arg-type]


def agrees(store: runstore.Store, text: str, built: str, params: dict[str, Any]) -> None:
    """The text and sqlglot's tree are one statement, and both answer the same rows."""
    same_statement(text, built)
    assert rows(store, text, params) == rows(store, built, params)


SETTINGS = settings(max_examples=examples(60), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(data=st.data(), kind=st.sampled_from([None, "rl", "sl", "dpo", "unknown"]))
def test_runs_query_is_the_statement_sqlglot_builds(store: runstore.Store, facts: dict,
                                                    data: st.DataObject,
                                                    kind: str | None) -> None:
    runs = data.draw(st.none() | st.lists(st.sampled_from(facts["ids"]), max_size=4))
    columns = data.draw(st.none() | st.lists(st.sampled_from(facts["columns"]), min_size=1,
                                             max_size=4, unique=True))
    text, params = frames.runs_query(kind=kind, runs=runs, columns=columns)
    built = built_runs(kind, runs, columns)
    agrees(store, text, built, params)


@SETTINGS
@given(data=st.data(), summarised=st.booleans())
def test_logged_keys_query_is_the_statement_sqlglot_builds(store: runstore.Store, facts: dict,
                                                           data: st.DataObject,
                                                           summarised: bool) -> None:
    runs = data.draw(st.none() | st.lists(st.sampled_from(facts["ids"]), max_size=4))
    keys = data.draw(st.none() | st.lists(st.sampled_from(facts["keys"]) | st.text(max_size=8),
                                          min_size=1, max_size=4))
    text, params = frames.logged_keys_query(keys, runs=runs, summarised=summarised)
    built = built_logged_keys(keys, runs, summarised)
    agrees(store, text, built, params)


@pytest.mark.parametrize("text_of,built_of", [
    (frames.count_runs_query, built_count_runs),
    (frames.run_status_query, built_run_status),
], ids=["count_runs_query", "run_status_query"])
@SETTINGS
@given(data=st.data())
def test_a_scoped_query_is_the_statement_sqlglot_builds(store: runstore.Store, facts: dict,
                                                        text_of: Any, built_of: Any,
                                                        data: st.DataObject) -> None:
    runs = data.draw(st.none() | st.lists(st.sampled_from(facts["ids"]) | st.text(max_size=5),
                                          max_size=4))
    text, params = text_of(runs)
    built = built_of(runs)
    agrees(store, text, built, params)


@SETTINGS
@given(data=st.data(), since=st.none() | st.integers(-2, 45))
def test_family_series_query_is_the_statement_sqlglot_builds(store: runstore.Store,
                                                             facts: dict, data: st.DataObject,
                                                             since: int | None) -> None:
    runs = data.draw(st.none() | st.lists(st.sampled_from(facts["ids"]), max_size=4))
    keys = data.draw(st.lists(st.sampled_from(facts["keys"]), min_size=1, max_size=3,
                              unique=True))
    text, params = frames.family_series_query(runs, since_step=since is not None)
    built = built_family_series(runs, since is not None)
    params = {**params, "keys": keys, **({} if since is None else {"since_step": since})}
    agrees(store, text, built, params)


@SETTINGS
@given(data=st.data(), since=st.none() | st.integers(-2, 45))
def test_family_lists_are_the_series_put_in_step_order(store: runstore.Store, facts: dict,
                                                      data: st.DataObject,
                                                      since: int | None) -> None:
    runs = data.draw(st.none() | st.lists(st.sampled_from(facts["ids"]), max_size=4))
    keys = data.draw(st.lists(st.sampled_from(facts["keys"]), min_size=1, max_size=3,
                              unique=True))
    bound = {"keys": keys, **({} if since is None else {"since_step": since})}
    text, params = frames.family_series_query(runs, since_step=since is not None)
    points = store.fetch(text, {**params, **bound}, convert=lambda r: r.fetchall())
    want: dict[str, list[tuple[Any, Any]]] = {}
    for run_id, step, value in points:
        want.setdefault(run_id, []).append((step, value))
    text, params = frames.family_lists_query(runs, since_step=since is not None)
    got = store.fetch(text, {**params, **bound}, convert=lambda r: r.fetchall())
    assert len(got) == len(want)
    for run_id, steps, numbers in got:
        order = sorted(want[run_id], key=lambda p: (p[0] is not None, p[0] or 0))
        assert steps == [p[0] for p in order]
        assert [repr(v) for v in numbers] == [repr(p[1]) for p in order]  # NaN is NaN


RUN_COLUMNS = ["run_id", "run_name", "run_label", "kind", "model_name", "learning_rate"]


@SETTINGS
@given(data=st.data())
def test_scoped_runs_query_is_the_statement_sqlglot_builds(store: runstore.Store, facts: dict,
                                                           data: st.DataObject) -> None:
    runs = data.draw(st.none() | st.lists(st.sampled_from(facts["ids"]) | st.text(max_size=5),
                                          max_size=4))
    columns = data.draw(st.permutations(RUN_COLUMNS).flatmap(
        lambda cs: st.integers(1, len(cs)).map(lambda n: cs[:n])))
    text, params = frames.scoped_runs_query(columns, runs)
    built = built_scoped_runs(columns, runs)
    same_statement(text, built)
    # Ordered by label: the rows in order (labels are unique).
    assert store.rows(text, params).to_pylist() == store.rows(built, params).to_pylist()


@SETTINGS
@given(data=st.data(), keyed=st.booleans())
def test_config_rows_query_is_the_statement_sqlglot_builds(store: runstore.Store, facts: dict,
                                                           data: st.DataObject,
                                                           keyed: bool) -> None:
    runs = data.draw(st.none() | st.lists(st.sampled_from(facts["ids"]), max_size=4))
    text, params = frames.config_rows_query(runs, keys=keyed)
    built = built_config_rows(runs, keyed)
    if keyed:
        config_keys = store.sql("select distinct key from config order by 1")["key"].to_list()
        params["keys"] = data.draw(st.lists(st.sampled_from(config_keys) | st.text(max_size=8),
                                            max_size=4))
    agrees(store, text, built, params)


@SETTINGS
@given(data=st.data())
def test_metric_values_query_is_the_statement_sqlglot_builds(store: runstore.Store,
                                                             facts: dict,
                                                             data: st.DataObject) -> None:
    keys = data.draw(st.lists(st.sampled_from(facts["keys"]), min_size=1, max_size=3,
                              unique=True))
    ids = data.draw(st.lists(st.sampled_from(facts["ids"]), min_size=1, max_size=5,
                             unique=True))
    text, built = frames.metric_values_query(len(keys)), built_metric_values(len(keys))
    params = {**{f"k{i}": k for i, k in enumerate(keys)}, "ids": ids,
              "codes": data.draw(st.lists(st.integers(0, 3), min_size=len(ids),
                                          max_size=len(ids)))}
    agrees(store, text, built, params)


def test_in_scope_is_the_condition_sqlglot_builds() -> None:
    same_statement(f"select 1 from runs as m where {frames.in_scope('m.run_id')}",
                   exp.select("1").from_(exp.table_("runs", alias="m"))
                   .where(built_in_scope(exp.column("run_id", table="m"))).sql("duckdb"))


def test_a_column_is_quoted_or_refused_never_pasted() -> None:
    text, _ = frames.runs_query(columns=["run_label"])
    assert text.startswith('SELECT "run_label" FROM')
    with pytest.raises(UsageError, match="no column"):
        frames.runs_query(columns=['run_label" from runs; --'])


def test_store_runs_query_takes_a_name_or_a_scope(store: runstore.Store) -> None:
    """`Store.runs_query` lists the runs a name pattern (`runs --name`) or a scope (`runs=`,
    what the MCP tool passes) covers; the scope's run_ids are `Store.scope`'s, its errors name
    `--runs`; both at once are refused."""
    import fnmatch

    names = dict(store.rows("select run_id, run_name from runs").data)
    for pattern in ("math_rl_sweep/*", ["sl/*", "dpo/*"]):
        sql, params = store.runs_query(runs=pattern, columns=["run_id"])
        want = {i for i, n in names.items()
                if any(fnmatch.fnmatchcase(n, p) for p in
                       ([pattern] if isinstance(pattern, str) else pattern))}
        assert want and {r["run_id"] for r in store.rows(sql, params).to_pylist()} == want
        assert params["runs"] == store.scope(pattern)
    with pytest.raises(runstore.RunstoreError, match="--runs 'nothing/\\*'"):
        store.runs_query(runs="nothing/*")
    with pytest.raises(runstore.RunstoreError, match="--name 'nothing/\\*'"):
        store.runs_query(name="nothing/*")
    with pytest.raises(UsageError, match="not both"):
        store.runs_query(name="sl/*", runs="sl/*")
