"""No-op re-ingest: a whole `runstore ingest` process over a tree the store already holds.

    python bench/bench_noop.py --store STORE --tree TREE [-n N] [--base CHECKOUT]

STORE is ingested from TREE first when it holds no snapshot (a complete ingest by this
checkout records what the shortcut compares; see ingest/unchanged.py). Runs these processes N times each (default
9), interleaved round-robin so each sees the same machine, and prints medians (and the
spread) as a Markdown table:

* floor: `python -c "import duckdb; duckdb.sql('select 1')"`, a bare DuckDB process;
* `runstore ingest -q TREE` with this checkout (issue 31's target: ≤ 0.4 s on the 100-run
  tree);
* with `--base CHECKOUT`, the same command with that checkout's code first on PYTHONPATH (e.g.
  a worktree at the commit before a change), side by side.

Then, in this process, the parts of the shortcut: discovering the runs (a `stat` per file)
and their signature, and the store's fingerprint under the lock (storage/fingerprint.py).
A no-op writes nothing to the store but the lock's holder line.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOOR = [sys.executable, "-c", "import duckdb; duckdb.sql('select 1').fetchall()"]


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    # Not from a checkout's directory: `-m` puts the working directory first on sys.path,
    # ahead of the PYTHONPATH that picks the checkout.
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL,
                   cwd=tempfile.gettempdir())
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("-n", type=int, default=9)
    ap.add_argument("--base", type=Path, default=None)
    args = ap.parse_args()
    here = Path(__file__).resolve().parents[1]
    ingest = [sys.executable, "-m", "runstore", "--store", str(args.store), "ingest", "-q",
              str(args.tree)]
    sides = {"floor (bare DuckDB process)": (FLOOR, dict(os.environ)),
             "no-op ingest, this checkout": (ingest, {**os.environ, "PYTHONPATH": str(here)})}
    if args.base:
        sides[f"no-op ingest, {args.base.name}"] = (
            ingest, {**os.environ, "PYTHONPATH": str(args.base.resolve())})
    if not (args.store / "_runstore" / "manifests").is_dir():
        print(f"ingesting {args.tree} into {args.store} first", file=sys.stderr)
        timed(ingest, sides["no-op ingest, this checkout"][1])
    for cmd, env in sides.values():
        timed(cmd, env)  # warm the page cache and __pycache__
    times: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(args.n):
        for name, (cmd, env) in sides.items():
            times[name].append(timed(cmd, env))
    print(f"load average before/after: {os.getloadavg()[0]:.1f}; n = {args.n}\n")
    print("| process | median, s | min–max, s |\n|---|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(ts):.3f} | {min(ts):.3f}–{max(ts):.3f} |")

    sys.path.insert(0, str(here))
    from runstore.ingest import run as run_mod
    from runstore.ingest import unchanged
    from runstore.storage import fingerprint
    from runstore.storage.location import location
    from runstore.storage.lock import lock_for
    from runstore.storage.manifest import read_manifest

    root, trees = location(args.store), [location(args.tree)]
    parts: dict[str, list[float]] = {"read the manifest": [], "discover + signature": [],
                                     "lock + fingerprint + release": []}
    for _ in range(args.n):
        t0 = time.perf_counter()
        m = read_manifest(root)
        t1 = time.perf_counter()
        runs, _ = run_mod._discover_all(trees)
        unchanged.signature(runs)
        t2 = time.perf_counter()
        lock = lock_for(root)
        lock.acquire(0)
        try:
            ok = fingerprint.holds(root, m)
        finally:
            lock.release()
        t3 = time.perf_counter()
        assert ok, "the store's fingerprint does not hold: ingest it with this checkout first"
        for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2)):
            parts[k].append(v)
    print("\n| part of the shortcut (in-process) | median, ms |\n|---|---|")
    for k, ts in parts.items():
        print(f"| {k} | {statistics.median(ts) * 1000:.1f} |")


if __name__ == "__main__":
    main()
