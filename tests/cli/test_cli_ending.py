"""How a `runstore` process ends once its command has: at once, with nothing of its owed lost.

`startup.finished` ends the command's process with `os._exit`, skipping the interpreter's
teardown. Tried on real processes, each with a `sitecustomize` that watches the ending: an
object whose `__del__` only the teardown runs (a plain Python process proves it does), an
atexit callback, a thread that is no daemon. Output, files written (`-o`) and exit statuses are
checked whole. A call of the group that is not standalone (a caller inside the process) never
ends it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import oracle
import storekit
from runstore import startup

WATCH = '''
import atexit, os, threading, time

MARK = os.environ["ENDING_MARK"]


def note(word, _open=os.open, _write=os.write, _close=os.close,
         _flags=os.O_WRONLY | os.O_CREAT | os.O_APPEND):
    # Bound now: by the teardown, builtins and module globals may be gone.
    fd = _open(MARK, _flags, 0o644)
    _write(fd, (word + "\\n").encode())
    _close(fd)


class TornDown:
    def __del__(self, _note=note):
        _note("teardown")


kept = TornDown()  # a module global: freed by the interpreter's teardown alone
atexit.register(note, "atexit")
if os.environ.get("ENDING_THREAD"):
    def late():
        time.sleep(1.0)
        note("thread")
    threading.Thread(target=late, daemon=False).start()
'''


@pytest.fixture(scope="module")
def store(ui_demo: tuple[Path, Path]) -> Path:
    return ui_demo[1]


def watched(tmp: Path, args: list[str], thread: bool = False,
            ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """`python ARGS` with the watching `sitecustomize`: the process and the words it noted."""
    site = tmp / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(WATCH)
    mark = tmp / "mark.txt"
    mark.unlink(missing_ok=True)
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path, "ENDING_MARK": str(mark)}
    if thread:
        env["ENDING_THREAD"] = "1"
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=120)
    return proc, mark.read_text().split() if mark.exists() else []


def test_the_watch_sees_a_plain_process_torn_down(tmp_path: Path) -> None:
    proc, noted = watched(tmp_path, ["-c", "print('x')"])
    assert proc.returncode == 0 and noted == ["atexit", "teardown"]


def test_a_command_ends_after_its_atexit_callbacks_without_the_teardown(
        store: Path, tmp_path: Path) -> None:
    proc, noted = watched(tmp_path, ["-m", "runstore", "--store", str(store), "sql",
                                     "select 42 as answer"])
    assert (proc.returncode, proc.stdout.split(), proc.stderr) == (0, ["answer", "42"], "")
    assert noted == ["atexit"]


def test_a_thread_still_running_is_waited_for(store: Path, tmp_path: Path) -> None:
    proc, noted = watched(tmp_path, ["-m", "runstore", "--store", str(store), "sql",
                                     "select 1 as one"], thread=True)
    assert proc.returncode == 0 and proc.stdout.split() == ["one", "1"]
    assert noted[0] == "thread" and "atexit" in noted


def test_a_long_output_reaches_its_reader_whole(store: Path, tmp_path: Path) -> None:
    n = 300_000
    proc, noted = watched(tmp_path, ["-m", "runstore", "--store", str(store), "sql", "-F",
                                     "csv", f"select range as i from range({n})"])
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and noted == ["atexit"]
    assert lines[0] == "i" and [int(x) for x in lines[1:]] == list(range(n))


@pytest.mark.parametrize(("args", "status", "said"), [
    (["check"], 1, "fired for 1 of"),
    (["--store", "{missing}", "runs"], 3, "Error: no store at"),
    (["sql", "select * from no_such_table"], 2, "no_such_table"),
    (["sql", "--no-such-option"], 2, "No such option"),
])
def test_exit_statuses_and_last_words_are_kept(store: Path, tmp_path: Path, args: list[str],
                                              status: int, said: str) -> None:
    args = [a.format(missing=tmp_path / "missing") for a in args]
    proc, noted = watched(tmp_path, ["-m", "runstore", "--store", str(store), *args])
    assert proc.returncode == status and said in proc.stderr, proc.stderr
    assert noted == ["atexit"]


def test_in_process_callers_keep_pythons_own_ending() -> None:
    assert startup.finished(0) is None  # this is pytest's process: nothing ends it


def test_only_the_outermost_standalone_call_ends_the_process(
        store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from runstore.cli import main

    ended: list[int] = []
    monkeypatch.setattr(startup, "is_the_command", lambda: True)  # as if this were runstore's
    monkeypatch.setattr(startup.atexit, "_run_exitfuncs", lambda: None)  # pytest's stay put
    monkeypatch.setattr(startup.os, "_exit", ended.append)
    args = ["--store", str(store), "sql", "select 7 as seven"]
    assert main.main(args, standalone_mode=False) is None and ended == []
    with pytest.raises(SystemExit):
        main.main(args)
    assert ended == [0] and capsys.readouterr().out.split() == ["seven", "7", "seven", "7"]

    # A SystemExit out of a call that is not standalone (Ctrl-C while its arguments are read
    # exits 130 from inside click's parsing) still leaves the ending to its caller.
    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("runstore.cli.group.utf8", interrupted)
    with pytest.raises(SystemExit) as stopped:
        main.main(args, standalone_mode=False)
    assert stopped.value.code == 130 and ended == [0]


def test_files_a_command_writes_are_whole_when_its_process_ends(store: Path,
                                                               tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    report, table = tmp_path / "r.html", tmp_path / "t.parquet"
    proc, noted = watched(tmp_path, ["-m", "runstore", "--store", str(store), "report", "-o",
                                     str(report)])
    assert proc.returncode == 0 and noted == ["atexit"]
    text = report.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.endswith("</body></html>\n")
    n = 100_000
    proc, noted = watched(tmp_path, ["-m", "runstore", "--store", str(store), "sql", "-F",
                                     "parquet", "-o", str(table),
                                     f"select range as i from range({n})"])
    assert proc.returncode == 0 and noted == ["atexit"]
    assert pq.read_table(table).column("i").to_pylist() == list(range(n))


@pytest.mark.parametrize("the_command", [False, True], ids=["in-process", "the-command"])
def test_a_reading_commands_database_is_left_only_to_a_process_that_ends_with_it(
        ui_demo: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, the_command: bool) -> None:
    # A caller in this process gets its database closed when the command ends; the command's
    # own process leaves it to its end (`os._exit` frees it), which closing would only delay.
    from runstore.cli import common
    from runstore.query.connect import Database

    tree, store = ui_demo
    closed: list[Database] = []
    close = Database.close
    monkeypatch.setattr(Database, "close", lambda self: (closed.append(self), close(self))[1])
    monkeypatch.setattr(common, "is_the_command", lambda: the_command)
    result = storekit.cli(store, "sql", "select count(*) as n from runs", "--format", "csv")
    runs = len(oracle.run_dirs(tree))
    assert result.exit_code == 0 and result.output.split() == ["n", str(runs)], result.output
    assert len(closed) == (0 if the_command else 1)
