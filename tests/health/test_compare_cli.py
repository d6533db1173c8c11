"""The keys, diff and compare commands, trend rules in `check` / runstore.toml / `ingest
--watch`, and `--notify` — checked against the run files (analysis_oracle, test_trends'
definitions) and a real webhook server on 127.0.0.1 that each test starts and stops.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pyarrow.parquet as pq
import pytest

import analysis_oracle as ao
from conftest import copy_store
import runstore
from runstore.health.trends import parse_trend
from runstore.numbers import nonfinite_name
from storekit import cli
from trend_oracle import expected as trend_expected
from webhook import POLL_S

REWARD = "env/all/reward/total"


@pytest.fixture(scope="module")
def demo_store(_demo_template: Path, shared_demo_store: Path) -> tuple[Path, Path]:
    return _demo_template, shared_demo_store


def rows_json(text: str) -> list[dict[str, Any]]:
    return json.loads(text, parse_constant=lambda c: float(c.replace("Infinity", "inf")))


# ---------------------------------------------------------------------------------------------
# keys, diff, compare


def test_keys_command_matches_the_files(demo_store: tuple[Path, Path]) -> None:
    root, store = demo_store
    r = cli(store, "keys", "-F", "json")
    assert r.exit_code == 0, r.output
    got = {x["key"]: (x["n_runs"], x["n_points"], x["first_step"], x["last_step"], x["type"])
           for x in rows_json(r.stdout)}
    assert got == ao.keys(root)
    scope = {n for n in ao.runs(root) if n.startswith("math_rl_sweep/")}
    r = cli(store, "keys", "--runs", "math_rl_sweep/*", "--like", "%reward/total", "-F", "csv")
    lines = r.stdout.splitlines()
    assert lines[0] == "key,n_runs,n_points,first_step,last_step,type"
    want = {k: v for k, v in ao.keys(root, scope).items() if k.lower().endswith("reward/total")}
    assert [ln.split(",")[0] for ln in lines[1:]] == sorted(want)


def test_diff_command(demo_store: tuple[Path, Path], tmp_path: Path) -> None:
    root, store = demo_store
    runs = ao.runs(root)
    a, b = "gsm8k_tool_rl/sweep/lr_1e-4/seed_0", "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"
    r = cli(store, "diff", a, "gsm8k_tool_rl/sweep/lr_1e-3", "-F", "json")
    assert r.exit_code == 0, r.output
    got = {x["key"]: (x[a], x[b]) for x in json.loads(r.stdout)}
    ca, cb = ao.config(runs[a]), ao.config(runs[b])
    assert ca is not None and cb is not None
    differing = {k for k in set(ca) | set(cb) if ca.get(k, "\0missing") != cb.get(k, "\0missing")}
    assert set(got) - {"code.diff"} == differing and differing
    for k in differing:
        assert got[k] == tuple(None if c.get(k, "\0m") == "\0m" else json.dumps(c[k])
                               for c in (ca, cb)) or all(
            isinstance(c.get(k), (int, float)) for c in (ca, cb)), k
    # --all: every key, with `differs`; the format from -o's extension.
    out = tmp_path / "all.parquet"
    r = cli(store, "diff", a, b, "--all", "-o", str(out))
    assert r.exit_code == 0, r.output
    table = pq.read_table(out)
    assert table.column_names == ["key", a, b, "differs"]
    assert set(table.column("key").to_pylist()) == set(ca) | set(cb) | {"code.diff"}
    assert {k for k, d in zip(table.column("key").to_pylist(),
                              table.column("differs").to_pylist()) if d} == set(got)


def test_diff_code_is_a_unified_diff_of_the_files(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    for name, text in (("x/one", "diff --git a/f b/f\n+a\n+b\n"),
                       ("x/two", "diff --git a/f b/f\n+a\n+c\n+d\n"),
                       ("x/three", "diff --git a/f b/f\n+a\n+b\n")):
        run = root / name
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"seed": 1, "lr": 1e-4}))
        (run / "metrics.jsonl").write_text(json.dumps({"step": 0, "loss": 1.0}) + "\n")
        (run / "code.diff").write_text(text)
    store = tmp_path / "store"
    runstore.open(store).ingest([root])
    r = cli(store, "diff", "x/one", "x/two", "x/three", "--code")
    assert r.exit_code == 0, r.output
    one, two = ((root / n / "code.diff").read_text() for n in ("x/one", "x/two"))
    want = "".join(difflib.unified_diff(one.splitlines(keepends=True),
                                        two.splitlines(keepends=True),
                                        "a/x/one/code.diff", "b/x/two/code.diff"))
    assert r.stdout == want + "# x/three/code.diff: identical to x/one's\n"
    r = cli(store, "diff", "x/one", "x/two", "x/three", "-F", "csv")
    a, b = (f"{len(t.splitlines())} lines, {len(t.encode())} bytes" for t in (one, two))
    assert r.stdout.splitlines() == ["key,x/one,x/two,x/three",
                                     f'code.diff,"A: {a}","B: {b}","A: {a}"']


def test_diff_errors_name_the_runs(demo_store: tuple[Path, Path]) -> None:
    store = demo_store[1]
    r = cli(store, "diff", "gsm8k*", "sl/*")
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.stderr.startswith("Error: 'gsm8k*' matches 5 runs (")
    r = cli(store, "diff", "nope", "sl/*")
    assert r.stderr.startswith("Error: no run is named or matches 'nope'")
    r = cli(store, "diff", "sl/*")
    assert r.exit_code == 2 and "two or more runs" in r.stderr
    r = cli(store, "diff", "sl/*", "--all", "-F", "json")
    assert r.exit_code == 0 and {x["key"] for x in json.loads(r.stdout)} >= {"learning_rate"}


@pytest.mark.parametrize("ext", ["csv", "json", "jsonl", "parquet", "md"])
def test_compare_command_every_output(demo_store: tuple[Path, Path], tmp_path: Path,
                                      ext: str) -> None:
    root, store = demo_store
    out = tmp_path / f"bands.{ext}"
    r = cli(store, "compare", REWARD, "--runs", "gsm8k_tool_rl/*", "--group-by",
            "learning_rate", "--smooth", "0.9", "-o", str(out))
    assert r.exit_code == 0, r.output
    runs = {n: p for n, p in ao.runs(root).items() if n.startswith("gsm8k_tool_rl/")}
    group_of = {n: (ao.config(p) or {}).get("learning_rate") for n, p in runs.items()}
    want = ao.curves(runs, REWARD, group_of, w=0.9)
    if ext == "parquet":
        rows = pq.read_table(out).to_pylist()
    elif ext == "json":
        rows = rows_json(out.read_text())
    elif ext == "jsonl":
        rows = [rows_json(line) for line in out.read_text().splitlines()]
    elif ext == "csv":
        import csv

        with out.open() as f:
            rows = [{k: (None if v == "" else v if k == "group" else float(v))
                     for k, v in r.items()} for r in csv.DictReader(f)]
    else:
        text = out.read_text()
        assert text.startswith("| group | learning_rate | step | n |")
        assert text.count("\n") >= len(want) + 2
        return
    assert len(rows) == len(want)
    for row in rows:
        cell = want[(float(row["learning_rate"]), round(float(row["step"]), 6))]
        for k in ("n", "mean", "std", "min", "max", "smooth_mean", "smooth_std"):
            assert ao.close(row[k], cell[k]), (row, k, cell)


def test_compare_group_by_several_keys_and_auto(demo_store: tuple[Path, Path]) -> None:
    root, store = demo_store
    r = cli(store, "compare", REWARD, "--group-by", "model_name,learning_rate", "-F", "json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert list(rows[0])[:4] == ["group", "model_name", "learning_rate", "step"]
    r = cli(store, "compare", REWARD, "--runs", "gsm8k_tool_rl/*", "--group-by", "auto",
            "-F", "json")
    groups: dict[str, set[str]] = {}
    for x in json.loads(r.stdout):
        groups.setdefault(x["group"], set())
    # The groups are the runs' configs without seed-like keys (named seed or *_seed, and
    # per-run names and paths), computed here from config.json.
    per_run = {n: p for n, p in ao.runs(root).items() if n.startswith("gsm8k_tool_rl/")}

    def seedless(cfg: dict[str, Any]) -> str:
        def seedy(k: str) -> bool:
            last = k.rsplit(".", 1)[-1].lower()
            return last == "seed" or last.endswith("_seed") or last in (
                "log_path", "log_dir", "wandb_name", "run_name", "session_name")
        return json.dumps({k: v for k, v in cfg.items() if not seedy(k)}, sort_keys=True)

    distinct = {seedless(ao.config(p) or {}) for p in per_run.values()}
    assert len(groups) == len(distinct), groups  # (seeds merging: test_analysis_compare)
    r = cli(store, "compare", "env/all/rewrd/total")
    assert r.exit_code == 2 and "did you mean env/all/reward/total?" in r.stderr
    r = cli(store, "compare", REWARD, "--smooth", "1")
    assert r.exit_code == 2 and "Traceback" not in r.output


# ---------------------------------------------------------------------------------------------
# Trend rules in check and runstore.toml


def test_check_runs_trend_and_threshold_rules_together(demo_store: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    root, store = demo_store
    drop = "drop(env/all/reward/total) > 0.08"
    rise = "rise(time/total, 0.5) > 1.3"
    r = cli(store, "check", "--rule", drop, "--rule", rise, "--rule", "optim/entropy < 0.29",
            "-F", "json")
    assert r.exit_code == 1, r.output  # something fired
    rows = rows_json(r.stdout)
    assert [(x["run_name"]) for x in rows] == sorted(x["run_name"] for x in rows)
    by_rule: dict[str, dict[str, Any]] = {}
    for x in rows:
        by_rule.setdefault(x["rule"], {})[x["run_name"]] = x
    for text in (drop, rise):
        want = trend_expected(root, parse_trend(text))
        assert set(by_rule.get(text, {})) == set(want), text
        for name, w in want.items():
            for k, v in w.items():
                assert ao.close(by_rule[text][name][k], v), (text, name, k)
    # The threshold rules' rows are the ones they give alone.
    alone = rows_json(cli(store, "check", "--rule", "optim/entropy < 0.29", "-F", "json").stdout)
    assert [x for x in rows if not x["rule"].startswith(("drop", "rise"))] == alone
    summary = r.stderr.strip().splitlines()[-1]
    assert f"{drop} fired for {len(by_rule[drop])} (" in summary
    assert f"{rise} fired for {len(by_rule.get(rise, {}))} (" in summary


def test_trend_rules_from_runstore_toml(demo_store: tuple[Path, Path], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root, store = demo_store
    toml = tmp_path / "runstore.toml"
    toml.write_text('[check]\ndefault_rules = false\n\n[[check.rule]]\ntrend = "drop"\n'
                    f'metric = "{REWARD}"\nop = ">"\nvalue = 0.08\nname = "reward collapse"\n')
    monkeypatch.chdir(tmp_path)
    r = cli(store, "check", "-F", "json")
    want = trend_expected(root, parse_trend(f"drop({REWARD}) > 0.08"))
    rows = rows_json(r.stdout)
    assert {x["run_name"] for x in rows} == set(want) and want
    assert {x["rule"] for x in rows} == {"reward collapse"}
    toml.write_text('[[check.rule]]\ntrend = "fall"\nmetric = "x"\nop = ">"\nvalue = 1\n')
    r = cli(store, "check")
    assert r.exit_code == 2 and "runstore.toml: rule 1" in r.stderr


def test_stale_in_check(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    for name, done in (("live", False), ("done", True)):
        run = root / name
        run.mkdir(parents=True)
        (run / "config.json").write_text("{}")
        (run / "metrics.jsonl").write_text("".join(
            json.dumps({"step": s, "loss": 1.0 / (s + 1)}) + "\n" for s in range(5)))
        if done:
            (run / "checkpoints.jsonl").write_text(json.dumps(
                {"name": "final", "batch": 5, "final": True,
                 "state_path": "tinker://x/weights/final"}) + "\n")
        old = time.time() - 3600
        for f in run.iterdir():
            os.utime(f, (old, old))
    store = tmp_path / "store"
    runstore.open(store).ingest([root])
    status = dict(runstore.open(store).sql("select run_name, status from run_status").rows())
    r = cli(store, "check", "--no-default-rules", "--rule", "stale > 30", "-F", "json")
    rows = rows_json(r.stdout)
    want = {n for n, s in status.items() if s not in ("completed", "missing")}
    assert {x["run_name"] for x in rows} == want and "live" in want
    assert all(59 < x["peak"] < 70 and x["steps_over"] is None for x in rows)
    assert r.exit_code == 1


# ---------------------------------------------------------------------------------------------
# --notify, against a real server


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.bodies.append((self.path, json.loads(body)))  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def notify_store(demo_store: tuple[Path, Path], tmp_path: Path) -> Path:
    """A private copy of the demo store: a check that notifies records what it posted there."""
    return copy_store(demo_store[1], tmp_path / "store")


@pytest.fixture
def hook() -> Iterator[tuple[str, list]]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    httpd.daemon_threads = True
    httpd.bodies = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, args=(POLL_S,), daemon=True)
    thread.start()
    host, port = httpd.server_address[:2]
    try:
        yield f"http://{host}:{port}", httpd.bodies  # type: ignore[attr-defined]
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)


def test_check_notify_posts_each_fired_row_once(notify_store: Path,
                                                hook: tuple[str, list]) -> None:
    store = notify_store
    base, bodies = hook
    drop = "drop(env/all/reward/total) > 0.08"
    r = cli(store, "check", "--rule", drop, "--notify", base + "/SECRETPATH/one",
            "--notify", base + "/two", "-F", "json")
    rows = rows_json(r.stdout)
    assert r.exit_code == 1 and rows
    for path in ("/SECRETPATH/one", "/two"):
        got = [b for p, b in bodies if p == path]
        assert sorted((b["run"], b["rule"]) for b in got) == sorted(
            (x["run_name"], x["rule"]) for x in rows)
        for b in got:
            row = next(x for x in rows if (x["run_name"], x["rule"]) == (b["run"], b["rule"]))
            assert b["step"] == row["first_step"] and b["store"] == str(store)
            assert b["value"] == nonfinite_name(row["peak"]) if not math.isfinite(
                row["peak"]) else ao.close(b["value"], row["peak"])  # numbers.json_number
            assert b["text"].startswith(f"FIRED {b['run']}: ")
    assert "SECRETPATH" not in r.stderr


def test_notify_from_the_environment_and_toml(notify_store: Path,
                                              hook: tuple[str, list], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    store = notify_store
    base, bodies = hook
    r = cli(store, "check", "-F", "json", env={"RUNSTORE_NOTIFY": f"{base}/env1 {base}/env2"})
    fired = rows_json(r.stdout)
    assert fired  # the demo's KL spike
    assert sorted(p for p, _ in bodies) == sorted(["/env1", "/env2"] * len(fired))
    bodies.clear()
    (tmp_path / "runstore.toml").write_text(f'[check]\nnotify = ["{base}/toml"]\n')
    monkeypatch.chdir(tmp_path)
    r = cli(store, "check", "-F", "json")
    assert [p for p, _ in bodies] == ["/toml"] * len(fired)
    r = cli(store, "check", "--notify", "ftp://example.com/x")
    assert r.exit_code == 2 and "not an http(s) URL" in r.stderr


def test_watch_notifies_each_firing_once_over_passes(demo_tree: Path, tmp_path: Path,
                                                     hook: tuple[str, list]) -> None:
    """`ingest --watch` in a real process: the KL spike and a trend rule fire in the first
    pass; later passes (one of them after an append) post nothing again."""
    from runstore import demo

    base, bodies = hook
    (tmp_path / "runstore.toml").write_text(
        '[[check.rule]]\ntrend = "drop"\nmetric = "env/all/reward/total"\nop = ">"\n'
        'value = 0.08\n')
    proc = subprocess.Popen(
        [sys.executable, "-m", "runstore", "--store", str(tmp_path / "store"), "ingest",
         str(demo_tree), "--watch", "0.3", "--notify", base + "/w"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not bodies:
            time.sleep(0.1)
        assert bodies, "no notification"
        time.sleep(1.5)  # a few more passes
        first = len(bodies)
        demo.append_steps(demo_tree / "math_rl_sweep/qwen3-8b/lr_1e-4", 3)
        time.sleep(2.0)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    fired = [line for line in out.splitlines() if line.startswith("FIRED ")]
    keys = [(b["run"], b["rule"]) for _, b in bodies]
    assert len(keys) == len(set(keys)) == len(fired) >= first >= 2
    assert {b["rule"] for _, b in bodies} >= {"kl_sample_train_v1|v2 > 0.01",
                                              "drop(env/all/reward/total) > 0.08"}


@pytest.mark.parametrize("others", [
    [],
    # Beside statements that run at the same time (the rules' own), the refusal is the answer.
    ["--rule", "optim/entropy < 0.29"],
    ["--rule", "rise(time/total, 0.5) > 1.3", "--rule", "stale > 1"],
])
def test_a_trend_rule_over_an_unlogged_metric_is_refused(demo_store: tuple[Path, Path],
                                                         others: list[str]) -> None:
    r = cli(demo_store[1], "check", "--rule", "drop(env/all/rewrd/total) > 0.1", *others)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert "did you mean env/all/reward/total?" in r.stderr and r.stdout == ""


def test_a_dead_webhook_warns_without_its_secret_and_the_check_still_answers(
        notify_store: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    r = cli(notify_store, "check", "--notify",
            f"http://alice:hunter2@127.0.0.1:{port}/services/T0/B0/SECRETTOKEN?k=SECRETQ",
            "-F", "json")
    assert r.exit_code == 1 and rows_json(r.stdout)  # the answer is printed regardless
    assert "not sent after 4 attempts" in r.stderr
    assert f"http://127.0.0.1:{port}/…" in r.stderr
    for secret in ("alice", "hunter2", "SECRETTOKEN", "SECRETQ", "services"):
        assert secret not in r.stderr, secret
    assert time.monotonic() - started < 15  # three backoffs (3.5 s), never the socket default
