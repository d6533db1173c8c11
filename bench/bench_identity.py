"""Runs keyed by run_id, side by side with a base commit: what naming runs by label costs.

    python bench/bench_identity.py --store bench/out/store --base BASE_TREE [--rounds 7]

`BASE_TREE` is an export of the commit to compare with (e.g. `git archive 8f6009c | tar -x -C
/tmp/base`). Each round starts one process per code tree, in turn (so a busy machine slows
both alike), and each process opens the store and times every item once after one warm-up
call: the queries that changed when the views gained `run_label` (the `metrics` view now
joins `run_labels`; `run_summary`, `kl_health` and the check's statuses read labels) and the
calls that now resolve their runs first (`compare` with a scope, the UI's series of named
runs). The best of the rounds is reported per item, with new ÷ base.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REWARD = "env/all/reward/total"

# Timed in a child process; the same calls exist at both commits.
CHILD = r"""
import json, sys, time
import runstore
from runstore.ui.api import Api
from runstore.ui.answers import Params

store = runstore.open(sys.argv[1])
names = store.sql("select run_name from runs order by 1")["run_name"].to_list()
one = names[len(names) // 2]
api = Api(store)
items = {
    "store.metrics(reward, wide=True)": lambda: store.metrics([REWARD], wide=True),
    "store.metrics(reward), one run": lambda: store.metrics([REWARD], runs=one),
    "store.runs()": lambda: store.runs(),
    "kl_health where flagged": lambda: store.arrow("select run_name from kl_health where flagged"),
    "store.check() (KL rule)": lambda: store.check(),
    "store.check(entropy rule)": lambda: store.check(rules=["optim/entropy < 0.5"],
                                                     default_rules=False),
    "store.compare(reward, runs=GLOB)": lambda: store.compare(REWARD, runs="*"),
    "GET /api/series, 3 runs": lambda: api.series(Params(
        [("metric", REWARD)] + [("run", n) for n in names[:3]])),
}
out = {}
for name, fn in items.items():
    fn()
    t = time.perf_counter()
    fn()
    out[name] = time.perf_counter() - t
print(json.dumps(out))
""".replace("REWARD", repr(REWARD))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--base", type=Path, required=True, help="the base commit's tree")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    trees = {"base": args.base.resolve(), "new": Path(__file__).resolve().parent.parent}
    best: dict[str, dict[str, float]] = {k: {} for k in trees}
    for _ in range(args.rounds):
        for which, tree in trees.items():
            env = {**os.environ, "PYTHONPATH": str(tree)}
            # -P: `-c` would otherwise put the working directory (a checkout, often) first
            # on the path, ahead of the PYTHONPATH that picks the side's code.
            p = subprocess.run([sys.executable, "-P", "-c", CHILD, str(args.store)], env=env,
                               capture_output=True, text=True, check=True)
            for name, s in json.loads(p.stdout.splitlines()[-1]).items():
                best[which][name] = min(s, best[which].get(name, s))
    print(f"best of {args.rounds} interleaved rounds (ms)\n")
    print("| call | base | new | new ÷ base |")
    print("|---|---:|---:|---:|")
    for name, base in best["base"].items():
        new = best["new"][name]
        print(f"| {name} | {base * 1e3:.1f} | {new * 1e3:.1f} | {new / base:.2f} |")


if __name__ == "__main__":
    main()
