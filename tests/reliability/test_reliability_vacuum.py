"""Compaction and vacuum never delete a file anyone may still read (docs/reliability.md, 3).

A file stops being used when the last manifest listing it is superseded. The tests compute,
from the manifests alone (not from runstore's vacuum code), when each file stopped being listed,
age the manifests' `created_at` to stand for time passing, and check what `runstore compact
--vacuum-hours H` deletes:

* fractional hours count as such (0.99 is not 0);
* `--vacuum-hours 0` deletes only files unlisted for longer than the readers' grace period, and
  every manifest left on disk still answers with the same rows;
* the time a file stopped being listed survives the pruning of old manifests;
* pruning keeps a ledger a kept manifest shares;
* reader processes querying in a loop while compactions (with and without vacuum) run never
  fail and always see whole snapshots;
* a rollback that needs a file that is gone names it and says to run `runstore repair` (it
  used to say "nothing committed was lost").

Kills at every phase of compact are in tests/reliability/test_crash.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import oracle
import runstore
from runstore.query.connect import connect
from runstore.storage.manifest import MANIFESTS, Manifest, manifest_paths, read_manifest
from runstore.storage.vacuum import KEEP_MANIFESTS
from storekit import TABLES, assert_clear_error, cli, counts, digest, python_m

MANY_FILES = {"RUNSTORE_BATCH_ROWS": "300", "RUNSTORE_COMPACT_FILES": "100000"}


def listed(store: Path) -> dict[int, set[str]]:
    """seq -> the files each manifest on disk lists."""
    out = {}
    for seq, path in manifest_paths(store):
        m = json.loads(path.read_text())
        out[seq] = {f for e in m["tables"].values() for f in e["files"]}
    return out


def on_disk(store: Path) -> set[str]:
    found = set()
    for dirpath, dirnames, filenames in os.walk(store / "tables"):
        dirnames[:] = [d for d in dirnames if d != "_delta_log"]
        found.update(os.path.relpath(os.path.join(dirpath, n), store)
                     for n in filenames if n.endswith(".parquet"))
    return found


def age(store: Path, ages: dict[int, float]) -> None:
    """Set each manifest's `created_at` to `ages[seq]` hours ago (the last one given applies
    to every later manifest not named)."""
    now = datetime.now(timezone.utc)
    hours = None
    for seq, path in manifest_paths(store):
        hours = ages.get(seq, hours)
        if hours is None:
            continue
        m = json.loads(path.read_text())
        m["created_at"] = (now - timedelta(hours=hours)).isoformat()
        path.write_text(json.dumps(m))


def unlisted_since(store: Path) -> dict[str, float]:
    """For every file listed by some manifest on disk but not the newest: how many hours ago
    the last manifest listing it was superseded (by the next one's `created_at`)."""
    now = datetime.now(timezone.utc)
    paths = manifest_paths(store)
    docs = [json.loads(p.read_text()) for _, p in paths]
    newest = {f for e in docs[-1]["tables"].values() for f in e["files"]}
    out: dict[str, float] = {}
    for i, m in enumerate(docs[:-1]):
        nxt = docs[i + 1]
        gone = {f for e in m["tables"].values() for f in e["files"]} - {
            f for e in nxt["tables"].values() for f in e["files"]}
        when = datetime.fromisoformat(nxt["created_at"])
        for f in gone - newest:
            out[f] = (now - when).total_seconds() / 3600
    return out


def append_steps(tree: Path, run: str, first: int, n: int) -> None:
    with open(tree / run / "metrics.jsonl", "a") as f:
        for step in range(first, first + n):
            f.write(json.dumps({"step": step, "env/all/reward/total": step / 100,
                                "optim/kl_sample_train_v1": 0.001}) + "\n")


def compacted(tree: Path, store: Path, monkeypatch: pytest.MonkeyPatch) -> runstore.Store:
    """`tree` ingested into `store` in a snapshot per run (several files per table), then
    compacted: the ingest's files are left listed only by the older manifests."""
    for k, v in MANY_FILES.items():
        monkeypatch.setenv(k, v)
    s = runstore.open(store)
    s.ingest([tree])
    s.compact()
    return s


@pytest.fixture
def history(small_tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store whose files were replaced twice: ingests in many small snapshots (many files),
    a compaction, more steps ingested, a second compaction, more steps ingested."""
    store = tmp_path / "store"
    s = compacted(small_tree, store, monkeypatch)
    append_steps(small_tree, "a/rl_flat", 100, 20)
    s.ingest([small_tree])
    s.compact()
    append_steps(small_tree, "a/rl_flat", 200, 20)
    s.ingest([small_tree])
    return store


def snapshot_answers(store: Path, seq: int) -> dict[str, int]:
    """Row counts read through the manifest `seq` itself (as a reader holding it would)."""
    m = Manifest.from_json((store / MANIFESTS / f"{seq:08d}.json").read_text())
    con = connect(store, m)
    try:
        return {t: con.execute(f"select count(*) from {t}").fetchall()[0][0] for t in TABLES}
    finally:
        con.close()


def test_fractional_hours_are_honoured(history: Path, small_tree: Path) -> None:
    store = history
    seqs = sorted(listed(store))
    # Everything happened over the last three hours, the newest half an hour ago.
    age(store, {seqs[0]: 3.0, **{s: 3.0 - 2.5 * i / (len(seqs) - 1) for i, s in enumerate(seqs)}})
    before = digest(store)
    since = unlisted_since(store)
    assert since and any(h > 0.99 for h in since.values())
    assert any(h < 0.99 for h in since.values())  # some were unlisted less than 0.99 h ago
    result = cli(store, "compact", "--vacuum-hours", "0.99")
    assert result.exit_code == 0, result.stderr
    here = on_disk(store)
    for f, hours in since.items():
        assert (f not in here) == (hours > 0.99), (f, hours)
    assert digest(store) == before
    # A smaller number deletes what it covers, and nothing a manifest still lists.
    since = unlisted_since(store)  # the Python API, this time
    report = runstore.open(store).compact(vacuum_hours=0.25).vacuum
    here = on_disk(store)
    for f, hours in since.items():
        assert (f not in here) == (hours > 0.25), (f, hours)
    assert report is not None and report.files_deleted == sum(h > 0.25 for h in since.values())
    assert report.files_deleted > 0
    for files in listed(store).values():
        assert files <= here
    assert digest(store) == before
    assert counts(store) == oracle.expected_counts_of(small_tree, TABLES)


def test_vacuum_zero_removes_only_safe_files(history: Path) -> None:
    store = history
    seqs = sorted(listed(store))
    # Old history, except the newest snapshot, published two minutes ago: files it replaced
    # (and files only it lists) may still be read by a query that started before it.
    age(store, {**{s: 5.0 - 4.0 * i / (len(seqs) - 2) for i, s in enumerate(seqs[:-1])},
                seqs[-1]: 2 / 60})
    before = digest(store)
    since = unlisted_since(store)
    previous = seqs[-1]
    answers = {seq: snapshot_answers(store, seq) for seq in seqs}
    result = cli(store, "compact", "--vacuum-hours", "0")
    assert result.exit_code == 0, result.stderr
    here = on_disk(store)
    grace = 600 / 3600
    # Files of the snapshot just replaced are unlisted "now": all kept.
    for f, hours in since.items():
        assert (f not in here) == (hours > grace), (f, hours)
    assert any(f not in here for f in since)
    left = listed(store)
    assert previous in left
    for seq, files in left.items():
        assert files <= here, seq
        assert snapshot_answers(store, seq) == answers.get(seq, answers[previous]), seq
    assert digest(store) == before
    assert cli(store, "repair", "--check").exit_code == 0
    n = sum(f not in here for f in since)
    assert f"vacuum: deleted {n} data files" in result.stdout


def test_unlisted_time_survives_pruning(small_tree: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Files a compaction replaced two hours ago are deleted by `--vacuum-hours 1` even after
    every manifest that listed them was pruned (KEEP_MANIFESTS) by twenty fresh snapshots."""
    store = tmp_path / "store"
    s = compacted(small_tree, store, monkeypatch)
    seqs = sorted(listed(store))
    age(store, {seqs[0]: 3.0, seqs[-1]: 2.0})
    replaced = set().union(*listed(store).values()) - listed(store)[seqs[-1]]
    assert replaced
    for i in range(KEEP_MANIFESTS + 1):
        s.set_setting("kl_threshold", 0.01 + i / 1000)
    assert min(listed(store)) > seqs[-1]  # every manifest that listed them is gone
    assert replaced <= on_disk(store)
    result = cli(store, "compact", "--vacuum-hours", "1")
    assert result.exit_code == 0, result.stderr
    assert not replaced & on_disk(store)
    assert counts(store) == oracle.expected_counts_of(small_tree, TABLES)


def test_pruning_keeps_a_ledger_a_kept_manifest_shares(small_tree: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    s = runstore.open(store)
    s.ingest([small_tree])
    for i in range(KEEP_MANIFESTS):  # snapshots that keep the ingest's ledger
        s.set_setting("kl_threshold", 0.01 + i / 1000)
    append_steps(small_tree, "a/rl_flat", 100, 3)
    s.ingest([small_tree])  # a new ledger; the oldest manifests are pruned
    for seq, path in manifest_paths(store):
        m = json.loads(path.read_text())
        assert m["ledger"] is None or (store / m["ledger"]).is_file(), seq


def test_rollback_needing_a_missing_file_names_it(small_tree: Path, tmp_path: Path) -> None:
    """A table whose Delta log ran ahead of the snapshot (a writer killed after compacting
    it) must be rolled back to the snapshot's files; when one is gone (deleted by hand, or by
    an older runstore's vacuum), the error names it and the next step, and repair mends it."""
    from deltalake import DeltaTable

    store = tmp_path / "store"
    s = runstore.open(store)
    with pytest.MonkeyPatch.context() as mp:
        for k, v in MANY_FILES.items():
            mp.setenv(k, v)
        s.ingest([small_tree])
    DeltaTable(str(store / "tables" / "metrics_raw")).optimize.compact()  # unpublished
    lost = sorted(read_manifest(store).tables["metrics_raw"]["files"])[0]
    (store / lost).unlink()
    for args in (["ingest", "-q", str(small_tree)], ["compact"]):
        result = cli(store, *args)
        assert result.exit_code == 3
        assert_clear_error(result.stderr, lost, "is missing", "runstore repair")
        assert "Nothing committed was lost" not in result.stderr
    result = cli(store, "repair")
    assert result.exit_code == 0 and lost in result.stdout, result.stderr
    assert cli(store, "ingest", "-q", str(small_tree)).exit_code == 0
    assert counts(store) == oracle.expected_counts_of(small_tree, TABLES)


# ---------------------------------------------------------------------------------------------
# Readers in other processes while compactions run

READER = textwrap.dedent('''
    import json, sys, time, traceback
    from pathlib import Path
    import runstore

    store, out, stop = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    kept = runstore.open(store)  # one long-lived Store (it caches a database per snapshot)
    with open(out, "w") as f:
        while not stop.exists():
            for s in (runstore.open(store), kept):
                try:
                    row = s.arrow("select count(*) as n, sum(value) filter (where "
                                  "isfinite(value)) as total, "
                                  "(select count(*) from spans) as spans from metrics_raw")
                    r = row.to_pylist()[0]
                    f.write(json.dumps({"n": r["n"], "total": r["total"],
                                        "spans": r["spans"]}) + "\\n")
                except Exception as e:
                    f.write(json.dumps({"error": repr(e), "tb": traceback.format_exc()}) + "\\n")
                f.flush()
''')


GRACE_S = 10  # the readers' grace period while these compactions run


def lines_written(outs: list[Path]) -> list[int]:
    return [o.read_bytes().count(b"\n") if o.exists() else 0 for o in outs]


def readers_read(outs: list[Path], readers: list[subprocess.Popen], since: list[int],
                 n: int) -> list[int]:
    """Wait until each reader has written `n` answers more than `since`; how many each has."""
    deadline = time.monotonic() + 120
    while True:
        now = lines_written(outs)
        if all(a - b >= n for a, b in zip(now, since)):
            return now
        assert all(r.poll() is None for r in readers), "a reader stopped"
        assert time.monotonic() < deadline, f"the readers wrote {now} answers in 120 s"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("vacuum", [False, True], ids=["compact", "compact-vacuum"])
def test_readers_during_compaction(vacuum: bool, small_tree: Path, tmp_path: Path,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in MANY_FILES.items():
        monkeypatch.setenv(k, v)
    store = tmp_path / "store"
    s = runstore.open(store)
    s.ingest([small_tree])
    states = {counts(store)["metrics_raw"]}
    reader_py = tmp_path / "reader.py"
    reader_py.write_text(READER)
    stop = tmp_path / "stop"
    outs = [tmp_path / f"reader{i}.jsonl" for i in range(2)]
    env = {**os.environ, "RUNSTORE_READER_GRACE_SECONDS": str(GRACE_S)}
    readers = [subprocess.Popen([sys.executable, str(reader_py), str(store), str(o), str(stop)],
                                env=env) for o in outs]
    outputs: list[str] = []
    try:
        # Waits on what the readers did, not fixed sleeps: both Stores of each reader have
        # answered before the first compaction, and again after each one. Of the answers
        # written after a compaction the first may come from a query begun before it, so three.
        seen = readers_read(outs, readers, [0] * len(outs), 2)
        first_done = None
        for i in range(8):
            if vacuum and i == 7 and first_done is not None:
                # The last vacuum comes after what the first compaction replaced has been
                # unlisted past the grace period, so the vacuums surely delete something.
                time.sleep(max(0.0, first_done + GRACE_S + 1 - time.monotonic()))
            append_steps(small_tree, "a/rl_flat", 100 + 10 * i, 10)
            s.ingest([small_tree])
            states.add(counts(store)["metrics_raw"])
            p = python_m(store, "compact", *(["--vacuum-hours", "0"] if vacuum else []),
                         env=env)
            assert p.returncode == 0, p.stderr
            outputs.append(p.stdout)
            first_done = first_done or time.monotonic()
            seen = readers_read(outs, readers, seen, 3)
    finally:
        stop.touch()
        for r in readers:
            r.wait(timeout=120)
    sums: dict[int, float] = {}
    for o in outs:
        rows = [json.loads(line) for line in o.read_text().splitlines()]
        errors = [r for r in rows if "error" in r]
        assert not errors, errors[0]["tb"]
        assert len(rows) >= 10
        last = 0
        for r in rows:
            assert r["n"] in states and r["n"] >= last, (r, states)
            assert sums.setdefault(r["n"], r["total"]) == pytest.approx(r["total"])
            last = r["n"]
    if vacuum:  # the vacuums really deleted replaced files meanwhile
        assert sum(int(out.split("vacuum: deleted ")[1].split()[0]) for out in outputs) > 0
