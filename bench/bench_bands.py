"""`compare`'s answers in-process, from several checkouts side by side in one run.

    python bench/bench_bands.py --store DIR --src base=DIR --src new=DIR [--rounds 5]
        [--repeat 3]

For each checkout (`--src LABEL=DIR`, repeatable; default: this one), a Python process that
imports runstore from DIR opens the store and times each question below, best of `--repeat`
after a warm-up call; the checkouts take turns for `--rounds` rounds (so each sees the same
machine), and the table gives each question's median over the rounds, in ms, with each
checkout's ratio to the first's. The questions are what the web UI and the MCP tools ask
(`Store.compare`, a polars frame), over `env/all/reward/total`:

* by learning rate; by `auto` (seeds set aside); one group per run (every run's curve);
* by learning rate, smoothed with W = 0.9; on the time axis, by learning rate.

Every checkout's answer to each question is checked equal to the first's (same groups and x,
numbers within 1e-9 relative) before any figure is printed. On the 100-run store
(`runstore --store bench/out/store-doctor ingest bench/out/tree-real`) these are 200,000
points each.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

METRIC = "env/all/reward/total"
QUESTIONS = {
    "by learning_rate": {"group_by": "learning_rate"},
    "by auto": {"group_by": "auto"},
    "one group per run": {},
    "by learning_rate, smooth 0.9": {"group_by": "learning_rate", "smooth": 0.9},
    "by learning_rate, x=time": {"group_by": "learning_rate", "x": "time"},
}

# One round in one checkout: times each question (best of N), writes the answers.
CHILD = r"""
import json, sys, time
import runstore
store_dir, repeat, answers = sys.argv[1], int(sys.argv[2]), sys.argv[3]
questions = json.loads(sys.argv[4])
store = runstore.open(store_dir)
out = {}
for name, kwargs in questions.items():
    ask = lambda: store.compare(METRIC, **kwargs)
    df = ask()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        ask()
        times.append(time.perf_counter() - t)
    out[name] = min(times)
    if answers:
        df.write_parquet(f"{answers}/{name}.parquet")
print(json.dumps(out))
""".replace("METRIC", repr(METRIC))


def run(src: Path, store: Path, repeat: int, answers: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(store), str(repeat), answers,
                           json.dumps(QUESTIONS)], capture_output=True, text=True, env=env,
                          cwd=src, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def same(a_dir: Path, b_dir: Path) -> None:
    """Raise unless every answer in `b_dir` equals the one in `a_dir` (numbers to 1e-9)."""
    import polars as pl

    for name in QUESTIONS:
        a = pl.read_parquet(a_dir / f"{name}.parquet")
        b = pl.read_parquet(b_dir / f"{name}.parquet")
        if a.columns != b.columns or a.height != b.height:
            raise AssertionError(f"{name}: shapes differ: {a.shape} vs {b.shape}")
        for col in a.columns:
            for x, y in zip(a[col].to_list(), b[col].to_list()):
                if isinstance(x, float) and isinstance(y, float):
                    if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12):
                        raise AssertionError(f"{name}: {col} {x} vs {y}")
                elif x != y:
                    raise AssertionError(f"{name}: {col} {x!r} vs {y!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--src", action="append", default=[], metavar="LABEL=DIR")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    sources = [(s.split("=", 1)[0], Path(s.split("=", 1)[1]).resolve()) for s in args.src] or \
        [("this", Path(__file__).resolve().parent.parent)]
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        for label, _ in sources:
            (Path(tmp) / label).mkdir()
        times: dict[str, list[dict[str, float]]] = {label: [] for label, _ in sources}
        for i in range(args.rounds):
            for label, src in sources:
                answers = str(Path(tmp) / label) if i == 0 else ""
                times[label].append(run(src, args.store.resolve(), args.repeat, answers))
        for label, _ in sources[1:]:
            same(Path(tmp) / sources[0][0], Path(tmp) / label)
    first = sources[0][0]
    print(f"Load average {load:.2f} before, {os.getloadavg()[0]:.2f} after; medians over "
          f"{args.rounds} rounds of the best of {args.repeat}, ms; answers checked equal.\n")
    print("| question | " + " | ".join(label for label, _ in sources) + " |")
    print("|---|" + "---|" * len(sources))
    for name in QUESTIONS:
        cells = []
        base = statistics.median(r[name] for r in times[first])
        for label, _ in sources:
            med = statistics.median(r[name] for r in times[label])
            cells.append(f"{med * 1000:.1f}" + ("" if label == first else f" ({med / base:.2f}×)"))
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
