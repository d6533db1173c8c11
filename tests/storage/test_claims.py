"""runstore.storage.claims on local disk, with real processes: one holder per attempt, a dead
holder's claim taken over at once (the kernel drops its lock), a live one's never, a released
attempt followed by the next, work done once. (The same on S3, where an expiry stands in for
the lock: tests/storage/test_s3.py.)"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from runstore.storage.claims import Claims
from runstore.storage.location import location

AREA = "_runstore/notify"
REPO = Path(__file__).resolve().parents[2]


def child(store: Path, body: str) -> subprocess.Popen:
    """A Python process that takes a claim on key `k` of `store`, then runs `body`."""
    code = ("import sys, time, os\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "from runstore.storage.claims import Claims\n"
            "from runstore.storage.location import location\n"
            f"c = Claims(location({str(store)!r}), {AREA!r})\n"
            "taken = c.take('k')\n"
            "print('taken' if taken else 'none', taken.n if taken else 0, flush=True)\n"
            + body)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


def test_take_release_done(tmp_path: Path) -> None:
    c = Claims(location(tmp_path), AREA)
    first = c.take("k", {"what": "x"})
    assert first is not None and first.n == 1
    assert c.take("k") is None  # held (by this process, through another open file)
    first.release()
    second = c.take("k")
    assert second is not None and second.n == 2  # the next attempt, at once
    second.done({"what": "x"})
    assert c.take("k") is None and c.is_done("k")
    assert sorted(p.name for p in (tmp_path / AREA).iterdir()) == ["k.done"]
    assert c.keys() == c.done_keys() == {"k"}
    c.forget(["k"])
    assert c.keys() == set() and c.take("k") is not None  # may be done again


def test_a_live_holder_keeps_it_and_a_dead_one_is_taken_over_at_once(tmp_path: Path) -> None:
    c = Claims(location(tmp_path), AREA)
    holder = child(tmp_path, "time.sleep(60)\n")
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().split() == ["taken", "1"]
        assert c.take("k") is None  # alive: not taken from it
        holder.kill()
        holder.wait()
        taken = c.take("k")  # dead: its lock went with it
        assert taken is not None and taken.n == 2
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_of_many_processes_at_once_exactly_one_holds_it(tmp_path: Path) -> None:
    """Six processes take one key at the same instant (each waits for it): one holds it,
    the others see a live holder. The holder keeps it until every one has looked."""
    start = time.time() + 3.0
    looked = tmp_path / "all_looked"
    # Each process stays alive (the holder holding) until the test has every answer, and so
    # knows that every one has looked: not a fixed 12 s that only most likely covers it.
    code = ("import os, sys, time\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "from runstore.storage.claims import Claims\n"
            "from runstore.storage.location import location\n"
            f"c = Claims(location({str(tmp_path)!r}), {AREA!r})\n"
            f"time.sleep(max(0, {start!r} - time.time()))\n"
            "taken = c.take('k')\n"
            "print('taken' if taken else 'none', flush=True)\n"
            f"while not os.path.exists({str(looked)!r}) and time.time() < {start + 120!r}:\n"
            "    time.sleep(0.05)\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
             for _ in range(6)]
    outs = []
    for p in procs:
        assert p.stdout is not None
        outs.append(p.stdout.readline().strip())  # after its take, while the holder holds
    looked.touch()
    for p in procs:
        rest, _ = p.communicate(timeout=120)
        assert p.returncode == 0 and rest == "", rest
    assert sorted(outs) == ["none"] * 5 + ["taken"]
