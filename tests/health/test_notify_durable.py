"""Alerts fire once per firing, across processes (issue 29 item 6), against a real webhook on
127.0.0.1 (tests/webhook.py) and real `runstore` processes.

The tree has runs whose KL goes over 0.01 (two firings of the default rule) and one that
never does. What each test counts is the POSTs the endpoint accepted, read from the server,
per firing (run, rule, step); the expected firings come from the files (tests/oracle.py):

* two `runstore check --notify` in a row, and four at once: each firing posted once;
  `--renotify` posts them again;
* a delivery that fails is posted by the next process, not lost;
* a process killed at each phase of a delivery (claimed, posted, recorded: the test points of
  health/notify.py) and the next one: posted once, except a kill between the endpoint's
  answer and the record (at-least-once: posted twice, as docs/reliability.md says);
* `ingest --watch` restarted (SIGINT, then SIGKILL): nothing posted again; a new firing is
  posted once; a firing that ends and starts again is posted again;
* a store the process cannot write: the check answers as ever, nothing is posted, a warning
  says why;
* bad URLs: runstore.toml's is reported with the file and the key; one with a CR/LF is
  refused, and no message holds its secret parts.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import oracle
import runstore
from webhook import Hook, server, wait_for  # noqa: F401 - server is a fixture

KL = ("optim/kl_sample_train_v1", "optim/kl_sample_train_v2")
RULE = "kl_sample_train_v1|v2 > 0.01"
ENV = {k: v for k, v in os.environ.items() if not k.startswith("RUNSTORE_")}


def write_run(run: Path, spikes: dict[int, float], steps: int = 12) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps({"learning_rate": 1e-4}))
    with open(run / "metrics.jsonl", "w") as f:
        for s in range(steps):
            f.write(json.dumps({"step": s, KL[0]: spikes.get(s, 0.001), KL[1]: 0.002}) + "\n")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    write_run(root / "a", {3: 0.05, 4: 0.2, 5: 0.03})
    write_run(root / "b", {7: float("inf")})
    write_run(root / "calm", {})
    return root


@pytest.fixture
def store(tree: Path, tmp_path: Path) -> Path:
    path = tmp_path / "store"
    runstore.open(path).ingest([tree])
    return path


def firings(tree: Path) -> list[tuple[str, str, int]]:
    """(run, rule, first step) of every firing of the default rule, from the files."""
    return sorted((name, RULE, row["first_step"])
                  for name, row in oracle.check_rule(tree, KL, ">", 0.01).items())


def posted(hook: Hook, prefix: str) -> list[tuple[str, str, int]]:
    """(run, rule, step) of every POST the endpoint accepted, sorted (repeats kept)."""
    return sorted((b["run"], b["rule"], b["step"]) for b in hook.accepted(prefix))


def runstore_cmd(store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "runstore", "--store", str(store), *args]


def check(store: Path, url: str, *more: str, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess:
    p = subprocess.run(runstore_cmd(store, "check", "--notify", url, "-F", "csv", *more),
                       capture_output=True, text=True, timeout=120, env=env or ENV,
                       cwd=store.parent)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_two_checks_in_a_row_post_each_firing_once(server: tuple[str, Hook], tree: Path,
                                                   store: Path) -> None:
    base, hook = server
    want = firings(tree)
    assert len(want) == 2
    for _ in range(2):
        p = check(store, base + "/ok/cron")
        assert p.returncode == 1, p.stderr  # the rule fires: the gate is unchanged
    assert posted(hook, "/ok/cron") == want
    # Another destination is another record: it gets every firing once too.
    check(store, base + "/ok/other")
    assert posted(hook, "/ok/other") == want
    # --renotify forces them out again, once more.
    check(store, base + "/ok/cron", "--renotify")
    assert posted(hook, "/ok/cron") == sorted(want * 2)
    check(store, base + "/ok/cron")
    assert posted(hook, "/ok/cron") == sorted(want * 2)


def test_processes_at_the_same_time_post_each_firing_once(server: tuple[str, Hook],
                                                          tree: Path, store: Path) -> None:
    base, hook = server
    procs = [subprocess.Popen(runstore_cmd(store, "check", "--notify", base + "/slow/x",
                                           "-F", "csv"),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=ENV) for _ in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1 and "Traceback" not in err, err
    assert posted(hook, "/slow/x") == firings(tree)


def test_a_failed_delivery_is_posted_by_the_next_process(server: tuple[str, Hook],
                                                         tree: Path, store: Path) -> None:
    base, hook = server
    hook.gate_closed.set()  # the endpoint refuses (400: not retried)
    p = check(store, base + "/gate/x")
    assert p.returncode == 1
    assert p.stderr.count("not sent after 1 attempt: HTTP 400") == 2, p.stderr
    assert "the next check or watch tries again" in p.stderr
    assert posted(hook, "/gate/x") == [] and len(hook.received("/gate/x")) == 2
    hook.gate_closed.clear()
    check(store, base + "/gate/x")
    assert posted(hook, "/gate/x") == firings(tree)
    check(store, base + "/gate/x")
    assert posted(hook, "/gate/x") == firings(tree)


def kill_when_paused(cmd: list[str], point: str, timeout: float = 60) -> None:
    """Run `cmd` with the test point `point` ("phase:N"), SIGKILL it once it says it paused."""
    with subprocess.Popen(cmd, env={**ENV, "RUNSTORE_TEST_PAUSE": point},
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], deadline - time.monotonic())
            line = proc.stderr.readline() if ready else ""
            seen.append(line)
            if line.strip() == f"paused at {point}":
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return
            if not line and proc.poll() is not None:
                break
        proc.kill()
        proc.wait()
        pytest.fail(f"never paused at {point}: {''.join(seen)}")


@pytest.mark.parametrize("point, twice", [("notify_claimed:1", False),
                                          ("notify_posted:1", True),
                                          ("notify_recorded:1", False)])
def test_a_kill_at_each_phase_loses_nothing(server: tuple[str, Hook], tree: Path, store: Path,
                                            point: str, twice: bool) -> None:
    """Killed with the first firing claimed, posted, or recorded (the second not begun), then
    the next check: every firing is posted; only the kill between the answer and the record
    posts one twice (at-least-once)."""
    base, hook = server
    url = base + "/ok/" + point.split(":")[0]
    kill_when_paused(runstore_cmd(store, "check", "--notify", url, "-F", "csv"), point)
    first = posted(hook, url[len(base):])
    assert len(first) == (0 if point.startswith("notify_claimed") else 1)
    check(store, url)  # a claim whose holder died is taken over at once
    got = posted(hook, url[len(base):])
    want = firings(tree)
    assert sorted(set(got)) == want
    assert len(got) == len(want) + (1 if twice else 0)
    check(store, url)
    assert len(posted(hook, url[len(base):])) == len(got)  # and then it is recorded


class Watch:
    """A `runstore ingest --watch` process; its output read line by line in the background."""

    def __init__(self, store: Path, tree: Path, url: str):
        self.proc = subprocess.Popen(
            runstore_cmd(store, "ingest", str(tree), "--watch", "0.3", "--notify", url),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**ENV, "PYTHONUNBUFFERED": "1"})
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def fired(self) -> int:
        return sum(line.startswith("FIRED") for line in self.lines)

    def stop(self, sig: int) -> str:
        self.proc.send_signal(sig)
        self.proc.wait(timeout=60)
        self.reader.join(10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        out = "".join(self.lines)
        assert "Traceback" not in out, out
        return out


def test_a_restarted_watch_posts_only_new_firings(server: tuple[str, Hook], tree: Path,
                                                  store: Path) -> None:
    base, hook = server
    url = base + "/ok/watch"
    want = firings(tree)
    w = Watch(store, tree, url)
    assert wait_for(lambda: posted(hook, "/ok/watch") == want, 60)
    w.stop(signal.SIGINT)
    # Restarted twice (once killed outright): it prints the firings again, posts none.
    for sig in (signal.SIGKILL, signal.SIGINT):
        w = Watch(store, tree, url)
        assert wait_for(lambda: w.fired() == len(want), 60)  # its first pass
        time.sleep(2)  # and a few more
        w.stop(sig)
        assert w.fired() == len(want)
        assert posted(hook, "/ok/watch") == want
    # A new run fires while a watch runs: posted once. The firing of `b` ends (a rewrite
    # without the spike), then starts again at the same step: posted again, once.
    w = Watch(store, tree, url)
    write_run(tree / "c", {9: 0.5})
    assert wait_for(lambda: len(hook.accepted("/ok/watch")) == len(want) + 1, 60)
    assert wait_for(lambda: done_records(store) == 3, 30)
    write_run(tree / "b", {})
    # The watch saw it end: the store forgot that it was posted.
    assert wait_for(lambda: done_records(store) == 2, 60)
    write_run(tree / "b", {7: float("inf")})
    assert wait_for(lambda: len(hook.accepted("/ok/watch")) == len(want) + 2, 60)
    time.sleep(2)
    w.stop(signal.SIGINT)
    assert posted(hook, "/ok/watch") == sorted(firings(tree) + [("b", RULE, 7)])


def test_a_watch_posts_what_failed_at_its_next_pass(server: tuple[str, Hook], tree: Path,
                                                   store: Path) -> None:
    # A webhook down for a moment (its first 4 answers 500: a firing's whole first round of
    # tries): the same watch posts each firing once it is back, not only after a restart.
    base, hook = server
    url = base + "/fail/4/watch"
    want = firings(tree)
    w = Watch(store, tree, url)
    try:
        assert wait_for(lambda: posted(hook, "/fail/4/watch") == want, 60), \
            (posted(hook, "/fail/4/watch"), want)
        time.sleep(1)  # a few more passes: nothing posted twice
    finally:
        out = w.stop(signal.SIGINT)
    assert posted(hook, "/fail/4/watch") == want
    assert "the next check or watch tries again" in out


def done_records(store: Path) -> int:
    """How many (firing, URL) the store records as posted (health/notified.py)."""
    area = store / "_runstore" / "notify"
    return sum(1 for n in os.listdir(area) if n.endswith(".done")) if area.is_dir() else 0


def _read_only(path: Path) -> bool:
    """Make `path` (a directory) unwritable for this process: chmod for a user, the
    immutable attribute for root (whom permissions do not stop). False when neither works."""
    if os.geteuid() != 0:
        path.chmod(0o555)
        return True
    return shutil.which("chattr") is not None and subprocess.run(
        ["chattr", "+i", str(path)], capture_output=True).returncode == 0


def _writable(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)
    path.chmod(0o755)


def test_a_read_only_store_answers_and_posts_nothing(server: tuple[str, Hook], tree: Path,
                                                     store: Path) -> None:
    base, hook = server
    internal = store / "_runstore"
    if not _read_only(internal):
        pytest.skip("cannot make a directory read-only here (root without chattr +i)")
    try:
        p = check(store, base + "/ok/ro")
    finally:
        _writable(internal)
    assert p.returncode == 1  # the check itself is unchanged: rows, verdict, exit status
    assert len(p.stdout.splitlines()) == 1 + len(firings(tree))
    assert p.stderr.count("notifications not sent: cannot record them in the store") == 1
    assert hook.received("/ok/ro") == []
    check(store, base + "/ok/ro")  # writable again: the next check posts them
    assert posted(hook, "/ok/ro") == firings(tree)


SECRET_URL = "http://alice:hunter2@127.0.0.1:9/a/SECRETPATH?token=SECRETQ"


@pytest.mark.parametrize("bad, what", [
    ("ftp://host/SECRETPATH", "is not an http(s) URL with a host"),
    (SECRET_URL.replace("/a/", "/a\r\nX-Injected: SECRETHDR/"), "holds a control character"),
    (SECRET_URL.replace("SECRETQ", "SECRETQ\nX: SECRETHDR"), "holds a control character"),
    # A host part over 63 characters: the request's IDNA encoding failed on every post, in a
    # warning that did not say it would be tried again.
    (SECRET_URL.replace("127.0.0.1", "h" * 64 + ".example"), "names a host no DNS can hold"),
])
def test_a_bad_url_in_runstore_toml_names_the_file_and_the_key(store: Path, bad: str,
                                                               what: str) -> None:
    toml = store.parent / "runstore.toml"
    toml.write_text("[check]\nnotify = [\"https://hooks.example/ok\", %s]\n" % json.dumps(bad))
    p = subprocess.run(runstore_cmd(store, "check"), capture_output=True, text=True,
                       timeout=120, env=ENV, cwd=store.parent)
    assert p.returncode == 2, p.stderr
    assert f"{toml}: check.notify[2]: notification URL" in p.stderr and what in p.stderr
    for secret in ("hunter2", "alice", "SECRETPATH", "SECRETQ", "SECRETHDR"):
        assert secret not in p.stderr + p.stdout, p.stderr


@pytest.mark.parametrize("where", ["--notify", "RUNSTORE_NOTIFY"])
def test_a_url_with_cr_lf_is_refused_without_its_secrets(store: Path, where: str) -> None:
    bad = SECRET_URL.replace("/a/", "/a\r\nX-Injected: SECRETHDR/")
    args, env = (["--notify", bad], ENV) if where == "--notify" else (
        [], {**ENV, "RUNSTORE_NOTIFY": bad})
    p = subprocess.run(runstore_cmd(store, "check", *args), capture_output=True, text=True,
                       timeout=120, env=env, cwd=store.parent)
    assert p.returncode == 2 and p.stderr.startswith("Error: "), p.stderr
    assert "Traceback" not in p.stderr
    for secret in ("hunter2", "alice", "SECRETPATH", "SECRETQ", "SECRETHDR", "X-Injected"):
        assert secret not in p.stderr + p.stdout, p.stderr
