"""A time limit for user SQL (`timeout=`, `runstore sql --timeout`, `runstore ui --sql-timeout`):
real DuckDB queries that would run for minutes are stopped near the limit, with a clear error,
and the store (or the server) answers the next query correctly. Expected answers come from the
source run trees (tests/oracle.py) or from arithmetic, never from runstore itself."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import oracle
import runstore
from runstore.cli import main
from runstore.errors import QueryError, UsageError
from runstore.query import deadline
from ui_harness import UiServer, http

# 10^14 pairs: minutes of work for DuckDB on any machine, and nothing it can optimise away.
LONG = "select sum(a.range + b.range) as s from range(10000000) a, range(10000000) b"
# Generous on a loaded machine: this bounds correctness (the query was stopped), not speed.
BOUND_S = 15.0
STOPPED = "query stopped after 1 s (its time limit): "


@pytest.fixture(scope="module")
def tree_and_store(ui_demo: tuple[Path, Path]) -> tuple[Path, Path]:
    """The demo tree and its store (conftest.py), which these tests only read."""
    return ui_demo


def run_names(tree: Path) -> list[str]:
    return sorted(oracle.run_name(tree, run) for run in oracle.run_dirs(tree))


def names_query(store: runstore.Store, **kw: Any) -> list[str]:
    return store.arrow("select run_name from runs order by 1", **kw).column(0).to_pylist()


# -- the library ------------------------------------------------------------------------------

CONVERSIONS = {
    "sql": lambda store, q, **kw: store.sql(q, **kw),
    "sql-lazy": lambda store, q, **kw: store.sql(q, lazy=True, **kw),
    "arrow": lambda store, q, **kw: store.arrow(q, **kw),
    "fetch": lambda store, q, **kw: store.fetch(q, convert=lambda rel: rel.fetchall(), **kw),
    # a setting param: the query runs on a database of its own, closed after it
    "own-database": lambda store, q, **kw: store.arrow(q, {"kl_threshold": 0.5}, **kw),
}


@pytest.mark.parametrize("how", CONVERSIONS)
def test_a_long_query_stops_at_its_limit_and_the_store_answers_next(
        tree_and_store: tuple[Path, Path], how: str) -> None:
    tree, path = tree_and_store
    store = runstore.open(path)
    started = time.monotonic()
    with pytest.raises(QueryError) as err:
        CONVERSIONS[how](store, LONG, timeout=1)
    elapsed = time.monotonic() - started
    assert str(err.value).startswith(STOPPED)
    assert "--timeout" in str(err.value)  # says how to allow longer
    assert 1.0 <= elapsed < BOUND_S
    # Right after, on the same Store (the same shared database): the right answer.
    assert names_query(store) == run_names(tree)
    assert names_query(store, timeout=30) == run_names(tree)


def test_a_query_within_its_limit_is_unaffected(tree_and_store: tuple[Path, Path]) -> None:
    tree, path = tree_and_store
    store = runstore.open(path)
    n = 3_000_000
    got = store.arrow("select sum(range) as s from range($n)", {"n": n}, timeout=60)
    assert got.column("s").to_pylist() == [n * (n - 1) // 2]
    before = threading.active_count()
    for _ in range(20):
        assert names_query(store, timeout=0.5) == run_names(tree)
    # No deadline thread outlives its query, and none fires later at anything.
    assert threading.active_count() <= before
    time.sleep(0.8)
    assert names_query(store) == run_names(tree)


def test_no_interrupt_reaches_the_next_query(tree_and_store: tuple[Path, Path]) -> None:
    """Limits about as long as the query itself, so the interrupt lands before, during and
    just after it: each query is answered right or stopped, and the query after it (no
    limit) on the same Store always gets the right answer."""
    tree, path = tree_and_store
    store = runstore.open(path)
    n = 2_000_000
    outcomes = {"answered": 0, "stopped": 0}
    for i in range(120):
        try:
            got = store.arrow("select sum(range) as s from range($n)", {"n": n},
                              timeout=0.0005 * (i % 30 + 1))
        except QueryError as e:
            assert str(e).startswith("query stopped after "), e
            outcomes["stopped"] += 1
        else:
            assert got.column("s").to_pylist() == [n * (n - 1) // 2]
            outcomes["answered"] += 1
        assert names_query(store) == run_names(tree)
    assert outcomes["stopped"] > 0  # the limit did bite (0.5 ms is less than any query)


def test_a_stopped_query_stops_no_other_thread(tree_and_store: tuple[Path, Path]) -> None:
    """The UI's threads share one Store: one thread's query stopped at its limit leaves the
    queries other threads run meanwhile on the same database untouched."""
    tree, path = tree_and_store
    store = runstore.open(path)
    n = 50_000_000
    results: dict[int, Any] = {}
    stop = threading.Event()

    def others(k: int) -> None:
        answers = []
        while not stop.is_set():
            try:
                answers.append(store.arrow("select sum(range) as s from range($n)",
                                           {"n": n}).column("s")[0].as_py())
            except Exception as e:  # noqa: BLE001 - any failure is what the test looks for
                answers.append(e)
        results[k] = answers

    threads = [threading.Thread(target=others, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    try:
        with pytest.raises(QueryError, match="^query stopped after 1 s"):
            store.arrow(LONG, timeout=1)
    finally:
        stop.set()
        for t in threads:
            t.join(120)
    answers = [a for k in results for a in results[k]]
    assert answers and all(a == n * (n - 1) // 2 for a in answers), answers


@pytest.mark.parametrize("how", CONVERSIONS)
def test_a_query_in_process_its_caller_gives_up_stops(tree_and_store: tuple[Path, Path],
                                                       how: str) -> None:
    """`Store.stopping(stop)` (`runstore mcp`, for a call its client cancels): a query run in
    this process, with or without a time limit, fails with `Stopped` once `stop()` turns
    true, in a thread that carries the caller's context; the next query answers; outside the
    block nothing stops one."""
    import contextvars

    from runstore.query.deadline import Stopped

    tree, path = tree_and_store
    store = runstore.open(path)
    for timeout in (None, 600):
        give_up = threading.Event()
        failure: list[BaseException] = []

        def query() -> None:
            try:
                CONVERSIONS[how](store, LONG, timeout=timeout)
            except BaseException as e:  # noqa: BLE001 - what the test looks at
                failure.append(e)

        with store.stopping(give_up.is_set):
            thread = threading.Thread(target=contextvars.copy_context().run, args=(query,))
        thread.start()
        time.sleep(0.5)
        started = time.monotonic()
        give_up.set()
        thread.join(120)
        assert not thread.is_alive() and time.monotonic() - started < BOUND_S
        assert len(failure) == 1 and isinstance(failure[0], Stopped), failure
        assert "its caller gave it up" in str(failure[0])
        assert names_query(store) == run_names(tree)
    # A block whose stop() is true from the start stops nothing outside it.
    with store.stopping(lambda: True):
        pass
    assert names_query(store, timeout=30) == run_names(tree)


def test_an_interrupt_not_of_the_deadline_is_not_called_a_time_limit(
        tree_and_store: tuple[Path, Path]) -> None:
    """Only the deadline's own interrupt is reported as the time limit (Ctrl-C is not)."""
    import duckdb

    def interrupted(rel: Any) -> Any:
        raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")

    store = runstore.open(tree_and_store[1])
    with pytest.raises(QueryError) as err:
        store.fetch("select 1", convert=interrupted, timeout=60)
    assert "time limit" not in str(err.value)


@pytest.mark.parametrize("bad", [0, -1, -0.5, float("nan"), float("inf"), "5", True])
def test_a_limit_that_is_not_seconds_above_zero_is_a_usage_error(
        tree_and_store: tuple[Path, Path], bad: Any) -> None:
    with pytest.raises(UsageError, match="timeout must be a number of seconds above 0"):
        runstore.open(tree_and_store[1]).sql("select 1", timeout=bad)


class SlowCursor:
    """A cursor whose interrupt takes a while, recording when it ran."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float]] = []

    def interrupt(self) -> None:
        began = time.monotonic()
        time.sleep(0.3)
        self.calls.append((began, time.monotonic()))


def test_ending_a_deadline_waits_for_an_interrupt_under_way_and_allows_no_more() -> None:
    """The caller closes the cursor once the `with` ends: no interrupt may still be running
    then, nor start later."""
    cursor = SlowCursor()
    with deadline.Deadline(cursor, 0.01) as limit:
        time.sleep(0.1)  # the first interrupt is under way (it takes 0.3 s)
    ended = time.monotonic()
    assert limit.fired
    assert cursor.calls and all(done <= ended for _, done in cursor.calls)
    count = len(cursor.calls)
    time.sleep(3 * deadline.REPEAT_S + 0.3)
    assert len(cursor.calls) == count


def test_a_deadline_keeps_interrupting_until_the_block_ends() -> None:
    """DuckDB drops an interrupt sent while the cursor runs nothing, so one is not enough."""
    class Counting:
        n = 0

        def interrupt(self) -> None:
            self.n += 1

    cursor = Counting()
    with deadline.Deadline(cursor, 0.01):
        time.sleep(0.01 + 6 * deadline.REPEAT_S)
    assert cursor.n >= 3
    cursor2 = Counting()
    with deadline.Deadline(cursor2, 5):
        pass
    with deadline.Deadline(cursor2, None):
        time.sleep(0.05)
    assert cursor2.n == 0


def test_an_interrupt_of_a_connection_closed_under_it_ends_quietly() -> None:
    """A cancel whose cursor is closed meanwhile (a command ending as a second Ctrl-C comes)
    stops there: no "Exception in thread runstore-query-cancel" traceback on stderr."""
    import duckdb

    cursor = duckdb.connect(":memory:")
    errors: list[Any] = []
    previous, threading.excepthook = threading.excepthook, errors.append
    try:
        with deadline.Deadline(cursor, None) as limit:
            cursor.close()
            limit.cancel()
            time.sleep(3 * deadline.REPEAT_S)
    finally:
        threading.excepthook = previous
    assert errors == [], [e.exc_value for e in errors]


# -- runstore sql --timeout -------------------------------------------------------------------

def test_cli_timeout_is_one_error_line_and_exit_1(tree_and_store: tuple[Path, Path]) -> None:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "runstore", "--store", str(tree_and_store[1]),
                           "sql", "--timeout", "1", LONG], capture_output=True, text=True,
                          timeout=120)
    assert time.monotonic() - started < BOUND_S + 10  # a process start on a loaded machine
    assert proc.returncode == 5
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: " + STOPPED), proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_query_within_its_timeout_answers(tree_and_store: tuple[Path, Path]) -> None:
    tree, path = tree_and_store
    result = CliRunner().invoke(main, ["--store", str(path), "sql", "--timeout", "30",
                                       "select run_name from runs order by 1", "-F", "csv"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["run_name", *run_names(tree)]


@pytest.mark.parametrize("command", [["sql", "select 1", "--timeout"], ["ui", "--sql-timeout"]])
@pytest.mark.parametrize("bad", ["0", "-1", "abc", "inf", "nan", ""])
def test_cli_timeout_not_seconds_is_a_usage_error(tree_and_store: tuple[Path, Path],
                                                 command: list[str], bad: str) -> None:
    result = CliRunner().invoke(main, ["--store", str(tree_and_store[1]), *command, bad])
    assert result.exit_code == 2, result.output
    assert "is not a number of seconds above 0" in result.stderr
    assert "Traceback" not in result.output


def test_timeouts_are_in_help_with_examples() -> None:
    from runstore.ui.api import SQL_TIMEOUT_S

    sql_help = CliRunner().invoke(main, ["sql", "--help"]).stdout
    assert "--timeout SECONDS" in sql_help
    assert "runstore sql --timeout 60 " in sql_help
    ui_help = CliRunner().invoke(main, ["ui", "--help"]).stdout
    assert "--sql-timeout SECONDS" in ui_help and "runstore ui --sql-timeout 300" in ui_help
    # The CLI's default is the app's (one figure, shown in --help).
    [option] = [p for p in main.commands["ui"].params if p.name == "sql_timeout"]
    assert option.default == SQL_TIMEOUT_S == 30
    assert "[default: 30.0]" in ui_help


# -- runstore ui --sql-timeout ----------------------------------------------------------------

def post(server: UiServer, path: str, sql: str, **extra: Any) -> Any:
    return http(server.url, "POST", "/api/" + path, body={"sql": sql, **extra}, timeout=120)


def test_ui_sql_stops_at_its_limit_and_the_server_keeps_answering(
        tree_and_store: tuple[Path, Path]) -> None:
    tree, path = tree_and_store
    with UiServer(path, "--sql-timeout", "1") as server:
        for endpoint, extra in (("sql", {}), ("sql/download", {"format": "csv"}),
                                ("sql/download", {"format": "parquet"})):
            started = time.monotonic()
            r = post(server, endpoint, LONG, **extra)
            assert time.monotonic() - started < BOUND_S
            assert r.status == 400, (r.status, r.text)
            assert r.headers["content-type"].startswith("application/json")
            error = r.json()["error"]
            assert error.startswith(STOPPED) and "--sql-timeout" in error
            assert "Traceback" not in r.text
        # The server still answers, rightly: its own pages and a short query.
        runs = http(server.url, "GET", "/api/runs", timeout=120)
        assert runs.status == 200
        body = runs.json()
        got = sorted(row[body["columns"].index("run_name")] for row in body["rows"])
        assert got == run_names(tree)
        r = post(server, "sql", "select run_name from runs order by 1")
        assert r.status == 200 and [row[0] for row in r.json()["rows"]] == run_names(tree)
        _, err = server.stop()
    assert "Traceback" not in err


def test_ui_limit_is_for_the_sql_page_only(tree_and_store: tuple[Path, Path]) -> None:
    """Under a limit of 1 ms the SQL page's query of run_summary is stopped, while the Runs
    page (run_summary and the health check, far more work) is answered in full."""
    tree, path = tree_and_store
    with UiServer(path, "--sql-timeout", "0.001") as server:
        r = post(server, "sql", "select * from run_summary order by run_name")
        assert r.status == 400 and r.json()["error"].startswith("query stopped after 0.001 s")
        runs = http(server.url, "GET", "/api/runs", timeout=120)
        assert runs.status == 200, runs.text
        body = runs.json()
        got = sorted(row[body["columns"].index("run_name")] for row in body["rows"])
        assert got == run_names(tree)
        health = http(server.url, "GET", "/api/health", timeout=120)
        assert health.status == 200, health.text
