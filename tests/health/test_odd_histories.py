"""Health answers for runs with odd histories that the other health tests do not write: runs
that never logged a step (only config.json, an empty metrics.jsonl, rows without `step`).

What each answer says is held to the run files: which runs they are, and that they logged no
step.
"""

from __future__ import annotations

import json
from pathlib import Path

import oracle
import runstore
from storekit import age_tree, cli


def test_a_stale_run_without_steps_says_so(tmp_path: Path) -> None:
    """`stale` fires for runs that never logged a step (a day unchanged, not completed): each
    FIRED line says the run logged no step, instead of a step called `None`."""
    root = tmp_path / "runs"
    for name in ("config_only", "empty", "stepless"):
        (root / name).mkdir(parents=True)
        (root / name / "config.json").write_text("{}")
    (root / "empty" / "metrics.jsonl").write_text("")
    (root / "stepless" / "metrics.jsonl").write_text(
        json.dumps({"optim/kl_sample_train_v1": 0.5}) + "\n")
    age_tree(root)
    stepless = {oracle.run_name(root, r) for r in oracle.run_dirs(root)
                if not oracle.live_metrics(r)}  # (step, key) -> value: no step, no entry
    assert stepless == {"config_only", "empty", "stepless"}
    (tmp_path / "runstore.toml").write_text(
        '[[check.rule]]\ntrend = "stale"\nop = ">"\nvalue = 30\n')
    store = tmp_path / "store"
    got = cli(store, "ingest", str(root), "--check", "--quiet")
    assert got.exit_code == 0, got.output
    lines = got.stdout.splitlines()
    assert sorted(line.split(":")[0] for line in lines) == sorted(f"FIRED {n}" for n in stepless)
    for line in lines:
        assert "None" not in line and "no step logged" in line, line
    assert runstore.open(store).runs().height == len(stepless)
