"""Hostile SQL through the MCP `sql` tool (and `list_runs`' `where`), over a real stdio
session: each attack of tests/sqlprobes.py is refused with `runstore sql`'s own error line,
no file outside the store is read (its bytes never reach an answer) or created, the store and
the run tree stay byte-identical, and the engine's limits hold: a query past its time limit
is stopped, one past the memory limit of `runstore mcp --memory-limit` fails naming it, and
the server answers the next call either way.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from mcpkit import McpSession

import oracle
from sqlprobes import READS_OUTSIDE, STATE_CHANGING, logging_probe
from storekit import cli

SECRET = "runstore-mcp-secret-" + uuid.uuid4().hex
SEE_VIEWS = "this tool reads the store's own tables and views only"
LONG = "select sum(a.range + b.range) as s from range(10000000) a, range(10000000) b"
HUNGRY = "select sum(length(repeat(run_id, 1000000))) as n from metrics_raw"


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("outside")
    (base / "dir").mkdir()
    (base / "secret.txt").write_text(f"{SECRET}\n")
    (base / "existing.csv").write_text(f"a,b\n1,{SECRET}\n")
    (base / "dir" / "inner.csv").write_text(f"x\n{SECRET}\n")
    return {"base": base, "secret": base / "secret.txt", "csv": base / "existing.csv",
            "dir": base / "dir", "new": base / "new"}


@pytest.fixture(scope="module")
def demo(ui_demo: tuple[Path, Path]) -> Any:
    tree, store = ui_demo
    before = oracle.tree_digest(store), oracle.tree_digest(tree)
    with McpSession(store) as session:
        yield tree, store, session
        assert "Traceback" not in session.stderr(), session.stderr()
    assert (oracle.tree_digest(store), oracle.tree_digest(tree)) == before


def refused_alike(session: McpSession, store: Path, query: str) -> str:
    """The tool's error is the CLI's error line (exit 2), then where to read the views."""
    line = session.error("sql", {"query": query})
    result = cli(store, "sql", query)
    assert result.exit_code == 2 and result.stdout == "", (query, result.stdout)
    assert line.startswith(result.stderr.strip() + " ("), (line, result.stderr)
    assert SEE_VIEWS in line and SECRET not in line
    return line


@pytest.mark.parametrize("query", READS_OUTSIDE)
def test_reads_outside_the_store_are_refused_as_runstore_sql_refuses_them(
        demo: Any, outside: dict[str, Path], query: str) -> None:
    tree, store, session = demo
    q = query.format(secret=outside["secret"], csv=outside["csv"], dir=outside["dir"],
                     store=store)
    line = refused_alike(session, store, q)
    assert "runstore sql reads only the store's files (DuckDB sandbox)" in line


@pytest.mark.parametrize("query", STATE_CHANGING)
def test_state_changing_functions_are_refused(demo: Any, query: str) -> None:
    tree, store, session = demo
    assert "only runs queries (found" in refused_alike(session, store, query)


@pytest.mark.parametrize("query", [
    "copy (select * from runs) to '{new}/runs.csv'",
    "attach '{new}/x.duckdb' as x",
    "install httpfs",
    "load httpfs",
    "set enable_external_access = true",
    "create table t as select 1",
    "insert into runs select * from runs",
    "delete from runs",
    "select 1; copy (select 1) to '{new}/y.csv'",
    "export database '{new}'",
    "pragma enable_profiling",
])
def test_writing_attaching_and_settings_are_refused(demo: Any, outside: dict[str, Path],
                                                    query: str) -> None:
    tree, store, session = demo
    refused_alike(session, store, query.format(new=outside["new"]))
    assert not outside["new"].exists()


def test_logging_to_files_writes_nothing(demo: Any, outside: dict[str, Path]) -> None:
    tree, store, session = demo
    run = next(p for p in tree.rglob("metrics.jsonl")).parent
    csv_before = outside["csv"].read_bytes()
    for target in (outside["new"], store, store / "tables", run, outside["csv"]):
        assert "enable_logging" in refused_alike(session, store, logging_probe(target))
    assert not outside["new"].exists() and outside["csv"].read_bytes() == csv_before


def test_params_are_bound_never_pasted(demo: Any, outside: dict[str, Path]) -> None:
    tree, store, session = demo
    hostile = f"x'); select * from read_text('{outside['secret']}'); --"
    text = session.ok("sql", {"query": "select $v as v, length($v) as n", "params": {"v": hostile},
                              "format": "csv"})
    assert SECRET not in text and f",{len(hostile)}\n" in text
    assert text.startswith("v,n\n")


def test_a_where_is_checked_as_runstore_runs_checks_it(demo: Any,
                                                       outside: dict[str, Path]) -> None:
    tree, store, session = demo
    for where in (f"(select count(*) from read_text('{outside['secret']}')) > 0",
                  "1 = 1; drop table runs", "run_id in (select run_id from runs)"):
        line = session.error("list_runs", {"where": where})
        result = cli(store, "runs", "--where", where)
        assert result.exit_code == 2 and line == result.stderr.strip(), (line, result.stderr)
        assert SECRET not in line


def test_a_query_past_its_time_limit_is_stopped(demo: Any) -> None:
    tree, store, session = demo
    line = session.error("sql", {"query": LONG, "timeout": 1})
    assert "query stopped after 1 s (its time limit)" in line
    assert session.ok("sql", {"query": "select 42 as x", "format": "csv"}).startswith("x\n42\n")


def test_a_where_past_the_time_limit_is_stopped(ui_demo: tuple[Path, Path],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """list_runs' `where` is user SQL with the sql tool's time limit (its default here made
    1 s, in the process calling the tool, for a test that does not wait 30 s)."""
    from runstore.agents.tools import runs
    from runstore.agents.tools.base import State

    monkeypatch.setattr(runs, "DEFAULT_TIMEOUT_S", 1.0)
    box = runs.RunTools(State(str(ui_demo[1])))
    slow = "levenshtein(repeat(run_id, 3000), repeat(kind, 20000)) > 0"
    result = box.list_runs(where=slow)
    assert result.is_error, result
    assert "query stopped after 1 s (its time limit)" in result.content[0].text
    assert "runs matching where=" in box.list_runs(where="kind = 'rl'")  # a worker answers on


def test_a_query_past_the_memory_limit_fails_naming_it(ui_demo: tuple[Path, Path]) -> None:
    tree, store = ui_demo
    with McpSession(store, "--memory-limit", "300MB") as session:
        line = session.error("sql", {"query": HUNGRY})
        assert "the query needed more memory than its limit of 300 MB" in line
        where = session.error("list_runs", {"where": "len(range(0, 200000000)) > 0"})
        assert "the query needed more memory than its limit of 300 MB" in where
        # The worker that ran out was replaced; the server answers on.
        assert session.ok("sql", {"query": "select count(*) as n from runs", "format": "csv"}) \
            == f"n\n{len(oracle.run_dirs(tree))}\n"
        assert "Traceback" not in session.stderr()
