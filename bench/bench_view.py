"""One-key questions over the generic `metrics` view against the bare scan of the key.

    python bench/bench_view.py --store DIR [--before REV] [--repeat 15]

On an open store, each question over `metrics` is timed beside the same question over
`metrics_raw` (the bare scan of the key's rows, no latest-write rule): the mean of
`env/all/reward/total` per run, the largest KL per run (two keys), one key's curve for every
run, and the mean of `env/all/reward/total` over each run's last 10 steps (bench_peers.py's
question against trackio). With `--before REV`, the `metrics` view as sql/metrics.sql was at
git revision REV is created beside it (as `metrics_before`, on the same connection) and timed
in the same rounds. The question over `metrics` is also timed through `store.fetch` (runstore's
whole per-query path: the guard, a sandboxed cursor, the result), so its cost over the bare
`execute` is runstore's own. Each figure is the best of `--repeat` interleaved rounds; the
tables give each as a ratio to its scan (target: at most ~2x): the wall time, then the CPU time
of the process (every DuckDB thread's, `getrusage`), which a busy machine inflates less than
the wall time.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KL = "('optim/kl_sample_train_v1', 'optim/kl_sample_train_v2')"
QUESTIONS = {
    "mean reward per run": ("select run_id, avg(value) from {t} "
                            "where key = 'env/all/reward/total'{live} group by 1"),
    "largest KL per run (2 keys)": "select run_id, max(value) from {t} where key in " + KL
                                   + "{live} group by 1",
    "one key's curve, every run": ("select run_id, step, value from {t} "
                                   "where key = 'env/all/reward/total'{live}"),
    # bench_peers.py's question against trackio (by run_id here, as the others are).
    "mean reward, each run's last 10 steps": (
        "select run_id, avg(value) filter (where not isnan(value)) from ("
        "select run_id, value, row_number() over (partition by run_id order by step desc) as k "
        "from {t} where key = 'env/all/reward/total' and value is not null{live}) "
        "where k <= 10 group by 1"),
}
RAW_LIVE = " and step is not null and not coalesce(pre_resume, false)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True)
    ap.add_argument("--before", metavar="REV", help="also time sql/metrics.sql as of REV")
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    import runstore

    # A connection over the newest snapshot with every table and view created.
    store = runstore.open(args.store)
    con = store.connect()
    tables = {"metrics_raw (scan)": "metrics_raw", "metrics": "metrics",
              "metrics via store.fetch": "metrics"}
    if args.before:
        text = subprocess.run(["git", "show", f"{args.before}:sql/metrics.sql"], cwd=HERE.parent,
                              check=True, capture_output=True, text=True).stdout
        body = "\n".join(line for line in text.splitlines() if not line.startswith("--"))
        con.execute(f"create or replace view metrics_before as {body}")
        tables[f"metrics as of {args.before}"] = "metrics_before"
    wall: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeat):
        for q, sql in QUESTIONS.items():
            for label, t in tables.items():
                text = sql.format(t=t, live=RAW_LIVE if t == "metrics_raw" else "")
                start, used = time.perf_counter(), cpu_time()
                if label.endswith("store.fetch"):
                    store.fetch(text, convert=lambda r: r.fetchall())
                else:
                    con.execute(text).fetchall()
                wall.setdefault((q, label), []).append(time.perf_counter() - start)
                cpu.setdefault((q, label), []).append(cpu_time() - used)
    for what, times in (("wall", wall), ("CPU", cpu)):
        print(f"\n| question ({what}) | " + " | ".join(tables) + " |")
        print("|---|" + "---|" * len(tables))
        for q in QUESTIONS:
            scan = min(times[(q, "metrics_raw (scan)")])
            cells = [f"{scan * 1000:.1f} ms"] + [
                f"{min(times[(q, label)]) * 1000:.1f} ms ({min(times[(q, label)]) / scan:.1f}×)"
                for label in list(tables)[1:]]
            print(f"| {q} | " + " | ".join(cells) + " |")


def cpu_time() -> float:
    """CPU seconds this process has used, in every thread (DuckDB's included)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


if __name__ == "__main__":
    main()
