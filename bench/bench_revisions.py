"""Revisions side by side: the same ingest and queries run by two or more commits of runstore,
in alternation, in one run.

    python bench/bench_revisions.py --tree DIR REV [REV ...] [--repeat 3]

Each REV (anything `git rev-parse` takes; `WORKTREE` means the files as they are) is exported
with `git archive` into a temporary directory, and every measurement runs in a fresh process
with that directory first on `PYTHONPATH`, so each revision reads the tree with its own code
and writes its own store. Each round runs every revision once in turn (so a busy machine slows
all of them alike); the figures are the medians over `--repeat` rounds:

1. a full `runstore ingest DIR` into an empty store (whole CLI process, wall and CPU time);
2. a no-op re-ingest (whole CLI process);
3. in-process, on that store, warm, each the best of 5: the KL question, the mean reward over
   the last 10 steps per run, `store.check()`, `store.runs()`;
4. the whole `runstore sql "select 1"` process (the floor of every command).

Ratios are to the first REV. This is how a change that should cost nothing (a restructuring)
or that buys safety (sandboxing, checksums) is shown to cost what it costs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

QUERIES = {
    "KL question": ("select r.run_name from kl_health k join runs r using (run_id) "
                    "where k.flagged"),
    "reward, last 10 steps": """
        select run_name, avg(reward) as last10
        from (select run_name, reward,
                     row_number() over (partition by run_id order by step desc) as k
              from reward_trends where reward is not null)
        where k <= 10 group by run_name""",
}

# Run in the revision's own interpreter process: times each question on a warm store.
PROBE = r"""
import json, sys, time
import runstore
assert runstore.__file__.startswith(sys.argv[3]), (runstore.__file__, sys.argv[3])
store = runstore.open(sys.argv[1])
queries = json.loads(sys.argv[2])
def best(fn, n=5):
    fn()
    out = []
    for _ in range(n):
        t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
    return min(out)
res = {name: best(lambda q=q: store.sql(q)) for name, q in queries.items()}
res["store.check()"] = best(lambda: store.check())
res["store.runs()"] = best(lambda: store.runs())
print(json.dumps(res))
"""


def export(rev: str, into: Path) -> Path:
    """The files of `rev` (or of the working tree) in a directory of their own."""
    into.mkdir(parents=True)
    if rev == "WORKTREE":
        for name in ("runstore", "sql", "migrations"):
            shutil.copytree(REPO / name, into / name)
    else:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "runstore", "sql",
                                  "migrations"], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system of the child) seconds of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("revs", nargs="+")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="runstore-revs-"))
    try:
        srcs = {rev: export(rev, work / f"src{i}") for i, rev in enumerate(args.revs)}
        figures: dict[str, dict[str, list[float]]] = {rev: {} for rev in args.revs}

        for rev, src in srcs.items():  # compile each revision's bytecode before any timing
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True,
                           capture_output=True)

        def add(rev: str, name: str, value: float) -> None:
            figures[rev].setdefault(name, []).append(value)

        for _ in range(args.repeat):
            for i, rev in enumerate(args.revs):
                env = {**os.environ, "PYTHONPATH": str(srcs[rev])}
                store = work / f"store{i}"
                shutil.rmtree(store, ignore_errors=True)
                # -P: `-m` and `-c` would otherwise put the working directory first on the
                # path, and run a checkout's own runstore instead of the revision's.
                cli = [sys.executable, "-P", "-m", "runstore", "--store", str(store)]
                wall, cpu = timed(cli + ["ingest", "-q", str(args.tree)], env)
                add(rev, "full ingest, s", wall)
                add(rev, "full ingest CPU, s", cpu)
                add(rev, "no-op re-ingest, s", timed(cli + ["ingest", "-q", str(args.tree)],
                                                     env)[0])
                probe = subprocess.run([sys.executable, "-P", "-c", PROBE, str(store),
                                        json.dumps(QUERIES), str(srcs[rev])], env=env,
                                       capture_output=True,
                                       text=True, check=True)
                for name, seconds in json.loads(probe.stdout).items():
                    add(rev, f"{name}, ms", seconds * 1000)
                add(rev, "`runstore sql \"select 1\"` process, s",
                    min(timed(cli + ["sql", "select 1"], env)[0] for _ in range(3)))

        names = list(figures[args.revs[0]])
        head = "| | " + " | ".join(f"`{r}`" for r in args.revs) + " |"
        print(f"tree: {args.tree.name}; {args.repeat} rounds; medians; ratio to `{args.revs[0]}`\n")
        print(head)
        print("|---" * (len(args.revs) + 1) + "|")
        for name in names:
            base = statistics.median(figures[args.revs[0]][name])
            cells = []
            for rev in args.revs:
                m = statistics.median(figures[rev][name])
                cells.append(f"{m:.3g}" + ("" if rev == args.revs[0] else f" ({m / base:.2f}×)"))
            print(f"| {name} | " + " | ".join(cells) + " |")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
