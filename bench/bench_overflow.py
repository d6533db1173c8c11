"""What overflow-free aggregates and smoothing cost `compare`: side by side in one run.

    python bench/bench_overflow.py [--runs 100] [--steps 2000] [--repeat 7]

On a frame shaped as `compare`'s points for 100 runs x 2000 steps in 4 groups (random
rewards, seeded), best of N, each way:

1. smoothing per run: `analysis.smooth.ema` (scaled when values pass 2^1022, held within
   the run's largest magnitude) against polars' plain `ewm_mean` over the finite values (what `ema`
   was before);
2. the per-(group, step) statistics: `analysis.compare.group_stats` (the band statement,
   `query.statements.bands`, run by DuckDB over the polars points: mean and std summed at a
   scale chosen by the group's largest magnitude) against plain polars aggregations (what
   they were before overflow was guarded).

Both ways compute the same numbers on ordinary values (checked first); the table shows what
the safety costs a smoothed `compare`, whose points polars places (the queries around it are
unchanged).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def best(fn: Callable[[], Any], n: int) -> float:
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    import numpy as np
    import polars as pl

    from runstore.analysis.compare import group_stats
    from runstore.analysis.smooth import ema

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(0)
    n = args.runs * args.steps
    points = pl.DataFrame({
        "_run": np.repeat(np.arange(args.runs, dtype=np.uint32), args.steps),
        "_g": np.repeat(np.arange(args.runs, dtype=np.uint32) % 4, args.steps),
        "step": np.tile(np.arange(args.steps, dtype=np.int64), args.runs),
        "value": rng.normal(0.5, 0.2, n)})

    def plain_ema(column: str, w: float) -> pl.Expr:
        v = pl.col(column)
        finite = pl.when(v.is_finite()).then(v).otherwise(None)
        return finite.ewm_mean(alpha=1.0 - w, adjust=True, ignore_nulls=True).forward_fill()

    def plain_stats(frame: pl.DataFrame) -> pl.DataFrame:
        aggs = []
        for col, prefix in (("value", ""), ("smoothed", "smooth_")):
            c = pl.col(col)
            finite = pl.when(c.is_finite()).then(c)
            aggs += [c.is_finite().sum().alias(f"{prefix}n"), finite.mean().alias(f"{prefix}mean"),
                     finite.std(ddof=1).alias(f"{prefix}std"), finite.min().alias(f"{prefix}min"),
                     finite.max().alias(f"{prefix}max")]
        return frame.group_by(["_g", "step"]).agg(aggs)

    def smoothed(fn: Callable[[str, float], pl.Expr]) -> pl.DataFrame:
        return points.with_columns(fn("value", 0.9).over("_run").alias("smoothed"))

    ours_s, theirs_s = smoothed(ema), smoothed(plain_ema)
    assert np.allclose(ours_s["smoothed"].to_numpy(), theirs_s["smoothed"].to_numpy(),
                       rtol=1e-12, atol=0)

    def new_stats() -> pl.DataFrame:
        return group_stats(ours_s, ["_g", "step"], smoothed=True).sort(["_g", "step"])

    def old_stats() -> pl.DataFrame:
        return plain_stats(ours_s).sort(["_g", "step"])

    new, old = new_stats(), old_stats()
    for col in ("mean", "std", "smooth_mean", "smooth_std"):
        assert np.allclose(new[col].to_numpy(), old[col].to_numpy(), rtol=1e-12, atol=1e-15)

    t_ema_new, t_ema_old = best(lambda: smoothed(ema), args.repeat), \
        best(lambda: smoothed(plain_ema), args.repeat)
    t_agg_new, t_agg_old = best(new_stats, args.repeat), best(old_stats, args.repeat)
    print(f"{args.runs} runs x {args.steps} steps, 4 groups, best of {args.repeat}\n")
    print("| step of compare | before (plain), ms | overflow-free, ms | ratio |")
    print("|---|---|---|---|")
    print(f"| smoothing per run (EMA, W = 0.9) | {t_ema_old * 1e3:.1f} | {t_ema_new * 1e3:.1f} "
          f"| {t_ema_new / t_ema_old:.2f} |")
    print(f"| statistics per (group, step), raw and smoothed | {t_agg_old * 1e3:.1f} | "
          f"{t_agg_new * 1e3:.1f} | {t_agg_new / t_agg_old:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
