"""`keys` stays exact while a store is ingested in steps: appends, a pre-0.6 resume logging
steps again, a 0.6 resume (truncated file plus pre_resume copy), a rewrite of the whole file,
string and NaN values, step-less rows, and a run that drops a key. After every ingest,
`store.keys()` (read from the `metric_keys` summary) must equal the oracle's answer computed
from the metrics files alone.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import analysis_oracle as ao
import runstore
from runstore import demo
from runstore.demo import RunSpec


def as_dict(df) -> dict[str, tuple]:  # type: ignore[no-untyped-def]
    return {r[0]: tuple(r[1:]) for r in df.rows()}


def append(path: Path, rows: list[dict]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, allow_nan=True) + "\n")


def check(store: runstore.Store, root: Path) -> None:
    assert as_dict(store.keys()) == ao.keys(root)
    for name in ao.runs(root):
        assert as_dict(store.keys(runs=[name])) == ao.keys(root, {name}), name


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    flat = dict(layout="flat", logtree=False, rollouts_every=0, eval_every=5, save_every=5)
    demo.generate_tree(root, [
        RunSpec("a/grow", steps=12, stepless_rows=2, **flat),
        RunSpec("a/dup", steps=12, resumed_at=5, resume_style="duplicate", **flat),
        RunSpec("a/trunc", steps=12, resumed_at=5, resume_style="truncate", **flat),
        RunSpec("b/dpo", kind="dpo", steps=8, logtree=False, rollouts_every=0),
    ], seed=3)
    return root


def test_keys_stay_exact_through_incremental_ingests(tmp_path: Path, tree: Path) -> None:
    store = runstore.open(tmp_path / "store")
    store.ingest([tree])
    check(store, tree)
    grow, dup = tree / "a" / "grow" / "metrics.jsonl", tree / "a" / "dup" / "metrics.jsonl"

    # Appends continuing the steps, one of them with a string, NaN and Infinity.
    demo.append_steps(grow.parent, 3, seed=1)
    append(grow, [{"step": 15, "env/all/reward/total": float("nan"), "note": "hello",
                   "time/total": float("inf")}])
    store.ingest([tree])
    check(store, tree)

    # A pre-0.6 resume in the middle of a watch: steps 8.. logged again (and a new key
    # only the second writes have), read as an append.
    append(dup, [{"step": s, "env/all/reward/total": 0.5, "late/key": s} for s in (8, 9, 10)])
    store.ingest([tree])
    check(store, tree)
    got = as_dict(store.keys(runs=["a/dup"]))
    assert got["late/key"] == (1, 3, 8, 10, "number")

    # Appending earlier steps only (step 0 again), then a step-less summary row.
    append(dup, [{"step": 0, "env/all/reward/total": 1.0}, {"summary/best": 0.9}])
    store.ingest([tree])
    check(store, tree)

    # The whole file rewritten shorter (a re-read): the old chunks' rows go with it.
    text = grow.read_text().splitlines(keepends=True)
    grow.write_text("".join(text[:4]))
    store.ingest([tree])
    check(store, tree)
    assert "note" not in as_dict(store.keys(runs=["a/grow"]))

    # A run disappears: its keys stay (the store keeps a missing run's rows), as the
    # oracle over a tree that still has it says.
    shutil.copytree(tree / "b", tmp_path / "b_copy")
    shutil.rmtree(tree / "b")
    store.ingest([tree])
    shutil.copytree(tmp_path / "b_copy", tree / "b")
    check(store, tree)


def test_keys_are_fast_paths_of_the_summary(tmp_path: Path, tree: Path) -> None:
    """The answer reads metric_keys (a handful of rows per key) and recounts from
    metrics_raw only the (file, key) pairs a resume made inexact."""
    store = runstore.open(tmp_path / "store")
    store.ingest([tree])
    rows = store.arrow("select * from metric_keys").to_pylist()
    keys_of_files = {(r["source_id"], r["key"]) for r in rows}
    assert len(rows) == len(keys_of_files)  # one read per file: one row per (file, key)
    assert all(r["steps_exact"] for r in rows)  # read whole, the duplicate resume is exact
    append(tree / "a" / "dup" / "metrics.jsonl", [{"step": 2, "env/all/reward/total": 0.1}])
    store.ingest([tree])
    inexact = store.arrow("select key from metric_keys where not steps_exact").to_pylist()
    assert inexact == [{"key": "env/all/reward/total"}]
    check(store, tree)
