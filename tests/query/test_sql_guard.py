"""The read-only guard of `runstore sql`, at scale: what it refuses and what it lets through.

Every statement in REFUSED (writes, DDL, COPY, ATTACH, INSTALL, LOAD, SET, PRAGMA and the rest,
several statements, a second statement hidden behind comments, functions that run SQL given
as data or change state) is refused with `Error: …` and exit 1, in three spellings each (as
written, upper case with tabs and newlines, mixed case behind a comment), and leaves the store
byte-identical (same files, same bytes, same mtimes) and writes no file anywhere. Every query
in ALLOWED (CTEs, recursion, windows, joins with an external CSV, views, strings and names
that merely contain forbidden words) runs, and the ones with a known answer give it.
tests/query/test_query_cli.py covers the exact messages of the common refusals.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import oracle
import runstore
from runstore.errors import QueryError
from storekit import cli

# (statement, what the refusal names): the message is
# "runstore sql only runs queries (found <what>)". {tmp} is a scratch directory.
REFUSED: list[tuple[str, str]] = [
    # writes
    ("insert into runs (run_id) values ('x')", "INSERT"),
    ("insert or replace into runs select * from runs", "INSERT"),
    ("with x as (select * from runs) insert into runs select * from x", "INSERT"),
    ("update runs set kind = 'x'", "UPDATE"),
    ("update runs set kind = 'x' from settings where true", "UPDATE"),
    ("delete from runs", "DELETE"),
    ("delete from runs where true returning *", "DELETE"),
    ("with gone as (delete from runs returning *) select * from gone", "DELETE"),
    ("merge into runs using runs r2 on runs.run_id = r2.run_id when matched then delete",
     "MERGE"),
    ("truncate runs", "TRUNCATE"),
    ("truncate table runs", "TRUNCATE"),
    # DDL
    ("create table x as select 1", "CREATE"),
    ("create temp table x (a int)", "CREATE"),
    ("create or replace view kl_health as select 1", "CREATE"),
    ("create macro m(a) as a + 1", "CREATE"),
    ("create sequence s", "CREATE"),
    ("create schema s", "CREATE"),
    ("create index i on runs (run_id)", "CREATE"),
    ("create type t as enum ('a', 'b')", "CREATE"),
    ("create secret (type s3, key_id 'x', secret 'y')", "CREATE"),
    ("drop table runs", "DROP"),
    ("drop view if exists kl_health", "DROP"),
    ("drop schema main cascade", "DROP"),
    ("alter table runs rename to r2", "ALTER"),
    ("alter table runs add column x int", "ALTER"),
    ("comment on table runs is 'x'", "COMMENT"),
    # files, databases, extensions, settings
    ("copy runs to '{tmp}/out.csv'", "COPY"),
    ("copy (select * from metrics_raw) to '{tmp}/out.parquet' (format parquet)", "COPY"),
    ("copy runs from '{tmp}/in.csv'", "COPY"),
    ("export database '{tmp}/export'", "EXPORT"),
    ("import database '{tmp}/export'", "IMPORT"),
    ("attach '{tmp}/x.duckdb' as x", "ATTACH"),
    ("attach database ':memory:' as m", "ATTACH"),
    ("detach x", "DETACH"),
    ("use memory", "USE"),
    ("install httpfs", "INSTALL"),
    ("force install httpfs", "FORCE"),
    ("install 'httpfs' from 'http://127.0.0.1:9/'", "INSTALL"),
    ("load httpfs", "LOAD"),
    ("load '{tmp}/x.duckdb_extension'", "LOAD"),
    ("set threads = 1", "SET"),
    ("set global memory_limit = '1GB'", "SET"),
    ("set enable_external_access = false", "SET"),
    ("set variable x = 1", "SET"),
    ("reset threads", "RESET"),
    ("pragma database_size", "PRAGMA"),
    ("pragma enable_profiling", "PRAGMA"),
    ("call pragma_version()", "CALL"),
    ("checkpoint", "CHECKPOINT"),
    ("vacuum", "VACUUM"),
    ("begin transaction", "BEGIN"),
    ("commit", "COMMIT"),
    ("rollback", "ROLLBACK"),
    ("prepare p as select 1", "PREPARE"),
    ("execute p", "EXECUTE"),
    ("deallocate p", "DEALLOCATE"),
    ("explain analyze select * from runs", "EXPLAIN"),
    # several statements, and statements hidden behind comments
    ("select 1; drop table runs", "2 statements: SELECT, DROP"),
    ("select 1; select 2", "2 statements: SELECT, SELECT"),
    ("select 1;;drop table runs", "2 statements: SELECT, DROP"),
    ("select 1 /* ; */ ; drop table runs", "2 statements: SELECT, DROP"),
    ("select 1 -- comment\n; drop table runs", "2 statements: SELECT, DROP"),
    ("select ';' ; drop table runs", "2 statements: SELECT, DROP"),
    ("from runs; delete from runs", "2 statements: FROM, DELETE"),
    ("select * from read_csv('{tmp}/x.csv'); copy runs to '{tmp}/y.csv'",
     "2 statements: SELECT, COPY"),
    ("/* hidden */ drop table runs", "DROP"),
    ("-- leading comment\ndrop table runs", "DROP"),
    ("delete/**/from runs", "DELETE"),
    # functions that run SQL given as data, or write
    ("select * from query('drop table runs')", "query()"),
    ("select * from main.query('select 1')", "query()"),
    ('select * from "query"(\'select 1\')', "query()"),
    ("select * from runs where exists (from query('select 1'))", "query()"),
    ("select * from query_table('runs')", "query_table()"),
    ("select * from json_execute_serialized_sql(json_serialize_sql('select 1'))",
     "json_execute_serialized_sql()"),
    ("select * from checkpoint()", "checkpoint()"),
    ("select * from force_checkpoint()", "force_checkpoint()"),
    ("select write_log('x')", "write_log()"),
    ("select * from truncate_duckdb_logs()", "truncate_duckdb_logs()"),
    ("select setval('s', 1)", "setval()"),
]

# Refused as syntax errors (DuckDB has no such statement form; sqlglot says where it stops).
SYNTAX_ERRORS = [
    "select * from (delete from runs returning *)",
    "select * from runs where run_id in (select run_id from (delete from runs returning run_id))",
    "summarize (delete from runs returning *)",
    "describe (drop table runs)",
]


def spellings(statement: str) -> list[str]:
    """The statement as written, upper case with tabs and newlines for spaces, and mixed case
    behind a leading comment."""
    gap = " \t " if "--" in statement else " \t\n "  # a newline would end a -- comment
    shouty = (statement if "'" in statement else statement.upper()).replace(" ", gap)
    mixed = "".join(c.upper() if i % 2 else c.lower() for i, c in enumerate(statement)) \
        if "'" not in statement and '"' not in statement else statement
    return [statement, shouty, f"/* a comment */\n{mixed}"]


@pytest.fixture(scope="module")
def store_dir(shared_small_store: Path) -> Path:
    return shared_small_store



def sql(store: Path, query: str, *extra: str):
    """`runstore sql QUERY`; a query that starts with `-` (a comment) goes through stdin, as
    on a command line where it would read as an option."""
    if query.startswith("-"):
        return cli(store, "sql", "-", *extra, input=query)
    return cli(store, "sql", query, *extra)


def test_enough_cases() -> None:
    assert len(REFUSED) + len(SYNTAX_ERRORS) >= 40
    assert len(ALLOWED) >= 20


@pytest.mark.parametrize("statement,found", REFUSED, ids=[s[:40] for s, _ in REFUSED])
def test_refused(store_dir: Path, tmp_path: Path, statement: str, found: str) -> None:
    before = oracle.tree_digest(store_dir)
    for text in spellings(statement.format(tmp=tmp_path)):
        result = sql(store_dir, text)
        assert result.exit_code == 2, (text, result.stdout)
        assert result.stdout == ""
        want = f"Error: runstore sql only runs queries (found {found})\n"
        if text == statement.format(tmp=tmp_path):
            assert result.stderr == want
        else:  # other spellings name the same thing, up to case
            assert result.stderr.lower() == want.lower(), (text, result.stderr)
        with pytest.raises(QueryError):
            runstore.open(store_dir).sql(text)
    assert oracle.tree_digest(store_dir) == before
    assert list(tmp_path.iterdir()) == []  # nothing written anywhere else either


@pytest.mark.parametrize("statement", SYNTAX_ERRORS)
def test_refused_as_syntax_errors(store_dir: Path, statement: str) -> None:
    before = oracle.tree_digest(store_dir)
    result = sql(store_dir, statement)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: syntax error at line 1, column ")
    assert oracle.tree_digest(store_dir) == before


# (query, expected JSON rows or None when only success is checked). {csv} is an external
# CSV mapping run_name → label; the small tree has runs a/rl_dirs, a/rl_flat, b/c/sl.
ALLOWED: list[tuple[str, list | None]] = [
    ("select 1 as x", [{"x": 1}]),
    ("select count(*) as n from runs", [{"n": 3}]),
    ("from runs select run_name order by run_name",
     [{"run_name": "a/rl_dirs"}, {"run_name": "a/rl_flat"}, {"run_name": "b/c/sl"}]),
    ("with t as (select kind, count(*) as n from runs group by kind) "
     "select * from t order by kind", [{"kind": "rl", "n": 2}, {"kind": "sl", "n": 1}]),
    ("with recursive t(n) as (select 1 union all select n + 1 from t where n < 5) "
     "select sum(n) as s from t", [{"s": 15}]),
    ("with a as (select 1 as x), b as (select x + 1 as y from a) select y from b", [{"y": 2}]),
    ("select run_id, step, value, row_number() over (partition by run_id order by step desc) "
     "as rn from metrics where key = 'env/all/reward/total' qualify rn = 1", None),
    ("select run_id, step, value - lag(value) over (partition by run_id order by step) as d "
     "from metrics where key = 'env/all/reward/total' order by run_id, step limit 5", None),
    ("select run_id, avg(value) over (partition by run_id order by step rows between 2 "
     "preceding and current row) as smooth from metrics where key = 'optim/entropy'", None),
    ("select r.run_name, count(*) as n from runs r join metrics_raw m using (run_id) "
     "group by r.run_name having count(*) > 0 order by 1", None),
    ("select r.run_name, l.label from runs r join read_csv('{csv}') l using (run_name) "
     "order by r.run_name",
     [{"run_name": "a/rl_dirs", "label": "baseline"}, {"run_name": "b/c/sl", "label": "sft"}]),
    ("select l.label, count(m.*) > 0 as has_metrics from read_csv('{csv}') l "
     "left join runs r using (run_name) left join metrics_raw m using (run_id) "
     "group by l.label order by l.label",
     [{"label": "baseline", "has_metrics": True}, {"label": "ghost", "has_metrics": False},
      {"label": "sft", "has_metrics": True}]),
    ("select run_name from runs where run_id in (select run_id from checkpoints) "
     "order by 1", None),
    ("select run_name from runs r where exists (select 1 from spans s "
     "where s.run_id = r.run_id) order by 1", None),
    ("select kind from runs union select 'x' except select 'sl' order by 1",
     [{"kind": "rl"}, {"kind": "x"}]),
    ("select case when kind = 'rl' then 'reinforcement' else kind end as k from runs "
     "order by 1", None),
    ("select * from kl_health", None),
    ("select * from run_summary order by run_name", None),
    ("select unnest(tags) as tag, count(*) as n from trajectories group by tag", None),
    ("select 'drop table runs; delete from runs' as s",
     [{"s": "drop table runs; delete from runs"}]),
    ('select 1 as "delete", 2 as "insert"', [{"delete": 1, "insert": 2}]),
    ("select 1 as x -- ; drop table runs", [{"x": 1}]),
    ("select 1 as x /* ; drop table runs */", [{"x": 1}]),
    ("select 1 as x; -- a trailing comment", [{"x": 1}]),
    ("SELECT\n\tCOUNT(*)\tAS n\nFROM\n  runs\n;", [{"n": 3}]),
    ("describe runs", None),
    ("summarize select * from metrics_raw", None),
    ("show tables", None),
    ("values (1, 'a'), (2, 'b')", None),
    ("select * from generate_series(1, 3) t(i)", [{"i": 1}, {"i": 2}, {"i": 3}]),
    ("select json_extract_string(config, '$.model_name') as m from runs limit 1", None),
]


@pytest.mark.parametrize("query,want", ALLOWED, ids=[q[:40] for q, _ in ALLOWED])
def test_allowed(store_dir: Path, tmp_path: Path, query: str, want: list | None) -> None:
    csv = tmp_path / "labels.csv"
    csv.write_text("run_name,label\na/rl_dirs,baseline\nb/c/sl,sft\nnowhere/run,ghost\n")
    before = oracle.tree_digest(store_dir)
    allow = ("--allow-read", str(csv)) if "{csv}" in query else ()
    result = sql(store_dir, query.format(csv=csv), "-F", "json", *allow)
    assert result.exit_code == 0, result.stderr
    if want is not None:
        assert json.loads(result.stdout) == want
    assert oracle.tree_digest(store_dir) == before
    assert sorted(os.listdir(tmp_path)) == ["labels.csv"]


def test_allowed_answers_match_the_oracle(store_dir: Path, _small_template: Path) -> None:
    """One of the window queries, checked against the files: the last reward of each run."""
    result = sql(store_dir, "select r.run_name, m.value from metrics m join runs r using "
                            "(run_id) where key = 'env/all/reward/total' qualify "
                            "row_number() over (partition by m.run_id order by step desc) = 1 "
                            "order by 1", "-F", "json")
    assert result.exit_code == 0, result.stderr
    want = {}
    for run in oracle.run_dirs(_small_template):
        live = oracle.live_metrics(run)
        steps = [s for s, k in live if k == "env/all/reward/total"]
        if steps:
            want[oracle.run_name(_small_template, run)] = live[(max(steps),
                                                                "env/all/reward/total")]
    assert {r["run_name"]: r["value"] for r in json.loads(result.stdout)} == want


def test_verdicts_are_kept_per_text_and_refusals_never(monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    from runstore.query import guard

    con = duckdb.connect()
    monkeypatch.setattr(guard, "_verdicts", type(guard._verdicts)())
    allowed = "select $x as a from runs"
    first = guard.guard(allowed, con)
    assert first.params == ("x",) and first.tables == frozenset({"runs"})
    parsed: list[str] = []
    real = guard._guard
    monkeypatch.setattr(guard, "_guard", lambda q, c: parsed.append(q) or real(q, c))
    assert guard.guard(allowed, con) is first and parsed == []  # kept: not parsed again
    # Another text is another verdict, even one that differs only in a literal or in case.
    other = guard.guard("select $y as a from checkpoints", con)
    assert other.params == ("y",) and other.tables == frozenset({"checkpoints"})
    assert guard.guard("SELECT $x AS a FROM runs", con) is not first
    # A refusal is not kept: each time the statement is checked and refused again.
    for _ in range(2):
        with pytest.raises(QueryError, match="found DELETE"):
            guard.guard("delete from runs", con)
    assert parsed.count("delete from runs") == 2
    # Bounded: the oldest verdict goes first.
    monkeypatch.setattr(guard, "VERDICTS", 2)
    guard.guard("select 1", con)
    guard.guard("select 2", con)
    assert allowed not in guard._verdicts and list(guard._verdicts) == ["select 1", "select 2"]
