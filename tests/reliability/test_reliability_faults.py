"""Faults of the store itself: a full disk, a read-only store, damaged files. Each gives a clear
`Error:` that names the file and says what to do, never a traceback, and loses nothing that was
committed; `runstore repair` then mends the store and the next ingest completes it.

* Full disk: the store on a 640 KB tmpfs (as root; otherwise skipped) and, everywhere, a
  simulated ENOSPC from the Delta writer. The failed ingest says the disk is full; the store
  still answers with everything committed before; with space again, an ingest completes.
* A store directory that cannot be written (a read-only bind mount as root; chmod otherwise):
  ingest, compact and repair refuse, queries still work.
* Damage, one kind per case: a live Parquet file deleted or overwritten with garbage, a Delta
  log entry corrupted or deleted, the newest manifest corrupted or deleted, every manifest
  deleted, the ledger deleted or corrupted. Queries and writes that meet the damage refuse
  with the file's name and the next step; `runstore repair` mends the store; the tables the
  damage did not touch keep every row throughout; the next ingest restores the oracle's counts.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest

import oracle
import runstore
import storekit
from runstore import demo
from runstore.storage.manifest import MANIFESTS, Manifest, manifest_paths, publish_manifest, read_manifest
from runstore.storage import writer as writer_mod
from conftest import copy_store
from storekit import TABLES, assert_clear_error, cli, counts, python_m


def want_counts(tree: Path) -> dict[str, int]:
    return oracle.expected_counts_of(tree, TABLES)


def assert_holds_both(store_path: Path, committed: dict[str, int], tree: Path) -> None:
    """The store holds the rows committed before plus every row of `tree`, and each Delta
    log matches the snapshot (the ingest that failed left nothing half-written behind)."""
    added = want_counts(tree)
    assert counts(store_path) == {t: committed[t] + added[t] for t in TABLES}
    storekit.delta_matches_manifest(store_path)


@contextmanager
def mounted(*commands: list[str], target: Path) -> Iterator[None]:
    """Run mount commands (root only); unmount `target` afterwards. Skips when mounting is not
    possible here (not root, no CAP_SYS_ADMIN)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting needs root")
    for cmd in commands:
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            subprocess.run(["umount", str(target)], capture_output=True)
            pytest.skip(f"cannot mount here: {' '.join(cmd)}: {p.stderr.strip()}")
    try:
        yield
    finally:
        p = subprocess.run(["umount", str(target)], capture_output=True, text=True)
        if p.returncode != 0:
            subprocess.run(["umount", "-l", str(target)], capture_output=True)


# ---------------------------------------------------------------------------------------------
# A full disk


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("full") / "runs"
    demo.generate_tree(root, demo.default_specs(), seed=9)
    return root


@pytest.mark.slow
def test_full_disk_tmpfs(_small_template: Path, big_tree: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    with mounted(["mount", "-t", "tmpfs", "-o", "size=640k", "tmpfs", str(store)], target=store):
        p = python_m(store, "ingest", "-q", str(_small_template))
        assert p.returncode == 0, p.stderr
        committed = counts(store)
        assert committed == want_counts(_small_template)

        p = python_m(store, "ingest", "-q", str(big_tree))
        assert p.returncode == 6
        assert_clear_error(p.stderr, "the disk holding the store is full", str(store),
                           "nothing already committed is lost")
        # The store answers, with everything committed before the disk filled up.
        p = python_m(store, "sql", "select count(*) as n from metrics_raw", "-F", "csv")
        assert p.returncode == 0, p.stderr
        assert p.stdout.split() == ["n", str(committed["metrics_raw"])]
        assert counts(store) == committed

        # A repair while the disk is still full may fail for want of room, but leaves the
        # store as it found it: healthy (a probe saw it move a table's log aside and fail to
        # write the new one, leaving a store every writer refused).
        p = python_m(store, "repair")
        assert p.returncode in (0, 6), p.stderr
        p = python_m(store, "repair", "--check")
        assert p.returncode == 0 and "the store is healthy" in p.stdout, p.stdout + p.stderr
        assert counts(store) == committed

        # With room again, the next ingest rolls back the half-written part and completes.
        subprocess.run(["mount", "-o", "remount,size=64m", str(store)], check=True)
        p = python_m(store, "ingest", "-q", str(big_tree))
        assert p.returncode == 0, p.stderr
        assert_holds_both(store, committed, big_tree)


def test_full_disk_simulated(small_tree: Path, big_tree: Path, tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    import deltalake

    store = tmp_path / "store"
    runstore.open(store).ingest([small_tree])
    committed = counts(store)
    calls = {"n": 0}
    real = deltalake.write_deltalake

    def full_after_two(*args, **kwargs):  # a few tables get written, then the disk is full
        calls["n"] += 1
        if calls["n"] > 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*args, **kwargs)

    monkeypatch.setattr(deltalake, "write_deltalake", full_after_two)
    result = cli(store, "ingest", "-q", str(big_tree))
    assert result.exit_code == 6
    assert_clear_error(result.stderr, "the disk holding the store is full", str(store / "tables"))
    assert counts(store) == committed
    monkeypatch.setattr(deltalake, "write_deltalake", real)
    result = cli(store, "ingest", "-q", str(big_tree))
    assert result.exit_code == 0, result.stderr
    assert_holds_both(store, committed, big_tree)


def test_full_disk_while_publishing(small_tree: Path, big_tree: Path, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills up at the last step (the manifest): still nothing half-published."""
    store = tmp_path / "store"
    runstore.open(store).ingest([small_tree])
    committed = counts(store)
    real = publish_manifest

    def full(root: Path, m: Manifest) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(writer_mod, "publish_manifest", full)
    result = cli(store, "ingest", "-q", str(big_tree))
    assert result.exit_code == 6
    assert_clear_error(result.stderr, "the disk holding the store is full", "manifests")
    assert counts(store) == committed
    monkeypatch.setattr(writer_mod, "publish_manifest", real)
    assert cli(store, "ingest", "-q", str(big_tree)).exit_code == 0
    assert_holds_both(store, committed, big_tree)


# ---------------------------------------------------------------------------------------------
# A store that cannot be written


def test_read_only_store(small_tree: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    runstore.open(store).ingest([small_tree])
    committed = counts(store)
    with open(small_tree / "a" / "rl_flat" / "metrics.jsonl", "a") as f:
        f.write('{"step": 99, "x": 1}\n')
    with mounted(["mount", "--bind", str(store), str(store)],
                 ["mount", "-o", "remount,ro,bind", str(store)], target=store):
        for args in (["ingest", str(small_tree)], ["compact"], ["repair"]):
            p = python_m(store, *args)
            assert p.returncode == 6, (args, p.stderr)
            assert_clear_error(p.stderr, "cannot write the store", str(store),
                               "Read-only file system")
        assert counts(store) == committed  # reading needs no write access
    assert cli(store, "ingest", "-q", str(small_tree)).exit_code == 0
    assert counts(store)["metrics_raw"] == committed["metrics_raw"] + 1


# ---------------------------------------------------------------------------------------------
# Damaged files

Damage = Callable[[Path, Manifest], str]


def delete_parquet(store: Path, m: Manifest) -> str:
    rel = m.tables["metrics_raw"]["files"][0]
    (store / rel).unlink()
    return rel


def corrupt_parquet(store: Path, m: Manifest) -> str:
    rel = m.tables["spans"]["files"][0]
    data = (store / rel).read_bytes()
    (store / rel).write_bytes(data[: len(data) // 2])  # cut: the footer is gone
    return rel


def corrupt_delta_log(store: Path, m: Manifest) -> str:
    log = sorted((store / "tables" / "checkpoints" / "_delta_log").glob("*.json"))[-1]
    log.write_text('{"add": {"path": "no')
    return "tables/checkpoints"


def delete_delta_log_entry(store: Path, m: Manifest) -> str:
    sorted((store / "tables" / "trajectories" / "_delta_log").glob("*.json"))[-1].unlink()
    return "tables/trajectories"


def corrupt_manifest(store: Path, m: Manifest) -> str:
    path = manifest_paths(store)[-1][1]
    path.write_text('{"seq": ')
    return path.name


def delete_manifests(store: Path, m: Manifest) -> str:
    shutil.rmtree(store / MANIFESTS)
    return MANIFESTS


def delete_ledger(store: Path, m: Manifest) -> str:
    assert m.ledger
    (store / m.ledger).unlink()
    return m.ledger


def corrupt_ledger(store: Path, m: Manifest) -> str:
    assert m.ledger
    (store / m.ledger).write_bytes(b"PAR1 not a parquet file")
    return m.ledger


# damage -> (which of `runstore sql`, `ingest`, `compact` refuse; tables whose rows the damage
# may take (every other table must keep all its rows); what repair says it did)
DAMAGES: dict[str, tuple[Damage, set[str], set[str], str]] = {
    "delete_parquet": (delete_parquet, {"sql", "compact"}, {"metrics_raw"}, "dropped"),
    "corrupt_parquet": (corrupt_parquet, {"sql", "compact"}, {"spans"}, "dropped"),
    "corrupt_delta_log": (corrupt_delta_log, {"ingest", "compact"}, set(),
                          "rebuilt its Delta log"),
    "delete_delta_log_entry": (delete_delta_log_entry, {"ingest", "compact"}, set(),
                               "rebuilt its Delta log"),
    "corrupt_manifest": (corrupt_manifest, {"sql", "ingest", "compact"}, set(TABLES),
                         "set aside the unreadable"),
    "delete_manifests": (delete_manifests, {"sql", "ingest", "compact"}, set(),
                         "rebuilt one from the Delta"),
    "delete_ledger": (delete_ledger, {"ingest"}, set(), "rebuilt the ingest ledger"),
    "corrupt_ledger": (corrupt_ledger, {"ingest"}, set(), "rebuilt the ingest ledger"),
}


@pytest.mark.parametrize("case", sorted(DAMAGES))
def test_damaged_store(case: str, _small_template: Path, shared_small_store: Path,
                       tmp_path: Path) -> None:
    damage, refusing, may_lose, repaired = DAMAGES[case]
    tree = _small_template
    store = copy_store(shared_small_store, tmp_path / "store")  # the tree, ingested
    runstore.open(store).set_setting("kl_threshold", 0.02)  # a second snapshot to fall back to
    before = counts(store)
    assert before == want_counts(tree)
    m = read_manifest(store)
    assert m is not None
    named = damage(store, m)

    # Readers of the damage: refused with the file's name and the next step, or unaffected.
    # (A connection opens only the tables a query reads, so the query reads every table.)
    every = " union all ".join(f"select count(*) as n from {t}" for t in TABLES)
    result = cli(store, "sql", every, "-F", "csv")
    if "sql" in refusing:
        assert result.exit_code == 3
        assert_clear_error(result.stderr, named, "runstore repair")
    else:
        assert result.exit_code == 0, result.stderr
        assert counts(store) == before
    if may_lose and may_lose != set(TABLES):  # a damaged data file: other tables still answer
        result = cli(store, "sql", "select count(*) as n from runs", "-F", "csv")
        assert result.exit_code == 0, result.stderr
        assert result.stdout == f"n\n{before['runs']}\n"

    # Writers that meet the damage refuse too (an ingest with nothing new to read meets a
    # damaged data file only when it has to rewrite it).
    result = cli(store, "ingest", "-q", str(tree))
    if "ingest" in refusing:
        assert result.exit_code == 3
        assert_clear_error(result.stderr, named, "runstore repair")
    else:
        assert result.exit_code == 0, result.stderr
    result = cli(store, "compact")
    if "compact" in refusing:
        assert result.exit_code == 3
        assert_clear_error(result.stderr, "runstore repair")
    else:
        assert result.exit_code == 0, result.stderr

    # Repair: says what it did, and the store answers again, every untouched table whole.
    result = cli(store, "repair")
    assert result.exit_code == 0, result.stderr
    assert repaired in result.stdout and result.stdout.rstrip().splitlines()[-1].startswith(
        "repaired (snapshot ")
    after = counts(store)
    for t in TABLES:
        if t not in may_lose:
            assert after[t] == before[t], t
    assert "repaired" not in cli(store, "repair").stdout  # once is enough

    # The next ingest re-reads what was lost: the oracle's counts again, once.
    result = cli(store, "ingest", "-q", str(tree))
    assert result.exit_code == 0, result.stderr
    assert counts(store) == before
    storekit.delta_matches_manifest(store)
    again = runstore.open(store).ingest([tree])
    assert not any(again.rows_added.values()) and again.snapshots == 0
    assert cli(store, "compact").exit_code == 0
    assert counts(store) == before


def test_damage_reported_by_a_real_process(_small_template: Path, shared_small_store: Path,
                                           tmp_path: Path) -> None:
    """The same messages from `python -m runstore`: no traceback on stderr, whatever
    $RUST_BACKTRACE says (deltalake appends a Rust backtrace to its errors when it is set)."""
    store = copy_store(shared_small_store, tmp_path / "store")  # _small_template, ingested
    m = read_manifest(store)
    assert m is not None
    named = delete_parquet(store, m)
    corrupt_delta_log(store, m)
    env = {**os.environ, "RUST_BACKTRACE": "1"}
    for args in (["sql", "select count(*) from metrics_raw"], ["ingest", str(_small_template)]):
        p = subprocess.run([sys.executable, "-m", "runstore", "--store", str(store), *args],
                           capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 3
        assert_clear_error(p.stderr, "runstore repair")
        assert "<unknown>" not in p.stderr and "pthread" not in p.stderr
    p = python_m(store, "repair")
    assert p.returncode == 0 and named in p.stdout, p.stderr
    assert (store / "_runstore" / "quarantine").is_dir()
    assert python_m(store, "ingest", "-q", str(_small_template)).returncode == 0
    assert counts(store) == want_counts(_small_template)
