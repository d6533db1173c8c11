"""Where ingest time goes: each stage of reading one run, timed on a few runs of the tree.

    python bench/bench_stages.py [--tree DIR] [--runs 10]

For the first N runs of the benchmark tree, times (in-process, no store) the JSON parse of
metrics and timing files, the metrics unpivot, the span nesting, the logtree normalizer, and a
Parquet write of the resulting rows, and prints seconds per run for each stage.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq

from runstore.ingest.discover import discover
from runstore.ingest.normalize import logtree, metrics, timing
from runstore.ingest.normalize.base import Context
from runstore.ingest import parse as jsonl

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, default=HERE / "out" / "tree")
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    acc: dict[str, float] = defaultdict(float)
    runs = []
    for rd in discover(args.tree):
        runs.append(rd)
        if len(runs) == args.runs:
            break
    out = Path(tempfile.mkdtemp(prefix="runstore-stages-"))
    for rd in runs:
        ctx = Context(run_id=rd.run_id, source_id=1, rel_path=rd.run_name)
        for f in rd.files:
            data = (Path(rd.path) / f.rel_path).read_bytes()
            t = time.perf_counter()
            if f.kind == "metrics":
                jsonl.fast_table(data)
                acc["metrics: JSON parse"] += time.perf_counter() - t
                t = time.perf_counter()
                table, _ = metrics.normalize(data, 1, ctx)
                acc["metrics: parse + unpivot"] += time.perf_counter() - t
                t = time.perf_counter()
                pq.write_table(table, out / "m.parquet")
                acc["metrics: Parquet write"] += time.perf_counter() - t
            elif f.kind == "timing_spans":
                jsonl.fast_table(data, timing.RECORD)
                acc["spans: JSON parse"] += time.perf_counter() - t
                t = time.perf_counter()
                table, _ = timing.normalize(data, 1, ctx)
                acc["spans: parse + flatten + nesting"] += time.perf_counter() - t
                t = time.perf_counter()
                pq.write_table(table, out / "s.parquet")
                acc["spans: Parquet write"] += time.perf_counter() - t
            elif f.kind == "logtree":
                logtree.normalize(data, ctx)
                acc["logtrees: parse + walk"] += time.perf_counter() - t
    print(f"{len(runs)} runs of {args.tree}\n")
    print("| stage | s per run |")
    print("|---|---|")
    for k, v in acc.items():
        print(f"| {k} | {v / len(runs):.3f} |")


if __name__ == "__main__":
    main()
