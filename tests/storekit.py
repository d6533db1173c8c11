"""Helpers shared by the store-level reliability tests: row digests, CLI calls, clean-error
checks, and running a command that pauses at a test hook (`crashpoints.pause_point`) to kill it.

What a store holds is read back through `runstore.open(...).arrow(...)`; every expectation
built from it is compared with an independent source (the oracle, or the store before).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import oracle
import runstore
from runstore.cli import main
from runstore.storage.lock import LOCK

TABLES = ("runs", "config", "metrics_raw", "checkpoints", "trajectories", "rollout_steps",
          "conversations", "messages", "spans", "trace_slices", "samples", "capture_events",
          "run_logs", "eval_runs", "eval_results", "eval_trajectories")


DAY = 24 * 3600


def set_old_mtime(path: Path, age: float = DAY) -> None:
    t = time.time() - age
    os.utime(path, (t, t))


def age_tree(root: Path) -> None:
    """Make every file look a day old: its runs are `idle` from the first ingest on (files
    written by the test would be `running` until the macro `running_until` says, then turn
    `idle`, and an ingest after that rewrites the runs' rows)."""
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            set_old_mtime(p)


def counts(store_path: Path) -> dict[str, int]:
    store = runstore.open(store_path)
    q = " union all ".join(f"select '{t}' as t, count(*) as n from {t}" for t in TABLES)
    return {r["t"]: r["n"] for r in store.arrow(q).to_pylist()}


def digest(store_path: Path, tables: tuple[str, ...] = TABLES) -> dict[str, list[str]]:
    """Every row of every table (sorted, as text; `ingested_at` left out, since a re-read
    source rewrites it), for before/after equality.

    A query reads nothing but the snapshot's files (DuckDB's sandbox confines it to them), so
    a local store whose files are all as they were at the last digest of the same path
    (`store_files`) holds the same rows: that digest is given again (a copy) instead of
    reading every table once more. The crash and shortcut tests take a digest after every
    step, and many steps change nothing."""
    local = Path(store_path).is_dir()  # an s3:// store is read every time
    files = store_files(Path(store_path)) if local else None
    key = (str(store_path), tuple(tables))
    seen = _DIGESTS.get(key)
    if seen is not None and files is not None and seen[0] == files:
        return {t: list(rows) for t, rows in seen[1].items()}
    store = runstore.open(store_path)
    out = {}
    for t in tables:
        # One query per table: a second one for the column names alone cost as much again
        # (digests run after every step of the crash and shortcut tests).
        rows = store.arrow(f"select * from {t}")
        if "ingested_at" in rows.column_names:
            rows = rows.drop_columns(["ingested_at"])
        out[t] = sorted(repr(sorted(r.items())) for r in rows.to_pylist())
    # Kept only when no writer changed the store while it was read.
    if files is not None and store_files(Path(store_path)) == files:
        _DIGESTS.pop(key, None)
        _DIGESTS[key] = (files, {t: list(rows) for t, rows in out.items()})
        while len(_DIGESTS) > 8:  # the oldest go (a test's stores are digested together)
            _DIGESTS.pop(next(iter(_DIGESTS)))
    return out


def store_files(store_path: Path) -> dict[str, tuple[str, int, int]]:
    """`oracle.fingerprint` of a store (each file's sha256, size and mtime), but for its lock
    file, which every writer rewrites, even one that publishes nothing, and no query reads."""
    files = oracle.fingerprint(store_path)
    files.pop(LOCK, None)
    return files


def delta_matches_manifest(store_path: Path) -> None:
    """Every Delta table of the store's latest snapshot, opened afresh, is at the version and
    has the files the manifest lists (the writer records them from the table object its
    commits moved, not from a fresh open, and a failed command leaves no commit behind)."""
    from deltalake import DeltaTable

    from runstore.storage.location import location
    from runstore.storage.manifest import read_manifest

    m = read_manifest(store_path)
    assert m is not None
    for name, entry in m.tables.items():
        dt = DeltaTable(str(store_path / "tables" / name))
        live = location(store_path).relative_files(dt.file_uris())
        assert sorted(live) == sorted(entry["files"]), name
        assert dt.version() == entry["version"], name


# (store path, tables) -> (the store's files, the digest read from them); newest last.
_DIGESTS: dict[tuple[str, tuple[str, ...]], tuple[dict, dict[str, list[str]]]] = {}


def cli(store: Path | runstore.Store | None, *args: str, catch_exceptions: bool = False,
        **kw: Any) -> Result:
    """`runstore [--store STORE] ARGS` in this process, through click's CliRunner (the one
    wrapper every test uses; `input=`, `env=` pass through). An exception the command did not
    turn into an error is raised, unless `catch_exceptions=True` (for tests that look at it)."""
    if isinstance(store, runstore.Store):
        store = store.path
    base = ["--store", str(store)] if store is not None else []
    return CliRunner().invoke(main, [*base, *args], catch_exceptions=catch_exceptions, **kw)


def python_m(store: Path, *args: str, env: dict[str, str] | None = None,
             timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runstore", "--store", str(store), *args],
                          capture_output=True, text=True, timeout=timeout, env=env)


def assert_clear_error(stderr: str, *needles: str) -> None:
    """One `Error: ...` message that holds every needle; no Python traceback."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("Error: ")]
    assert len(lines) == 1, stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def kill_at(cmd: list[str], env: dict[str, str], point: str, timeout: float = 120) -> bool:
    """Run `cmd` pausing at `point` ("phase:N", see crashpoints.pause_point), SIGKILL it there; True
    if it got there, False if it finished first (it must then have succeeded)."""
    env = {**env, "RUNSTORE_TEST_PAUSE": point}
    with subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stderr is not None
        ready, _, _ = select.select([proc.stderr], [], [], timeout)
        line = proc.stderr.readline() if ready else ""
        if line.strip() == f"paused at {point}":
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        if not ready:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            pytest.fail(f"{cmd} neither paused at {point} nor finished in {timeout} s")
        rest = proc.stderr.read()
        proc.wait()
    assert proc.returncode == 0, line + rest
    return False


def points_reached(cmd: list[str], env: dict[str, str], log: Path) -> dict[str, int]:
    """Run `cmd` to the end, logging every hook it reaches; how many times each."""
    log.unlink(missing_ok=True)
    p = subprocess.run(cmd, env={**env, "RUNSTORE_TEST_POINTS": str(log)}, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    reached: dict[str, int] = {}
    for name in (log.read_text().split() if log.exists() else []):
        reached[name] = reached.get(name, 0) + 1
    return reached


def flip_silently(path: Path, column: str | None = None) -> int:
    """Change two bytes inside a data page of a Parquet file so that it still decodes, to other
    values (what bit rot or a stray write does unnoticed); the offset changed. The position is
    searched: the first one past each column chunk's middle whose change decodes differently."""
    import pyarrow.parquet as pq

    original = pq.read_table(path)
    data = path.read_bytes()
    md = pq.ParquetFile(path).metadata
    rg = md.row_group(0)
    for c in range(rg.num_columns):
        chunk = rg.column(c)
        if column is not None and chunk.path_in_schema != column:
            continue
        start, end = chunk.data_page_offset, chunk.data_page_offset + chunk.total_compressed_size
        if chunk.has_dictionary_page and chunk.dictionary_page_offset is not None:
            end = chunk.dictionary_page_offset + chunk.total_compressed_size
        for off in range(start + (end - start) // 2, end - 2):
            changed = bytearray(data)
            changed[off] ^= 0x5A
            changed[off + 1] ^= 0xA5
            path.write_bytes(changed)
            try:
                if not pq.read_table(path).equals(original):
                    return off
            except Exception:
                pass
    path.write_bytes(data)
    raise AssertionError(f"no silent change found in {path}")
