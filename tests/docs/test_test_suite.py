"""The test suite's own promise about what it shares (docs/architecture.md, "Tests"): the trees
and stores conftest.py builds once per run are read-only, and a test that writes into one fails
the run, naming what changed.

Checked by a real inner pytest run (a child process with tests/conftest.py as its plugin) over
two tests: one reads the shared small store, the other changes a setting in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

INNER = '''
import runstore


def test_reads(shared_small_store):
    assert runstore.open(shared_small_store).sql("select count(*) as n from runs")["n"][0] == 3


def test_writes(shared_small_store):
    runstore.open(shared_small_store).set_setting("kl_threshold", 0.5)
'''


def test_a_test_that_writes_into_a_shared_store_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(INNER)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(TESTS.parent),
                                         os.environ.get("PYTHONPATH", "")])
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest",
                        "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "temp"),
                        "test_inner.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "2 passed, 1 error" in p.stdout, p.stdout
    assert "ERROR at teardown of test_writes" in p.stdout, p.stdout
    assert "the shared, read-only" in p.stdout and "small-store/store changed" in p.stdout
    assert "_runstore/manifests" in p.stdout, p.stdout
