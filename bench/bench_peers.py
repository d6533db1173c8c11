"""Peer benchmark: runstore against trackio (the local tracker researchers would otherwise pick),
side by side in one run, on the same runs.

    python bench/bench_peers.py --tree DIR [--repeat 5] [--keep DIR]
    python bench/bench_peers.py --make 10 --steps 200        # a quick run on a small tree
    python bench/bench_peers.py --questions DIR [--repeat 5]  # only the questions, again

`--tree` names a benchmark tree (bench/make_tree.py's 100 runs x 2000 steps); `--make N`
writes bench/make_tree.py's tree of N runs (`--steps`, seed 0) under the work directory first.
Everything is written under a new temporary directory (or `--keep DIR`), removed at the end
unless `--keep`: a copy of each run's config.json and metrics.jsonl (what both tools read),
the runstore store, and trackio's directory (`TRACKIO_DIR`, with `HF_HOME` beside it).
`--questions DIR` times only the questions (3. below) over what an earlier `--keep DIR` left
there, with the code of this checkout (measures 1. and 2. are not taken again).
trackio is kept local: its Space/server/dataset/bucket variables are unset, the Hugging Face
hub is offline, no dashboard is launched, and an audit hook refuses every socket connection
and name lookup that is not the loopback, so nothing can leave the machine.

Measures, each ratio trackio / runstore (above 1: runstore is ahead):

1. ingest vs logging: `runstore ingest` of the copied tree (a whole process) against a whole
   process that ports each run into trackio as a user would (`trackio.init(project, name,
   group, config)`, `trackio.log(line, step=...)` for each metrics.jsonl line with a step,
   `trackio.finish()`);
2. disk: the store's bytes against trackio's directory;
3. questions, each answered by every path and checked to agree, best of `--repeat`
   interleaved rounds: "which runs had KL > 0.01" (the latest write of each step, either KL
   family, the `optim/` spelling first), "mean `env/all/reward/total` over each run's last 10
   reward steps" (NaN left out), "per sweep, the learning rate of the run with the best such
   mean", and the one-metric curve of `env/all/reward/total` for every run. trackio answers
   through its Python API (`SQLiteStorage.get_metric_values` per run, what its dashboard
   reads), its SQL command (`trackio query project --sql`, i.e. `SQLiteStorage.query_project`;
   it refuses results over 10,000 rows, so the curve has no such path), and raw SQL over its
   SQLite file (`json_extract` over the metrics column, and per-run lookups of the last steps
   through its `(run_id, step)` index); runstore through `store.sql`-style queries on an open
   store over the generic `metrics` view and over its canned views (`kl_health`,
   `last_steps`, `run_summary`). The best of each side is compared.

Prints Markdown tables for docs/benchmarks.md. Run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
PROJECT = "bench"
REWARD = "env/all/reward/total"
KL_THRESHOLD = 0.01
# The KL spellings, (family, preferred first): tinker-cookbook 0.6.x writes `optim/...`.
KL_FAMILIES = (("optim/kl_sample_train_v1", "kl_sample_train_v1"),
               ("optim/kl_sample_train_v2", "kl_sample_train_v2"))
# Variables that would send trackio's data elsewhere or start a server.
REMOTE_VARS = ("TRACKIO_SPACE_ID", "TRACKIO_SERVER_URL", "TRACKIO_DATASET_ID",
               "TRACKIO_BUCKET_ID", "TRACKIO_REGISTRY_BUCKET_ID", "TRACKIO_WRITE_TOKEN",
               "TRACKIO_WEBHOOK_URL", "SPACE_ID", "SPACE_REPO_NAME", "SPACE_HOST", "SYSTEM",
               "HF_TOKEN", "GRADIO_SHARE", "GRADIO_MCP_SERVER")


# ---------------------------------------------------------------------------------------------
# Keeping trackio on this machine


def local_only_env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in REMOTE_VARS}
    env.update(TRACKIO_DIR=str(work / "trackio"), HF_HOME=str(work / "hf"), HF_HUB_OFFLINE="1",
               HF_HUB_DISABLE_TELEMETRY="1", DO_NOT_TRACK="1", GRADIO_ANALYTICS_ENABLED="False")
    return env


def refuse_network() -> None:
    """An audit hook: any socket connection or name lookup off the loopback raises."""
    def loopback(host: Any) -> bool:
        return host in (None, "", "localhost", "127.0.0.1", "::1") or str(host).startswith("127.")

    def hook(event: str, args: tuple) -> None:
        if event == "socket.connect":
            addr = args[1]
            if isinstance(addr, tuple) and not loopback(addr[0]):
                raise RuntimeError(f"bench_peers: refused a connection to {addr!r}")
        elif event == "socket.getaddrinfo" and not loopback(args[0]):
            raise RuntimeError(f"bench_peers: refused a lookup of {args[0]!r}")

    sys.addaudithook(hook)


# ---------------------------------------------------------------------------------------------
# The runs


def runs_of(tree: Path) -> list[Path]:
    return sorted(p.parent for p in tree.rglob("metrics.jsonl"))


def copy_tree(tree: Path, dst: Path) -> list[str]:
    """config.json and metrics.jsonl of every run (hard links where the file system allows)."""
    names = []
    for run in runs_of(tree):
        name = run.relative_to(tree).as_posix()
        (dst / name).mkdir(parents=True, exist_ok=True)
        for f in ("config.json", "metrics.jsonl"):
            if (run / f).is_file():
                try:
                    os.link(run / f, dst / name / f)
                except OSError:
                    shutil.copy2(run / f, dst / name / f)
        names.append(name)
    return names


def port_to_trackio(tree: Path) -> None:
    """What a user porting the runs would write: one trackio run per run directory."""
    refuse_network()
    import trackio

    for run in runs_of(tree):
        name = run.relative_to(tree).as_posix()
        config_file = run / "config.json"
        config = json.loads(config_file.read_text()) if config_file.is_file() else {}
        trackio.init(project=PROJECT, name=name, group=str(Path(name).parent.parent),
                     config=config, embed=False, auto_log_gpu=False, auto_log_cpu=False)
        with open(run / "metrics.jsonl") as f:
            for line in f:
                row = json.loads(line)
                step = row.pop("step", None)
                if isinstance(step, int):  # step-less summary rows are not metrics of a step
                    trackio.log(row, step=step)
        trackio.finish()


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


# ---------------------------------------------------------------------------------------------
# The questions: runstore


def kl_filter(col: str) -> str:
    return f"{col} in ({', '.join(repr(k) for f in KL_FAMILIES for k in f)})"


RS_KL_VIEW = ("select r.run_name from kl_health k join runs r using (run_id) where k.flagged")
RS_KL_METRICS = f"""
select distinct run_name from (
    select run_id, run_name, step,
           coalesce(max(value) filter (where key = '{KL_FAMILIES[0][0]}'),
                    max(value) filter (where key = '{KL_FAMILIES[0][1]}')) as v1,
           coalesce(max(value) filter (where key = '{KL_FAMILIES[1][0]}'),
                    max(value) filter (where key = '{KL_FAMILIES[1][1]}')) as v2
    from metrics where {kl_filter('key')} group by all)
where (v1 > {KL_THRESHOLD} and not isnan(v1)) or (v2 > {KL_THRESHOLD} and not isnan(v2))
"""
RS_LAST10 = f"""
select run_name, avg(value) filter (where not isnan(value)) as last10
from (select run_name, value, row_number() over (partition by run_id order by step desc) as k
      from metrics where key = '{REWARD}' and value is not null)
where k <= 10 group by run_name
"""
RS_LAST10_SUMMARY = ("select run_name, last_reward_ma10 as last10 from run_summary "
                     "where last_reward_ma10 is not null")
RS_LAST10_STEPS = f"""
select r.run_name, avg(l.value) filter (where not isnan(l.value)) as last10
from last_steps as l join runs as r using (run_id)
where l.key = '{REWARD}'
group by r.run_name
"""
RS_BEST = """
select sweep, arg_max(learning_rate, last10) as learning_rate
from (select regexp_replace(q.run_name, '/[^/]+/[^/]+$', '') as sweep, r.learning_rate,
             q.last10
      from ({last10}) as q join runs r using (run_name) where q.last10 is not null)
group by sweep
"""
RS_CURVE = f"select run_name, step, value from metrics where key = '{REWARD}'"


# ---------------------------------------------------------------------------------------------
# The questions: trackio


def jx(key: str) -> str:
    """A number logged under `key` in trackio's JSON column (NaN/±Infinity are strings there)."""
    e = f"json_extract(metrics, '$.\"{key}\"')"
    return f"(case when json_type(metrics, '$.\"{key}\"') in ('real', 'integer') then {e} end)"


def jx_any(key: str) -> str:
    """Whether the row logs `key` at all (a number or NaN/±Infinity as a string)."""
    return f"json_type(metrics, '$.\"{key}\"') is not null"


TR_KL = f"""
select distinct run_name from (
    select run_name, coalesce({jx(KL_FAMILIES[0][0])}, {jx(KL_FAMILIES[0][1])}) as v1,
           coalesce({jx(KL_FAMILIES[1][0])}, {jx(KL_FAMILIES[1][1])}) as v2,
           row_number() over (partition by run_id, step order by id desc) as latest
    from metrics)
where latest = 1 and (v1 > {KL_THRESHOLD} or v2 > {KL_THRESHOLD})
"""
TR_LAST10 = f"""
select run_name, avg(v) as last10 from (
    select run_name, v, row_number() over (partition by run_id order by step desc) as k
    from (select run_id, run_name, step, {jx(REWARD)} as v,
                 row_number() over (partition by run_id, step order by id desc) as latest
          from metrics where {jx_any(REWARD)})
    where latest = 1)
where k <= 10 group by run_name
"""
TR_CURVE = f"""
select run_name, step, v from (
    select run_name, step, json_extract(metrics, '$."{REWARD}"') as v,
           row_number() over (partition by run_id, step order by id desc) as latest
    from metrics where {jx_any(REWARD)})
where latest = 1
"""


def sweep_of(run_name: str) -> str:
    return run_name.rsplit("/", 2)[0]


def number(v: Any) -> float | None:
    """A trackio value as a number: its NaN/±Infinity strings back to floats."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}.get(v)


class Trackio:
    """trackio's paths to each answer (its API, its SQL command, raw SQL over its file)."""

    def __init__(self) -> None:
        from trackio.sqlite_storage import SQLiteStorage

        self.storage = SQLiteStorage
        self.db = SQLiteStorage.get_project_db_path(PROJECT)
        self.runs = SQLiteStorage.get_runs(PROJECT)

    def raw(self, sql: str, params: tuple = ()) -> list[tuple]:
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            return con.execute(sql, params).fetchall()
        finally:
            con.close()

    def command(self, sql: str) -> list[tuple]:
        res = self.storage.query_project(PROJECT, sql)
        return [tuple(r[c] for c in res["columns"]) for r in res["rows"]]

    def api_series(self, key: str) -> dict[str, dict[int, float | None]]:
        """Each run's values of `key` through the API, the later write of a step winning
        (the API returns rows in write order)."""
        out = {}
        for run in self.runs:
            steps: dict[int, float | None] = {}
            for r in self.storage.get_metric_values(PROJECT, run, key):
                steps[r["step"]] = number(r["value"])
            out[run] = steps
        return out

    def api_kl(self) -> set[str]:
        fams = [[self.api_series(k) for k in fam] for fam in KL_FAMILIES]
        flagged = set()
        for run in self.runs:
            for pref, other in fams:
                steps = {**other[run], **pref[run]}  # the prefixed spelling wins at a step
                if any(v is not None and v > KL_THRESHOLD for v in steps.values()):
                    flagged.add(run)
        return flagged

    def api_last10(self) -> dict[str, float | None]:
        return {run: mean_last10(steps) for run, steps in self.api_series(REWARD).items()
                if steps}

    def index_last10(self) -> dict[str, float | None]:
        """Per run, its rows from the last step down through the (run_id, step) index, until
        10 reward steps are seen (the later write of a step winning)."""
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            ids = con.execute("select distinct run_id, run_name from configs").fetchall()
            out = {}
            for run_id, run_name in ids:
                seen: dict[int, float | None] = {}
                for step, metrics in con.execute(
                        "select step, metrics from metrics where run_id = ? "
                        "order by step desc, id desc", (run_id,)):
                    if step in seen:
                        continue
                    row = json.loads(metrics)
                    if REWARD in row:
                        seen[step] = number(row[REWARD])
                        if len(seen) == 10:
                            break
                if seen:
                    out[run_name] = mean_last10(seen)
            return out
        finally:
            con.close()

    def configs(self) -> dict[str, Any]:
        return {n: json.loads(c).get("learning_rate")
                for n, c in self.raw("select run_name, config from configs")}


def mean_last10(steps: dict[int, float | None]) -> float | None:
    last = [steps[s] for s in sorted(steps, reverse=True)[:10]]
    vals = [v for v in last if v is not None and not math.isnan(v)]
    return sum(vals) / len(vals) if vals else None


def best_per_sweep(last10: dict[str, float | None], lr: dict[str, Any]) -> dict[str, Any]:
    best: dict[str, tuple[float, Any]] = {}
    for run, v in last10.items():
        if v is not None and (sweep_of(run) not in best or v > best[sweep_of(run)][0]):
            best[sweep_of(run)] = (v, lr.get(run))
    return {s: b[1] for s, b in best.items()}


# ---------------------------------------------------------------------------------------------
# Agreement and timing


def close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return a == b


def agree(name: str, answers: dict[str, Any]) -> None:
    ref_name, ref = next(iter(answers.items()))
    for path, got in answers.items():
        if isinstance(ref, dict):
            ok = got.keys() == ref.keys() and all(close(got[k], ref[k]) for k in ref)
        else:
            ok = got == ref
        if not ok:
            raise SystemExit(f"{name}: {path} disagrees with {ref_name}")


def best_of(items: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in items}
    for _ in range(repeat):  # interleaved rounds: a busy machine slows every path alike
        for k, fn in items.items():
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
    return {k: min(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path)
    ap.add_argument("--make", type=int, metavar="N", help="write make_tree.py's N-run tree")
    ap.add_argument("--steps", type=int, default=200, help="steps per run for --make")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    ap.add_argument("--questions", type=Path, metavar="DIR",
                    help="only the questions, over what an earlier --keep DIR left there")
    ap.add_argument("--port", type=Path, help=argparse.SUPPRESS)  # the trackio process
    args = ap.parse_args()
    if args.port is not None:
        port_to_trackio(args.port)
        return
    if args.questions is not None:
        if not (args.questions / "store").is_dir() or not (args.questions / "trackio").is_dir():
            ap.error(f"{args.questions} holds no store and trackio directory: run with "
                     "--keep first")
        questions(args, args.questions, local_only_env(args.questions))
        return
    if (args.tree is None) == (args.make is None):
        ap.error("give --tree DIR or --make N")
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-peers-"))
    work.mkdir(parents=True, exist_ok=True)
    env = local_only_env(work)
    try:
        run(args, work, env)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, work: Path, env: dict[str, str]) -> None:
    tree = args.tree
    if args.make is not None:
        tree = work / "generated"
        subprocess.run([sys.executable, str(HERE / "make_tree.py"), str(tree), "--runs",
                        str(args.make), "--steps", str(args.steps)], check=True)
    runs = copy_tree(tree, work / "runs")
    lines = sum(1 for r in runs for _ in open(work / "runs" / r / "metrics.jsonl"))
    print(f"{len(runs)} runs, {lines} metrics.jsonl lines; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)

    # 1. ingest vs logging: whole processes, one after the other
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "runstore", "--store", str(work / "store"), "ingest",
                    "-q", str(work / "runs")], check=True, env=env)
    ingest_s = time.perf_counter() - t
    t = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--port", str(work / "runs")], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    log_s = time.perf_counter() - t
    store_bytes, trackio_bytes = tree_bytes(work / "store"), tree_bytes(work / "trackio")

    print(f"\n| measure | runstore | trackio | trackio / runstore |\n|---|---|---|---|")
    print(f"| ingest {lines} lines vs logging them | {ingest_s:.1f} s | {log_s:.1f} s | "
          f"{log_s / ingest_s:.1f}× |")
    print(f"| disk | {store_bytes / 1e6:.0f} MB | {trackio_bytes / 1e6:.0f} MB | "
          f"{trackio_bytes / store_bytes:.1f}× |")
    questions(args, work, env)


def questions(args: argparse.Namespace, work: Path, env: dict[str, str]) -> None:
    """3. the questions, in this process (trackio reads TRACKIO_DIR when imported)."""
    print(f"questions: load average before {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
          flush=True)
    os.environ.clear()
    os.environ.update(env)
    refuse_network()
    import runstore

    store = runstore.open(work / "store")
    tr = Trackio()

    def rs(sql: str) -> list[tuple]:
        return store.fetch(sql, convert=lambda r: r.fetchall())

    def rs_map(sql: str) -> dict[str, Any]:
        return dict(rs(sql))

    asked: list[tuple[str, dict[str, Callable[[], Any]], dict[str, Callable[[], Any]]]] = [
        ("which runs had KL > 0.01",
         {"runstore `kl_health`": lambda: {r[0] for r in rs(RS_KL_VIEW)},
          "runstore `metrics` view": lambda: {r[0] for r in rs(RS_KL_METRICS)}},
         {"trackio API": tr.api_kl,
          "trackio SQL command": lambda: {r[0] for r in tr.command(TR_KL)},
          "trackio raw SQL": lambda: {r[0] for r in tr.raw(TR_KL)}}),
        ("mean reward over each run's last 10 steps",
         {"runstore `last_steps`": lambda: rs_map(RS_LAST10_STEPS),
          "runstore `run_summary`": lambda: rs_map(RS_LAST10_SUMMARY),
          "runstore `metrics` view": lambda: rs_map(RS_LAST10)},
         {"trackio API": tr.api_last10,
          "trackio SQL command": lambda: {n: v for n, v in tr.command(TR_LAST10)},
          "trackio raw SQL over its index": tr.index_last10}),
        ("best learning rate per sweep",
         {"runstore `last_steps`": lambda: rs_map(RS_BEST.format(last10=RS_LAST10_STEPS)),
          "runstore `run_summary`": lambda: rs_map(RS_BEST.format(last10=RS_LAST10_SUMMARY)),
          "runstore `metrics` view": lambda: rs_map(RS_BEST.format(last10=RS_LAST10))},
         {"trackio API": lambda: best_per_sweep(tr.api_last10(), tr.configs()),
          "trackio raw SQL over its index": lambda: best_per_sweep(tr.index_last10(),
                                                                   tr.configs())}),
        (f"curve of {REWARD}, every run",
         {"runstore `metrics` view": lambda: {(n, s): v for n, s, v in rs(RS_CURVE)}},
         {"trackio API": lambda: {(run, s): v for run, steps in tr.api_series(REWARD).items()
                                  for s, v in steps.items()},
          "trackio raw SQL": lambda: {(n, s): number(v) for n, s, v in tr.raw(TR_CURVE)}}),
    ]
    rows = []
    for name, ours, theirs in asked:
        answers = {k: fn() for k, fn in {**ours, **theirs}.items()}
        if name.startswith("mean"):  # runs without a non-NaN reward: no row on either side
            answers = {k: {n: v for n, v in a.items() if v is not None}
                       for k, a in answers.items()}
        agree(name, answers)
        times = best_of({**ours, **theirs}, args.repeat)
        our = min(times[k] for k in ours)
        their = min(times[k] for k in theirs)
        for k in {**ours, **theirs}:
            rows.append((name, k, f"{times[k] * 1000:.1f} ms", ""))
        rows.append((name, "**trackio best / runstore best**", "", f"**{their / our:.2f}×**"))
    print("\n| question | path | best time | ratio |\n|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(f"\nload average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
