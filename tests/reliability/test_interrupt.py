"""Ctrl-C and SIGTERM during an ingest keep what was read whole; a second signal stops at once.

Real `runstore ingest` processes get real signals at chosen moments: the test-only hook
`pause_point` (`$RUNSTORE_TEST_PAUSE=PHASE:N[,PHASE:N]`) makes the process say
`paused at PHASE:N` and wait there until it receives a signal it handles, so a signal lands
exactly during discovery, in the middle of parsing, while a batch is committed in the
background, during the last commit, or right after the last publish. After each one:

* the exit status is 130 and stderr says how much was kept (and that running again continues);
* the store answers, and what it holds is a consistent prefix of an uninterrupted ingest:
  every source file the published ledger lists has exactly its rows of the uninterrupted
  ingest (whose totals equal the oracle's), with the same ledger entry, no other file has any
  row, and `runs` holds exactly the runs with a ledger entry (no orphaned rows);
* the next ingest ends with exactly the uninterrupted ingest's rows, and one more adds nothing.

A second signal makes the process exit at once (status 130, "stopped at once"); the store
still answers and the next ingest completes it. `store.ingest()` from Python behaves the same
with a real SIGINT (raised by the process itself, in the main thread): it publishes what is
whole and raises KeyboardInterrupt carrying the report of what it kept.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import oracle
from signals import sigint_not_ignored  # noqa: F401  (autouse: SIGINT reaches the children)
import runstore
from runstore import demo
from runstore.storage import schema
from runstore.crashpoints import pause_point
from runstore.storage.ledger import EVAL_STORE_KIND
from runstore.storage.manifest import read_manifest
from runstore.storage.snapshot import open_parquet
from runstore.errors import StoreNotFound

ENV = {**os.environ, "RUNSTORE_BATCH_ROWS": "8000"}  # many snapshots, several in the background
SOURCE_TABLES = schema.DATA_TABLES  # every table but `runs` keys its rows by source file


def command(store: Path, tree: Path) -> list[str]:
    return [sys.executable, "-m", "runstore", "--store", str(store), "ingest", "-q", str(tree)]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("interrupt") / "runs"
    demo.generate_tree(root, demo.default_specs() + demo.bench_specs(2, 200), seed=5)
    return root


def per_source(store: runstore.Store) -> dict[tuple[str, int], int]:
    """(table, source_id) -> rows."""
    q = " union all ".join(f"select '{t}' as t, source_id, count(*) as n from {t} group by all"
                           for t in SOURCE_TABLES)
    return {(r["t"], r["source_id"]): r["n"] for r in store.arrow(q).to_pylist()}


def ledger(store_path: Path) -> dict[int, dict[str, Any]]:
    """source_id -> the published ledger entry (internal: the newest manifest's ledger)."""
    m = read_manifest(store_path)
    if m is None or not m.ledger:
        return {}
    rows = open_parquet(str(store_path / m.ledger)).read().to_pylist()
    return {r["source_id"]: r for r in rows}


class Reference:
    """An uninterrupted ingest of the tree: its rows per source, ledger, and phase counts."""

    def __init__(self, store_path: Path, tree: Path, points: Path):
        p = subprocess.run(command(store_path, tree), capture_output=True, text=True,
                           env={**ENV, "RUNSTORE_TEST_POINTS": str(points)}, timeout=300)
        assert p.returncode == 0, p.stderr
        self.store = runstore.open(store_path)
        self.counts = {t: n for t, n in self.store.sql(" union all ".join(
            f"select '{t}' as t, count(*) as n from {t}" for t in schema.TABLES)).iter_rows()}
        want = oracle.expected_counts(tree)
        assert self.counts == {t: want.get(t, 0) for t in schema.TABLES}
        self.rows = per_source(self.store)
        self.ledger = ledger(store_path)
        self.reached: dict[str, int] = {}
        for name in points.read_text().split():
            self.reached[name] = self.reached.get(name, 0) + 1
        assert self.reached["publish"] >= 4  # background and final commits both happen


@pytest.fixture(scope="module")
def ref(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    d = tmp_path_factory.mktemp("interrupt_ref")
    return Reference(d / "store", tree, d / "points.log")


def assert_consistent_prefix(store_path: Path, ref: Reference) -> int:
    """The store answers and holds whole files of the uninterrupted ingest, exactly those its
    ledger lists; returns how many source files it holds (0 without a store)."""
    store = runstore.open(store_path)
    try:
        run_ids = set(store.sql("select run_id from runs")["run_id"].to_list())
    except StoreNotFound:
        return 0
    entries = ledger(store_path)
    files = {sid: e for sid, e in entries.items() if e["kind"] != "run"}
    got = per_source(store)
    for (table, sid), n in got.items():
        assert sid in files, f"{table} has rows of a file the ledger does not list"
        assert n == ref.rows.get((table, sid)), (table, files[sid]["rel_path"], n)
    for sid, e in files.items():
        for table in SOURCE_TABLES:
            assert got.get((table, sid), 0) == ref.rows.get((table, sid), 0), (table, e["rel_path"])
        mine = {k: v for k, v in e.items() if k != "state"}
        theirs = {k: v for k, v in ref.ledger[sid].items() if k != "state"}
        assert mine == theirs, e["rel_path"]
    assert run_ids == {e["run_id"] for e in entries.values() if e["kind"] == "run"}
    # No orphaned rows: every file belongs to a run with its `runs` row, or to an eval store
    # with its own entry (an eval store has no `runs` row; its tables are keyed by the store).
    evals = {e["run_id"] for e in entries.values() if e["kind"] == EVAL_STORE_KIND}
    assert {e["run_id"] for e in files.values()} <= run_ids | evals
    return len(files)


def units_in_order(tree: Path) -> list[tuple[str, Path]]:
    """The runs and eval stores of `tree` ("run" or "eval_store", directory) in the order an
    ingest reads them (path order, a run's own eval stores right after it), from the files."""
    units = [("run", d) for d in oracle.run_dirs(tree)]
    units += [("eval_store", d) for d in oracle.eval_stores(tree)]
    return sorted(units, key=lambda u: u[1].relative_to(tree).parts)


def assert_completes(store_path: Path, tree: Path, ref: Reference) -> None:
    """The next ingest gives exactly the uninterrupted rows; one more adds nothing."""
    p = subprocess.run(command(store_path, tree), capture_output=True, text=True, env=ENV,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    store = runstore.open(store_path)
    assert per_source(store) == ref.rows
    assert store.sql("select count(*) as n from runs")["n"][0] == ref.counts["runs"]
    assert ledger(store_path).keys() == ref.ledger.keys()
    again = store.ingest([tree])
    assert not any(again.rows_added.values()) and again.snapshots == 0


class Paused:
    """A `runstore ingest` that pauses at points; signals are sent when it says it paused."""

    def __init__(self, store: Path, tree: Path, points: str, timeout: float = 120):
        self.timeout = timeout
        self.proc = subprocess.Popen(command(store, tree), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True,
                                     env={**ENV, "RUNSTORE_TEST_PAUSE": points})
        self.lines: list[str] = []

    def wait_paused(self, point: str) -> None:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + self.timeout
        while True:
            ready, _, _ = select.select([self.proc.stderr], [], [], deadline - time.monotonic())
            line = self.proc.stderr.readline() if ready else ""
            if not line:
                self.stop()
                pytest.fail(f"never paused at {point}: {''.join(self.lines)}")
            self.lines.append(line)
            if line.strip() == f"paused at {point}":
                return

    def stop(self) -> None:
        """Kill it and reap it (a failing test leaves no process behind)."""
        self.proc.kill()
        self.proc.communicate()

    def signal(self, sig: int = signal.SIGINT) -> None:
        self.proc.send_signal(sig)

    def finish(self, timeout: float | None = None) -> tuple[int, str, float]:
        """(exit status, the rest of stderr, seconds it took to exit)."""
        started = time.monotonic()
        try:
            _, err = self.proc.communicate(timeout=timeout or self.timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"did not exit within {timeout or self.timeout} s of the signal")
        return self.proc.returncode, "".join(self.lines) + err, time.monotonic() - started


@pytest.fixture
def paused() -> Any:
    """Makes `Paused` ingests; any still running when the test ends is killed and reaped."""
    made: list[Paused] = []

    def make(store: Path, tree: Path, points: str) -> Paused:
        made.append(Paused(store, tree, points))
        return made[-1]

    yield make
    for run in made:
        if run.proc.poll() is None:
            run.stop()
        elif run.proc.stderr is not None:
            run.proc.stderr.close()


KEPT = re.compile(r"interrupted by (SIGINT|SIGTERM): (kept (?P<whole>\d+) of (?P<runs>\d+) "
                  r"runs whole(?P<cut> and (?P<cut_files>\d+) of (\d+) files of \S+)?"
                  r"( \(eval stores: (?P<evals_whole>\d+) of (?P<evals>\d+) whole\))?|"
                  r"everything was kept \((?P<all_runs>\d+) runs(; eval stores: "
                  r"(?P<all_evals>\d+))?\)|nothing new was kept \(the store is as it was\)), "
                  r"in (?P<snapshots>\d+) snapshots?")


def moments(ref: Reference) -> dict[str, tuple[str, str]]:
    """moment -> (pause point, what the message must say was kept)."""
    return {
        "discover": ("discover:3", "nothing"),
        "early parse": ("parse:5", "some"),
        "mid-parse": (f"parse:{ref.reached['parse'] // 2}", "some"),
        # The first commit is a batch written in the background while parsing goes on.
        "background commit": ("write:1", "some"),
        "background ledger": ("ledger:1", "some"),
        "final commit": (f"ledger:{ref.reached['ledger']}", "everything"),
        "after publish": (f"publish:{ref.reached['publish']}", "everything"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["discover", "early parse", "mid-parse", "background commit",
                                    "background ledger", "final commit", "after publish"])
def test_sigint_keeps_whole_files(moment: str, tree: Path, ref: Reference,
                                  tmp_path: Path, paused: Any) -> None:
    point, kept = moments(ref)[moment]
    n_runs, n_evals = len(oracle.run_dirs(tree)), len(oracle.eval_stores(tree))
    assert n_evals > 0  # the demo tree holds an eval store: the message says it apart
    before = oracle.fingerprint(tree)
    store = tmp_path / "store"
    run = paused(store, tree, point)
    run.wait_paused(point)
    run.signal()
    status, err, _ = run.finish()
    assert status == 130, err
    m = KEPT.search(err)
    assert m, err
    assert "Traceback" not in err
    files = assert_consistent_prefix(store, ref)
    # The rows it says it added are the rows the store holds (it started empty); the report
    # counts rows read from sources, not the metric_keys summary kept beside them.
    said = dict((t, int(n)) for t, n in re.findall(r"(\w+) \+(\d+)", err.split("rows: ", 1)[1]))
    held = {t: n for t, n in runstore.open(store).sql(" union all ".join(
        f"select '{t}' as t, count(*) as n from {t}" for t in schema.TABLES
        if t not in schema.SUMMARY_TABLES)).iter_rows() if n} if files else {}
    assert said == held, (said, held)
    if point.startswith("parse:"):
        # It stopped right after the file it paused after: every file read so far is kept.
        assert files == int(point.split(":")[1])
    if kept == "nothing":
        assert "nothing new was kept" in err and files == 0
        assert "run the same command again to continue\n" in err
    elif kept == "everything":
        assert m["all_runs"] == str(n_runs) and "run the same command again" not in err
        assert m["all_evals"] == str(n_evals)  # said apart, as the final report does
        assert files == len([e for e in ref.ledger.values() if e["kind"] != "run"])
    else:
        assert m["runs"] == str(n_runs) and m["evals"] == str(n_evals)
        assert "run the same command again to continue" in err
        assert 0 < files < len([e for e in ref.ledger.values() if e["kind"] != "run"])
        # What it says it kept is what it kept: whole runs and eval stores, plus the files of
        # one cut short.
        assert int(m["snapshots"]) >= 1
        whole, whole_evals = int(m["whole"]), int(m["evals_whole"])
        cut = int(m["cut_files"]) if m["cut"] else 0
        held_runs = runstore.open(store).sql("select count(*) as n from runs")["n"][0]
        held_evals = sum(e["kind"] == EVAL_STORE_KIND for e in ledger(store).values())
        assert held_runs >= whole and held_evals >= whole_evals
        assert held_runs + held_evals == whole + whole_evals + (1 if m["cut"] else 0)
        assert (cut > 0) == bool(m["cut"])
    assert_completes(store, tree, ref)
    assert oracle.fingerprint(tree) == before


def blocked_main_thread(pid: int, within: float = 60) -> None:
    """Wait until the main thread of `pid` has slept in a futex (a lock) for half a second."""
    deadline, since = time.monotonic() + within, None
    while time.monotonic() < deadline:
        wchan = Path(f"/proc/{pid}/task/{pid}/wchan").read_text()
        since = (since or time.monotonic()) if "futex" in wchan else None
        if since is not None and time.monotonic() - since > 0.5:
            return
        time.sleep(0.02)
    pytest.fail(f"the main thread did not wait on a lock within {within} s")


def another_thread(pid: int) -> int:
    """A thread of `pid` other than the main one that does not block SIGINT."""
    for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
        status = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines()
                      if ":\t" in line)
        if int(task.name) != pid and not int(status["SigBlk"], 16) & (1 << (signal.SIGINT - 1)):
            return int(task.name)
    raise AssertionError("no other thread takes SIGINT")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tgkill and /proc are Linux's")
def test_sigint_that_the_kernel_gives_another_thread_still_stops_the_ingest(
        tree: Path, ref: Reference, tmp_path: Path, paused: Any) -> None:
    """The kernel may hand a process's signal to any of its threads: Python then runs the
    handler when the main thread next runs Python code. With the main thread waiting on a
    lock for a commit in the background (paused until the signal is handled), the SIGINT
    sent to another thread still stops the ingest, keeping what is whole. It used to hang."""
    import ctypes

    store = tmp_path / "store"
    run = paused(store, tree, "ledger:1")
    run.wait_paused("ledger:1")
    blocked_main_thread(run.proc.pid)
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.tgkill(run.proc.pid, another_thread(run.proc.pid), signal.SIGINT) == 0
    status, err, _ = run.finish(timeout=30)
    assert status == 130 and KEPT.search(err), err
    assert "Traceback" not in err
    assert assert_consistent_prefix(store, ref) > 0
    assert_completes(store, tree, ref)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tgkill and /proc are Linux's")
def test_sigint_that_another_thread_gets_during_the_last_commit_is_heard(
        tree: Path, ref: Reference, tmp_path: Path, paused: Any) -> None:
    """The same during the ingest's last commit, which the main thread runs itself while it
    waits for the tables written two at a time: paused at the last table write until the
    signal is handled, a SIGINT sent to another thread still ends the ingest, everything
    kept. It hung while the main thread waited for a table's write in one blocking wait."""
    import ctypes

    store = tmp_path / "store"
    point = f"write:{ref.reached['write']}"
    run = paused(store, tree, point)
    run.wait_paused(point)
    blocked_main_thread(run.proc.pid)
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.tgkill(run.proc.pid, another_thread(run.proc.pid), signal.SIGINT) == 0
    status, err, _ = run.finish(timeout=30)
    assert status == 130 and "everything was kept" in err, err
    assert "Traceback" not in err
    assert assert_consistent_prefix(store, ref) > 0
    assert_completes(store, tree, ref)


@pytest.mark.slow
def test_sigterm_keeps_whole_files_too(tree: Path, ref: Reference, tmp_path: Path,
                                       paused: Any) -> None:
    store = tmp_path / "store"
    point = f"parse:{ref.reached['parse'] // 3}"
    run = paused(store, tree, point)
    run.wait_paused(point)
    run.signal(signal.SIGTERM)
    status, err, _ = run.finish()
    assert status == 130 and "interrupted by SIGTERM: kept" in err, err
    assert assert_consistent_prefix(store, ref) > 0
    assert_completes(store, tree, ref)


@pytest.mark.slow
def test_second_signal_stops_at_once(tree: Path, ref: Reference, tmp_path: Path,
                                     paused: Any) -> None:
    """The second SIGINT comes while the first one's snapshot is being published."""
    store = tmp_path / "store"
    first = f"parse:{ref.reached['parse'] // 2}"
    run = paused(store, tree, f"{first},interrupted:1")
    run.wait_paused(first)
    run.signal()
    run.wait_paused("interrupted:1")  # about to publish what it has
    run.signal()
    status, err, took = run.finish(timeout=30)
    assert status == 130, err
    assert "stopped at once by a second SIGINT" in err and "Traceback" not in err
    assert took < 5, f"took {took:.1f} s to stop"
    assert_consistent_prefix(store, ref)  # the snapshots published before the first signal
    assert_completes(store, tree, ref)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.0, 0.05, 0.2])
def test_second_signal_during_the_last_publish(delay: float, tree: Path, ref: Reference,
                                               tmp_path: Path, paused: Any) -> None:
    """The second SIGINT lands wherever `delay` puts it in publishing what the first kept
    (Delta writes, ledger, manifest): still at once, still safe."""
    store = tmp_path / "store"
    first = f"parse:{ref.reached['parse'] * 2 // 3}"
    run = paused(store, tree, first)
    run.wait_paused(first)
    run.signal()
    time.sleep(delay)
    started = time.monotonic()
    run.signal()
    status, err, _ = run.finish(timeout=30)
    assert status == 130, err
    assert time.monotonic() - started < 5
    assert "stopped at once" in err or KEPT.search(err), err  # it may have finished first
    assert_consistent_prefix(store, ref)
    assert_completes(store, tree, ref)


# ---------------------------------------------------------------------------------------------
# From Python: store.ingest() under a real SIGINT


def test_python_ingest_publishes_then_raises(tree: Path, ref: Reference, tmp_path: Path) -> None:
    store = runstore.open(tmp_path / "store")
    before = signal.getsignal(signal.SIGINT)

    def progress(done: int, total: int, nbytes: int, name: str) -> None:
        if done == 4:
            signal.raise_signal(signal.SIGINT)  # a real Ctrl-C, delivered to this thread

    with pytest.raises(KeyboardInterrupt) as info:
        store.ingest([tree], progress=progress)
    assert type(info.value) is KeyboardInterrupt  # not a subclass: see the script test below
    report = info.value.report
    assert report.interrupted == "SIGINT" and not report.complete
    assert report.runs_new == 4 and report.partial is None  # stopped at the run boundary
    # The eval stores read before the fourth run (in the order of the files), said apart.
    units = units_in_order(tree)
    fourth = [i for i, (kind, _) in enumerate(units) if kind == "run"][3]
    evals_before = sum(kind == "eval_store" for kind, _ in units[:fourth])
    assert (f"kept 4 of {len(oracle.run_dirs(tree))} runs whole (eval stores: {evals_before} "
            f"of {len(oracle.eval_stores(tree))} whole), in ") in str(info.value)
    assert signal.getsignal(signal.SIGINT) is before  # the handler is put back
    assert assert_consistent_prefix(store.path, ref) > 0
    assert store.sql("select count(*) as n from runs")["n"][0] == 4
    last = store.manifest().last_ingest
    assert last is not None and last["interrupted"] == "SIGINT"
    again = store.ingest([tree])
    assert again.runs_new == ref.counts["runs"] - 4 and again.runs_unchanged == 4
    assert per_source(store) == ref.rows


def test_python_second_sigint_raises_at_once(tree: Path, ref: Reference, tmp_path: Path) -> None:
    store = runstore.open(tmp_path / "store")
    calls = []

    def progress(done: int, total: int, nbytes: int, name: str) -> None:
        calls.append(done)
        if done == 3:
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)  # raises KeyboardInterrupt right here

    with pytest.raises(KeyboardInterrupt) as info:
        store.ingest([tree], progress=progress)
    assert not hasattr(info.value, "report")  # nothing more was published
    assert calls == [1, 2, 3]
    assert_consistent_prefix(store.path, ref)
    store.ingest([tree])
    assert per_source(store) == ref.rows


def test_python_script_interrupted_by_a_real_sigint(tree: Path, ref: Reference,
                                                    tmp_path: Path) -> None:
    """A script that does not catch it: the KeyboardInterrupt ends it as Python ends any
    (killed by SIGINT, after its traceback), and what was whole is in the store."""
    store = tmp_path / "store"
    script = ("import sys, runstore\n"
              "runstore.open(sys.argv[1]).ingest([sys.argv[2]])\n")
    point = f"parse:{ref.reached['parse'] // 2}"
    proc = subprocess.Popen([sys.executable, "-c", script, str(store), str(tree)],
                            stderr=subprocess.PIPE, text=True,
                            env={**ENV, "RUNSTORE_TEST_PAUSE": point})
    assert proc.stderr is not None
    try:
        assert proc.stderr.readline().strip() == f"paused at {point}"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGINT, err
    assert "KeyboardInterrupt: interrupted by SIGINT: kept" in err
    assert assert_consistent_prefix(store, ref) > 0
    assert_completes(store, tree, ref)
