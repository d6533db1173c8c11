"""Ctrl-C and closed pipes, tried on real `runstore` processes with real signals and pipes.

* Ctrl-C: a long `runstore sql` (a cross join of two 10^8-row ranges, hours of work) gets SIGINT
  after 0.5, 2 and 4 s, a `runs --where` with a 20-million-character regex (the issue's; ~3 s of
  compiling) after 0.5, 1 and 1.5 s; every other command that queries gets it while paused at its
  first, middle and last query (`crashpoints.pause_point("query")`, which a handled signal ends, so
  the signal lands exactly as that query starts). Each must stop (the queries would run on for
  minutes), print `interrupted` as its last line and nothing else, and exit 130. A SIGINT at several
  moments of a command's Python work (the report's charts) ends it the same way. A query that
  ignores the interrupt is ended by a second SIGINT at once (exit 130). How fast the first SIGINT
  stops a query is measured in bench/bench_interrupt.py, not here.
* Pipes: every command that prints, writing into a pipe whose reader is already gone, prints
  nothing and is ended by SIGPIPE (what `yes | head -n 1` does to `yes`); `runstore sql` into
  a real `head -n 1` gives the shell status 141, as `seq` does.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Autouse: a suite started in the background inherits SIGINT ignored, which runstore rightly
# leaves ignored; these tests need it delivered to their children.
from signals import sigint_not_ignored  # noqa: F401
from storekit import cli

ENDLESS = "select count(*) from range(100000000) a, range(100000000) b"
HUGE_REGEX = "regexp_matches(run_name, repeat('a', 20000000))"
RUN = "gsm8k_tool_rl/sweep/lr_3e-4/seed_1"
REWARD = "env/all/reward/total"


@pytest.fixture(scope="module")
def store(ui_demo: tuple[Path, Path]) -> Path:
    return ui_demo[1]


def command(store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "runstore", "--store", str(store), *args]


def wait_for_pause(proc: subprocess.Popen, timeout: float = 120) -> str:
    """The `paused at …` line (lines before it, such as `wrote FILE`, are skipped); "" when
    the process ends or says nothing more for `timeout` seconds. stderr must be unbuffered
    bytes (`bufsize=0`): a buffered reader would hold lines `select` cannot see."""
    assert proc.stderr is not None
    while True:
        ready, _, _ = select.select([proc.stderr], [], [], timeout)
        line = proc.stderr.readline().decode() if ready else ""
        if not line or line.startswith("paused at "):
            return line


def assert_interrupted(proc: subprocess.Popen) -> None:
    """Stopped (well before the minutes the work would take), `interrupted` as the one line
    on stderr (after any before the signal came), exit 130."""
    assert proc.stderr is not None
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("the command did not stop after SIGINT")
    err = proc.stderr.read()
    err = err.decode() if isinstance(err, bytes) else err
    assert proc.returncode == 130, err
    assert err.strip() == "interrupted", err


# The cross join runs for hours; compiling the regex takes ~3 s of CPU before DuckDB's RE2
# gives up on its size (measured here), so it is interrupted well inside that.
@pytest.mark.parametrize("args,after", [
    *((("sql", ENDLESS), after) for after in (0.5, 2.0, 4.0)),
    *((("runs", "--where", HUGE_REGEX), after) for after in (0.5, 1.0, 1.5)),
], ids=[f"{after}-{name}" for name, afters in (("sql", (0.5, 2.0, 4.0)),
                                              ("runs --where", (0.5, 1.0, 1.5)))
        for after in afters])
def test_ctrl_c_stops_a_long_query(store: Path, tmp_path: Path, args: tuple[str, ...],
                                   after: float) -> None:
    with subprocess.Popen(command(store, *args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        time.sleep(after)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGINT)
        assert_interrupted(proc)
        assert proc.stdout is not None and proc.stdout.read() == ""


@pytest.mark.parametrize("args", [("sql", ENDLESS), ("runs", "--where", HUGE_REGEX)],
                         ids=["sql", "runs --where"])
def test_sigterm_stops_a_long_query_as_ctrl_c_does(store: Path, args: tuple[str, ...]) -> None:
    """The exit table's 130 is "interrupted by Ctrl-C (SIGINT) or SIGTERM": a `kill` (or a
    supervisor's stop) mid-query says `interrupted` too, rather than ending by the signal."""
    with subprocess.Popen(command(store, *args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        time.sleep(1.0)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGTERM)
        assert_interrupted(proc)


def _sigint_ignored() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_sigterm_stops_a_query_of_a_process_that_ignores_sigint(store: Path) -> None:
    """A job a script starts with `&` (or `nohup`) has SIGINT ignored, and it stays so: a
    SIGINT changes nothing. A SIGTERM still stops its query, `interrupted`, 130, rather
    than ending it by the signal once the command has begun."""
    with subprocess.Popen(command(store, "sql", ENDLESS), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          preexec_fn=_sigint_ignored) as proc:
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        proc.send_signal(signal.SIGTERM)
        assert_interrupted(proc)


def test_sigterm_during_compact_is_an_interruption(store: Path, tmp_path: Path) -> None:
    """A writing command other than ingest: SIGTERM at its pause, `interrupted`, 130, and
    the store still answers with the rows it had."""
    copy = tmp_path / "store"
    shutil.copytree(store, copy, symlinks=True)
    before = subprocess.run(command(copy, "sql", "select count(*) from metrics_raw", "-F",
                                    "csv"), capture_output=True, text=True, check=True).stdout
    env = {**os.environ, "RUNSTORE_TEST_PAUSE": "compact:1"}
    with subprocess.Popen(command(copy, "compact"), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env) as proc:
        assert proc.stderr is not None
        assert proc.stderr.readline() == "paused at compact:1\n"
        proc.send_signal(signal.SIGTERM)
        assert_interrupted(proc)
    after = subprocess.run(command(copy, "sql", "select count(*) from metrics_raw", "-F",
                                   "csv"), capture_output=True, text=True, check=True).stdout
    assert after == before


# Every command that queries, with how many queries it runs on the demo store (a test below
# checks the counts, so that "first, middle, last" stays true).
QUERYING = {
    "check": (("check",), 1),
    # A threshold rule and a trend rule: three statements, run at once on threads.
    "check --rule": (("check", "--rule", f"drop({REWARD}) > 0.2"), 3),
    "compare": (("compare", REWARD, "--group-by", "learning_rate", "--smooth", "0.9"), 2),
    "runs --where": (("runs", "--where", "kind = 'rl'"), 1),
    "keys": (("keys",), 1),
    "diff": (("diff", "gsm8k_tool_rl/sweep/lr_1e-4/seed_0", "gsm8k_tool_rl/sweep/lr_1e-3"), 2),
    "plot metric": (("plot", "metric", REWARD, "-o", "{tmp}/m.html"), 3),
    "plot kl": (("plot", "kl", "-o", "{tmp}/k.html"), 1),
    "plot rewards": (("plot", "rewards", "-o", "{tmp}/r.html"), 1),
    "plot spans": (("plot", "spans", RUN, "-o", "{tmp}/s.html"), 4),
    "report": (("report", "-o", "{tmp}/report.html"), 6),
    "trace": (("trace", RUN, "--step", "10"), 7),
    "sql": (("sql", "select 1"), 1),
}


def querying_args(name: str, tmp: Path) -> list[str]:
    return [a.format(tmp=tmp) for a in QUERYING[name][0]]


@pytest.mark.parametrize("name", sorted(QUERYING))
def test_each_command_runs_the_queries_counted(store: Path, tmp_path: Path, name: str) -> None:
    points = tmp_path / "points"
    env = {**os.environ, "RUNSTORE_TEST_POINTS": str(points)}
    done = subprocess.run(command(store, *querying_args(name, tmp_path)), env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stderr  # check fires on the demo store: 1
    assert points.read_text().split().count("query") == QUERYING[name][1]


@pytest.mark.parametrize("name", sorted(QUERYING))
def test_ctrl_c_at_each_query_of_every_command(store: Path, tmp_path: Path, name: str) -> None:
    n = QUERYING[name][1]
    for k in sorted({1, (n + 1) // 2, n}):
        point = f"query:{k}"
        env = {**os.environ, "RUNSTORE_TEST_PAUSE": point}
        with subprocess.Popen(command(store, *querying_args(name, tmp_path)), env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              bufsize=0) as proc:
            try:
                line = wait_for_pause(proc)
                assert line.strip() == f"paused at {point}", (name, line)
                proc.send_signal(signal.SIGINT)
                assert_interrupted(proc)
            finally:
                if proc.poll() is None:  # never leave a paused process behind
                    proc.kill()


@pytest.mark.parametrize("after", [0.0, 0.3, 1.0, 2.0])
def test_ctrl_c_at_any_moment_of_a_command(store: Path, tmp_path: Path, after: float) -> None:
    """The report draws its charts in Python between its queries: a SIGINT anywhere in its
    work (`after` seconds past its first query) stops it, or it had finished and said so."""
    out, points = tmp_path / "report.html", tmp_path / "points"
    env = {**os.environ, "RUNSTORE_TEST_POINTS": str(points)}
    with subprocess.Popen(command(store, "report", "-o", str(out)), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env) as proc:
        deadline = time.monotonic() + 120
        while not (points.exists() and "query" in points.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(after)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        err = proc.stderr.read() if proc.stderr else ""
        if proc.returncode == 0:
            assert err.startswith(f"wrote {out}"), err
        else:
            assert proc.returncode == 130 and err.strip() == "interrupted", err


def test_ctrl_c_after_the_command_ended(store: Path, tmp_path: Path) -> None:
    """A SIGINT after the command has done its work and its own handling has ended (between
    there and the interpreter's exit) changes nothing: the report was written, exit 0 — not a
    process killed by the signal, nor a click `Aborted!`."""
    report_with_a_signal_once_ended(store, tmp_path, signal.SIGINT)


def report_with_a_signal_once_ended(store: Path, tmp_path: Path, signum: int) -> None:
    """`runstore report` sent `signum` once its own handling has ended: exit 0, nothing said,
    the report written."""
    out = tmp_path / "report.html"
    env = {**os.environ, "RUNSTORE_TEST_PAUSE": "ended:1"}
    with subprocess.Popen(command(store, "report", "-o", str(out)), env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, bufsize=0) as proc:
        try:
            line = wait_for_pause(proc)
            assert line.strip() == "paused at ended:1", line
            proc.send_signal(signum)
            proc.wait(timeout=60)
            assert proc.stderr is not None
            err = proc.stderr.read().decode()
            assert proc.returncode == 0 and err == "", (proc.returncode, err)
            assert out.stat().st_size > 0
        finally:
            if proc.poll() is None:  # never leave a paused process behind
                proc.kill()


@pytest.mark.parametrize("after", [0.0, 0.02, 0.1, 0.3])
def test_ctrl_c_once_the_command_said_it_is_done(store: Path, tmp_path: Path,
                                                 after: float) -> None:
    """A SIGINT `after` seconds past the report's last line (its file is written): through
    the rest of the command, the interpreter's exit and its teardown (where Python puts the
    OS default back, under which the signal would kill the process: status -2), it finishes
    with 0. Only in the few instructions between that line and the command's return may it
    still count as an interruption: then 130 and `interrupted` after the line."""
    out = tmp_path / "report.html"
    with subprocess.Popen(command(store, "report", "-o", str(out)), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, bufsize=0) as proc:
        assert proc.stderr is not None
        said = proc.stderr.readline().decode()
        assert said.startswith(f"wrote {out}"), said
        time.sleep(after)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        rest = proc.stderr.read().decode()
    assert (proc.returncode, rest.strip()) in ((0, ""), (130, "interrupted")), \
        (proc.returncode, rest)


def console_script() -> Path:
    """The `runstore` script pip installed (the README's install puts it beside the
    interpreter's other scripts)."""
    import sysconfig

    script = Path(sysconfig.get_path("scripts")) / "runstore"
    assert script.is_file(), f"no console script at {script}: install with pip install -e ."
    return script


def test_ctrl_c_before_click_reads_the_arguments(store: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Click reads its program name and any shell-completion request before its own `try`:
    a SIGINT that lands there (a loaded CI machine hit it: a traceback, status -2) is
    `interrupted`, 130, as anywhere else. The interrupt is raised where click looks for a
    completion request."""
    import click

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(click.Command, "_main_shell_completion", interrupted)
    try:
        result = cli(store, "runs", catch_exceptions=True)
    except KeyboardInterrupt:
        pytest.fail("the interrupt escaped the command: a traceback, status -2")
    assert result.exit_code == 130, (result.output, result.exception)
    assert result.output.strip() == "interrupted", result.output


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("started", ["python -m runstore", "the console script"])
def test_ctrl_c_while_the_command_starts(store: Path, started: str, signum: int) -> None:
    """A SIGINT while Python imports runstore (before the command's own handling) is no
    traceback either: `interrupted`, exit 130 (runstore/startup.py), however the command is
    started (the console script is run by its interpreter as the kernel runs it from its
    `#!` line). The signal is sent as soon as the process is seen importing runstore's
    modules (before that, a SIGINT finds Python importing its own, which only Python
    handles). A SIGTERM then ends it the same way, not by the signal."""
    how = ["-m", "runstore"] if started.startswith("python") else [str(console_script())]
    stopped = 0
    for delay in (0.0, 0.02, 0.05, 0.1):
        with subprocess.Popen([sys.executable, "-X", "importtime", *how,
                               "--store", str(store), "runs"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, bufsize=0) as proc:
            assert proc.stderr is not None
            seen = b""
            # -X importtime names each module once loaded: runstore.errors is the first after
            # startup.quiet_interrupts() has run.
            while b"runstore.errors\n" not in seen:
                chunk = os.read(proc.stderr.fileno(), 65536)
                assert chunk, seen[-500:]
                seen += chunk
            time.sleep(delay)
            proc.send_signal(signum)
            proc.wait(timeout=120)
            lines = [ln for ln in (seen + proc.stderr.read()).decode().splitlines()
                     if not ln.startswith("import time:")]
            if proc.returncode == 0:  # it had finished
                continue
            assert proc.returncode == 130 and lines == ["interrupted"], (proc.returncode, lines)
            stopped += 1
    assert stopped  # at least one signal came while it started


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("started", ["python -m runstore", "the console script"])
def test_a_signal_before_click_reads_the_arguments_is_an_interruption(
        store: Path, started: str, signum: int) -> None:
    """Between the start-up's handling (`startup.started`) and the command's own (click
    reading the arguments, finding the command): a SIGINT or a SIGTERM there ends the command
    `interrupted`, 130 — not a process killed by the signal (status -15: a CI run hit it)."""
    how = ["-m", "runstore"] if started.startswith("python") else [str(console_script())]
    env = {**os.environ, "RUNSTORE_TEST_PAUSE": "started:1"}
    with subprocess.Popen([sys.executable, *how, "--store", str(store), "runs"], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          bufsize=0) as proc:
        try:
            line = wait_for_pause(proc)
            assert line.strip() == "paused at started:1", line
            proc.send_signal(signum)
            assert_interrupted(proc)
        finally:
            if proc.poll() is None:  # never leave a paused process behind
                proc.kill()


def test_an_interrupt_before_click_reads_the_arguments_ends_the_process_at_once(
        store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The `KeyboardInterrupt` of a SIGINT that lands before click reads the arguments ends
    the process as every command's ending does (`startup.finished`: the atexit callbacks, then
    `os._exit`), not through the interpreter's teardown, which aborts the process ("FATAL:
    exception not rethrown", status -6: a CI run hit it) while the early database is still
    being made on its thread. `finished` is recorded here instead of ending the test."""
    from runstore.cli import group, main

    ended: list[object] = []
    monkeypatch.setattr(group, "finished", ended.append)

    def interrupted(phase: str) -> None:
        if phase == "started":
            raise KeyboardInterrupt

    monkeypatch.setattr(group, "pause_point", interrupted)
    with pytest.raises(SystemExit) as done:
        main.main(args=["--store", str(store), "runs"], prog_name="runstore")
    assert done.value.code == 130 and ended == [130], (done.value.code, ended)
    assert capsys.readouterr().err.strip() == "interrupted"


def test_a_second_signal_while_the_first_is_said_adds_nothing(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second Ctrl-C that lands while the command says `interrupted` (the first one's
    ending is decided) says nothing more: one line, 130 — not the line twice (two SIGTERMs
    back to back printed it twice) nor a traceback. The first Ctrl-C comes as the command's
    first query starts, the second as the line is written."""
    from runstore.cli import failures
    from runstore.query import session

    real_say, said = failures.say, []

    def say(text: str) -> None:
        said.append(text)
        real_say(text)
        if len(said) == 1:
            signal.raise_signal(signal.SIGINT)

    def pause_point(phase: str) -> None:
        if phase == "query":
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(failures, "say", say)
    monkeypatch.setattr(session, "pause_point", pause_point)
    result = cli(store, "runs", catch_exceptions=True)
    assert result.exit_code == 130, (result.output, result.exception)
    assert said == ["interrupted"] and result.output.strip() == "interrupted", result.output


def test_sigterm_after_the_command_ended(store: Path, tmp_path: Path) -> None:
    """A SIGTERM after the command's own handling has ended, as a SIGINT there
    (`test_ctrl_c_after_the_command_ended`), changes nothing: the report was written, exit 0,
    nothing said — not a process killed by the signal."""
    report_with_a_signal_once_ended(store, tmp_path, signal.SIGTERM)


# Sends SIGINT to its own process from inside DuckDB's import, while nanobind creates the
# `ExplainType` enum (`enum`'s functional API, called from DuckDB's native initialization).
SIGINT_INSIDE_DUCKDB_INIT = """
import enum, os, signal, sys
create = enum.EnumType._create_
def interrupted_create(cls, class_name, *args, **kwargs):
    if class_name == "ExplainType":
        os.kill(os.getpid(), signal.SIGINT)
    return create(cls, class_name, *args, **kwargs)
enum.EnumType._create_ = interrupted_create
sys.orig_argv = [sys.executable, "-m", "runstore"]  # this process is the runstore command
from runstore.cli import main
{call}
"""


@pytest.mark.parametrize("when", ["starting", "in the command"])
def test_ctrl_c_inside_duckdbs_native_import_is_held_until_it_ends(store: Path,
                                                                     when: str) -> None:
    """A SIGINT while DuckDB's native module initializes, inside a command (the store's first
    query imports it), is held until the import ends: a KeyboardInterrupt raised there aborts
    the process ("Critical nanobind error" and a traceback, status -6; seen once in CI). The
    command says `interrupted` and exits 130. Before the command's own handling (`import
    duckdb` first thing) the start-up handler ends the process at once, raising nothing."""
    call = ("import duckdb" if when == "starting"
            else f"main(['--store', {str(store)!r}, 'runs'])")
    proc = subprocess.run([sys.executable, "-c", SIGINT_INSIDE_DUCKDB_INIT.format(call=call)],
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stderr.strip()) == (130, "interrupted"), proc.stderr[-2000:]
    assert proc.stdout == ""


def test_a_second_ctrl_c_ends_a_query_that_does_not_stop(store: Path) -> None:
    """When the interrupt does not reach the query (simulated: `cancel_running` finds it but
    does not interrupt it), the second SIGINT ends the process at once."""
    script = (
        "import sys\n"
        "from runstore.query import deadline\n"
        "deadline.Deadline.cancel = lambda self: None  # the query ignores the interrupt\n"
        "from runstore.cli import main\n"
        f"main(['--store', sys.argv[1], 'sql', {ENDLESS!r}])\n")
    with subprocess.Popen([sys.executable, "-c", script, str(store)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as proc:
        time.sleep(1.5)
        proc.send_signal(signal.SIGINT)
        time.sleep(1.5)
        assert proc.poll() is None  # the first one did not stop it
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        err = proc.stderr.read() if proc.stderr else ""
        assert proc.returncode == 130 and "stopped at once by a second Ctrl-C" in err, err


# ---------------------------------------------------------------------------------------------
# Pipes


def printing_commands(store: Path, tmp: Path) -> dict[str, list[str]]:
    """Every command that prints on stdout, with arguments that make it print."""
    writable = tmp / "writable"
    shutil.copytree(store, writable)
    return {
        "sql": command(store, "sql", "select * from range(100000)"),
        "runs": command(store, "runs", "-F", "csv"),
        "check": command(store, "check", "-F", "csv"),
        "views": command(store, "views"),
        "views --dialect": command(store, "views", "--dialect", "spark"),
        "schema": command(store, "schema"),
        "keys": command(store, "keys"),
        "diff": command(store, "diff", "gsm8k_tool_rl/sweep/lr_1e-4/seed_0",
                        "gsm8k_tool_rl/sweep/lr_1e-3", "--all"),
        "diff --code": command(store, "diff", "sl/tulu3_qwen3-8b_lr2e-4", "dpo/*", "--code"),
        "compare": command(store, "compare", REWARD),
        "trace": command(store, "trace", RUN),
        "migrate --list": command(store, "migrate", "--list"),
        "migrate": command(writable, "migrate"),
        "repair --check": command(writable, "repair", "--check"),
        "compact": command(writable, "compact"),
        "demo": [sys.executable, "-m", "runstore", "demo", str(tmp / "demo")],
    }


def test_a_reader_that_went_away_ends_every_printing_command_quietly(
        store: Path, tmp_path: Path) -> None:
    for name, cmd in printing_commands(store, tmp_path).items():
        read, write = os.pipe()
        os.close(read)  # the reader is gone before the command prints anything
        try:
            done = subprocess.run(cmd, stdout=write, stderr=subprocess.PIPE, text=True,
                                  timeout=300, cwd=tmp_path)
        finally:
            os.close(write)
        assert done.returncode == -signal.SIGPIPE, (name, done.returncode, done.stderr)
        assert "Error" not in done.stderr and "Traceback" not in done.stderr, (name, done.stderr)


def test_watch_mode_ends_quietly_when_its_reader_goes(store: Path, tmp_path: Path,
                                                      ui_demo: tuple[Path, Path]) -> None:
    """`ingest --watch` prints each firing rule on stdout: with the reader gone it ends as
    SIGPIPE ends it, at its first line, instead of retrying the pass forever."""
    writable = tmp_path / "store"
    shutil.copytree(store, writable)
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(command(writable, "ingest", "-q", str(ui_demo[0]), "--watch",
                                      "30"), stdout=write, stderr=subprocess.PIPE, text=True,
                              timeout=300)
    finally:
        os.close(write)
    assert done.returncode == -signal.SIGPIPE, done.stderr
    assert done.stderr == ""


def test_sql_into_head_is_what_the_shell_expects(store: Path) -> None:
    """A big answer into `head -n 1` (its reader leaves mid-write): the first line, no
    message, and the shell status of a command ended by SIGPIPE, 141, as `seq` gets."""
    script = (f'{" ".join(command(store))} sql "select * from range(1000000)" | head -n 1; '
              'echo "status ${PIPESTATUS[0]}" >&2; '
              'seq 1 10000000 | head -n 1 > /dev/null; echo "seq ${PIPESTATUS[0]}" >&2')
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout == "range\n"
    assert done.stderr.splitlines() == ["status 141", "seq 141"], done.stderr


def test_an_interrupt_lost_in_a_callback_is_delivered_again(capfd: pytest.CaptureFixture[str]
                                                            ) -> None:
    """A SIGINT whose handler runs inside a weakref callback (where Python only prints the
    KeyboardInterrupt as "Exception ignored in ...": a CI run saw it in an import's module-lock
    callback) still stops the command, with nothing printed: the interrupt is raised again
    where it can propagate."""
    import threading
    import weakref

    from runstore.cli.stopping import StopOnSignals

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are set on the main thread only")

    class Thing:
        pass

    reached_after = False
    with pytest.raises(KeyboardInterrupt):
        with StopOnSignals():
            thing = Thing()
            ref = weakref.ref(thing, lambda _: os.kill(os.getpid(), signal.SIGINT))
            del thing  # the callback runs here, and the handler inside it
            for _ in range(2000):  # the interrupt delivered again lands in this loop
                time.sleep(0.001)
            reached_after = True
    assert ref() is None and not reached_after
    assert "Exception ignored" not in capfd.readouterr().err
