"""Query benchmark: runstore against the pandas loop users write today, side by side.

    python bench/bench_query.py [--tree DIR] [--store DIR]

On the benchmark tree (see bench_ingest.py; written if missing) and a store ingested from it
(made if missing), measures in one run:

1. the pandas loop (bench/pandas_baseline.py) answering "which runs had KL above 0.01" and
   "mean reward over the last 10 steps per run";
2. `store.sql(...)` answering the same two questions in-process (each call a cursor on the
   snapshot's cached database, as every call is), best of 3;
3. the whole `runstore sql "select * from kl_health where flagged"` process, best of 3;
4. `store.metrics(["env/all/reward/total"], wide=True)` over all runs, best of 3;
5. KL side by side, each the best of `--repeat` rounds that run every item once in turn (so a
   busy machine slows all of them alike): the scan of the four KL keys alone
   (`KL_SCAN_SQL`), the KL question over `kl_health` (`KL_QUESTION_SQL`), the in-process part
   of `runstore check` (`store.check()`, default rules), the KL chart's query
   (`charts.kl_series`) — each as a ratio to the scan and to the pandas loop.

Prints Markdown tables for docs/benchmarks.md.
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
KL_KEYS = ("optim/kl_sample_train_v1", "optim/kl_sample_train_v2", "kl_sample_train_v1",
           "kl_sample_train_v2")
# What the KL question costs at least: reading its keys' values once.
KL_SCAN_SQL = ("select run_id, max(value) as max_value from metrics_raw where key in ("
               + ", ".join(f"'{k}'" for k in KL_KEYS) + ") group by 1")
KL_QUESTION_SQL = ("select r.run_name from kl_health k join runs r using (run_id) "
                   "where k.flagged")
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
    ap.add_argument("--repeat", type=int, default=15, help="rounds of the KL side-by-side")
    ap.add_argument("--no-ingest", action="store_true",
                    help="query the store as it is (e.g. one this user may not write)")
    args = ap.parse_args()

    import runstore
    from runstore import demo

    if not args.tree.is_dir():
        demo.generate_tree(args.tree, demo.bench_specs(profile="real"), seed=0, workers=2)
    store = runstore.open(args.store)
    if not args.no_ingest:
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
    kl_side_by_side(store, pd_kl, sorted(flagged_pd), args.repeat)


def kl_side_by_side(store, pd_kl: float, flagged_pd: list[str], repeat: int) -> None:
    """The KL question, `runstore check` and the KL chart's query against the scan of the KL
    keys, measured in the same rounds."""
    from runstore.present import charts

    items = {
        "scan of the 4 KL keys (`max(value) ... group by run_id`)": lambda: store.sql(KL_SCAN_SQL),
        "KL question: `kl_health ... where k.flagged`": lambda: store.sql(KL_QUESTION_SQL),
        "`runstore check`, in-process (`store.check(config=False)`)":
            lambda: store.check(config=False),
        "KL chart's query (`charts.kl_series`)": lambda: charts.kl_series(store),
    }
    # The answers first: the question and check name the runs the pandas loop names.
    assert sorted(store.sql(KL_QUESTION_SQL)["run_name"].to_list()) == flagged_pd
    assert sorted(store.check(config=False)["run_name"].to_list()) == flagged_pd
    assert charts.kl_series(store).num_rows > 0
    times: dict[str, list[float]] = {name: [] for name in items}
    for fn in items.values():
        fn()  # warm: the snapshot's database, Parquet footers, imports
    for _ in range(repeat):
        for name, fn in items.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    scan = min(times[next(iter(items))])
    print(f"\nKL side by side, best of {repeat} rounds (pandas loop {pd_kl:.2f} s):\n")
    print("| measurement | best, ms | median, ms | × the KL-key scan | pandas loop ÷ this |")
    print("|---|---|---|---|---|")
    for name, ts in times.items():
        b, med = min(ts), sorted(ts)[len(ts) // 2]
        print(f"| {name} | {b * 1000:.1f} | {med * 1000:.1f} | {b / scan:.2f} | "
              f"{pd_kl / b:.0f}× |")


if __name__ == "__main__":
    main()
