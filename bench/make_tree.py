"""Write the benchmark run tree: `python bench/make_tree.py OUT_DIR [--runs N] [--steps S] [--seed K] [--profile real|wide]`.

A thin CLI around `runstore.demo.generate_tree(bench_specs(...))`. Prints the time taken and
the size written. Uses two worker processes by default (the benchmark machine has two cores).

`--profile real` (the default) writes what tinker-cookbook 0.6.1's writers write for such runs:
the metric keys, their order and value types of each era's rows, each era's resume rule, SDK
spans where tracing is on (see `bench_specs` and docs/benchmarks.md). `--profile wide` pads every
row to ~60 keys with invented per-tag env families (the tree of the earlier benchmark figures).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--profile", choices=("real", "wide"), default="real")
    args = parser.parse_args(argv)

    from runstore import demo

    start = time.perf_counter()
    specs = demo.generate_tree(args.out_dir, demo.bench_specs(args.runs, args.steps, profile=args.profile),
                               seed=args.seed, workers=args.workers)
    elapsed = time.perf_counter() - start
    size = _tree_bytes(args.out_dir)
    print(f"wrote {len(specs)} runs x {args.steps} steps to {args.out_dir} in {elapsed:.1f} s "
          f"({size / 1e6:.1f} MB, {size / max(len(specs), 1) / 1e6:.1f} MB per run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
