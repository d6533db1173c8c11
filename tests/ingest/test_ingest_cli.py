"""The `runstore` command around ingest: summary line, exit codes, errors, --quiet, sql output,
migrate --list, the store location rules and the store lock (in a real second process).

Expected values come from `oracle` (reading the source files) or are literals.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from click.testing import Result

import oracle
from runstore.storage import schema
from runstore.storage.lock import Lock
from storekit import cli

SUMMARY = re.compile(r"^runs: (\d+) new, (\d+) updated, (\d+) unchanged, (\d+) missing; "
                     r"rows: (.*); (\d+) warnings?; [\d.]+ s, [\d.]+ MB read at [\d.]+ MB/s$")


def run_cli(*args: str, env: dict[str, str] | None = None) -> Result:
    """`runstore ARGS` (the store, if any, among them)."""
    return cli(None, *args, env=env)


def rows_part(root: Path) -> str:
    """The "rows: ..." part of the summary for a first ingest of root, from the oracle (rows read
    from sources: the summaries kept beside them are not reported)."""
    return ", ".join(f"{t} +{n}" for t, n in sorted(oracle.expected_counts(root).items())
                     if n and t not in schema.SUMMARY_TABLES)



def python_m(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runstore", *args], capture_output=True,
                          text=True, timeout=timeout)


# --------------------------------------------------------------------------- ingest


def test_ingest_prints_one_summary_line(small_tree: Path, store_path: Path) -> None:
    result = run_cli("--store", str(store_path), "ingest", str(small_tree))
    assert result.exit_code == 0
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1  # not a terminal: no progress bar
    m = SUMMARY.match(lines[0])
    assert m, lines[0]
    assert m.groups()[:4] == ("3", "0", "0", "0")
    assert m.group(5) == rows_part(small_tree) and m.group(6) == "0"

    again = run_cli("--store", str(store_path), "ingest", str(small_tree))
    assert again.exit_code == 0
    m = SUMMARY.match(again.stderr.strip())
    assert m and m.groups()[:6] == ("0", "0", "3", "0", "no rows", "0")


def test_ingest_with_warnings_exits_0(tmp_path: Path, store_path: Path) -> None:
    run = tmp_path / "runs" / "bad"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_bytes(b'{"step": 0, "x": 1}\nnot json\n{"step": 2, "x": 3}\n')
    result = run_cli("--store", str(store_path), "ingest", str(tmp_path / "runs"))
    assert result.exit_code == 0
    lines = result.stderr.splitlines()
    assert lines[0].startswith("warning: bad/metrics.jsonl:2: ")
    m = SUMMARY.match(lines[-1])
    assert m and m.group(6) == "1" and lines[-1].endswith(" MB/s") and "; 1 warning;" in lines[-1]
    assert m.group(5) == "metrics_raw +2, runs +1"


def test_ingest_missing_path_is_an_error(tmp_path: Path, store_path: Path) -> None:
    missing = tmp_path / "no" / "such" / "runs"
    result = run_cli("--store", str(store_path), "ingest", str(missing))
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ") and str(missing) in result.stderr
    assert "Traceback" not in result.stderr
    assert not store_path.exists()  # nothing created for nothing


HINT = "a run is a directory holding metrics.jsonl or config.json"


def test_a_tree_whose_path_is_not_utf8_says_why_it_has_no_run(small_tree: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # A tree under a directory named in Latin-1 bytes: its runs are there, but the store keeps
    # paths as text, so the error says that, not that there is no run.
    monkeypatch.chdir(tmp_path)
    shutil.copytree(small_tree / "a/rl_flat", os.fsdecode(b"outer/d\xe9/rl_flat"))
    result = run_cli("--store", "st", "ingest", "outer")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == ("Error: no run under outer can be stored: the paths of 1 are not "
                             "UTF-8 (first: d\\xe9/rl_flat); rename the "
                             "directories to ingest them\n")
    assert not (tmp_path / "st").exists()
    # Named on the command line itself, the path is refused as every such argument is.
    result = run_cli("--store", "st", "ingest", os.fsdecode(b"outer/d\xe9"))
    assert (result.exit_code, result.stdout) == (2, "")
    assert "argument 'outer/d\\xe9' is not UTF-8 text (byte 0xe9" in result.stderr
    assert not (tmp_path / "st").exists()
    # Beside a path with a run (and into a store that exists), the path whose runs are all
    # skipped is a warning saying why, about that path and its runs alone; the run is stored.
    shutil.copytree(small_tree / "a/rl_flat", "good/rl_flat")
    shutil.copytree(small_tree / "a/rl_flat", os.fsdecode(b"outer2/r\xe9/x/rl_flat"))
    result = run_cli("--store", "st", "ingest", "good", "outer", "outer2")
    assert result.exit_code == 0, result.stderr
    warnings = [w for w in result.stderr.splitlines() if "no run under" in w]
    assert warnings == [
        "warning: no run under outer can be stored: the paths of 1 are not UTF-8 (first: "
        "d\\xe9/rl_flat); rename the directories to ingest them",
        "warning: no run under outer2 can be stored: the paths of 1 are not UTF-8 (first: "
        "r\\xe9/x/rl_flat); rename the directories to ingest them"], result.stderr
    assert run_cli("--store", "st", "sql", "select run_name from runs", "-F", "csv").stdout \
        == "run_name\nrl_flat\n"


def test_ingest_of_what_is_not_a_run_is_an_error(small_tree: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty" / "deeper").mkdir(parents=True)
    (tmp_path / "notes.txt").write_text("not a run\n")
    (tmp_path / "empty" / "deeper" / "metrics.json").write_text("{}\n")  # not a run's file
    for path, message in [
            ("empty/", f"Error: no runs under empty/: {HINT}\n"),
            ("notes.txt", f"Error: notes.txt is a file, not a run: {HINT}; pass a directory "
                          "of runs\n"),
            ("empty/deeper/metrics.json", "Error: empty/deeper/metrics.json is a file, not a "
                                          f"run: {HINT}; pass a directory of runs\n")]:
        result = run_cli("--store", "st", "ingest", path)
        assert (result.exit_code, result.stdout, result.stderr) == (2, "", message), path
        assert not (tmp_path / "st").exists()  # nothing created for nothing
    result = run_cli("--store", "st", "ingest", "empty/", "notes.txt")
    assert result.exit_code == 2 and result.stderr == (
        f"Error: no runs under empty/ or notes.txt: {HINT}\n")
    assert not (tmp_path / "st").exists()
    # Into an existing store: the same error, and nothing is published.
    assert run_cli("--store", "st", "ingest", str(small_tree)).exit_code == 0
    before = sorted(os.listdir(tmp_path / "st" / "_runstore" / "manifests"))
    result = run_cli("--store", "st", "ingest", "empty/")
    assert result.exit_code == 2 and result.stderr == f"Error: no runs under empty/: {HINT}\n"
    assert sorted(os.listdir(tmp_path / "st" / "_runstore" / "manifests")) == before
    # Beside a path with runs, a path without is a warning and the runs are ingested.
    result = run_cli("--store", "st2", "ingest", "empty/", str(small_tree))
    assert result.exit_code == 0
    lines = result.stderr.splitlines()
    assert lines[0] == f"warning: no runs under empty/: {HINT}"
    m = SUMMARY.match(lines[-1])
    assert m and m.groups()[:4] == ("3", "0", "0", "0") and m.group(6) == "1"


def test_a_file_of_a_run_ingests_that_run(small_tree: Path, tmp_path: Path) -> None:
    run_dir = small_tree / "a" / "rl_dirs"
    logtree = sorted(run_dir.glob("iteration_*/*_logtree.json"))[0]  # one level deeper
    for i, path in enumerate([run_dir / "metrics.jsonl", run_dir / "config.json", logtree]):
        store = tmp_path / f"store{i}"
        result = run_cli("--store", str(store), "ingest", str(path))
        assert result.exit_code == 0, result.stderr
        m = SUMMARY.match(result.stderr.strip())
        assert m and m.groups()[:4] == ("1", "0", "0", "0")
        assert m.group(5) == rows_part(run_dir)  # the whole run, not just that file
        out = run_cli("--store", str(store), "sql", "select run_name, run_path from runs",
                      "-F", "csv").stdout
        assert out == f"run_name,run_path\nrl_dirs,{run_dir.resolve()}\n"


def test_watch_keeps_watching_a_path_without_runs(small_tree: Path, tmp_path: Path) -> None:
    """`--watch` on a directory that holds no run yet warns once and picks the runs up later."""
    import shutil

    from runstore import open as open_store
    from runstore.health.watch import Watcher

    later = tmp_path / "later"
    later.mkdir()
    warnings: list[str] = []
    w = Watcher(open_store(tmp_path / "store"), [later], on_warning=warnings.append)
    assert w.run_pass() == [] and w.run_pass() == []
    assert warnings == [f"{later} holds no runs (yet): {HINT}; watching it"]
    shutil.copytree(small_tree, later / "runs")
    w.run_pass()
    assert open_store(tmp_path / "store").sql("select count(*) from runs").item() == 3
    assert len(warnings) == 1
    # One pass (ingest --check, no --watch) is a plain ingest: an error.
    result = run_cli("--store", str(tmp_path / "s2"), "ingest", str(tmp_path / "empty_too"),
                     "--check")
    assert result.exit_code == 2
    (tmp_path / "empty_too").mkdir()
    result = run_cli("--store", str(tmp_path / "s2"), "ingest", str(tmp_path / "empty_too"),
                     "--check")
    assert result.exit_code == 2 and f"no runs under {tmp_path / 'empty_too'}" in result.stderr


def test_copied_finished_runs_say_completed(small_tree: Path, tmp_path: Path) -> None:
    """After `cp -r` (fresh mtimes), runs with a final checkpoint are completed, not running."""
    import shutil

    copied = tmp_path / "copied"
    shutil.copytree(small_tree, copied, copy_function=shutil.copy)
    finished = sorted(oracle.run_name(copied, r) for r in oracle.run_dirs(copied)
                      if oracle.has_final_checkpoint(r))
    assert len(finished) == 3
    store = str(tmp_path / "store")
    assert run_cli("--store", store, "ingest", str(copied)).exit_code == 0
    out = run_cli("--store", store, "runs", "-c", "run_name,status", "-F", "csv").stdout
    assert out == "run_name,status\n" + "".join(f"{n},completed\n" for n in finished)
    out = run_cli("--store", store, "sql", "select run_name, status from runs order by 1",
                  "-F", "csv").stdout
    assert out == "run_name,status\n" + "".join(f"{n},completed\n" for n in finished)


def test_ingest_into_unwritable_store_is_an_error(small_tree: Path, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("a regular file, not a directory\n")
    store = afile / "store"  # cannot be created, even by root
    result = run_cli("--store", str(store), "ingest", str(small_tree))
    assert result.exit_code == 6
    assert result.stderr.startswith("Error: ") and str(store) in result.stderr
    assert "cannot write the store" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes whatever the permissions")
def test_ingest_into_read_only_directory_is_an_error(small_tree: Path, tmp_path: Path) -> None:
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o555)
    try:
        result = run_cli("--store", str(parent / "store"), "ingest", str(small_tree))
    finally:
        parent.chmod(0o755)
    assert result.exit_code == 6
    assert result.stderr.startswith("Error: ") and "cannot write the store" in result.stderr


def test_quiet_prints_nothing(tmp_path: Path, small_tree: Path, store_path: Path) -> None:
    bad = small_tree / "a" / "rl_flat" / "metrics.jsonl"
    with open(bad, "ab") as f:
        f.write(b"garbage line\n")
    result = run_cli("--store", str(store_path), "ingest", "--quiet", str(small_tree))
    assert result.exit_code == 0
    assert (result.stdout, result.stderr) == ("", "")
    # ... but errors still show
    result = run_cli("--store", str(store_path), "ingest", "-q", str(tmp_path / "nope"))
    assert result.exit_code == 2 and result.stderr.startswith("Error: ")


def test_store_location_rules(small_tree: Path, tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUNSTORE_STORE", raising=False)
    env_store = tmp_path / "from_env"
    result = run_cli("ingest", "-q", str(small_tree), env={"RUNSTORE_STORE": str(env_store)})
    assert result.exit_code == 0 and (env_store / "_runstore" / "manifests").is_dir()
    flag_store = tmp_path / "from_flag"  # --store wins over the environment
    result = run_cli("--store", str(flag_store), "ingest", "-q", str(small_tree),
                     env={"RUNSTORE_STORE": str(env_store)})
    assert result.exit_code == 0 and (flag_store / "_runstore" / "manifests").is_dir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    result = run_cli("ingest", "-q", str(small_tree))
    assert result.exit_code == 0 and (cwd / ".runstore" / "_runstore" / "manifests").is_dir()


# --------------------------------------------------------------------------- sql


@pytest.fixture(scope="module")
def ingested_demo(_demo_template: Path, tmp_path_factory: pytest.TempPathFactory
                  ) -> tuple[Path, Path]:
    """The demo tree ingested once for the read-only sql tests of this module."""
    store_path = tmp_path_factory.mktemp("cli_sql") / "store"
    result = run_cli("--store", str(store_path), "ingest", "-q", str(_demo_template))
    assert result.exit_code == 0
    return _demo_template, store_path


def kinds(root: Path) -> Counter:
    return Counter(oracle.run_kind(run) for run in oracle.run_dirs(root))


def test_sql_json(ingested_demo: tuple[Path, Path]) -> None:
    tree, store = ingested_demo
    result = run_cli("--store", str(store), "sql",
                     "select kind, count(*) from runs group by kind", "--format", "json")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert {r["kind"]: r["count_star()"] for r in rows} == kinds(tree)


def test_sql_csv(ingested_demo: tuple[Path, Path]) -> None:
    tree, store = ingested_demo
    result = run_cli("--store", str(store), "sql",
                     "select kind, count(*) as n from runs group by kind order by kind",
                     "--format", "csv")
    assert result.exit_code == 0, result.stderr
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows[0] == ["kind", "n"]
    assert rows[1:] == [[k, str(n)] for k, n in sorted(kinds(tree).items())]


def test_sql_table(ingested_demo: tuple[Path, Path]) -> None:
    tree, store = ingested_demo
    result = run_cli("--store", str(store), "sql",
                     "select kind, count(*) as n from runs group by kind order by kind",
                     "--format", "table")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["kind", "n"]
    want = sorted(kinds(tree).items())
    assert [line.split() for line in lines[2:-1]] == [[k, str(n)] for k, n in want]
    assert lines[-1] == f"({len(want)} rows)"


def test_sql_counts_every_table(ingested_demo: tuple[Path, Path]) -> None:
    tree, store = ingested_demo
    want = oracle.expected_counts(tree)
    for table, n in want.items():
        result = run_cli("--store", str(store), "sql", f"select count(*) as n from {table}",
                         "--format", "json")
        assert result.exit_code == 0 and json.loads(result.stdout) == [{"n": n}], table


def test_sql_without_a_store_is_an_error(tmp_path: Path) -> None:
    result = run_cli("--store", str(tmp_path / "none"), "sql", "select 1")
    assert result.exit_code == 3
    assert result.stderr.startswith("Error: no store at ")


# --------------------------------------------------------------------------- migrate, help


def test_migrate_list_is_read_only(small_tree: Path, store_path: Path) -> None:
    assert run_cli("--store", str(store_path), "ingest", "-q", str(small_tree)).exit_code == 0
    before = oracle.tree_digest(store_path)
    result = run_cli("--store", str(store_path), "migrate", "--list")
    assert result.exit_code == 0, result.stderr
    from runstore.storage import versions

    names = [m.name for m in versions.available()]
    lines = result.stdout.splitlines()
    assert lines[0] == f"schema version {versions.latest_version()}"
    assert len(lines) == 1 + len(names)
    assert [ln.split()[:2] for ln in lines[1:]] == [["applied", n] for n in names]
    assert "pending" not in result.stdout
    assert oracle.tree_digest(store_path) == before


def test_migrate_list_without_a_store(tmp_path: Path) -> None:
    result = run_cli("--store", str(tmp_path / "none"), "migrate", "--list")
    assert result.exit_code == 3 and result.stderr.startswith("Error: no store at ")
    assert not (tmp_path / "none").exists()


def test_python_m_help() -> None:
    p = python_m("--help")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("Usage: ")
    for command in ("ingest", "sql", "migrate"):
        assert re.search(rf"^\s+{command}\s", p.stdout, re.M), command
    p = python_m("ingest", "--help")
    assert p.returncode == 0 and "--quiet" in p.stdout and "Example:" in p.stdout


# --------------------------------------------------------------------------- the store lock


def test_locked_store_fails_after_timeout(small_tree: Path, store_path: Path) -> None:
    lock = Lock(store_path)
    lock.acquire(1)
    try:
        p = python_m("--store", str(store_path), "ingest", str(small_tree),
                     "--lock-timeout", "0.5")
    finally:
        lock.release()
    assert p.returncode == 4
    assert p.stderr.startswith("Error: ")
    assert f"store is locked by PID {os.getpid()}" in p.stderr
    assert "Traceback" not in p.stderr
    p = python_m("--store", str(store_path), "ingest", "-q", str(small_tree))
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    result = run_cli("--store", str(store_path), "sql", "select count(*) as n from runs",
                     "--format", "json")
    assert json.loads(result.stdout) == [{"n": len(oracle.run_dirs(small_tree))}]


def test_second_ingest_waits_for_the_lock(small_tree: Path, store_path: Path) -> None:
    lock = Lock(store_path)
    lock.acquire(1)
    proc = subprocess.Popen([sys.executable, "-m", "runstore", "--store", str(store_path),
                             "ingest", str(small_tree), "--lock-timeout", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Let the other process start and block on the lock, then let it through.
        time.sleep(1.5)
    finally:
        lock.release()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    m = SUMMARY.match(err.strip().splitlines()[-1])
    assert m and m.group(1) == "3" and m.group(5) == rows_part(small_tree)
