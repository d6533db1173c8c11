"""Source trees are read-only to runstore: every command leaves every source byte and mtime.

The tree is made read-only (`chmod -R a-w`) and, as root (for whom permissions do not bind),
also reached through a read-only bind mount, so any write, create, rename, chmod or utime
aimed at it fails with EROFS instead of passing unnoticed. Then every `runstore` command runs
against it (ingest twice, sql, runs, check, keys, diff, compare, views, schema, migrate
--list, compact, repair, report, plot, trace, doctor, skill (printed, and installed outside
the tree), a real `runstore mcp` stdio session calling its tools, forget) and after EACH one
the tree must be exactly as before: the same files
and directories, the same bytes (sha256), sizes, modes and mtimes. A command added to the CLI
must be added to COMMANDS here (a test fails until it is).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import oracle
import runstore
from runstore.cli import main
from mcpkit import McpSession
from storekit import cli


def snapshot(root: Path) -> dict[str, tuple]:
    """Every file and directory under root: kind, mode, size, mtime, and sha256 of files."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in [*dirnames, *sorted(filenames)]:
            p = Path(dirpath) / name
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) \
                else None
            out[p.relative_to(root).as_posix()] = (stat.S_IFMT(st.st_mode),
                                                   stat.S_IMODE(st.st_mode), st.st_size,
                                                   st.st_mtime_ns, digest)
    st = root.stat()
    out["."] = (stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    return out


def commands(tree: Path, out: Path) -> list[list[str]]:
    """Every command, as a user would run it over this tree (outputs go to `out`)."""
    return [
        ["ingest", str(tree)],
        ["ingest", str(tree)],  # again: the incremental path
        ["sql", "select count(*) as n from metrics"],
        ["sql", "select * from runs", "-o", str(out / "runs.parquet"), "-F", "parquet"],
        ["runs"],
        ["check"],
        ["check", "--rule", "drop(env/all/reward/total) > 0.1", "--rule", "stale > 1"],
        ["keys"],
        ["diff", "a/rl_dirs", "--all"],
        ["compare", "env/all/reward/total", "--group-by", "auto", "--smooth", "0.9"],
        ["views"],
        ["views", "--dialect", "spark"],
        ["schema"],
        ["schema", "metrics_raw"],
        ["migrate", "--list"],
        ["migrate"],
        ["compact"],
        ["repair"],
        ["report", "-o", str(out / "report.html")],
        ["plot", "kl", "-o", str(out / "kl.html")],
        ["plot", "metric", "env/all/reward/total", "-o", str(out / "reward.html")],
        ["trace", "a/rl_dirs", "-o", str(out / "trace.json")],
        ["doctor"],
        ["doctor", "a/rl_dirs", "--explain", "-F", "json"],
        ["skill"],
        ["skill", "--install", str(out / "skills" / "runstore")],
        ["mcp"],  # a real stdio session (`mcp_session`), not a CliRunner call
        ["forget", "a/rl_flat", "--dry-run"],
        ["forget", "a/rl_flat"],
        ["forget", "--missing"],
        ["ingest", str(tree)],  # the forgotten run again, read afresh
    ]


# `demo` writes a demo tree of its own, never reads a user's; `ui` serves until stopped (its
# PATHS go through the same ingest as `ingest`; that serving writes neither the store nor the
# tree is tests/ui/test_ui_security.py::test_using_every_endpoint_writes_neither_store_nor_tree).
NOT_RUN = {"demo", "ui"}


def test_every_command_is_covered(tmp_path: Path) -> None:
    covered = {c[0] for c in commands(tmp_path, tmp_path)} | NOT_RUN
    assert set(main.commands) <= covered, (
        f"add {sorted(set(main.commands) - covered)} to COMMANDS in {__file__}")


def read_only(tree: Path) -> dict[Path, int]:
    modes = {p: stat.S_IMODE(p.lstat().st_mode) for p in [tree, *tree.rglob("*")]}
    for p, mode in modes.items():
        if not p.is_symlink():
            p.chmod(mode & ~0o222)
    return modes


def restore(modes: dict[Path, int]) -> None:
    for p, mode in modes.items():
        if not p.is_symlink():
            p.chmod(mode)


# What an agent asks `runstore mcp` (tests/agents/test_mcp.py tests the answers).
MCP_CALLS = [
    ("list_runs", {}), ("describe_run", {"run": "a/rl_dirs"}),
    ("metric_history", {"keys": ["env/all/reward/total"]}), ("metric_keys", {}),
    ("rollouts", {"run": "a/rl_dirs"}), ("search_transcripts", {"text": "e"}),
    ("step_timeline", {"run": "a/rl_dirs"}), ("slowest_spans", {"run": "a/rl_dirs"}),
    ("check", {}), ("doctor", {}), ("compare_runs", {"runs": ["a/*"]}),
    ("sql", {"query": "select count(*) as n from metrics"}), ("views", {}),
]


def mcp_session(store: Path) -> None:
    """A real `runstore mcp` over stdio (the SDK's client), every call of MCP_CALLS answered."""
    with McpSession(store) as session:
        for tool, args in MCP_CALLS:
            session.ok(tool, args)
        assert "Traceback" not in session.stderr(), session.stderr()


def run_all(tree: Path, store: Path, out: Path, watched: Path) -> None:
    """Every command over `tree`; `watched` (the real tree) must not change after any."""
    before = snapshot(watched)
    for args in commands(tree, out):
        if args == ["mcp"]:
            mcp_session(store)
            assert snapshot(watched) == before, "`runstore mcp` changed the tree"
            continue
        result = cli(store, *args, catch_exceptions=True)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args, result.exception)
        assert "Traceback" not in result.stderr, (args, result.stderr)
        if args[0] in ("ingest", "sql", "runs", "views", "schema", "migrate", "compact",
                       "repair", "forget", "skill"):
            assert result.exit_code == 0, (args, result.stderr)
        if args[0] == "doctor":  # 1: a finding is an error
            assert result.exit_code in (0, 1) and result.stdout, (args, result.stderr)
        if args[0] == "skill":
            skill = out / "skills" / "runstore" / "SKILL.md"
            assert (skill.read_text() if "--install" in args else result.stdout).startswith("---")
        if args[0] == "ingest":
            assert "warning:" not in result.stderr, result.stderr
        assert snapshot(watched) == before, f"`runstore {' '.join(args)}` changed the tree"


def test_read_only_tree(small_tree: Path, tmp_path: Path) -> None:
    """chmod -R a-w (binding for users other than root), hashes and mtimes after each command."""
    out = tmp_path / "out"
    out.mkdir()
    modes = read_only(small_tree)
    try:
        run_all(small_tree, tmp_path / "store", out, small_tree)
        counts = runstore.open(tmp_path / "store").sql("select count(*) as n from runs")
        assert counts["n"][0] == len(oracle.run_dirs(small_tree))
    finally:
        restore(modes)


def test_read_only_mount(small_tree: Path, tmp_path: Path) -> None:
    """As root, the same through a read-only bind mount: a write of any kind would fail."""
    if os.geteuid() != 0:
        pytest.skip("bind mounts need root (test_read_only_tree covers other users)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.run(["mount", "--bind", str(small_tree), str(mnt)], capture_output=True,
                       text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {p.stderr.strip()}")
    try:
        p = subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], capture_output=True,
                           text=True)
        if p.returncode != 0:
            pytest.skip(f"cannot remount read-only here: {p.stderr.strip()}")
        with pytest.raises(OSError):  # really read-only, even for root
            (mnt / "probe").write_text("x")
        out = tmp_path / "out"
        out.mkdir()
        modes = read_only(small_tree)
        try:
            run_all(mnt, tmp_path / "store", out, small_tree)
            # And a real process, as users run it.
            proc = subprocess.run([sys.executable, "-m", "runstore", "--store",
                                   str(tmp_path / "store2"), "ingest", str(mnt)],
                                  capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0 and "warning:" not in proc.stderr, proc.stderr
        finally:
            restore(modes)
        store = runstore.open(tmp_path / "store")
        assert store.sql("select count(*) as n from runs")["n"][0] == \
            len(oracle.run_dirs(small_tree))
        assert all(p.startswith(str(mnt)) for p in store.sql("select run_path from runs")[
            "run_path"])
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
    shutil.rmtree(mnt)
