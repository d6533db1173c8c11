"""What users write today: a pandas loop over run directories, one metrics.jsonl at a time.

    python bench/pandas_baseline.py RUNS_DIR

Answers the two benchmark questions — which runs had KL above 0.01, and the mean reward over
the last 10 logged steps per run — and prints how long each took.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

KL = ["optim/kl_sample_train_v1", "optim/kl_sample_train_v2"]


def run_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("metrics.jsonl"))


def kl_above(root: Path, threshold: float = 0.01) -> list[str]:
    flagged = []
    for run in run_dirs(root):
        df = pd.read_json(run / "metrics.jsonl", lines=True)
        df = df.drop_duplicates("step", keep="last")
        cols = [c for c in KL if c in df.columns]
        if cols and (df[cols] > threshold).any().any():
            flagged.append(str(run.relative_to(root)))
    return flagged


def last10_reward(root: Path) -> dict[str, float]:
    out = {}
    for run in run_dirs(root):
        df = pd.read_json(run / "metrics.jsonl", lines=True)
        if "env/all/reward/total" not in df.columns:
            continue
        df = df.dropna(subset=["env/all/reward/total"]).drop_duplicates("step", keep="last")
        out[str(run.relative_to(root))] = float(df.sort_values("step")["env/all/reward/total"].tail(10).mean())
    return out


if __name__ == "__main__":
    root = Path(sys.argv[1])
    t = time.perf_counter()
    flagged = kl_above(root)
    t1 = time.perf_counter()
    rewards = last10_reward(root)
    t2 = time.perf_counter()
    print(f"kl: {len(flagged)} runs in {t1 - t:.2f} s; last-10 reward: {len(rewards)} runs in {t2 - t1:.2f} s")
