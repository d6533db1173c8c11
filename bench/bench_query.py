"""Query benchmark: runstore against the pandas loop users write today, side by side.

    python bench/bench_query.py [--tree DIR] [--store DIR]

On the benchmark tree (see bench_ingest.py; written if missing) and a store ingested from it
(made if missing), measures in one run:

1. the pandas loop (bench/pandas_baseline.py) answering "which runs had KL above 0.01" and
   "mean reward over the last 10 steps per run";
2. `store.sql(...)` answering the same two questions in-process (each call builds its own
   DuckDB connection over the snapshot, as every call does), best of 3;
3. the whole `runstore sql "select * from kl_health where flagged"` process, best of 3;
4. `store.metrics(["env/all/reward/total"], wide=True)` over all runs, best of 3.

Prints a Markdown table for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

KL_SQL = "select run_name from kl_health where flagged order by run_name"
REWARD_SQL = """
select run_name, avg(reward) as last10
from (select run_name, reward,
             row_number() over (partition by run_id order by step desc) as k
      from reward_trends where reward is not null)
where k <= 10 group by run_name order by run_name
"""


def best(fn, n: int = 3) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, default=HERE / "out" / "tree")
    ap.add_argument("--store", type=Path, default=HERE / "out" / "store")
    args = ap.parse_args()

    import runstore
    from runstore import demo

    if not args.tree.is_dir():
        demo.generate_tree(args.tree, demo.bench_specs(), seed=0, workers=2)
    store = runstore.open(args.store)
    store.ingest([args.tree])

    import pandas_baseline as pb

    t = time.perf_counter()
    flagged_pd = pb.kl_above(args.tree)
    pd_kl = time.perf_counter() - t
    t = time.perf_counter()
    rewards_pd = pb.last10_reward(args.tree)
    pd_rw = time.perf_counter() - t

    flagged = store.sql(KL_SQL)["run_name"].to_list()
    assert sorted(flagged) == sorted(flagged_pd), (flagged, flagged_pd)
    rewards = dict(store.sql(REWARD_SQL).iter_rows())
    assert rewards.keys() == rewards_pd.keys()
    assert all(abs(rewards[k] - rewards_pd[k]) < 1e-9 for k in rewards)
    rs_kl = best(lambda: store.sql(KL_SQL))
    rs_rw = best(lambda: store.sql(REWARD_SQL))
    cmd = [sys.executable, "-m", "runstore", "--store", str(args.store), "sql",
           "select * from kl_health where flagged", "--format", "csv"]
    proc = best(lambda: subprocess.run(cmd, check=True, capture_output=True))
    wide = best(lambda: store.metrics(["env/all/reward/total"], wide=True))

    print(f"{len(rewards)} runs; {len(flagged)} flagged\n")
    print("| measurement | pandas loop | runstore | speed-up |")
    print("|---|---|---|---|")
    print(f"| which runs had KL > 0.01, s | {pd_kl:.2f} | {rs_kl:.3f} | {pd_kl / rs_kl:.0f}× |")
    print(f"| mean reward of the last 10 steps per run, s | {pd_rw:.2f} | {rs_rw:.3f} | {pd_rw / rs_rw:.0f}× |")
    print(f"| whole `runstore sql \"select * from kl_health where flagged\"` process, s | | {proc:.2f} | |")
    print(f"| `store.metrics([\"env/all/reward/total\"], wide=True)`, s | | {wide:.3f} | |")


if __name__ == "__main__":
    main()
