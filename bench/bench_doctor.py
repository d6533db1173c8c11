"""`runstore doctor` in-process, side by side with the scan of what it reads (issue 33).

    python bench/bench_doctor.py --store DIR [--tree DIR] [--repeat N]

On an ingested store (the 100-run benchmark store: the tree bench/make_tree.py writes, ingested
into DIR from `--tree` first when DIR holds no store yet), each round runs, in turn (so a busy
machine slows all of them alike):

1. the scan: the live values of every key the catalogue reads, read once
   (`doctor.live_metrics`, counted and summed), and the KL table it reads besides: what the
   doctor costs at least;
2. `diagnose(store, config=False)`: the whole catalogue, every finding over every run, with
   its pre-queries, the trend rules and every finding's statement (two at a time): what
   `store.doctor()` and `runstore doctor` do in-process;
3. `store.check()`: `runstore check`'s in-process part (the default KL rule), for scale.

Prints, for `--repeat` rounds after one warm-up round, each item's best and median seconds of
wall time and of CPU time (the process's user + system time: what the item costs whatever else
the shared machine runs; DuckDB uses both cores, so a quiet machine's wall time is at most
that), the doctor's wall time over the scan's (per round, then the median), and the load
average; then the statements one more run of the doctor sends (by the wall clock; the
findings' overlap, two at a time), as Markdown for docs/benchmarks.md. The target: the doctor
answers in at most 1 s in-process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def scan_query(store) -> tuple[str, dict]:
    """The scan: what the doctor reads at least (the live values of its keys, the KL table)."""
    from runstore.health.doctor import CATALOGUE
    from runstore.health.doctor.diagnose import literal_keys
    from runstore.query.keys import family
    from runstore.resources import statement

    keys = set().union(*(literal_keys(f.sql) for f in CATALOGUE))
    for f in CATALOGUE:
        if f.keys_sql is not None:
            keys |= {r["key"] for r in store.arrow(f.keys_sql).to_pylist()}
        if f.trend is not None and f.trend[1] is not None:
            keys |= set(family(f.trend[1]))
    unplain = [r["run_id"] for r in store.arrow(statement("doctor.unplain_runs")).to_pylist()]
    sql = (f"select (select count(*) from metric_kl) as kl, count(*) as n, sum(value) as s "
           f"from ({statement('doctor.live_metrics')})")
    return sql, {"live_keys": sorted(keys), "live_unplain": unplain}


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cpu_timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process: user + system, every thread)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF)
    wall = timed(fn)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    import runstore
    from runstore.health.doctor import diagnose

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--tree", type=Path, help="ingest this tree into --store when it holds none")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    store = runstore.open(args.store)
    if store.snapshot() is None:
        if args.tree is None:
            ap.error(f"{args.store} holds no store yet: give --tree to ingest one")
        print(store.ingest([args.tree]).summary(), file=sys.stderr)
    sql, params = scan_query(store)
    items = {"scan": lambda: store.arrow(sql, params),
             "doctor": lambda: diagnose(store, config=False),
             "check": lambda: store.check(config=False)}
    for fn in items.values():  # warm-up: footers cached, views bound, modules imported
        fn()
    import os

    times: dict[str, list[float]] = {name: [] for name in items}
    cpus: dict[str, list[float]] = {name: [] for name in items}
    load = os.getloadavg()[0]
    for _ in range(args.repeat):
        for name, fn in items.items():
            wall, cpu = cpu_timed(fn)
            times[name].append(wall)
            cpus[name].append(cpu)
    load = (load + os.getloadavg()[0]) / 2
    ratios = [d / s for d, s in zip(times["doctor"], times["scan"])]
    runs = store.sql("select count(*) as n from runs").item()
    rows = store.sql("select count(*) as n from metrics_raw").item()
    found = diagnose(store, config=False)
    print(f"\n**{args.store.name}** ({runs} runs, {rows:,} metrics_raw rows; "
          f"{found.summary()}): best and median of {args.repeat} interleaved rounds (s), "
          f"load average {load:.1f} on 2 cores\n")
    print("| item | wall, best | wall, median | CPU, best | CPU, median |")
    print("|---|---|---|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {min(ts):.3f} | {statistics.median(ts):.3f} | "
              f"{min(cpus[name]):.3f} | {statistics.median(cpus[name]):.3f} |")
    print(f"\ndoctor / scan, per round: median {statistics.median(ratios):.2f}x "
          f"(best {min(ratios):.2f}x, worst {max(ratios):.2f}x)\n")

    # The statements one run of the doctor sends, by the clock (the findings' overlap).
    sent: list[tuple[float, str]] = []
    arrow = store.arrow

    def spy(query, p=None, **kw):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        out = arrow(query, p, **kw)
        first = next((line.strip() for line in query.splitlines()
                      if line.strip() and not line.strip().startswith("--")), "")
        sent.append((time.perf_counter() - start, first[:70]))
        return out

    store.arrow = spy  # type: ignore[method-assign]
    total = timed(lambda: diagnose(store, config=False))
    store.arrow = arrow  # type: ignore[method-assign]
    print(f"One more run: {total:.3f} s; the statements it sends, in the order they ended (the "
          "findings' run two at a time, so their times overlap) (s):\n")
    print("| statement (first line) | s |")
    print("|---|---|")
    for dt, first in sent:
        print(f"| `{first.replace('|', '&#124;')}` | {dt:.3f} |")


if __name__ == "__main__":
    main()
