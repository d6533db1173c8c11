"""Compare benchmark: runstore's keys, diff and compare against the pandas loop, side by side.

    python bench/bench_compare.py [--tree DIR] [--store DIR] [--repeat N] [--no-ingest]

On the benchmark tree (written if missing, as bench_query.py does) and a store ingested from
it, measures in one run:

1. the pandas loop (bench/pandas_compare.py) answering "mean ± band of env/all/reward/total
   per learning rate, smoothed with W = 0.9", once (it takes seconds);
2. `analysis.compare.compare(store, METRIC, group_by=["learning_rate"], smooth=0.9)`, the
   same answer in-process (checked equal to the pandas one first), best of N;
3. `analysis.diff.diff(store, <10 runs>)`, best of N;
4. `store.keys()` (every key, from the `metric_keys` summary the ingest keeps), best of N,
   beside the scan of `metrics_raw` it replaces (`keys` over a snapshot without the summary,
   as a schema-1 store is read), best of 3.

Targets (issue 15): compare ≤ 0.25 s and ≥ 50× the pandas loop; diff of 10 runs ≤ 50 ms;
keys ≤ 50 ms. Prints a Markdown table for docs/benchmarks.md. All through the public
`Store` methods, in-process, after one warm-up call each.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_query import best  # noqa: E402  (best of n wall times, as every bench here)

METRIC = "env/all/reward/total"
WEIGHT = 0.9


def check_same(ours: Any, theirs: Any) -> int:
    """Cells (group, step, column) where the two answers differ; raises on a shape mismatch."""
    import polars as pl

    pd_frame = pl.from_pandas(theirs).rename({"group": "learning_rate"})
    joined = ours.join(pd_frame, on=["learning_rate", "step"], how="full", suffix="_pd")
    if joined.height != ours.height or joined.height != pd_frame.height:
        raise AssertionError(f"different (group, step) cells: runstore {ours.height}, pandas "
                             f"{pd_frame.height}, joined {joined.height}")
    bad = 0
    for col in ("n", "mean", "std", "min", "max", "smooth_n", "smooth_mean", "smooth_std",
                "smooth_min", "smooth_max"):
        for a, b in zip(joined[col].to_list(), joined[f"{col}_pd"].to_list()):
            if a is None or b is None or (isinstance(b, float) and math.isnan(b)):
                bad += not ((a is None) and (b is None or math.isnan(b)))
            elif not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
                bad += 1
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, default=HERE / "out" / "tree")
    ap.add_argument("--store", type=Path, default=HERE / "out" / "store")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-ingest", action="store_true",
                    help="query the store as it is (e.g. one this user may not write)")
    args = ap.parse_args()

    import pandas_compare
    import runstore
    from runstore import demo
    from runstore.query import keys as query_keys

    if not args.tree.is_dir():
        demo.generate_tree(args.tree, demo.bench_specs(profile="real"), seed=0, workers=2)
    store = runstore.open(args.store)
    if not args.no_ingest:
        store.ingest([args.tree])

    t = time.perf_counter()
    theirs = pandas_compare.compare_pandas(args.tree, METRIC, "learning_rate", WEIGHT)
    pd_time = time.perf_counter() - t

    def ours() -> Any:
        return store.compare(METRIC, group_by=["learning_rate"], smooth=WEIGHT)

    answer = ours()
    mismatches = check_same(answer, theirs)
    if mismatches:
        raise AssertionError(f"runstore and pandas differ in {mismatches} cells")
    rs_compare = best(ours, args.repeat)

    ten = store.sql("select run_name from runs order by run_name limit 10")["run_name"].to_list()
    store.diff(ten)
    rs_diff = best(lambda: store.diff(ten), args.repeat)

    keys = store.keys()
    rs_keys = best(store.keys, args.repeat)
    real = query_keys.summarised
    query_keys.summarised = lambda s: False  # type: ignore[assignment] - the scan it replaces
    try:
        assert store.keys().equals(keys)
        scan = best(store.keys, min(args.repeat, 3))
    finally:
        query_keys.summarised = real  # type: ignore[assignment]
    n_runs = len(store.sql("select run_id from runs"))
    summary_rows = store.sql("select count(*) as n from metric_keys")["n"][0]

    print(f"{n_runs} runs; {answer.height} (learning rate, step) rows; {keys.height} keys; "
          f"{summary_rows} metric_keys rows\n")
    print("| measurement | pandas loop | runstore | speed-up | target |")
    print("|---|---|---|---|---|")
    print(f"| compare {METRIC} by learning_rate, smooth 0.9, s | {pd_time:.2f} | "
          f"{rs_compare:.3f} | {pd_time / rs_compare:.0f}× | ≤ 0.25 s, ≥ 50× |")
    print(f"| diff of 10 runs, ms | | {rs_diff * 1000:.1f} | | ≤ 50 ms |")
    print(f"| keys (metric_keys summary), ms | | {rs_keys * 1000:.1f} | | ≤ 50 ms |")
    print(f"| keys by a scan of metrics_raw (what the summary replaces), ms | | "
          f"{scan * 1000:.0f} | {scan / rs_keys:.0f}× | |")

if __name__ == "__main__":
    main()
