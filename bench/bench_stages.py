"""Where ingest time goes: every stage of a real ingest, timed where it runs.

    python bench/bench_stages.py --tree DIR [--every 10] [--store DIR] [--threads 0]

Ingests every `--every`-th run of the tree into a fresh store, in process, twice (the first
warms imports and the page cache), with a timer around the function that is each stage: the
discovery, the reading of source bytes, each file kind's normalizer (and, inside them,
pyarrow's JSON reader, Python's decoder, the summaries' statements), and each part of a
commit (Delta deletes, grouping rows by key, Parquet/Delta writes, compaction, content
hashes, the ledger file, the manifest). Each stage's wall seconds and the CPU seconds of the
thread that ran it are summed wherever it ran: the read-ahead threads, the commit's table
writers, the main thread. `--threads 0` (the default) reads every file inline, so the stages
add up to the ingest's wall time; with the ingest's own read-ahead threads they overlap.
Work deltalake does in its own threads is counted as the wall time the calling stage waited;
their CPU (and that of any other thread not started from Python) is listed after the table, by
thread name, where the system shows threads' CPU (Linux's /proc).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import shutil
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent

# (stage, module, attribute path of the function that is the stage), in pipeline order; an
# indented stage runs inside the ones above it and is not counted again in the total.
STAGES = [
    ("discover runs and files", "runstore.ingest.run", "_discover_all"),
    ("read source bytes", "runstore.ingest.parse", "read_span"),
    ("normalize metrics.jsonl", "runstore.ingest.normalize.metrics", "Metrics.normalize"),
    ("  of which: summaries (statements)", "runstore.ingest.summaries", "of_read"),
    ("normalize timing_spans.jsonl", "runstore.ingest.normalize.timing", "Timing.normalize"),
    ("normalize trace_events.jsonl", "runstore.ingest.normalize.trace", "Trace.normalize"),
    ("normalize logtrees", "runstore.ingest.normalize.logtree", "Logtree.normalize"),
    ("normalize rollout summaries", "runstore.ingest.normalize.rollouts", "Rollouts.normalize"),
    ("normalize checkpoints.jsonl", "runstore.ingest.normalize.checkpoints",
     "Checkpoints.normalize"),
    ("normalize config.json", "runstore.ingest.normalize.config", "Config.normalize"),
    ("  of which: pyarrow's JSON reader", "runstore.ingest.parse", "fast_table"),
    ("  of which: Python's JSON decoder", "runstore.ingest.parse", "decode_line"),
    ("ledger fingerprints", "runstore.ingest.changes", "fingerprint"),
    ("runs rows", "runstore.ingest.job", "Job._run_row"),
    ("commit: Delta deletes", "deltalake", "DeltaTable.delete"),
    ("commit: group rows by key", "runstore.storage.writer", "group_rows"),
    ("commit: Parquet/Delta writes", "deltalake", "write_deltalake"),
    ("commit: compaction", "deltalake.table", "TableOptimizer.compact"),
    ("commit: content hashes", "runstore.storage.integrity", "entry"),
    ("commit: ledger file", "runstore.storage.ledger", "write"),
    ("commit: manifest", "runstore.storage.writer", "Writer.publish"),
]

_wall: dict[str, float] = defaultdict(float)
_cpu: dict[str, float] = defaultdict(float)
_lock = threading.Lock()


def _timed(stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            with _lock:
                _wall[stage] += time.perf_counter() - wall
                _cpu[stage] += time.thread_time() - cpu
    return wrapper


def instrument() -> set[str]:
    """Put a timer around every stage's function (for the life of the process); the stages
    this revision of runstore does not have (an older one, under `PYTHONPATH`) are returned."""
    missing = set()
    for stage, module, attr in STAGES:
        try:
            owner: Any = importlib.import_module(module)
            *path, name = attr.split(".")
            for part in path:
                owner = getattr(owner, part)
            setattr(owner, name, _timed(stage, getattr(owner, name)))
        except (ImportError, AttributeError):
            missing.add(stage)
    return missing


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each of this process's live threads, summed by thread name (Linux's
    /proc; empty elsewhere). Threads started from Python are named `python` there."""
    out: dict[str, float] = defaultdict(float)
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    for task in Path("/proc/self/task").glob("*"):
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        out[name] += (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return out


def ingest(tree: Path, every: int, store: Path) -> tuple[float, float, int]:
    """A fresh ingest of every `every`-th run of `tree` into `store`: (wall s, process CPU s,
    runs)."""
    import runstore
    from runstore.ingest.discover import discover

    runs = [Path(rd.path) for rd in discover(tree)][::every]
    shutil.rmtree(store, ignore_errors=True)
    wall, cpu = time.perf_counter(), time.process_time()
    runstore.open(store).ingest(runs)
    return time.perf_counter() - wall, time.process_time() - cpu, len(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, default=HERE / "out" / "tree")
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="read-ahead threads (default 0)")
    ap.add_argument("--store", type=Path, default=None,
                    help="where the store is written (default: a temporary directory)")
    args = ap.parse_args()
    os.environ["RUNSTORE_READ_THREADS"] = str(args.threads)
    work = Path(tempfile.mkdtemp(prefix="runstore-stages-"))
    store = args.store or work / "store"
    try:
        ingest(args.tree, args.every, store)  # warm: imports, page cache
        missing = instrument()
        _wall.clear(), _cpu.clear()
        before = thread_cpu()
        wall, cpu, n = ingest(args.tree, args.every, store)
        after = thread_cpu()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    import runstore

    top_wall = sum(v for k, v in _wall.items() if not k.startswith(" "))
    top_cpu = sum(v for k, v in _cpu.items() if not k.startswith(" "))
    print(f"runstore from {Path(runstore.__file__).parent.parent}")
    print(f"{n} runs of {args.tree} (every {args.every}th), {args.threads} read-ahead threads: "
          f"{wall:.2f} s wall, {cpu:.2f} s CPU (the process)\n")
    print("| stage | wall s | CPU s (its thread) | share of the wall |")
    print("|---|---|---|---|")
    for stage, _, _ in STAGES:
        if stage in missing:
            print(f"| {stage} | — | — | — |")
        else:
            print(f"| {stage} | {_wall[stage]:.3f} | {_cpu[stage]:.3f} | {_wall[stage] / wall:.0%} |")
    print(f"| everything else (imports, lock, staging, Python glue; waiting) | "
          f"{wall - top_wall:.3f} | {max(cpu - top_cpu, 0):.3f} | {(wall - top_wall) / wall:.0%} |")
    others = {k: after[k] - before.get(k, 0.0) for k in after if k != "python"}
    if others:
        print("\nof everything else, CPU s of threads not started from Python (by name; "
              "tokio-rt-worker: deltalake's Parquet/Delta writes): "
              + ", ".join(f"{k} {v:.2f}" for k, v in sorted(others.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main()
