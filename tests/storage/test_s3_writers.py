"""Writing commands killed (SIGKILL) on a store on S3, against the moto endpoint of test_s3.

tests/reliability/test_crash.py kills every writing command at every phase on local disk; on
S3 a file appears by a create-once put and the lock is a lease, so what a killed writer leaves
differs. What must hold, as on disk: after a kill at a phase, the same command run again
succeeds and the store ends with exactly the rows of the same command uninterrupted on a copy
of the store (`storekit.digest`, every table, summaries included).

The store before the forget, and the same store after an uninterrupted forget, are made once
for the module (`forget_reference`); each phase kills a forget on its own copy of the former.
An ingest into a new store, whose tables S3 creates and writes eight at once, is killed at
phases of both steps, each into a prefix of its own, and compared with that store before the
forget (one uninterrupted ingest of the same tree).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import runstore
import storekit
from runstore.errors import StoreNotFound
from test_s3 import endpoint, new_bucket, s3fs_client  # noqa: F401 - fixtures: a moto S3 endpoint

# One worker runs the whole module: one moto server, and the reference made once.
pytestmark = pytest.mark.xdist_group("s3_writers")

EVERY = storekit.TABLES + ("metric_keys", "metric_steps", "metric_kl")
# The killed writer's lease expires at once, so the command run again need not wait it out.
ENV = {"RUNSTORE_LEASE_SECONDS": "1"}
FORGET = ("forget", "b/c/sl")


def copy_prefix(src: str, dst: str) -> str:
    fs = s3fs_client()
    fs.copy(src[5:], dst[5:], recursive=True)
    return dst


def runstore_cmd(uri: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "runstore", "--store", uri, *args]


def wait_out_the_lease(uri: str) -> None:
    """Until the store's lease (`_runstore/lock`), if there is one, is past its expiry."""
    fs = s3fs_client()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            expires = json.loads(fs.cat(f"{uri[5:]}/_runstore/lock"))["expires"]
        except FileNotFoundError:
            return
        if expires < time.time():
            return
        time.sleep(min(0.1, expires - time.time() + 0.01))
    pytest.fail(f"the lease of {uri} did not expire")


@pytest.fixture(scope="module")
def forget_reference(_small_template: Path, endpoint: dict[str, str],  # noqa: F811
                     tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The small tree (files a day old: its runs stay `idle` however long the module runs),
    a store of it on S3 (`base`) with its digest (`before`), and the digest of a copy of that
    store after an uninterrupted `runstore forget` process (`want`)."""
    tree = tmp_path_factory.mktemp("s3_writers") / "small"
    shutil.copytree(_small_template, tree, symlinks=True)
    storekit.age_tree(tree)
    bucket = new_bucket(endpoint)
    base = f"s3://{bucket}/base"
    runstore.open(base).ingest([tree])
    ref = copy_prefix(base, f"s3://{bucket}/ref")
    done = subprocess.run(runstore_cmd(ref, *FORGET), env={**os.environ, **ENV},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    want, before = storekit.digest(ref, EVERY), storekit.digest(base, EVERY)
    assert want != before
    return {"tree": tree, "bucket": bucket, "base": base, "want": want, "before": before}


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["locked", "forget", "write:1", "ledger", "publish"])
def test_forget_killed_at_a_phase_on_s3_is_finished_by_running_it_again(
        phase: str, forget_reference: dict[str, Any]) -> None:
    ref = forget_reference
    victim = copy_prefix(ref["base"], f"s3://{ref['bucket']}/victim-{phase.replace(':', '-')}")
    point = phase if ":" in phase else f"{phase}:1"
    assert storekit.kill_at(runstore_cmd(victim, *FORGET), {**os.environ, **ENV}, point), point
    wait_out_the_lease(victim)
    # The command again, in this process (a kill needs a process of its own; this does not).
    again = storekit.cli(victim, *FORGET, env=ENV)
    if again.exit_code == 2:  # killed after publishing: the run is forgotten already
        assert "no run is named or matches" in again.stderr
    else:
        assert again.exit_code == 0, again.output
    assert storekit.digest(victim, EVERY) == ref["want"]
    assert runstore.open(victim).ingest([ref["tree"]]).runs_new == 1  # the ledger forgot it too
    assert storekit.digest(victim) == {t: ref["before"][t] for t in storekit.TABLES}


@pytest.mark.slow
@pytest.mark.parametrize(("phase", "runs"), [("migrate:1", None), ("migrate:12", None),
                                             ("publish:1", 0), ("write:1", 0), ("write:9", 0),
                                             ("publish:2", 3)])
def test_a_new_store_ingest_killed_on_s3_is_finished_by_running_it_again(
        phase: str, runs: int | None, forget_reference: dict[str, Any]) -> None:
    """An ingest into a new store on S3 creates its tables eight at once, publishes the empty
    store, then writes the tables eight at once (`requests_at_once`). Killed while some tables
    of either step are written and others not, the store is no store yet (before its first
    snapshot: `runs` None) or answers as its last snapshot (0 runs, then the tree's 3), and
    the ingest run again ends with exactly the rows of an uninterrupted one (the forget
    reference's `base`, a store of the same tree made by one ingest: its digest `before`)."""
    ref = forget_reference
    victim = f"s3://{ref['bucket']}/new-{phase.replace(':', '-')}"
    assert storekit.kill_at(runstore_cmd(victim, "ingest", "-q", str(ref["tree"])),
                            {**os.environ, **ENV}, phase), phase
    try:
        answered = runstore.open(victim).sql("select count(*) as n from runs").item()
    except StoreNotFound:
        answered = None
    assert answered == runs
    wait_out_the_lease(victim)
    again = storekit.cli(victim, "ingest", "-q", str(ref["tree"]), env=ENV)
    assert again.exit_code == 0, again.output
    assert storekit.digest(victim, EVERY) == ref["before"]
