"""Writing commands killed (SIGKILL) on a store on S3, against the moto endpoint of test_s3.

tests/reliability/test_crash.py kills every writing command at every phase on local disk; on
S3 a file appears by a create-once put and the lock is a lease, so what a killed writer leaves
differs. What must hold, as on disk: after a kill at a phase, the same command run again
succeeds and the store ends with exactly the rows of the same command uninterrupted on a copy
of the store (`storekit.digest`, every table, summaries included).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import runstore
import storekit
from test_s3 import bucket, endpoint, s3fs_client  # noqa: F401 - fixtures: a moto S3 endpoint

EVERY = storekit.TABLES + ("metric_keys", "metric_steps", "metric_kl")
# The killed writer's lease expires at once, so the command run again need not wait it out.
ENV = {"RUNSTORE_LEASE_SECONDS": "1"}


def copy_prefix(src: str, dst: str) -> str:
    fs = s3fs_client()
    fs.copy(src[5:], dst[5:], recursive=True)
    return dst


def runstore_cmd(uri: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "runstore", "--store", uri, *args]


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["locked", "forget", "write:1", "ledger", "publish"])
def test_forget_killed_at_a_phase_on_s3_is_finished_by_running_it_again(
        phase: str, small_tree: Path, bucket: str) -> None:  # noqa: F811 - the fixture
    base = f"s3://{bucket}/base"
    runstore.open(base).ingest([small_tree])
    args = ("forget", "b/c/sl")
    env = {**os.environ, **ENV}
    ref = copy_prefix(base, f"s3://{bucket}/ref")
    done = subprocess.run(runstore_cmd(ref, *args), env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    want = storekit.digest(ref, EVERY)
    assert want != storekit.digest(base, EVERY)

    victim = copy_prefix(base, f"s3://{bucket}/victim")
    point = phase if ":" in phase else f"{phase}:1"
    assert storekit.kill_at(runstore_cmd(victim, *args), env, point), point
    time.sleep(1.5)  # the killed writer's lease expires
    again = subprocess.run(runstore_cmd(victim, *args), env=env, capture_output=True, text=True)
    if again.returncode == 2:  # killed after publishing: the run is forgotten already
        assert "no run is named or matches" in again.stderr
    else:
        assert again.returncode == 0, again.stderr
    assert storekit.digest(victim, EVERY) == want
    assert runstore.open(victim).ingest([small_tree]).runs_new == 1  # the ledger forgot it too
    assert storekit.digest(victim) == storekit.digest(base)
