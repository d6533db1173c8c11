"""The per-file read-and-normalize step of an ingest, at this checkout against a base commit,
side by side in one process.

    python bench/bench_normalizers.py --tree bench/out/tree [--base main] [--rounds 3]
        [--every 1]

The base commit's `runstore` package is extracted into a temporary directory under the name
`runstore_base` (its imports rewritten), so both versions load into this one process and each
file is normalized by both, alternately (which one goes first alternates too), from the same
bytes in memory. Measured per kind, as the ingest's read threads do it:

* metrics / timing: `normalize` on every `metrics.jsonl` / `timing_spans.jsonl` (pyarrow's
  reader, the unpivot or the span nesting);
* trace, checkpoints, rollouts: `parse.records` over each file (Python's decoder);
* logtree, config: `normalize` on every file (the nesting pre-check and the tree walk);
* append: `process.process_file` reading the last 10 lines of every append-only file as an
  incremental ingest does (the ledger entry rolled back by 10 lines: the fingerprint check,
  the read, the normalize, the new fingerprint), the "+10 steps" case without the commit.

Prints the CPU seconds of the calling thread (pyarrow's reader runs in it) and the wall
seconds per kind and side, summed over files, the median of the rounds, and the ratio.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def base_package(commit: str, into: Path) -> None:
    """`runstore` at `commit` as the package `runstore_base` under `into`."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "runstore"],
                         check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    (into / "runstore").rename(into / "runstore_base")
    for path in (into / "runstore_base").rglob("*.py"):
        text = path.read_text()
        text = re.sub(r"\bfrom runstore([. ])", r"from runstore_base\1", text)
        text = re.sub(r"\bimport runstore\b", "import runstore_base", text)
        path.write_text(text)


def files_of(tree: Path, every: int) -> dict[str, list[Path]]:
    kinds: dict[str, list[Path]] = {k: [] for k in ("metrics", "timing", "trace", "checkpoints",
                                                    "rollouts", "logtree", "config")}
    names = {"metrics.jsonl": "metrics", "timing_spans.jsonl": "timing",
             "trace_events.jsonl": "trace", "checkpoints.jsonl": "checkpoints",
             "config.json": "config"}
    runs = sorted({p.parent for p in tree.rglob("config.json")})[::every]
    for run in runs:
        for p in sorted(run.rglob("*")):
            if p.name in names:
                kinds[names[p.name]].append(p)
            elif p.name.endswith("_rollout_summaries.jsonl"):
                kinds["rollouts"].append(p)
            elif p.name.endswith("_logtree.json"):
                kinds["logtree"].append(p)
    return kinds


def work_for(pkg: str, kind: str) -> Callable[[Path, bytes], Any]:
    norm = importlib.import_module(f"{pkg}.normalize")
    jsonl = importlib.import_module(f"{pkg}.parse.jsonl")
    ctx = lambda p: norm.Context(run_id="r", source_id=1, rel_path=p.name)  # noqa: E731
    if kind == "metrics":
        m = importlib.import_module(f"{pkg}.normalize.metrics")
        return lambda p, data: m.normalize(data, 1, ctx(p))
    if kind == "timing":
        t = importlib.import_module(f"{pkg}.normalize.timing")
        return lambda p, data: t.normalize(data, 1, ctx(p))
    if kind in ("trace", "checkpoints", "rollouts"):
        return lambda p, data: list(jsonl.records(data, 1, ctx(p)))
    mod = importlib.import_module(f"{pkg}.normalize.{kind}")
    return lambda p, data: mod.normalize(data, ctx(p))


def append_task(pkg: str, path: Path, run: Path) -> tuple[Callable[[], Any], int]:
    """A `process_file` call reading the last 10 lines of `path`, as after an append."""
    disc = importlib.import_module(f"{pkg}.discover")
    led = importlib.import_module(f"{pkg}.ledger")
    work = importlib.import_module(f"{pkg}.work")
    data = path.read_bytes()
    data = data[: data.rfind(b"\n") + 1]
    lines = data.split(b"\n")[:-1]
    offset = len(data) - sum(len(x) + 1 for x in lines[-10:])
    f = next(f for f in disc.scan_run(str(run), "run").files if f.rel_path == path.name)
    state: dict[str, Any] = {"tail": data[max(0, offset - led.TAIL):offset].hex()}
    if path.name in ("metrics.jsonl", "timing_spans.jsonl"):
        state["max_step"] = 10 ** 9  # a later step: no re-logged spans to delete
    if getattr(led, "PREFIX_HASH_MAX", 0) >= offset:
        import zlib

        state["crc"] = zlib.crc32(data[:offset])
    entry = led.Entry(source_id=1, run_id="r", rel_path=path.name, kind=f.kind,
                      size=offset, mtime_ns=f.mtime_ns - 1, offset=offset,
                      lines=len(lines) - 10, state=state)
    task = work.FileTask(str(run), "r", "run", f, entry)
    return (lambda: work.process_file(task)), len(data) - offset


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=HERE / "out" / "tree")
    ap.add_argument("--base", default="main")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--every", type=int, default=1, help="take every N-th run of the tree")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="runstore-base-"))
    base_package(args.base, tmp)
    sys.path.insert(0, str(tmp))
    sys.path.insert(0, str(ROOT))
    kinds = files_of(args.tree, args.every)
    sides = ("base", "this")
    pkgs = {"base": "runstore_base", "this": "runstore"}
    gc.disable()  # as the ingest runs
    results: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for kind, paths in [*kinds.items(), ("append", [])]:
        results[kind] = {s: [] for s in sides}
        for r in range(args.rounds):
            cpu = {s: 0.0 for s in sides}
            wall = {s: 0.0 for s in sides}
            todo = paths if kind != "append" else [p for k in ("metrics", "timing", "trace",
                                                               "checkpoints")
                                                   for p in kinds[k]]
            for i, p in enumerate(todo):
                order = sides if (i + r) % 2 == 0 else sides[::-1]
                if kind == "append":
                    calls = {s: append_task(pkgs[s], p, p.parent)[0] for s in sides}
                else:
                    data = p.read_bytes()
                    fns = {s: work_for(pkgs[s], kind) for s in sides}
                    calls = {s: (lambda s=s: fns[s](p, data)) for s in sides}
                for s in order:
                    c0, w0 = time.thread_time(), time.perf_counter()
                    calls[s]()
                    cpu[s] += time.thread_time() - c0
                    wall[s] += time.perf_counter() - w0
                gc.collect()
            for s in sides:
                results[kind][s].append((cpu[s], wall[s]))
        n = len(paths) if kind != "append" else len(todo)
        med = {s: (statistics.median(c for c, _ in results[kind][s]),
                   statistics.median(w for _, w in results[kind][s])) for s in sides}
        print(f"{kind:12s} {n:5d} files  CPU base {med['base'][0]:7.3f} s  this "
              f"{med['this'][0]:7.3f} s  ({med['this'][0] / max(med['base'][0], 1e-9):.3f})   "
              f"wall base {med['base'][1]:7.3f} s  this {med['this'][1]:7.3f} s  "
              f"({med['this'][1] / max(med['base'][1], 1e-9):.3f})", flush=True)
    total = {s: sum(statistics.median(c for c, _ in results[k][s]) for k in results
                    if k != "append") for s in sides}
    print(f"{'all kinds':12s}              CPU base {total['base']:7.3f} s  this "
          f"{total['this']:7.3f} s  ({total['this'] / total['base']:.3f})")


if __name__ == "__main__":
    main()
