"""Capture ingest benchmark: a token-level capture file of >= 1 GB, ingested, beside two readers.

    python bench/bench_capture.py [--dir DIR] [--size 1.1e9] [--repeat 2]

Writes one run (config.json, a one-line metrics.jsonl and `capture/sample.jsonl` of `--size`
bytes made by `runstore.demo.write_capture`: realistic sample records of 200-1200 prompt and
50-800 sampled tokens with their logprobs) unless DIR already holds it, then measures in one
run, each in a fresh process (so peak RSS is per step), alternating `--repeat` times:

1. `json.loads` of every line (Python's decoder, which the capture normalizer uses): the floor
   of a reader that checks every field;
2. DuckDB `read_json` of the file into memory (a table), the fastest reader on the machine;
3. a full `runstore ingest` into an empty store (samples, capture_events, committed as Delta).

Then 1% more records are appended and ingested again (the incremental read). Prints a Markdown
table (MB/s, ratios of medians, CPU seconds, peak RSS) for docs/benchmarks.md.
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
JSON_LOADS = r"""
import json, sys
n = 0
with open(sys.argv[1], "rb") as f:
    for line in f:
        json.loads(line)
        n += 1
"""
DUCKDB = r"""
import duckdb, sys
con = duckdb.connect(":memory:")
con.execute("create table t as select * from read_json(?, format='newline_delimited', "
            "maximum_object_size=1073741824)", [sys.argv[1]])
"""


def timed(cmd: list[str]) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds (user + system) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"{' '.join(cmd)} failed ({status}): {err[-2000:]}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def make_run(run: Path, size: int) -> None:
    from runstore import demo

    (run / "capture").mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text('{"model_name": "Qwen/Qwen3-8B", "loss_fn": "ppo"}\n')
    (run / "metrics.jsonl").write_text('{"step": 0, "env/all/reward/total": 0.5}\n')
    t = time.perf_counter()
    n = demo.write_capture(run / "capture" / "sample.jsonl", size)
    print(f"wrote {n} capture records in {time.perf_counter() - t:.1f} s", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=HERE / "out" / "capture")
    ap.add_argument("--size", type=float, default=1.1e9)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    run = args.dir / "runs" / "big_capture"
    capture = run / "capture" / "sample.jsonl"
    if not capture.is_file() or capture.stat().st_size < args.size:
        make_run(run, int(args.size))
    size = capture.stat().st_size
    py = sys.executable
    work = Path(tempfile.mkdtemp(prefix="runstore-bench-capture-", dir=args.dir))
    loads, duck, ingest = [], [], []
    try:
        for i in range(args.repeat):
            loads.append(timed([py, "-c", JSON_LOADS, str(capture)]))
            duck.append(timed([py, "-c", DUCKDB, str(capture)]))
            ingest.append(timed([py, "-m", "runstore", "--store", str(work / f"store{i}"),
                                 "ingest", "-q", str(args.dir / "runs")]))
        # The incremental read: a copy ingested, 1% more records appended, ingested again.
        for i in range(args.repeat):
            shutil.rmtree(work / f"store{i}", ignore_errors=True)
        tree = work / "tree"
        shutil.copytree(args.dir / "runs", tree)
        store = work / "store-inc"
        timed([py, "-m", "runstore", "--store", str(store), "ingest", "-q", str(tree)])
        with open(capture, "rb") as src, open(tree / "big_capture" / "capture" / "sample.jsonl",
                                               "ab") as dst:
            dst.write(src.read(size // 100).rsplit(b"\n", 1)[0] + b"\n")
        inc = timed([py, "-m", "runstore", "--store", str(store), "ingest", "-q", str(tree)])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def med(xs: list[tuple[float, float, float]], k: int) -> float:
        return statistics.median(x[k] for x in xs)

    mb = size / 1e6
    print(f"capture file: {mb:.0f} MB\n")
    print("| measurement | wall s (each run) | MB/s (median) | CPU s (median) | peak RSS MB |")
    print("|---|---|---|---|---|")
    for name, xs in (("`json.loads` of every line", loads), ("DuckDB `read_json` into a table",
                                                           duck),
                     ("runstore ingest (samples + capture_events, Delta)", ingest)):
        print(f"| {name} | {', '.join(f'{x[0]:.1f}' for x in xs)} | {mb / med(xs, 0):.1f} | "
              f"{med(xs, 2):.1f} | {max(x[1] for x in xs):.0f} |")
    print(f"| **ratio ingest / json.loads (medians, wall)** | | **{med(ingest, 0) / med(loads, 0):.2f}** | | |")
    print(f"| ratio ingest / DuckDB read_json (medians, wall) | | {med(ingest, 0) / med(duck, 0):.2f} | | |")
    print(f"| re-ingest after 1% more records appended, s | {inc[0]:.1f} | | {inc[2]:.1f} | {inc[1]:.0f} |")


if __name__ == "__main__":
    main()
