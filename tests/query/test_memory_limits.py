"""A memory limit on every path that runs user SQL (issue 29, item 3).

The queries here would take tens of gigabytes unbounded (the issue's `repeat(run_id, 1000000)`
over 26,814 rows is ~27 GB of strings) — a large string, a large list, a large join, a large
aggregate. Each must stop at the limit with one clear error naming it and how to raise it:
`runstore sql` (its own process capped), `store.sql(..., isolated=True)` (a capped worker
process), and the in-process path where DuckDB's own limit is what holds. The kernel's own
figures judge the bound (a child's peak RSS from `wait4`, a worker's `/proc/PID/limits` and
`VmRSS`), expected answers come from the source tree (tests/oracle.py). Every process these
tests start runs under a safety net (an address-space limit of several GB), so that a
regression fails the test instead of taking the machine's memory.
"""

from __future__ import annotations

import gc
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

import oracle
import runstore
from runstore.cli import main
from runstore.errors import QueryError, UsageError
from runstore.query import memory
from runstore.query.workers import Workers
from test_query_timeout import LONG

LIMIT = "384MB"
LIMIT_BYTES = 384 * 10**6
# What a capped process holds besides the limit: the interpreter, DuckDB and pyarrow loaded
# (resident library code is not data, so it is outside the cap but inside the RSS).
START_UP = 450 * 2**20
SAFETY_NET = 3 * 2**30  # address space beyond what a test process holds: a regression stops here

HUNGRY = {
    # The query: ~27 GB of strings, outside DuckDB's buffer manager.
    "large-string": "select sum(length(repeat(run_id, 1000000))) as n from metrics_raw",
    # One list of 300 million integers (2.4 GB).
    "large-list": "select max(len(l)) as n from (select list(range) as l from range(300000000))",
    # A three-way self-join on key (~10^10 rows) gathered into one list.
    "large-join": "select len(list(c.value)) as n from metrics_raw a join metrics_raw b "
                  "using (key) join metrics_raw c using (key)",
    # One string of every run_id padded to 100 kB (2.7 GB).
    "large-aggregate": "select length(string_agg(run_id || repeat('y', 100000), ',')) as n "
                       "from metrics_raw",
}


def metrics_rows(tree: Path) -> int:
    return oracle.expected_counts(tree)["metrics_raw"]


def _vm(pid: int | str, field: str) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def data_limit(pid: int) -> int | None:
    """The soft RLIMIT_DATA the kernel enforces on `pid` (None: unlimited)."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max data size"):
            soft = line.split()[3]
            return None if soft == "unlimited" else int(soft)
    raise AssertionError("no data limit line")


def net() -> None:
    """preexec_fn: the safety net of a child process."""
    resource.setrlimit(resource.RLIMIT_AS, (SAFETY_NET + 2 * 2**30, SAFETY_NET + 2 * 2**30))


@pytest.fixture
def safety_net() -> Iterator[None]:
    """This process's address space limited to what it holds plus SAFETY_NET for the test:
    the worker processes runstore starts inherit the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    size = _vm("self", "VmSize") or 0
    resource.setrlimit(resource.RLIMIT_AS, (size + SAFETY_NET, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class Watch:
    """The largest RSS seen of some processes, sampled every 20 ms (a lower bound of their
    true peak: enough to see a process that grows without bound)."""

    def __init__(self, pids: Any):
        self.pids = pids
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self.pids():
                self.peak = max(self.peak, _vm(pid, "VmRSS") or 0)
            self._stop.wait(0.02)

    def __enter__(self) -> "Watch":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def limit_message(limit_text: str, doubled: str) -> str:
    return (f"the query needed more memory than its limit of {limit_text}: narrow it (a WHERE, "
            f"a LIMIT, fewer or shorter values) or raise the limit (runstore sql --memory-limit "
            f"{doubled}; runstore ui --memory-limit {doubled}; $RUNSTORE_MEMORY_LIMIT; Python: "
            f"runstore.open(path, memory_limit='{doubled}'))")


# -- the limit itself ---------------------------------------------------------------------------

def meminfo_total() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no MemTotal")


def test_the_machine_memory_is_the_kernels() -> None:
    limits = [meminfo_total()]
    for name in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    assert memory.machine() == min(limits)
    assert memory.default() == int(memory.machine() / 4)


@pytest.mark.parametrize("text, expected", [
    ("4GB", 4 * 10**9), ("4 GiB", 4 * 2**30), ("512mb", 512 * 10**6), ("1.5GB", 15 * 10**8),
    ("2048MiB", 2 * 2**30), ("0.5 TB", 5 * 10**11), (3 * 2**30, 3 * 2**30), ("100000000", 10**8),
    ("100000000b", 10**8), ("64MiB", 64 * 2**20),
])
def test_sizes_are_read_as_duckdb_reads_them(text: Any, expected: int) -> None:
    assert memory.parse(text) == expected


def test_shares_are_of_the_machine() -> None:
    assert memory.parse("25%") == int(memory.machine() * 25 / 100)
    assert memory.parse("100%") == memory.machine()
    assert memory.parse("12.5%") == int(memory.machine() * 12.5 / 100)


@pytest.mark.parametrize("bad", ["lots", "4XB", "0%", "101%", "-1GB", "1KB", "10", "", "GB",
                                 True, 3.5, None, "4GB4", "\u0664GB", "\uff14GB"])
def test_a_size_that_is_not_one_is_a_usage_error(bad: Any) -> None:
    with pytest.raises(UsageError, match="memory limit"):
        memory.parse(bad)


def test_the_environment_sets_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(memory.ENV, raising=False)
    assert memory.resolve() == memory.default()
    monkeypatch.setenv(memory.ENV, "2GB")
    assert memory.resolve() == 2 * 10**9
    assert memory.resolve("1GB") == 10**9  # the argument first
    monkeypatch.setenv(memory.ENV, "lots")
    with pytest.raises(UsageError, match=r"\$RUNSTORE_MEMORY_LIMIT"):
        memory.resolve()


def duckdb_text(setting: str) -> str:
    """How DuckDB itself shows a memory_limit set to `setting`."""
    import duckdb

    con = duckdb.connect()
    con.execute("set memory_limit = $v", {"v": setting})
    return con.execute("select current_setting('memory_limit')").fetchone()[0]


def test_duckdbs_own_limit_is_three_quarters_in_process_and_in_workers(
        ui_demo: tuple[Path, Path], safety_net: None) -> None:
    with runstore.open(ui_demo[1], memory_limit="400MB") as store:
        expected = duckdb_text("300MB")
        query = "select current_setting('memory_limit') as m"
        assert store.sql(query).item() == expected
        assert store.sql(query, isolated=True).item() == expected
        # Nothing can raise it: the configuration is locked, even past the guard.
        con = store.connect()
        assert con.execute(query).fetchone()[0] == expected
        with pytest.raises(Exception, match="the configuration has been locked"):
            con.execute("set memory_limit = '10GB'")


# -- runstore sql: the command's own process is capped ------------------------------------------

def run_capped(args: list[str], env: dict[str, str] | None = None,
               timeout: float = 300) -> tuple[int, str, str, int]:
    """Run `python -m runstore ARGS` under the safety net: (exit status, stdout, stderr,
    peak RSS in bytes, from the kernel's accounting of the finished child)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, "-m", "runstore", *args], stdout=out,
                                stderr=err, env={**os.environ, **(env or {})}, preexec_fn=net)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.kill(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                raise AssertionError(f"runstore {args} still ran after {timeout} s")
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode(), err.read().decode(),
                usage.ru_maxrss * 1024)


@pytest.mark.parametrize("kind", HUNGRY)
def test_runstore_sql_stops_at_its_memory_limit(ui_demo: tuple[Path, Path], kind: str) -> None:
    code, out, err, peak = run_capped(["--store", str(ui_demo[1]), "sql", "--memory-limit", LIMIT,
                                       HUNGRY[kind], "-F", "csv"])
    assert code == 5, err  # a query stopped at its limit (errors.EXIT_CODES)
    assert out == ""
    assert err.splitlines() == ["Error: " + limit_message("384 MB", "768MB")], err
    assert peak < LIMIT_BYTES + START_UP, f"peak RSS {peak / 2**20:.0f} MiB"


def test_the_limit_from_the_environment_holds_for_sql_and_runs_where(
        ui_demo: tuple[Path, Path]) -> None:
    env = {"RUNSTORE_MEMORY_LIMIT": "300MB"}
    for args in (["sql", HUNGRY["large-string"]],
                 ["runs", "--where", "len(range(0, 200000000)) > 0"]):
        code, out, err, peak = run_capped(["--store", str(ui_demo[1]), *args], env=env)
        assert (code, out) == (5, ""), err  # stopped at its limit: errors.EXIT_CODES
        assert err.splitlines() == ["Error: " + limit_message("300 MB", "600MB")], err
        assert peak < 300 * 10**6 + START_UP


def test_runstore_sql_within_its_limit_answers(ui_demo: tuple[Path, Path]) -> None:
    tree, path = ui_demo
    code, out, err, _ = run_capped(["--store", str(path), "sql", "--memory-limit", "200MB",
                                    "select count(*) as n from metrics_raw", "-F", "csv"])
    assert code == 0, err
    assert out.splitlines() == ["n", str(metrics_rows(tree))]


@pytest.mark.parametrize("bad", ["0", "lots", "10KB", "-1GB", "200%", "1.5.5GB"])
def test_a_bad_memory_limit_is_a_usage_error(ui_demo: tuple[Path, Path], bad: str) -> None:
    for command in (["sql", "select 1", "--memory-limit", bad], ["ui", "--memory-limit", bad]):
        result = CliRunner().invoke(main, ["--store", str(ui_demo[1]), *command])
        assert result.exit_code == 2, result.output
        assert "memory limit" in result.stderr and "Traceback" not in result.output


def test_a_command_run_in_this_process_lifts_its_cap(ui_demo: tuple[Path, Path]) -> None:
    """`runstore sql` run in this process (CliRunner) leaves its limit as it was."""
    before = resource.getrlimit(resource.RLIMIT_DATA)
    seen: list[int] = []
    held: list[int] = []  # what the process held as each limit was set
    real = resource.setrlimit

    def spy(which: int, limits: tuple[int, int]) -> None:
        if which == resource.RLIMIT_DATA:
            seen.append(limits[0])
            held.append(memory.data_size() or 0)
        real(which, limits)

    resource.setrlimit = spy  # type: ignore[assignment]
    try:
        result = CliRunner().invoke(main, ["--store", str(ui_demo[1]), "sql", "--memory-limit",
                                           LIMIT, "select 1 as x", "-F", "csv"])
    finally:
        resource.setrlimit = real  # type: ignore[assignment]
    assert result.exit_code == 0 and result.stdout == "x\n1\n", result.output
    # The cap is what the process held then, plus the limit (the command frees what it used
    # when it ends: the size after it may be lower).
    assert len(seen) == 2 and 0 < seen[0] <= held[0] + LIMIT_BYTES
    assert resource.getrlimit(resource.RLIMIT_DATA) == before


def test_help_documents_the_memory_limit() -> None:
    sql_help = CliRunner().invoke(main, ["sql", "--help"]).stdout
    assert "--memory-limit SIZE" in sql_help and "runstore sql --memory-limit 8GB" in sql_help
    ui_help = CliRunner().invoke(main, ["ui", "--help"]).stdout
    assert "--memory-limit SIZE" in ui_help and "runstore ui --memory-limit 8GB" in ui_help


# -- Python: DuckDB's limit in the caller's process, a capped worker with isolated=True -----------

def test_in_process_duckdbs_limit_stops_what_it_accounts(ui_demo: tuple[Path, Path],
                                                         safety_net: None) -> None:
    """A sort of a three-way join needs DuckDB's buffers (which cannot spill here): DuckDB's
    own limit stops it in the caller's process, which is never capped."""
    tree, path = ui_demo
    before = resource.getrlimit(resource.RLIMIT_DATA)
    with runstore.open(path, memory_limit="256MB") as store:
        with pytest.raises(QueryError) as err:
            store.sql("select count(*) from (select a.seq, b.seq, c.seq from metrics_raw a join "
                      "metrics_raw b using (key) join metrics_raw c using (key) order by 1, 2, 3)")
        assert str(err.value) == limit_message("256 MB", "512MB")
        assert store.sql("select count(*) as n from metrics_raw").item() == metrics_rows(tree)
    assert resource.getrlimit(resource.RLIMIT_DATA) == before


@pytest.mark.parametrize("kind", HUNGRY)
def test_isolated_queries_stop_at_the_limit_and_the_next_one_answers(
        ui_demo: tuple[Path, Path], kind: str, safety_net: None) -> None:
    tree, path = ui_demo
    own_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with runstore.open(path, memory_limit=LIMIT) as store:
        assert store.sql("select 1 as x", isolated=True).item() == 1  # a worker is ready
        workers = store.workers()
        pid = workers.pids()[0]
        cap = data_limit(pid)
        # The kernel holds the worker to what it held once warmed up plus the limit.
        assert cap is not None and LIMIT_BYTES < cap <= (_vm(pid, "VmData") or 0) + LIMIT_BYTES
        with Watch(workers.pids) as watch:
            with pytest.raises(QueryError) as err:
                store.sql(HUNGRY[kind], isolated=True)
        assert str(err.value) == limit_message("384 MB", "768MB")
        assert watch.peak < LIMIT_BYTES + START_UP, f"{watch.peak / 2**20:.0f} MiB"
        got = store.sql("select count(*) as n from metrics_raw", isolated=True).item()
        assert got == metrics_rows(tree)
    # The work happened elsewhere: this process did not grow by the query's size.
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - own_peak
    assert grown < 200 * 2**20


def test_an_isolated_result_larger_than_the_limit_is_refused(ui_demo: tuple[Path, Path],
                                                             safety_net: None) -> None:
    with runstore.open(ui_demo[1], memory_limit="256MB") as store:
        with pytest.raises(QueryError, match="^the result is larger than the memory limit of "
                                             "256 MB: select fewer rows or columns"):
            # ~3 million rows of ~100 bytes each: streamed by the worker batch by batch, so it
            # fits the worker; as one table it would not fit the limit.
            store.arrow("select repeat('x', 100) || range as s from range(3000000)",
                        isolated=True)
        assert store.arrow("select count(*) as n from range(3000000)",
                           isolated=True).column("n").to_pylist() == [3000000]


def test_isolated_answers_equal_in_process_answers(ui_demo: tuple[Path, Path]) -> None:
    """The worker path gives the same table (types included) as the caller's own DuckDB."""
    queries = ["select * from runs order by run_id",
               "select * from metrics_raw order by run_id, seq, key",
               "select * from kl_health order by run_id",
               "select run_id, list(value order by step) as v, map(['a'], [1]) as m, "
               "{'x': 1} as s, interval 1 day as i from metrics_raw group by 1 order by 1",
               "select * from runs where false", "select $x::integer as x"]
    with runstore.open(ui_demo[1]) as store:
        for q in queries:
            params = {"x": 7} if "$x" in q else None
            assert store.arrow(q, params, isolated=True).equals(store.arrow(q, params)), q


def test_a_page_of_an_isolated_result_is_the_slice_of_the_whole(ui_demo: tuple[Path, Path]) -> None:
    """`head(skip=, rows=, nbytes=)`: the rows of the whole result from `skip` on (across the
    worker's batches of `BATCH_ROWS`), and the count of all of them (the MCP sql tool's pages)."""
    from runstore.query.worker import BATCH_ROWS

    q = "select range as i, repeat('x', (range % 7)::integer) as s from range($n) order by i"
    n = 2 * BATCH_ROWS + 11
    with runstore.open(ui_demo[1]) as store:
        whole = store.arrow(q, {"n": n})
        workers = store.workers()
        for skip, rows in [(0, 5), (BATCH_ROWS - 2, 5), (BATCH_ROWS, 3), (n - 4, 10),
                           (n, 3), (n + 50, 3), (7, 2 * BATCH_ROWS)]:
            page, total = workers.head(q, {"n": n}, rows=rows, nbytes=64 << 20, skip=skip)
            assert total == n, (skip, rows)
            assert page.equals(whole.slice(skip, rows)), (skip, rows)
        small, total = workers.head(q, {"n": n}, rows=1000, nbytes=2000, skip=100)
        assert total == n and 0 < small.num_rows < 1000 and small.nbytes <= 2000
        assert small.equals(whole.slice(100, small.num_rows))


# -- the worker processes ----------------------------------------------------------------------

def gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_gone(pid: int, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not gone(pid):
        assert time.monotonic() < deadline, f"process {pid} still runs"
        time.sleep(0.05)


def test_a_killed_worker_fails_its_query_and_is_replaced(ui_demo: tuple[Path, Path]) -> None:
    tree, path = ui_demo
    workers = Workers(path, memory.parse("1GB"), size=1)
    try:
        workers.table("select 1")
        [pid] = workers.pids()
        failure: list[BaseException] = []

        def long_query() -> None:
            try:
                workers.table(LONG, timeout=120)
            except BaseException as e:  # noqa: BLE001 - what the test looks at
                failure.append(e)

        thread = threading.Thread(target=long_query)
        thread.start()
        time.sleep(1.0)  # the query is running in the one worker
        os.kill(pid, signal.SIGKILL)
        thread.join(60)
        assert len(failure) == 1 and isinstance(failure[0], QueryError)
        assert str(failure[0]).startswith("the process running the query ended (killed by "
                                          "SIGKILL); most likely the query needed more memory ")
        got = workers.table("select count(*) as n from metrics_raw").column("n").to_pylist()
        assert got == [metrics_rows(tree)]
        assert workers.pids() and pid not in workers.pids()
    finally:
        workers.close()


def test_a_query_its_caller_gives_up_stops_and_its_worker_is_replaced(
        ui_demo: tuple[Path, Path]) -> None:
    """`stopping(stop)`: a running query whose `stop()` turns true fails with `Stopped` long
    before its time limit and its worker is killed; a query still waiting for the one worker
    stops too; the next query gets a new worker and answers. The test is the caller's context,
    so a thread started with a copy of it carries it (as the MCP SDK's tool threads do)."""
    import contextvars

    from runstore.query.workers import Stopped, stopping

    tree, path = ui_demo
    workers = Workers(path, memory.parse("1GB"), size=1)
    try:
        workers.table("select 1")
        [pid] = workers.pids()
        give_up = threading.Event()
        failures: dict[str, BaseException] = {}

        def query(name: str) -> None:
            try:
                workers.table(LONG, timeout=120)
            except BaseException as e:  # noqa: BLE001 - what the test looks at
                failures[name] = e

        with stopping(give_up.is_set):
            threads = {name: threading.Thread(target=contextvars.copy_context().run,
                                              args=(query, name)) for name in ("runs", "waits")}
        threads["runs"].start()
        time.sleep(1.0)  # the first query is running in the one worker
        threads["waits"].start()
        time.sleep(0.5)  # the second waits for it
        started = time.monotonic()
        give_up.set()
        for thread in threads.values():
            thread.join(60)
        assert time.monotonic() - started < 30  # the time limit was 120 s
        assert set(failures) == {"runs", "waits"}
        assert all(isinstance(e, Stopped) for e in failures.values()), failures
        wait_gone(pid)
        got = workers.table("select count(*) as n from metrics_raw").column("n").to_pylist()
        assert got == [metrics_rows(tree)] and pid not in workers.pids()
        # Outside the block, nothing stops a query.
        assert workers.table("select 41 + 1 as n").column("n").to_pylist() == [42]
    finally:
        workers.close()


def test_a_worker_past_its_time_limit_and_grace_is_killed(ui_demo: tuple[Path, Path]) -> None:
    """Compiling a 60-million-character regular expression is work DuckDB's interrupt does not
    reach: the worker is killed GRACE_S after the limit, and the query fails as any query
    stopped at its limit does."""
    from runstore.query.workers import GRACE_S

    workers = Workers(ui_demo[1], memory.parse("1GB"), size=1)
    try:
        workers.table("select 1")
        [pid] = workers.pids()
        started = time.monotonic()
        with pytest.raises(QueryError, match=r"^query stopped after 1 s \(its time limit\)"):
            workers.table("select regexp_matches(run_name, repeat('a', 60000000)) from runs",
                          timeout=1)
        assert time.monotonic() - started >= 1 + GRACE_S  # not answered by the worker itself
        wait_gone(pid)
        assert workers.table("select 41 + 1 as n").column("n").to_pylist() == [42]
    finally:
        workers.close()


def test_workers_end_with_their_store(ui_demo: tuple[Path, Path]) -> None:
    for close in (True, False):  # closed, or dropped without close(): its workers end too
        store = runstore.open(ui_demo[1])
        store.arrow("select 1", isolated=True)
        pids = store.workers().pids()
        assert pids
        if close:
            store.close()
        del store
        gc.collect()  # a Store is in a reference cycle (its session reads its manifest)
        for pid in pids:
            wait_gone(pid)


def test_workers_never_outlive_their_parent(ui_demo: tuple[Path, Path]) -> None:
    """A parent that dies without a word (os._exit), one of its workers idle and one in the
    middle of a query that would run for minutes: both end."""
    script = ("import os, sys, threading, time, runstore\n"
              "s = runstore.open(os.environ['STORE'])\n"
              "s.arrow('select 1', isolated=True)\n"
              "threading.Thread(target=s.arrow, args=(sys.argv[1],),\n"
              "                 kwargs={'isolated': True}, daemon=True).start()\n"
              "time.sleep(1)\n"
              "s.arrow('select 1', isolated=True)  # a second worker: the first is busy\n"
              "time.sleep(1)\n"
              "print(*s.workers().pids(), flush=True)\n"
              "os._exit(0)\n")
    proc = subprocess.run([sys.executable, "-c", script, LONG], capture_output=True, text=True,
                          env={**os.environ, "STORE": str(ui_demo[1])}, timeout=120)
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) == 2, (proc.stdout, proc.stderr)
    for pid in pids:
        wait_gone(pid, within=30)
