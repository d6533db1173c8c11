"""A source file that is no longer there keeps its rows, and the ingest says so once.

A run's file deleted (or turned into a directory) after an ingest: nothing stored is lost (the
store holds what it held), the next ingest warns naming the file and how to drop its rows,
and later ingests do not repeat it, even when another file of the run changed. A file that
comes back and goes again is warned of again.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from storekit import age_tree, cli, digest, set_old_mtime


def _warnings(out: str, name: str) -> list[str]:
    return [line for line in out.splitlines() if name in line and "no longer" in line]


def _ingest(store: Path, tree: Path) -> str:
    res = cli(store, "ingest", str(tree))
    assert res.exit_code == 0, res.output
    return res.output


def test_a_deleted_file_keeps_its_rows_and_is_warned_of_once(small_tree: Path,
                                                             tmp_path: Path) -> None:
    store = tmp_path / "store"
    age_tree(small_tree)
    _ingest(store, small_tree)
    spans = sorted(small_tree.rglob("timing_spans.jsonl"))
    assert spans, "the small tree has timing spans"
    gone = spans[0]
    run_dir = gone.parent
    name = f"{run_dir.name}/timing_spans.jsonl"
    before = digest(store)
    kept = shutil.copy(gone, tmp_path / "kept.jsonl")
    gone.unlink()

    out = _ingest(store, small_tree)
    assert len(_warnings(out, name)) == 1, out
    assert "runstore forget" in _warnings(out, name)[0]
    assert digest(store) == before  # nothing stored is lost

    assert _warnings(_ingest(store, small_tree), name) == []  # said once
    with open(run_dir / "metrics.jsonl", "a") as f:  # the full path, not the shortcut
        f.write('{"step": 100000, "extra/x": 1.0}\n')
    set_old_mtime(run_dir / "metrics.jsonl")
    out = _ingest(store, small_tree)
    assert "1 updated" in out, out
    assert _warnings(out, name) == []

    shutil.copy(kept, gone)  # back: read again (a new file to the ledger), nothing to say
    set_old_mtime(gone)
    assert _warnings(_ingest(store, small_tree), name) == []
    gone.unlink()
    gone.mkdir()  # a directory where the file was is not that file
    assert len(_warnings(_ingest(store, small_tree), name)) == 1
