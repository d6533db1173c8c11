"""`-o -` is standard output, as for most command-line tools, never a file named `-`.

Commands that print (`sql`, `runs`, `trace`, ...) print with `-o -` exactly what they print
without `-o`; commands that write an HTML page refuse it, saying to give a file name, and
write nothing. Run from a fresh working directory, so a file named `-` would be seen.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from runstore.cli import main

RUN = "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"


@pytest.mark.parametrize("args", [
    ["sql", "select run_name, run_id from runs order by run_name", "-F", "json"],
    ["runs", "-F", "csv"],
    ["keys", "--like", "reward", "-F", "json"],
    ["trace", RUN],
], ids=lambda a: a[0])
def test_dash_prints_what_no_output_prints(shared_demo_store: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           args: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    base = ["--store", str(shared_demo_store), *args]
    plain = CliRunner().invoke(main, base)
    dashed = CliRunner().invoke(main, [*base, "-o", "-"])
    assert plain.exit_code == 0, plain.output
    assert dashed.exit_code == 0, dashed.output
    assert dashed.stdout == plain.stdout
    if args[0] != "runs":
        assert json.loads(dashed.stdout)  # the answer itself, not a note about a file
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("args", [
    ["report"],
    ["plot", "metric", "env/all/reward/total"],
], ids=lambda a: a[0])
def test_dash_is_refused_for_a_page(shared_demo_store: Path, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch, args: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["--store", str(shared_demo_store), *args, "-o", "-"])
    assert out.exit_code == 2, out.output
    assert "give a file name" in out.output
    assert os.listdir(tmp_path) == []
