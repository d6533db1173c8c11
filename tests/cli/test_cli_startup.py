"""A reading command's database, made while the command imports (runstore.startup).

`READING_COMMANDS` is held to the CLI itself: exactly the commands whose code opens the store
to read it. The command is found in its arguments as click would find it, whatever global
options come first. The database made early is handed over once, to the first database the
process opens, which confines it as any other (the sandbox tests run every command through
it in real processes). In a real process a reading command imports DuckDB before the rest of
runstore, and a command that reads no store (or asked for its `--help`) imports no DuckDB.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import click
import oracle
import pytest

from runstore import startup


def _reads(command: click.Command) -> bool:
    """Whether `command` (or, for a group, one of its commands) opens the store to read."""
    if isinstance(command, click.Group):
        return any(_reads(c) for c in command.commands.values())
    source = inspect.getsource(inspect.unwrap(command.callback))
    calls = source.split("open_store(ctx")[1:]
    return any(not call.split(")")[0].count("reading=False") for call in calls)


def test_the_reading_commands_are_the_clis() -> None:
    from runstore.cli import main

    reading = {name for name, command in main.commands.items() if _reads(command)}
    assert reading == startup.READING_COMMANDS
    assert {"views", "schema", "ingest", "ui", "mcp"}.isdisjoint(reading)
    # `command_of` skips the value of the one global option that takes one.
    assert {o for p in main.params if not getattr(p, "is_flag", False)
            for o in p.opts} == {"--store", "-s"}


@pytest.mark.parametrize("args,command", [
    (["check"], "check"),
    (["--store", "check", "sql", "select 1"], "sql"),  # a store named like a command
    (["-s", "runs", "plot", "metric", "k"], "plot"),
    (["--store=x", "--debug", "runs"], "runs"),
    (["-sx", "diff", "a", "b"], "diff"),
    (["sql", "select 1", "--store", "views"], "sql"),
    (["views"], "views"),
    (["--help"], None),
    (["--store", "x"], None),
    ([], None),
])
def test_the_command_is_the_first_word_no_option_takes(args: list[str],
                                                       command: str | None) -> None:
    assert startup.command_of(args) == command


def test_the_database_made_early_is_handed_over_once(shared_demo_store: Path,
                                                    _demo_template: Path) -> None:
    import runstore

    assert startup.early_database() is None  # none started in this process
    startup.start_database()
    store = runstore.open(shared_demo_store)
    made = startup._EARLY.get("thread")
    assert made is not None and made.daemon
    db, _ = store._session.database({}, None)
    assert not made.is_alive() and "database" not in startup._EARLY  # taken, by this one
    assert startup.early_database() is None
    # Confined as any new database is: the sandbox holds on it.
    assert db.con.execute("select current_setting('enable_external_access')").fetchall() == [
        (False,)]
    assert store.sql("select count(*) as n from runs").item() == len(
        oracle.run_dirs(_demo_template))
    other = runstore.open(shared_demo_store)._session.database({}, None)[0]
    assert other.con is not db.con  # the next database is made as always


def _imports(store: Path, args: list[str], tmp: Path) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "runstore", *args],
                          capture_output=True, text=True, timeout=300, cwd=tmp,
                          env={**env, "RUNSTORE_STORE": str(store)})
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return [line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
            if line.startswith("import time:") and "|" in line]


@pytest.mark.parametrize("args", [["sql", "select 1"], ["check"],
                                  ["plot", "metric", "env/all/reward/total", "-o", "p.html"]])
def test_a_reading_command_imports_duckdb_first(shared_demo_store: Path, tmp_path: Path,
                                               args: list[str]) -> None:
    names = _imports(shared_demo_store, args, tmp_path)
    assert names.index("duckdb") < names.index("runstore.store")


@pytest.mark.parametrize("args", [["views"], ["schema"], ["--help"], ["sql", "--help"],
                                  ["plot", "metric", "--help"]])
def test_a_command_that_reads_no_store_imports_no_duckdb(shared_demo_store: Path,
                                                         tmp_path: Path,
                                                         args: list[str]) -> None:
    names = _imports(shared_demo_store, args, tmp_path)
    assert "runstore.cli" in names and "duckdb" not in names


def test_the_early_database_is_confined_in_a_real_process(shared_demo_store: Path,
                                                          _demo_template: Path,
                                                          tmp_path: Path) -> None:
    """`runstore sql` in its own process (so on the database made early): a file outside
    the store is refused by DuckDB's sandbox, the store answers."""
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    run = [sys.executable, "-m", "runstore", "--store", str(shared_demo_store), "sql"]
    proc = subprocess.run([*run, f"select content from read_text('{outside}')"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "refused" in proc.stderr and "secret" not in proc.stdout
    proc = subprocess.run([*run, "select count(*) as n from runs", "-F", "csv"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0
    assert proc.stdout == f"n\n{len(oracle.run_dirs(_demo_template))}\n"
