"""What each read command imports at start-up: a heavy module only where the answer needs it.

Issue 31 asks every read command to answer in a blink; most of a short command's time beyond
a bare DuckDB process is importing (pyarrow and numpy ~0.1-0.15 s, polars ~0.15 s, sqlglot
~0.1 s, pandas more). Each command here runs as a real process under `python -X importtime`
against the demo store, and every module it imported is read from that report: the heavy
packages among them must be within what the command is allowed (an upper bound, so a change
that makes a command lighter passes, and one that makes it heavier fails). The bounds say what
the answer needs today: `sql`, `runs`, `check` of threshold rules and `views` print plain
rows and need none, nor do `keys` (it adds up the per-key summary's plain rows), `diff`,
`trace` and trend rules (plain rows, smoothed by `analysis.smooth.smoothed`); a `--where` is
parsed by sqlglot; `compare` on the step axis without smoothing is one DuckDB statement printed
as plain rows (no polars; its statements are fixed text, no sqlglot), and only a smoothed or
time/spend axis `compare` places its points with polars (still without pyarrow, nor numpy,
which pyarrow loads). `plot` and
`report` write their HTML from the charts' plain data, with plotly.js read as a file: no
plotly Python package, numpy, pyarrow or polars (a smoothing weight computes with polars). Not a timed test: it counts modules, never seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = {"pyarrow", "polars", "numpy", "sqlglot", "pandas", "deltalake", "plotly",
         "starlette", "uvicorn", "urllib3", "httpx", "rich"}
RUN = "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"
OTHER = "gsm8k_tool_rl/sweep/lr_3e-4/seed_0"
POLARS = {"polars", "pyarrow", "numpy"}


def modules(store: Path, args: list[str], tmp: Path) -> tuple[set[str], int]:
    """The modules a `runstore` process imported, and its exit status."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "runstore", "--store",
                           str(store), *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=tmp)
    names = set()
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            module = line.rsplit("|", 1)[1].strip()
            if module and module != "package":
                names.add(module)
    return names, proc.returncode


def imported(store: Path, args: list[str], tmp: Path) -> tuple[set[str], int]:
    """The top-level packages a `runstore` process imported, and its exit status."""
    names, status = modules(store, args, tmp)
    return {n.split(".")[0] for n in names}, status


@pytest.mark.parametrize("args,allowed,code", [
    (["sql", "select 1"], set(), 0),
    (["sql", "select run_label, max_kl_v1 from kl_health where flagged"], set(), 0),
    (["runs"], set(), 0),
    (["runs", "--where", "last_step > 3", "-c", "run_label"], {"sqlglot"}, 0),
    (["check"], set(), 1),
    (["check", "--threshold", "0.5"], set(), 0),
    (["views"], set(), 0),
    (["keys"], set(), 0),
    (["diff", RUN, OTHER], set(), 0),
    (["trace", RUN, "-o", "t.json"], set(), 0),
    (["compare", "env/all/reward/total", "--group-by", "auto"], set(), 0),
    (["compare", "env/all/reward/total", "--group-by", "learning_rate", "--runs", "gsm8k*"],
     set(), 0),
    (["compare", "env/all/reward/total", "--group-by", "auto", "--smooth", "0.9"],
     {"polars"}, 0),
    (["compare", "env/all/reward/total", "--x", "time"], {"polars"}, 0),
    (["check", "--rule", "drop(env/all/reward/total) > 0.2"], set(), 1),
    (["check", "--rule", "rise(time/total) > 1.2", "--no-default-rules"], set(), 1),
    (["check", "--rule", "stale > 1", "--no-default-rules"], set(), 1),
    (["doctor"], {"sqlglot"}, 1),
    (["doctor", "-F", "json"], {"sqlglot"}, 1),
    (["plot", "metric", "env/all/reward/total", "-o", "p.html"], set(), 0),
    (["plot", "metric", "env/all/reward/total", "optim/kl_sample_train_v1", "--runs", "gsm8k*",
      "--color-by", "learning_rate", "-o", "p.html"], set(), 0),
    (["plot", "metric", "env/all/reward/total", "--smooth", "0.6", "-o", "p.html"], set(), 0),
    (["plot", "kl", "-o", "kl.html"], set(), 0),
    (["plot", "rewards", "--color-by", "model_name", "-o", "r.html"], set(), 0),
    (["plot", "spans", RUN, "-o", "s.html"], set(), 0),
    (["report", "-o", "report.html"], set(), 0),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_read_command_imports_only_what_it_needs(shared_demo_store: Path, tmp_path: Path,
                                                   args: list[str], allowed: set[str],
                                                   code: int) -> None:
    names, status = imported(shared_demo_store, args, tmp_path)
    assert status == code, (args, status)
    assert "runstore" in names and "click" in names  # the report was read
    assert names & HEAVY <= allowed, sorted(names & HEAVY - allowed)


def test_the_report_names_a_heavy_import(shared_demo_store: Path, tmp_path: Path) -> None:
    """The reading above sees a heavy package when a command does import one (a smoothed
    `compare` computes with polars), so an empty set above is a finding, not a blind spot."""
    names, status = imported(shared_demo_store, ["compare", "env/all/reward/total", "--smooth",
                                                 "0.9"], tmp_path)
    assert status == 0
    assert "polars" in names


# The store's write side: a read command reads a snapshot and never loads these.
WRITE_SIDE = {"runstore.storage.writer", "runstore.storage.ledger", "runstore.storage.vacuum",
              "runstore.storage.migrate", "runstore.storage.lock", "runstore.ingest"}


@pytest.mark.parametrize("args", [["runs"], ["sql", "select 1"], ["keys"]], ids=" ".join)
def test_a_read_command_loads_no_write_side(shared_demo_store: Path, tmp_path: Path,
                                            args: list[str]) -> None:
    names, status = modules(shared_demo_store, args, tmp_path)
    assert status == 0 and "runstore.query.connect" in names
    assert not names & WRITE_SIDE, sorted(names & WRITE_SIDE)
