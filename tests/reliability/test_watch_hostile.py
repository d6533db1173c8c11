"""The long-running modes under hostile conditions, with real processes stopped by PID.

* `runstore ui PATHS --watch` stopped by SIGINT or SIGTERM while its watch thread waits for
  the store's write lock (another writer, such as `runstore compact`, holds it): the server
  stops promptly (nothing is at stake while waiting), prints no traceback, and the store
  keeps what it had; the lock is free afterwards.
* `runstore ingest --watch` stopped by SIGINT or SIGTERM while a pass writes its snapshot: the
  commit finishes (as for a plain `runstore ingest`), so the store holds every row of the files.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import oracle
import runstore

ENV = {k: v for k, v in os.environ.items() if not k.startswith("RUNSTORE_")}


def write_run(run: Path, steps: int) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps({"learning_rate": 1e-4}))
    with open(run / "metrics.jsonl", "w") as f:
        for s in range(steps):
            f.write(json.dumps({"step": s, "loss": 1.0 / (s + 1)}) + "\n")


def wait_for_text(path: Path, text: str, timeout: float = 60) -> bool:
    """Whether `text` shows in the file `path` (a process's output) within `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ui_watch_stops_promptly_while_the_store_is_locked(tmp_path: Path, sig: int) -> None:
    tree, store = tmp_path / "runs", tmp_path / "store"
    write_run(tree / "a", 5)
    runstore.open(store).ingest([tree])
    write_run(tree / "b", 7)  # the watch has something to ingest, and waits for the lock
    with open(store / "_runstore" / "lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another writer holds the store
        log = tmp_path / "out.txt"
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "runstore", "--store", str(store), "ui", str(tree),
                 "--watch", "0.2", "--port", "0"],
                stdout=out, stderr=subprocess.STDOUT, env={**ENV, "PYTHONUNBUFFERED": "1"})
        try:
            assert wait_for_text(log, "ingesting"), log.read_text()
            time.sleep(1)  # the watch thread is waiting for the lock by now
            proc.send_signal(sig)
            try:
                proc.wait(timeout=20)  # uvicorn's graceful shutdown takes up to 3 s
            except subprocess.TimeoutExpired:
                pytest.fail(f"not stopped 20 s after {signal.Signals(sig).name}: "
                            f"{log.read_text()}")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        fcntl.flock(held, fcntl.LOCK_UN)
    assert "Traceback" not in log.read_text(), log.read_text()
    # The store kept what it had and is free: a plain ingest takes the lock at once and
    # ends with the files' rows.
    p = subprocess.run([sys.executable, "-m", "runstore", "--store", str(store), "ingest",
                        str(tree), "--lock-timeout", "0"],
                       capture_output=True, text=True, timeout=120, env=ENV)
    assert p.returncode == 0, p.stderr
    got = runstore.open(store).sql("select count(*) from metrics_raw").item()
    want = sum(len(oracle.metric_rows(tree / r / "metrics.jsonl")) for r in ("a", "b"))
    assert got == want


def stopped_watch(tree: Path, store: Path, log: Path, *signals: int, **popen: Any) -> int:
    """The exit status of `runstore ingest TREE --watch 0.2` (its output in `log`) sent
    `signals` while paused at its first pass's ledger (a pause a handled signal ends): each
    signal but the last must change nothing for a second."""
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "runstore", "--store", str(store), "ingest", str(tree),
             "--watch", "0.2"], stdout=out, stderr=subprocess.STDOUT,
            env={**ENV, "PYTHONUNBUFFERED": "1", "RUNSTORE_TEST_PAUSE": "ledger:1"}, **popen)
    try:
        assert wait_for_text(log, "paused at ledger:1"), log.read_text()
        for sig in signals[:-1]:
            proc.send_signal(sig)
            time.sleep(1.0)
            assert proc.poll() is None, log.read_text()
        proc.send_signal(signals[-1])
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_commit_of_a_watch_pass_lets_it_finish(tmp_path: Path,
                                                                    sig: int) -> None:
    """SIGTERM (what a service manager sends) ends `ingest --watch` as Ctrl-C does: one that
    comes while a pass writes its snapshot lets the commit finish, so what was read is kept."""
    tree, store = tmp_path / "runs", tmp_path / "store"
    write_run(tree / "a", 5)
    write_run(tree / "b", 7)
    log = tmp_path / "out.txt"
    assert stopped_watch(tree, store, log, sig) == 0, log.read_text()
    assert "Traceback" not in log.read_text(), log.read_text()
    # The snapshot of that pass was published: every row of the files, with no other ingest.
    got = runstore.open(store).sql("select count(*) from metrics_raw").item()
    want = sum(len(oracle.metric_rows(tree / r / "metrics.jsonl")) for r in ("a", "b"))
    assert got == want


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_watch_started_with_sigint_ignored_keeps_it_ignored(tmp_path: Path) -> None:
    """`ingest --watch` started as a script's `&` job (or under `nohup`) has SIGINT ignored,
    and it stays so, as for every other command: a SIGINT changes nothing (it used to end
    the watch); a SIGTERM still ends it cleanly, with 0."""
    tree, store = tmp_path / "runs", tmp_path / "store"
    write_run(tree / "a", 5)
    log = tmp_path / "out.txt"
    status = stopped_watch(tree, store, log, signal.SIGINT, signal.SIGTERM,
                           preexec_fn=_sigint_ignored)
    assert status == 0, log.read_text()
    assert "Traceback" not in log.read_text(), log.read_text()
