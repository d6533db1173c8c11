"""The newer artifacts of tinker-cookbook 0.6.1 (`logs.log`, `capture/<kind>.jsonl`, the
eval store, the cost and token totals, leftover `.NAME.PID.tmp` files) changed the way a live
trainer or a user changes them, with an ingest after each change, answer what the files say
now: every affected table and `runs` column is compared with a reading of the files written
here with json and plain Python (not runstore's code, not tests/oracle.py), and the store
built change by change holds the rows of one fresh ingest of the final tree.

The changes (hypothesis draws their order): appends cut anywhere (mid-line, mid-character)
and completed by the next one; a file rewritten in place or replaced by rename, shorter,
longer or of the same size, with its mtime set back; an eval run added later (its
`metadata.json` and `runs.jsonl` line), a `result.json` written after its metadata,
`metadata.json` rewritten with the scores, trajectories appended after a first ingest; a
benchmark directory removed (its rows stay: docs/ingest.md); the eval store reachable from
the run's `eval/` directory too; `.NAME.PID.tmp` files that come and go. The material is the
shared sample runs' own lines (the test is skipped when they are not there).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import storekit
from conftest import examples
import runstore

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "sample-runs-0.6.1"
CRASHED = SAMPLES / "sweeps" / "20260926_083012" / "learning_rate=8e-05"
FINISHED = CRASHED.with_name("learning_rate=2e-05")
EVALS = SAMPLES / "evals"
CASES = examples(30)

pytestmark = pytest.mark.skipif(not CRASHED.is_dir(), reason=f"no {CRASHED}")

APPEND_ONLY = ("logs.log", "metrics.jsonl", "capture/sample.jsonl", "capture/train_op.jsonl")
TMP_NAMES = (".metrics.jsonl.31.tmp", "iteration_000001/.train_rollout_summaries.jsonl.7.tmp",
             "capture/.sample.jsonl.9.tmp")
BENCHES = ("gsm8k", "math500")


def _lines(path: Path, n: int | None = None) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)[:n]


def _material() -> dict[str, list[bytes]]:
    """Lines for each append-only file: the crashed sample run's own, cut short so that the
    logs keep a traceback, a chained one, a second command line and traceback, and the other
    run's end (the sweep's next `Configuration:` block, which is no error)."""
    log = _lines(CRASHED / "logs.log")
    sweep = _lines(FINISHED / "logs.log")  # ends with the next sweep point's Configuration:
    tb = next(i for i, line in enumerate(log) if line.startswith(b"Traceback"))
    chained = [b"\n", b"During handling of the above exception, another exception occurred:\n",
               b"\n", b"Traceback (most recent call last):\n",
               b'  File "/home/researcher/x.py", line 3, in <module>\n',
               "KeyError: 'caf\u00e9'\n".encode()]
    again = [b"root:791 [INFO] Command line invocation: launch_tool_sweep.py resume=1\r\n",
             b"tinker_cookbook.rl.train:1513 [INFO] Step 4: Will train on batch\n",
             b"tinker_cookbook.utils.ml_log:317 [ERROR] Run failed\n",
             b"Traceback (most recent call last):\n",
             b'  File "a.py", line 1, in <module>\n', b"    main()\n",
             b"RuntimeError: second crash\n"]
    return {
        "logs.log": log[:40] + log[tb - 3:] + chained + again + sweep[-40:] + log[40:60],
        "metrics.jsonl": _lines(CRASHED / "metrics.jsonl"),
        "capture/sample.jsonl": _lines(CRASHED / "capture" / "sample.jsonl", 24),
        "capture/train_op.jsonl": _lines(CRASHED / "capture" / "train_op.jsonl"),
    }


def _eval_material() -> list[dict[str, Any]]:
    """Per eval run of the sample eval store: its id, index line, metadata (with and
    without the scores), and per benchmark its result and trajectory lines."""
    out = []
    for line in _lines(EVALS / "runs.jsonl"):
        rid = json.loads(line)["run_id"]
        d = EVALS / "runs" / rid
        meta = json.loads((d / "metadata.json").read_text())
        out.append({"id": rid, "index": line, "final": (d / "metadata.json").read_bytes(),
                    "first": json.dumps({**meta, "scores": {}}, indent=2).encode(),
                    "result": {b: (d / b / "result.json").read_bytes() for b in BENCHES},
                    "traj": {b: _lines(d / b / "trajectories.jsonl") for b in BENCHES}})
    return out


# --------------------------------------------------------------------------- the reading of the files

HEAD = re.compile(r"^[^\s:]+:\d+ \[[A-Z]+\] ?(.*)$")
TB = "Traceback (most recent call last):"


def complete_lines(data: bytes) -> list[str]:
    """The complete lines of a file as text (what a line-reader has consumed)."""
    end = data.rfind(b"\n")
    if end < 0:
        return []
    return [x[:-1] if x.endswith("\r") else x
            for x in data[:end].decode("utf-8", errors="replace").split("\n")]


def log_facts(lines: list[str]) -> tuple[str | None, str | None]:
    """(first command line, last error): the exception line ending the last finished
    traceback after the last command line."""
    cmds = [i for i, x in enumerate(lines)
            if (m := HEAD.match(x)) and m.group(1).startswith("Command line invocation: ")]
    command = HEAD.match(lines[cmds[0]]).group(1)[len("Command line invocation: "):] \
        if cmds else None  # type: ignore[union-attr]
    error = None
    i = cmds[-1] + 1 if cmds else 0
    while i < len(lines):
        m = HEAD.match(lines[i])
        if lines[i] == TB or (m and m.group(1) == TB):
            j = i + 1
            while j < len(lines) and (lines[j][:1].isspace() or lines[j] == ""):
                j += 1  # frames, source lines, carets
            if j < len(lines) and not HEAD.match(lines[j]):
                error = lines[j]
            i = j
        i += 1
    return command, error


def log_rows(lines: list[str]) -> list[tuple]:
    """(line_no, text, level, logger, record_line): each line belongs to the record whose
    header line is the last at or before it."""
    out, record = [], (None, None, None)
    for i, x in enumerate(lines, 1):
        m = re.match(r"^(\S+):\d+ \[([A-Z]+)\]", x)
        if m:
            record = (m.group(2), m.group(1), i)
        out.append((i, x, *record))
    return out


def last_number(lines: list[str], key: str) -> float | None:
    out = None
    for x in lines:
        try:
            row = json.loads(x)
        except ValueError:
            continue
        v = row.get(key) if isinstance(row, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out = float(v)
    return out


def expected(files: dict[str, bytes], tmp: set[str]) -> dict[str, Any]:
    """Every compared answer, from the files' bytes (path relative to the tree -> bytes)."""
    run = {k[len("run/"):]: v for k, v in files.items() if k.startswith("run/")}
    logs = complete_lines(run.get("logs.log", b""))
    metrics = complete_lines(run.get("metrics.jsonl", b""))
    samples, events = [], []
    for name in ("capture/sample.jsonl", "capture/train_op.jsonl"):
        for seq, x in enumerate(complete_lines(run.get(name, b"")), 1):
            rec = json.loads(x)
            if rec.get("kind") == "sample" and rec.get("samples"):
                samples += [(seq, k, tuple(s["tokens"])) for k, s in enumerate(rec["samples"])]
            else:
                events.append((name, seq, rec["kind"], rec.get("op"), rec.get("status")))
    eval_runs, results, trajs = [], [], []
    for path, data in files.items():
        parts = path.split("/")
        if parts[0] != "evals" or len(parts) < 4:
            continue
        rid = parts[2]
        if parts[3] == "metadata.json":
            m = json.loads(data)
            eval_runs.append((rid, m["model_name"], m["checkpoint_path"],
                              json.dumps(m["scores"], sort_keys=True)))
        elif parts[-1] == "result.json":
            r = json.loads(data)
            results.append((rid, parts[3], r["score"], r["num_examples"], r["num_correct"]))
        elif parts[-1] == "trajectories.jsonl":
            for seq, x in enumerate(complete_lines(data), 1):
                t = json.loads(x)
                trajs.append((rid, parts[3], seq, t["idx"], t["example_id"], t["reward"]))
    model = {rid: m for rid, m, _, _ in eval_runs}
    return {
        "run_logs": log_rows(logs),
        "facts": log_facts(logs) + tuple(
            last_number(metrics, k) for k in ("cost/cumulative_usd", "tokens/cumulative/sampled",
                                              "tokens/cumulative/trained")),
        "tmp_files": sorted(tmp) or None,
        "samples": sorted(samples), "capture_events": sorted(events),
        "eval_runs": sorted(eval_runs), "eval_results": sorted(results),
        "eval_trajectories": sorted(trajs),
        "eval_scores": sorted((rid, b, s, model[rid]) for rid, b, s, _, _ in results
                              if rid in model),
    }


def stored(store: runstore.Store) -> dict[str, Any]:
    def rows(sql: str) -> list[tuple]:
        return sorted(tuple(r) for r in store.sql(sql).rows())

    run = store.sql("select command, last_error, cost_usd, tokens_sampled, tokens_trained, "
                    "tmp_files from runs").to_dicts()
    assert len(run) == 1
    r = run[0]
    return {
        "run_logs": rows("select line_no, text, level, logger, record_line from run_logs"),
        "facts": (r["command"], r["last_error"], r["cost_usd"],
                  None if r["tokens_sampled"] is None else float(r["tokens_sampled"]),
                  None if r["tokens_trained"] is None else float(r["tokens_trained"])),
        "tmp_files": sorted(r["tmp_files"]) if r["tmp_files"] is not None else None,
        "samples": [(s, k, tuple(t)) for s, k, t in
                    rows("select seq, sample_idx, sampled_tokens from samples")],
        "capture_events": rows(
            "select case when payload like '%\"train_op\"%' then 'capture/train_op.jsonl' "
            "else 'capture/sample.jsonl' end, seq, kind, op, status from capture_events"),
        "eval_runs": [(a, b, c, json.dumps(json.loads(d), sort_keys=True)) for a, b, c, d in
                      rows("select eval_run_id, model_name, checkpoint_path, scores "
                           "from eval_runs")],
        "eval_results": rows("select eval_run_id, benchmark, score, num_examples, num_correct "
                             "from eval_results"),
        "eval_trajectories": rows("select eval_run_id, benchmark, seq, idx, example_id, reward "
                                  "from eval_trajectories"),
        "eval_scores": rows("select eval_run_id, benchmark, score, model_name from eval_scores"),
    }


# --------------------------------------------------------------------------- the tree and its changes

class Tree:
    """A run and an eval store beside it, changed step by step; `seen` is what each file held
    at the last ingest that saw it (the rows of a file that is gone stay in the store)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.material = _material()
        self.evals = _eval_material()
        self.target = {k: b"".join(v) for k, v in self.material.items()}
        self.tmp: set[str] = set()
        self.seen: dict[str, bytes] = {}
        self.removed = False
        run = root / "run"
        (run / "capture").mkdir(parents=True)
        (run / "iteration_000001").mkdir()
        shutil.copy(CRASHED / "config.json", run / "config.json")
        for name in APPEND_ONLY:
            (run / name).write_bytes(b"")
        (root / "evals" / "runs").mkdir(parents=True)
        (root / "evals" / "runs.jsonl").write_bytes(b"")
        self.add_eval(0)

    def files(self) -> dict[str, bytes]:
        now = {p.relative_to(self.root).as_posix(): p.read_bytes()
               for p in self.root.rglob("*") if p.is_file() and not p.name.endswith(".tmp")
               and p.name not in ("config.json", "runs.jsonl")
               and p.relative_to(self.root).parts[:2] != ("run", "eval")}
        return {**self.seen, **now}

    def ingested(self) -> None:
        self.seen = self.files()

    # Each change takes the draw's integers and does one thing (or nothing, when it cannot).
    def grow(self, which: int, n: int) -> None:
        path = self.root / "run" / APPEND_ONLY[which % len(APPEND_ONLY)]
        name = APPEND_ONLY[which % len(APPEND_ONLY)]
        have = path.stat().st_size
        target = self.target[name]
        if target[:have] != path.read_bytes():
            return
        with open(path, "ab") as f:
            f.write(target[have:have + n])

    def rewrite(self, which: int, n: int, how: int) -> None:
        """A resumed run or a user's edit: the file holds another content, of the size drawn
        (the same as now when `how` says so), written in place or renamed over it, its mtime
        set back to what it was when `how` says so."""
        name = APPEND_ONLY[which % len(APPEND_ONLY)]
        path = self.root / "run" / name
        lines = self.material[name]
        st_before = path.stat()
        cut = n % (len(lines) + 1)
        self.target[name] = b"".join(lines[:cut] + lines[: max(1, cut // 2)] + lines[cut:])
        size = st_before.st_size if how % 3 == 0 else min(n * 97, len(self.target[name]))
        data = self.target[name][:size]
        if how % 2:
            aside = path.with_name(path.name + ".new")
            aside.write_bytes(data)
            os.replace(aside, path)
        else:
            with open(path, "r+b") as f:
                f.write(data)
                f.truncate()
        if how % 4 == 0:
            os.utime(path, ns=(st_before.st_atime_ns, st_before.st_mtime_ns))

    def add_eval(self, i: int) -> None:
        e = self.evals[i % len(self.evals)]
        d = self.root / "evals" / "runs" / e["id"]
        if d.exists():
            return
        d.mkdir()
        (d / "metadata.json").write_bytes(e["first"])
        with open(self.root / "evals" / "runs.jsonl", "ab") as f:
            f.write(e["index"])

    def bench(self, i: int, b: int, n: int, what: int) -> None:
        e = self.evals[i % len(self.evals)]
        d = self.root / "evals" / "runs" / e["id"]
        bench = BENCHES[b % 2]
        if not d.exists():
            return
        result = d / bench / "result.json"
        if what % 5 == 4 and result.exists():  # a score fixed in place: same size and mtime
            before = result.stat()
            data = result.read_bytes()
            at = data.index(b'"score": ') + len(b'"score": ') + 2
            digit = b"%d" % ((int(data[at:at + 1]) + 1) % 10) if data[at:at + 1].isdigit() \
                else data[at:at + 1]
            with open(result, "r+b") as f:
                f.seek(at)
                f.write(digit)
            os.utime(result, ns=(before.st_atime_ns, before.st_mtime_ns))
        elif what % 5 == 0:  # finalized: the metadata rewritten with the scores
            (d / "metadata.json").write_bytes(e["final"])
        elif what % 5 == 1:  # the benchmark's result
            (d / bench).mkdir(exist_ok=True)
            (d / bench / "result.json").write_bytes(e["result"][bench])
        elif what % 5 == 2:  # more trajectories (cut anywhere)
            (d / bench).mkdir(exist_ok=True)
            path = d / bench / "trajectories.jsonl"
            have = path.stat().st_size if path.exists() else 0
            with open(path, "ab") as f:
                f.write(b"".join(e["traj"][bench])[have:have + n * 211])
        elif what % 5 == 3 and (d / bench).exists() and not (i + b + n) % 5:
            shutil.rmtree(d / bench)
            self.removed = True

    def link(self) -> None:
        """The eval store reachable from a second place too: the run's `eval/` directory."""
        if not (self.root / "run" / "eval").exists():
            (self.root / "run" / "eval").symlink_to(Path("..") / "evals")

    def tmp_file(self, which: int) -> None:
        name = TMP_NAMES[which % len(TMP_NAMES)]
        path = self.root / "run" / name
        if name in self.tmp:
            path.unlink()
            self.tmp.discard(name)
        else:
            path.write_bytes(b"{half")
            self.tmp.add(name)


N = st.integers(0, 4000)
CHANGE = st.one_of(
    st.tuples(st.just("grow"), st.integers(0, 3),
              st.one_of(st.integers(1, 400), st.integers(400, 8000))),
    st.tuples(st.just("rewrite"), st.integers(0, 3), N, st.integers(0, 11)),
    st.tuples(st.just("add_eval"), st.integers(0, 2)),
    st.tuples(st.just("bench"), st.integers(0, 2), st.integers(0, 1), st.integers(0, 30),
              st.integers(0, 4)),
    st.tuples(st.just("link"),),
    st.tuples(st.just("tmp_file"), st.integers(0, 2)),
)


def assert_answers(store: runstore.Store, tree: Tree, when: str) -> None:
    want = expected(tree.files(), tree.tmp)
    got = stored(store)
    for k in want:
        assert got[k] == want[k], (when, k)


@pytest.mark.slow
@settings(max_examples=CASES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(steps=st.lists(st.lists(CHANGE, min_size=1, max_size=4), min_size=1, max_size=6))
# A traceback split across two appends, the second cut mid-line; a log replaced by one of the
# same size with its mtime set back; a result written after its metadata, then removed.
@example(steps=[[("grow", 0, 4200)], [("grow", 0, 2900)], [("grow", 0, 5000)]])
@example(steps=[[("grow", 0, 8000), ("grow", 1, 8000)], [("rewrite", 0, 30, 0)],
                [("rewrite", 1, 2, 4)], [("grow", 0, 9000), ("grow", 1, 90000)]])
@example(steps=[[("bench", 0, 0, 3, 1), ("bench", 0, 0, 3, 2)], [("add_eval", 1), ("link",),
                ("bench", 0, 0, 9, 0), ("tmp_file", 1)], [("bench", 0, 0, 9, 4)],
                [("bench", 0, 0, 0, 3), ("tmp_file", 1)]])
def test_every_change_then_an_ingest_answers_what_the_files_say(
        tmp_path_factory: pytest.TempPathFactory, steps: list[list[tuple]]) -> None:
    base = tmp_path_factory.mktemp("incremental061")
    tree = Tree(base / "tree")
    store = runstore.open(base / "store")
    store.ingest([tree.root], on_warning=lambda text: None)
    tree.ingested()
    assert_answers(store, tree, "first ingest")
    for k, changes in enumerate(steps):
        for change in changes:
            getattr(tree, change[0])(*change[1:])
        store.ingest([tree.root], on_warning=lambda text: None)
        tree.ingested()
        assert_answers(store, tree, f"after step {k}: {changes}")
    if not tree.removed:
        fresh = base / "fresh"
        runstore.open(fresh).ingest([tree.root], on_warning=lambda text: None)
        assert storekit.digest(base / "store") == storekit.digest(fresh)
    shutil.rmtree(base)
