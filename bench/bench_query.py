"""Query benchmark: runstore against the pandas loop users write today, side by side.

    python bench/bench_query.py [--tree DIR --store DIR]...

Each `--tree`/`--store` pair is one benchmark store (give the pair twice to measure the wide
and the real tree in one run; a tree is written if missing, with `--profile real`, and the
store is ingested from it unless `--no-ingest`). Per store, measures:

1. the pandas loop (bench/pandas_baseline.py) answering "which runs had KL above 0.01" and
   "mean reward over the last 10 steps per run";
2. `store.sql(...)` answering the same two questions in-process (each call a cursor on the
   snapshot's cached database, as every call is), best of 3;
3. the whole `runstore sql "select * from kl_health where flagged"` process, best of 3;
4. `store.metrics(["env/all/reward/total"], wide=True)` over all runs, best of 3.

Then, for every store together, KL side by side: each item is the best of `--repeat` rounds,
and each round runs every item of every store once in turn (so a busy machine slows all of
them alike): the scan of the four KL keys alone (`KL_SCAN_SQL`), the KL question over
`kl_health` (`KL_QUESTION_SQL`), the in-process part of `runstore check` (`store.check()`,
default rules), the KL chart's query (`charts.kl_series`) — each as a ratio to its store's
scan and as the pandas loop's time divided by it (target: the question, check and the chart
at most 2x the scan, the question at least 200x faster than the pandas loop).

Last, slower queries, best of `--slow-repeat` interleaved rounds: the Runs page's query
(`store.runs()`, what `GET /api/runs` reads; target 0.3 s on the 100-run store) and
`slowest_spans` with and without its wall-time columns (`select *`, as the report reads it).

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
    ap.add_argument("--tree", type=Path, action="append",
                    help="a benchmark tree (repeat, one per --store; default bench/out/tree)")
    ap.add_argument("--store", type=Path, action="append",
                    help="the store ingested from it (default bench/out/store)")
    ap.add_argument("--repeat", type=int, default=15, help="rounds of the KL side-by-side")
    ap.add_argument("--slow-repeat", type=int, default=3, help="rounds of the slower queries")
    ap.add_argument("--no-ingest", action="store_true",
                    help="query the store as it is (e.g. one this user may not write)")
    args = ap.parse_args()
    trees = args.tree or [HERE / "out" / "tree"]
    stores = args.store or [HERE / "out" / "store"]
    if len(trees) != len(stores):
        ap.error("give one --store per --tree")

    benches = [prepare(tree, path, ingest=not args.no_ingest) for tree, path in zip(trees, stores)]
    kl_side_by_side(benches, args.repeat)
    slow_queries(benches, args.slow_repeat)


class Bench:
    """One benchmark store: its name, its `Store`, the pandas loop's KL time and answer."""

    def __init__(self, name: str, store, pd_kl: float, flagged: list[str]):
        self.name, self.store, self.pd_kl, self.flagged = name, store, pd_kl, flagged


def prepare(tree: Path, path: Path, *, ingest: bool) -> Bench:
    """Write and ingest if needed, check the answers against the pandas loop, and print the
    first tables for this store."""
    import runstore
    from runstore import demo

    if not tree.is_dir():
        demo.generate_tree(tree, demo.bench_specs(profile="real"), seed=0, workers=2)
    store = runstore.open(path)
    if ingest:
        store.ingest([tree])

    import pandas_baseline as pb

    t = time.perf_counter()
    flagged_pd = pb.kl_above(tree)
    pd_kl = time.perf_counter() - t
    t = time.perf_counter()
    rewards_pd = pb.last10_reward(tree)
    pd_rw = time.perf_counter() - t

    flagged = store.sql(KL_SQL)["run_name"].to_list()
    assert sorted(flagged) == sorted(flagged_pd), (flagged, flagged_pd)
    rewards = dict(store.sql(REWARD_SQL).iter_rows())
    assert rewards.keys() == rewards_pd.keys()
    assert all(abs(rewards[k] - rewards_pd[k]) < 1e-9 for k in rewards)
    rs_kl = best(lambda: store.sql(KL_SQL))
    rs_rw = best(lambda: store.sql(REWARD_SQL))
    cmd = [sys.executable, "-m", "runstore", "--store", str(path), "sql",
           "select * from kl_health where flagged", "--format", "csv"]
    proc = best(lambda: subprocess.run(cmd, check=True, capture_output=True))
    wide = best(lambda: store.metrics(["env/all/reward/total"], wide=True))

    print(f"\n### {path.name} (from {tree.name}): {len(rewards)} runs; {len(flagged)} flagged\n")
    print("| measurement | pandas loop | runstore | speed-up |")
    print("|---|---|---|---|")
    print(f"| which runs had KL > 0.01, s | {pd_kl:.2f} | {rs_kl:.3f} | {pd_kl / rs_kl:.0f}× |")
    print(f"| mean reward of the last 10 steps per run, s | {pd_rw:.2f} | {rs_rw:.3f} | {pd_rw / rs_rw:.0f}× |")
    print(f"| whole `runstore sql \"select * from kl_health where flagged\"` process, s | | {proc:.2f} | |")
    print(f"| `store.metrics([\"env/all/reward/total\"], wide=True)`, s | | {wide:.3f} | |")
    return Bench(path.name, store, pd_kl, sorted(flagged_pd))


def rounds(items: dict, repeat: int) -> dict[str, list[float]]:
    """Wall times of each item, `repeat` rounds that run every item once in turn (warm first)."""
    times: dict[str, list[float]] = {name: [] for name in items}
    for fn in items.values():
        fn()  # warm: the snapshot's database, Parquet footers, imports
    for _ in range(repeat):
        for name, fn in items.items():
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return times


KL_ITEMS = (
    ("scan", "scan of the 4 KL keys (`max(value) ... group by run_id`)"),
    ("question", "KL question: `kl_health ... where k.flagged`"),
    ("check", "`runstore check`, in-process (`store.check(config=False)`)"),
    ("chart", "KL chart's query (`charts.kl_series`)"),
)


def kl_side_by_side(benches: list[Bench], repeat: int) -> None:
    """The KL question, `runstore check` and the KL chart's query against the scan of the KL
    keys, every store's items measured in the same rounds."""
    from runstore.present import charts

    items = {}
    for b in benches:
        s = b.store
        # The answers first: the question and check name the runs the pandas loop names.
        assert sorted(s.sql(KL_QUESTION_SQL)["run_name"].to_list()) == b.flagged
        assert sorted(s.check(config=False)["run_name"].to_list()) == b.flagged
        assert charts.kl_series(s).num_rows > 0
        fns = {"scan": lambda s=s: s.sql(KL_SCAN_SQL),
               "question": lambda s=s: s.sql(KL_QUESTION_SQL),
               "check": lambda s=s: s.check(config=False),
               "chart": lambda s=s: charts.kl_series(s)}
        items.update({(b.name, k): fn for k, fn in fns.items()})
    times = rounds(items, repeat)
    print(f"\n### KL side by side, best of {repeat} rounds (ms; × the KL-key scan; pandas loop ÷ "
          "this)\n")
    print("| measurement | " + " | ".join(f"{b.name}: ms | ×scan | pandas ÷" for b in benches) + " |")
    print("|---|" + "---|---|---|" * len(benches))
    for key, label in KL_ITEMS:
        cells = []
        for b in benches:
            t, scan = min(times[(b.name, key)]), min(times[(b.name, "scan")])
            cells.append(f"{t * 1000:.1f} | {t / scan:.2f} | {b.pd_kl / t:.0f}×")
        print(f"| {label} | " + " | ".join(cells) + " |")


SPANS_NO_WALL = ("select run_id, run_name, name, calls, total_s, mean_s, p50_s, p95_s, max_s, "
                 "share, rank from slowest_spans")


def slow_queries(benches: list[Bench], repeat: int) -> None:
    """The Runs page's query and `slowest_spans`, best of `repeat` interleaved rounds."""
    items = {}
    for b in benches:
        s = b.store
        items[(b.name, "runs")] = lambda s=s: s.runs()
        items[(b.name, "spans_all")] = lambda s=s: s.sql("select * from slowest_spans")
        items[(b.name, "spans_no_wall")] = lambda s=s: s.sql(SPANS_NO_WALL)
    times = rounds(items, repeat)
    labels = (("runs", "Runs page: `store.runs()` (GET /api/runs), s"),
              ("spans_all", "`select * from slowest_spans`, s"),
              ("spans_no_wall", "`slowest_spans` without wall_s/wall_share, s"))
    print(f"\n### Slower queries, best of {repeat} rounds\n")
    print("| measurement | " + " | ".join(b.name for b in benches) + " |")
    print("|---|" + "---|" * len(benches))
    for key, label in labels:
        print(f"| {label} | " + " | ".join(f"{min(times[(b.name, key)]):.3f}" for b in benches)
              + " |")


if __name__ == "__main__":
    main()
