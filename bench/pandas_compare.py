"""What users write today for "mean ± band of a metric per learning rate, smoothed": a pandas
loop over run directories, one metrics.jsonl and config.json at a time.

    python bench/pandas_compare.py RUNS_DIR [METRIC] [WEIGHT]

`compare_pandas(root, metric, group_key, weight)` returns one row per (group, step) with the
columns of `store.compare(metric, group_by=[group_key], smooth=weight)`: n, n_nan, n_inf, mean,
std, min, max and the same of the smoothed values. It follows compare's rules as a careful
pandas user would: the last row of a step wins (`drop_duplicates(keep="last")`), NaN and
±Infinity stay out of the aggregates, the EMA is pandas' `ewm(alpha=1 - W, adjust=True,
ignore_na=True)` per run over the finite values, carried forward over the others.

One rule it cannot follow: pandas reads a JSON NaN and a key a row lacks both as NaN, so a
step whose metric is NaN looks like a step that did not log it (`n_nan` is 0 here, and such a
step's smoothed value is missing). The benchmark tree logs no NaN reward, so the answers agree
there (bench_compare.py checks that they do).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("metrics.jsonl"))


def compare_pandas(root: Path, metric: str = "env/all/reward/total",
                   group_key: str = "learning_rate", weight: float = 0.9) -> pd.DataFrame:
    frames = []
    for run in run_dirs(root):
        try:
            config = json.loads((run / "config.json").read_text())
        except (OSError, ValueError):
            config = {}
        df = pd.read_json(run / "metrics.jsonl", lines=True)
        if metric not in df.columns:
            continue
        s = df[["step", metric]].dropna(subset=["step", metric])
        s = s.drop_duplicates("step", keep="last").sort_values("step")
        values = pd.to_numeric(s[metric], errors="coerce").astype(float)
        finite = values.where(np.isfinite(values))
        frames.append(pd.DataFrame({
            "group": config.get(group_key), "step": s["step"].astype(int), "value": values,
            "smoothed": finite.ewm(alpha=1 - weight, adjust=True, ignore_na=True).mean().ffill(),
        }))
    data = pd.concat(frames, ignore_index=True)
    data["finite"] = data["value"].where(np.isfinite(data["value"]))
    data["is_nan"] = np.isnan(data["value"])
    data["is_inf"] = np.isinf(data["value"])
    grouped = data.groupby(["group", "step"])
    out = pd.DataFrame({
        "n": grouped["finite"].count(),
        "n_nan": grouped["is_nan"].sum(), "n_inf": grouped["is_inf"].sum(),
        "mean": grouped["finite"].mean(), "std": grouped["finite"].std(),
        "min": grouped["finite"].min(), "max": grouped["finite"].max(),
        "smooth_n": grouped["smoothed"].count(), "smooth_mean": grouped["smoothed"].mean(),
        "smooth_std": grouped["smoothed"].std(), "smooth_min": grouped["smoothed"].min(),
        "smooth_max": grouped["smoothed"].max(),
    })
    return out.reset_index()


if __name__ == "__main__":
    root = Path(sys.argv[1])
    metric = sys.argv[2] if len(sys.argv) > 2 else "env/all/reward/total"
    weight = float(sys.argv[3]) if len(sys.argv) > 3 else 0.9
    t = time.perf_counter()
    result = compare_pandas(root, metric, weight=weight)
    print(f"{len(result)} (group, step) rows in {time.perf_counter() - t:.2f} s")
