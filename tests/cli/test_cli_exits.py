"""How every command ends: one exit-status scheme, plain messages for user mistakes, global
options after the command.

* The scheme is defined once (`errors.EXIT_CODES`, each error class's `exit_code`) and shown by
  `runstore --help` and docs/cli.md.
* Every command against it: an unknown run, metric, column, table, config key or option, and a
  bad value are 2; no store is 3; a locked store 4; a query past its time limit 5; a full disk
  (`/dev/full`) 6; a rule that fires 1; success 0 (130 and SIGPIPE: test_cli_signals.py).
* An --output whose directory does not exist, or whose extension names no format, is a usage
  error (2) for every command that takes one, before any work; --format decides otherwise.
* A hypothesis search over argument values of every reading command never reaches the
  "unexpected … (a runstore bug)" ending (exit 70) nor prints a traceback.
* `--store` / `-s` and `--debug` work after every command (and beat the ones before it).
"""

from __future__ import annotations

import os
import re
from collections import Counter
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

import oracle
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings, strategies as st

from conftest import REPORT
from runstore import errors
from runstore.cli import main
from runstore.storage.lock import Lock

REWARD = "env/all/reward/total"
RUN = "gsm8k_tool_rl/sweep/lr_3e-4/seed_1"
TWO = ("gsm8k_tool_rl/sweep/lr_1e-4/seed_0", "gsm8k_tool_rl/sweep/lr_1e-3")


@pytest.fixture(scope="module")
def store(ui_demo: tuple[Path, Path]) -> Path:
    return ui_demo[1]


def run(store: Path | None, *args: str) -> Result:
    base = ["--store", str(store)] if store is not None else []
    return CliRunner().invoke(main, [*base, *args])


def assert_ends(result: Result, code: int, *needles: str) -> None:
    """Exit `code`; for an error, one `Error:` line holding the needles, no traceback."""
    text = result.output
    assert result.exit_code == code, (code, result.exit_code, text, result.exception)
    assert "Traceback" not in text and "runstore bug" not in text, text
    if code >= 2:
        lines = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
        assert len(lines) == 1, result.stderr
        for needle in needles:
            assert needle in lines[0], (needle, lines[0])


# ---------------------------------------------------------------------------------------------
# The scheme


def test_the_scheme_is_defined_once_and_shown() -> None:
    codes = errors.EXIT_CODES
    assert [errors.OK, errors.FINDING, errors.USAGE] == [0, 1, 2]
    assert min(c for c in codes if c > errors.USAGE) == 3 and errors.INTERRUPTED == 130
    classes = [errors.RunstoreError, *_subclasses(errors.RunstoreError)]
    assert all(c.exit_code in codes and c.exit_code >= errors.USAGE for c in classes)
    # A usage mistake is never a store failure, and no error is a finding.
    for name in ("UsageError", "QueryError", "UnknownKey", "SourceNotFound", "NoRuns"):
        assert getattr(errors, name).exit_code == errors.USAGE, name
    assert errors.StoreLocked.exit_code == errors.BUSY
    assert errors.LimitReached.exit_code == errors.LIMIT
    helped = CliRunner().invoke(main, ["--help"]).output
    documented = Path(__file__).resolve().parents[2].joinpath("docs", "cli.md").read_text()
    for code in codes:
        assert re.search(rf"^\s+{code}\s+\S", helped, re.M), code
        assert re.search(rf"^\s+{code}\s+\S", documented, re.M), code


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


# ---------------------------------------------------------------------------------------------
# Every command against it

USAGE_MISTAKES = [
    # unknown runs
    (("diff", "no/such/run", TWO[0]), "no run is named or matches 'no/such/run'"),
    (("trace", "no/such/run"), "no run"),
    (("plot", "spans", "no/such/run", "-o", "{tmp}/s.html"), "no run"),
    (("compare", REWARD, "--runs", "no/such/*"), "no run matches"),
    (("keys", "--runs", "no/such/*"), "no run matches"),
    (("plot", "metric", REWARD, "--runs", "no/such/*", "-o", "{tmp}/m.html"), "no run matches"),
    (("plot", "kl", "--runs", "no/such/*", "-o", "{tmp}/k.html"), "no run matches"),
    (("plot", "rewards", "--runs", "no/such/*", "-o", "{tmp}/r.html"), "no run matches"),
    (("report", "--runs", "no/such/*", "-o", "{tmp}/r.html"), "no run matches"),
    (("runs", "--name", "no/such/*"), "no run matches --name 'no/such/*'"),
    # unknown metrics
    (("compare", "no/such/metric"), "no/such/metric"),
    (("plot", "metric", "no/such/metric", "-o", "{tmp}/m.html"), "no/such/metric"),
    (("check", "--rule", "no/such/metric > 1"), "no/such/metric"),
    # unknown columns, tables, config keys
    (("sql", "select no_such_column from runs"), "no_such_column"),
    (("runs", "--where", "no_such_column = 1"), "no_such_column"),
    (("runs", "--columns", "run_name,no_such_column"), "no_such_column"),
    (("schema", "no_such_table"), "no_such_table"),
    (("compare", REWARD, "--group-by", "no.such.key"), "no.such.key"),
    (("plot", "metric", REWARD, "--color-by", "no.such.key", "-o", "{tmp}/m.html"),
     "no.such.key"),
    # bad values
    (("sql", "select 1", "--timeout", "0"), "--timeout"),
    (("compare", REWARD, "--smooth", "1.5"), "smooth"),
    (("check", "--threshold", "abc"), "abc"),
    (("check", "--threshold", "nan"), "--threshold"),
    (("plot", "kl", "--threshold", "inf", "-o", "{tmp}/k.html"), "--threshold"),
    (("runs", "--no-such-option"), "no-such-option"),
    (("sql", "select $x"), "$x"),
    (("sql", "drop table runs"), "only runs queries"),
    (("compact", "--lock-timeout", "nan"), "nan"),
    (("repair", "--lock-timeout", "-1"), "-1"),
    (("ingest", "runs", "--watch", "1e308"), "longer than runstore can wait"),
    (("ingest", "runs", "--watch", "inf"), "inf"),
    (("ui", "--watch", "nan"), "nan"),
]


@pytest.mark.parametrize("args,needle", USAGE_MISTAKES,
                         ids=[" ".join(a[:2]) + f" {i}" for i, (a, _) in
                              enumerate(USAGE_MISTAKES)])
def test_a_usage_mistake_is_2(store: Path, tmp_path: Path, args: tuple[str, ...],
                              needle: str) -> None:
    result = run(store, *(a.format(tmp=tmp_path) for a in args))
    assert_ends(result, errors.USAGE, needle)


STORE_COMMANDS = [("sql", "select 1"), ("runs",), ("check",), ("keys",), ("views", "-F", "csv"),
                  ("compare", REWARD), ("diff", *TWO), ("trace", RUN),
                  ("plot", "kl", "-o", "{tmp}/k.html"), ("report", "-o", "{tmp}/r.html"),
                  ("migrate", "--list"), ("repair", "--check")]


@pytest.mark.parametrize("args", STORE_COMMANDS, ids=[a[0] for a in STORE_COMMANDS])
def test_no_store_is_3(tmp_path: Path, args: tuple[str, ...]) -> None:
    result = run(tmp_path / "nowhere", *(a.format(tmp=tmp_path) for a in args))
    if args[0] == "views":  # views need no store
        assert_ends(result, errors.OK)
        return
    assert_ends(result, errors.STORE, "no store at")
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("args", [("compact", "--lock-timeout", "0.2"),
                                  ("repair", "--lock-timeout", "0.2")])
def test_a_locked_store_is_4(store: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    import shutil

    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    lock = Lock(copy)
    lock.acquire(1)
    try:  # another process: fcntl locks are the process's own
        done = subprocess.run([sys.executable, "-m", "runstore", "--store", str(copy), *args],
                              capture_output=True, text=True, timeout=300)
    finally:
        lock.release()
    assert done.returncode == errors.BUSY, done.stderr
    assert done.stderr.startswith("Error: ") and "locked by PID" in done.stderr


def test_a_demo_where_it_cannot_be_written_is_2(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    result = run(None, "demo", str(tmp_path / "a-file" / "demo"))
    assert_ends(result, errors.USAGE, "cannot write the demo under", "choose another DIRECTORY")


@pytest.mark.parametrize("args", [("sql", "select 1"), ("ingest", "RUNS"), ("runs",)])
def test_a_path_longer_than_the_system_allows_is_2(tmp_path: Path,
                                                    args: tuple[str, ...]) -> None:
    """A --store (or a tree) whose name the system refuses as too long (ENAMETOOLONG) is the
    caller's to shorten: exit 2 naming it, not a fault of the machine."""
    too_long = tmp_path / ("a" * (os.pathconf(tmp_path, "PC_NAME_MAX") + 1))
    runs = tmp_path / "runs"
    runs.mkdir()
    result = run(too_long, *[str(runs) if a == "RUNS" else a for a in args])
    assert_ends(result, errors.USAGE, str(too_long), "longer than this system allows")


def test_a_query_past_its_time_limit_is_5(store: Path) -> None:
    result = run(store, "sql", "select count(*) from range(100000000) a, range(100000000) b",
                 "--timeout", "0.5")
    assert_ends(result, errors.LIMIT, "time limit")


def test_a_full_disk_is_6(store: Path) -> None:
    result = run(store, "sql", "select * from range(100000)", "-F", "csv", "-o", "/dev/full")
    assert_ends(result, errors.IO, "cannot write /dev/full", "No space left on device")
    # Standard output on a full disk too (a real process: its stdout is /dev/full).
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "runstore", "--store", str(store), "sql",
                               "select * from range(100000)"], stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=300)
    assert done.returncode == errors.IO, done.stderr
    assert done.stderr.startswith("Error: No space left on device")
    assert "runstore bug" not in done.stderr and "Traceback" not in done.stderr


def test_findings_and_success(store: Path) -> None:
    assert_ends(run(store, "check", "-F", "csv"), errors.FINDING)  # the demo's KL fires
    assert_ends(run(store, "check", "-F", "csv", "--runs", "math_rl_sweep/*"), errors.OK)
    for args in (("runs",), ("keys",), ("compare", REWARD), ("diff", *TWO), ("schema",)):
        assert_ends(run(store, *args), errors.OK)


# ---------------------------------------------------------------------------------------------
# --output

ROW_COMMANDS = [("sql", "select 1 as x"), ("runs",), ("check",), ("keys",), ("schema",),
                ("compare", REWARD), ("diff", *TWO)]
FILE_COMMANDS = [*ROW_COMMANDS, ("views",), ("plot", "kl"), ("plot", "rewards"),
                 ("plot", "metric", REWARD), ("plot", "spans", RUN), ("report",), ("trace", RUN)]


@pytest.mark.parametrize("args", FILE_COMMANDS, ids=[" ".join(a[:2]) for a in FILE_COMMANDS])
def test_output_into_a_missing_directory_is_a_usage_error(store: Path, tmp_path: Path,
                                                          args: tuple[str, ...]) -> None:
    target = tmp_path / "missing-dir" / "x.csv"
    result = run(store, *args, "-o", str(target))
    assert result.exit_code == errors.USAGE, result.output
    assert f"the directory {target.parent} does not exist" in result.stderr
    assert "Traceback" not in result.output and "runstore bug" not in result.output
    assert not target.parent.exists()
    # A file where the directory should be.
    (tmp_path / "a-file").write_text("")
    result = run(store, *args, "-o", str(tmp_path / "a-file" / "x.csv"))
    assert result.exit_code == errors.USAGE and "is not a directory" in result.stderr


@pytest.mark.parametrize("args", ROW_COMMANDS, ids=[a[0] for a in ROW_COMMANDS])
def test_an_unknown_extension_is_a_usage_error_unless_format_decides(
        store: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    for name in ("kl.txt", "kl"):
        target = tmp_path / name
        result = run(store, *args, "-o", str(target))
        assert result.exit_code == errors.USAGE, result.output
        assert ".json, .jsonl, .ndjson, .csv, .md, .markdown, .parquet" in result.stderr
        assert "--format" in result.stderr and not target.exists()
        decided = run(store, *args, "-o", str(target), "-F", "csv")
        assert decided.exit_code in (errors.OK, errors.FINDING), decided.output
        assert target.read_text().count("\n") >= 1


def test_text_commands_write_any_extension(store: Path, tmp_path: Path) -> None:
    """views (its listing) and diff --code write text: the extension picks no format."""
    assert_ends(run(store, "views", "-o", str(tmp_path / "views.txt")), errors.OK)
    assert (tmp_path / "views.txt").read_text().startswith(
        run(store, "views").stdout.splitlines()[0])
    assert_ends(run(store, "views", "--dialect", "spark", "-o", str(tmp_path / "v.sql")),
                errors.OK)
    assert_ends(run(store, "diff", "sl/tulu3_qwen3-8b_lr2e-4", "dpo/*", "--code", "-o",
                    str(tmp_path / "code.diff")), errors.OK)


def test_an_unwritable_output_names_the_file(store: Path, tmp_path: Path) -> None:
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as root: permissions do not refuse the write")
        result = run(store, "sql", "select 1", "-o", str(locked / "x.csv"))
        assert_ends(result, errors.USAGE, f"cannot write {locked / 'x.csv'}",
                    "Permission denied")
    finally:
        locked.chmod(0o700)


# ---------------------------------------------------------------------------------------------
# Argument values nobody expected

TEXT = st.one_of(st.text(max_size=12), st.sampled_from(
    ["", "*", "'", '"', "a.b", "nan", "-1", "1e400", "0", "%", "\\", "..", "/", "run_name",
     REWARD, RUN, "select", "$x", "a,b", "\x7f", "é", "[", "1; drop table runs"]))
NUMBER = st.one_of(st.integers(min_value=-10**30, max_value=10**30).map(str),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr),
                   st.sampled_from(["nan", "inf", "-inf", "1e400", "-0", "0x10", " 3", ""]))
VALUE = st.one_of(TEXT, NUMBER)


def _calls(tmp: str) -> st.SearchStrategy[list[str]]:
    html = f"{tmp}/out.html"
    return st.one_of(
        st.tuples(VALUE).map(lambda v: ["sql", "select 1 as x", "--param", f"x={v[0]}"]),
        st.tuples(VALUE).map(lambda v: ["sql", "select $x as x", "--param", f"x={v[0]}"]),
        st.tuples(NUMBER).map(lambda v: ["sql", "select 1", "--timeout", v[0]]),
        st.tuples(VALUE).map(lambda v: ["runs", "--name", v[0]]),
        st.tuples(VALUE).map(lambda v: ["runs", "--where", v[0]]),
        st.tuples(VALUE).map(lambda v: ["runs", "--columns", v[0]]),
        st.tuples(NUMBER, VALUE).map(lambda v: ["check", "--threshold", v[0], "--runs", v[1]]),
        st.tuples(VALUE).map(lambda v: ["check", "--rule", v[0]]),
        st.tuples(NUMBER).map(lambda v: ["check", "--rule", f"{REWARD} > {v[0]}"]),
        st.tuples(NUMBER).map(lambda v: ["check", "--since-step", v[0]]),
        st.tuples(NUMBER).map(lambda v: ["check", "--rule", f"drop({REWARD}, {v[0]}) > 0.1"]),
        st.tuples(VALUE, VALUE).map(lambda v: ["keys", "--runs", v[0], "--like", v[1]]),
        st.tuples(VALUE, VALUE).map(lambda v: ["diff", v[0], v[1]]),
        st.tuples(VALUE).map(lambda v: ["diff", v[0], "--all"]),
        st.tuples(VALUE).map(lambda v: ["compare", v[0]]),
        st.tuples(VALUE).map(lambda v: ["compare", REWARD, "--group-by", v[0]]),
        st.tuples(NUMBER).map(lambda v: ["compare", REWARD, "--smooth", v[0]]),
        st.tuples(VALUE).map(lambda v: ["compare", REWARD, "--runs", v[0], "--x", "time"]),
        st.tuples(VALUE).map(lambda v: ["plot", "metric", v[0], "-o", html]),
        st.tuples(VALUE).map(lambda v: ["plot", "metric", REWARD, "--color-by", v[0], "-o",
                                        html]),
        st.tuples(NUMBER).map(lambda v: ["plot", "metric", REWARD, "--smooth", v[0], "-o",
                                         html]),
        st.tuples(NUMBER).map(lambda v: ["plot", "kl", "--threshold", v[0], "-o", html]),
        st.tuples(VALUE, NUMBER).map(lambda v: ["plot", "spans", v[0], "--step", v[1], "-o",
                                                html]),
        st.tuples(NUMBER, NUMBER).map(lambda v: ["trace", RUN, "--step", v[0], "--segment",
                                                 v[1]]),
        st.tuples(NUMBER).map(lambda v: ["trace", RUN, "--step", v[0]]),
        st.tuples(NUMBER).map(lambda v: ["trace", RUN, "--segment", v[0]]),
        st.tuples(VALUE).map(lambda v: ["trace", v[0]]),
        st.tuples(VALUE).map(lambda v: ["schema", v[0]]),
        st.tuples(VALUE).map(lambda v: ["sql", "select 1", "-o", f"{tmp}/{v[0]}"]),
        st.tuples(VALUE).map(lambda v: ["views", "-o", f"{tmp}/{v[0]}"]),
        st.tuples(VALUE).map(lambda v: ["report", "--runs", v[0], "-o", html]),
    )


def test_no_argument_value_is_a_runstore_bug(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    seen: Counter[int] = Counter()

    @settings(max_examples=300, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(_calls(str(out)))
    def attempt(args: list[str]) -> None:
        if any("\x00" in a for a in args):  # no process can receive a NUL in an argument
            return
        result = run(store, *args)
        seen[result.exit_code] += 1
        text = result.output
        assert result.exit_code != errors.BUG and "runstore bug" not in text, (args, text)
        assert "Traceback" not in text, (args, text)
        assert result.exit_code in errors.EXIT_CODES, (args, result.exit_code, text)
        if result.exit_code >= errors.USAGE:
            assert result.stderr.startswith(("Error: ", "Usage: ")), (args, text)

    attempt()
    REPORT["CLI argument values tried, by exit status"] = dict(sorted(seen.items()))
    assert seen[errors.OK] and seen[errors.USAGE]  # both kinds of value were tried


# ---------------------------------------------------------------------------------------------
# Global options after the command


def _leaves(group: click.Group, path: list[str]) -> list[tuple[list[str], click.Command]]:
    out = []
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            out += [(path + [name], cmd)] + _leaves(cmd, path + [name])
        else:
            out.append((path + [name], cmd))
    return out


@pytest.mark.parametrize("path,command", _leaves(main, []),
                         ids=[" ".join(p) for p, _ in _leaves(main, [])])
@pytest.mark.parametrize("store_flag", ["--store", "-s"])
def test_global_options_follow_every_command(path: list[str], command: click.Command,
                                             store_flag: str) -> None:
    """Parsed after the command's own arguments, they reach what the command reads (the
    group's settings), and beat the ones given before the command."""
    with main.make_context("runstore", ["--store", "before"]) as root:
        needed = [p for p in command.params if isinstance(p, click.Argument) and p.required]
        args = ["x"] * sum(max(p.nargs, 1) for p in needed)
        if any(p.name == "output" and p.required for p in command.params):
            args += ["-o", "x.html"]
        parent = root
        for name in path[:-1]:  # a subgroup's context between the root and the command
            parent = main.commands[name].make_context(name, [path[-1]], parent=parent)
        command.make_context(path[-1], [*args, store_flag, "after", "--debug"], parent=parent)
        assert root.obj == {"store": "after", "debug": True}


def test_global_options_after_the_command_really_choose_the_store(
        ui_demo: tuple[Path, Path], store: Path, tmp_path: Path) -> None:
    runs = len(oracle.run_dirs(ui_demo[0]))
    assert CliRunner().invoke(main, ["sql", "select count(*) as n from runs", "-F", "csv",
                                     "--store", str(store)]).output == f"n\n{runs}\n"
    result = CliRunner().invoke(main, ["--store", str(store), "runs", "-s",
                                       str(tmp_path / "nowhere")])
    assert result.exit_code == errors.STORE and f"no store at {tmp_path / 'nowhere'}" in \
        result.stderr
    plotted = CliRunner().invoke(main, ["plot", "kl", "-o", str(tmp_path / "k.html"),
                                        "--store", str(store)])
    assert plotted.exit_code == 0 and (tmp_path / "k.html").exists(), plotted.output


def test_debug_after_the_command_shows_the_traceback(store: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import runstore

    def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("deliberately broken for this test")

    monkeypatch.setattr(runstore.Store, "fetch", broken)
    plain = CliRunner().invoke(main, ["sql", "select 1", "--store", str(store)])
    assert plain.exit_code == errors.BUG and "Error: unexpected RuntimeError" in plain.stderr
    debug = CliRunner().invoke(main, ["sql", "select 1", "--store", str(store), "--debug"])
    assert isinstance(debug.exception, RuntimeError)
