"""Ingest benchmark: runstore's full ingest against DuckDB's own read_json, side by side.

    python bench/bench_ingest.py [--tree DIR] [--runs 100] [--steps 2000] [--repeat 2]
    python bench/bench_ingest.py --tree DIR --families

Writes the benchmark tree (100 RL runs × 2000 steps, ~60 metric keys a row, ~50 spans a step,
rollouts and logtrees every 250 steps) unless DIR already holds one, then measures in one run,
each in a fresh process (so peak RSS is per step):

1. baseline — DuckDB `read_json` reading every JSONL file of the tree into memory
   (one `create table … as select * from read_json([...], union_by_name=true)` per file family);
2. a full `runstore ingest` into an empty store;
3. a no-op re-ingest (whole CLI process);
4. 10 steps appended to every run, then a re-ingest (whole CLI process).

The baseline and the full ingest alternate `--repeat` times; the ratio uses the medians. The
CPU time of both sides (user + system, every thread) is printed too: unlike wall time it
hardly moves with the machine's load, so its ratio is the one to compare across machines.
Prints a Markdown table for docs/benchmarks.md.

`--families` runs the baseline alone, once, on the tree as it is (it only reads it), and prints
the CPU seconds (every thread) of each family's read_json, and the bytes of the files it does
not read at all (logtrees, `metrics.jsonl.pre_resume_*`, config, HTML, ...), which the ingest
reads: what each side of the ratio pays for.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASELINE = r"""
import duckdb, sys, glob, os, time
root = sys.argv[1]
families = {}
for dirpath, _, files in os.walk(root):
    for f in files:
        if f.endswith(".jsonl"):
            fam = "rollouts" if f.endswith("_rollout_summaries.jsonl") else f
            families.setdefault(fam, []).append(os.path.join(dirpath, f))
con = duckdb.connect(":memory:")
for i, (fam, paths) in enumerate(sorted(families.items())):
    cpu = time.process_time()
    con.execute(f"create table t{i} as select * from read_json(?, format='newline_delimited', union_by_name=true)", [sorted(paths)])
    if sys.argv[2:] == ["--families"]:
        mb = sum(os.path.getsize(p) for p in paths) / 1e6
        print(f"| {fam} | {len(paths)} | {mb:.0f} | {time.process_time() - cpu:.2f} |")
"""


def timed(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds (user + system, all threads) of one child
    process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"{' '.join(cmd)} failed ({status}): {err[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def tree_bytes(root: Path, suffix: str = "") -> int:
    return sum(p.stat().st_size for p in root.rglob(f"*{suffix}") if p.is_file())


def families(tree: Path) -> None:
    """The baseline's CPU per file family, and what it leaves unread (see the module)."""
    load = os.getloadavg()[0]
    print("| family | files | MB | read_json CPU s |\n|---|---|---|---|", flush=True)
    subprocess.run([sys.executable, "-c", BASELINE, str(tree), "--families"], check=True)
    unread: dict[str, int] = {}
    for p in tree.rglob("*"):
        if p.is_file() and not p.name.endswith(".jsonl"):
            kind = "*_logtree.json" if p.name.endswith("_logtree.json") else p.suffix or p.name
            unread[kind] = unread.get(kind, 0) + p.stat().st_size
    print("\nnot read by the baseline, MB: " + ", ".join(
        f"{k} {v / 1e6:.0f}" for k, v in sorted(unread.items(), key=lambda kv: -kv[1])))
    print(f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, default=HERE / "out" / "tree")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--work", type=Path, default=None,
                    help="where the stores and the tree's copy go (default: a temporary "
                         "directory); removed at the end")
    ap.add_argument("--families", action="store_true",
                    help="only the baseline, once, CPU per file family (see above)")
    args = ap.parse_args()
    if args.families:
        families(args.tree)
        return

    from runstore import demo

    if not args.tree.is_dir():
        t = time.perf_counter()
        demo.generate_tree(args.tree, demo.bench_specs(args.runs, args.steps), seed=0, workers=2)
        print(f"wrote {args.tree} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="runstore-bench-", dir=args.work))
    tree = work / "tree"
    shutil.copytree(args.tree, tree)  # appends below must not change the cached tree
    py = sys.executable
    # -P: `-m` would otherwise put the working directory first on the path.
    cli = [py, "-P", "-m", "runstore"]
    base_t, ingest_t, base_mem, ingest_mem, base_cpu, ingest_cpu = [], [], [], [], [], []
    load = [os.getloadavg()[0]]
    try:
        for i in range(args.repeat):
            w, m, c = timed([py, "-c", BASELINE, str(tree)])
            base_t.append(w); base_mem.append(m); base_cpu.append(c)
            store = work / f"store{i}"
            shutil.rmtree(work / f"store{i - 1}", ignore_errors=True)
            w, m, c = timed(cli + ["--store", str(store), "ingest", "-q", str(tree)])
            ingest_t.append(w); ingest_mem.append(m); ingest_cpu.append(c)
        store = work / f"store{args.repeat - 1}"
        noops = [timed(cli + ["--store", str(store), "ingest", "-q", str(tree)])[0]
                 for _ in range(max(3, args.repeat))]
        runs = [p.parent for p in tree.rglob("metrics.jsonl")]
        before = tree_bytes(tree, ".jsonl")
        for run in runs:
            demo.append_steps(run, 10)
        appended = tree_bytes(tree, ".jsonl") - before
        inc, _, _ = timed(cli + ["--store", str(store), "ingest", "-q", str(tree)])
        load.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    jsonl = tree_bytes(args.tree, ".jsonl")
    total = tree_bytes(args.tree)
    b, g = statistics.median(base_t), statistics.median(ingest_t)
    print(f"tree: {len(runs)} runs × {args.steps} steps, {total / 1e6:.0f} MB "
          f"({jsonl / 1e6:.0f} MB of JSONL); load average {load[0]:.1f} at the start, "
          f"{load[-1]:.1f} at the end\n")
    print("| measurement | result |")
    print("|---|---|")
    print(f"| DuckDB read_json of every JSONL file (baseline), s | {', '.join(f'{x:.2f}' for x in base_t)} |")
    print(f"| runstore full ingest, s | {', '.join(f'{x:.2f}' for x in ingest_t)} |")
    print(f"| **ratio ingest / baseline (medians)** | **{g / b:.2f}** |")
    bc, ic = statistics.median(base_cpu), statistics.median(ingest_cpu)
    print(f"| CPU (user + system) baseline / ingest, s (medians) | {bc:.1f} / {ic:.1f} "
          f"(ratio {ic / bc:.2f}) |")
    print(f"| peak RSS baseline / ingest, MB | {max(base_mem):.0f} / {max(ingest_mem):.0f} |")
    print(f"| no-op re-ingest (whole process), s | {', '.join(f'{x:.2f}' for x in noops)} |")
    print(f"| re-ingest after 10 steps appended to every run ({appended / 1e6:.1f} MB), s | {inc:.2f} |")


if __name__ == "__main__":
    main()
