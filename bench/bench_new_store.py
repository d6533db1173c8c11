"""A new store: what making one costs (the migrations a first ingest runs), and a first ingest.

    python bench/bench_new_store.py [--tree DIR] [-n N] [--rounds R] [--src LABEL=DIR ...]

For each checkout (`--src LABEL=DIR`, repeatable; default this one), a process that imports
that checkout's runstore and, N times (default 20), creates a new store under a temporary
directory (the writer's lock and `migrate.apply`, as `runstore ingest` does before reading
a file) and, separately, ingests TREE (default: ../shared/sample-runs/sl, one small run)
into another new store; the processes run interleaved for R rounds (default 5) so each
checkout sees the same machine. Prints the median per store over all rounds, in ms, and
each checkout's ratio to the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

# Run in a child process, with the checkout's code first on sys.path.
CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
from runstore.storage import migrate
from runstore.storage.location import location
from runstore.storage.writer import writer
import runstore

n, tree = int(sys.argv[1]), Path(sys.argv[2])
work = Path(tempfile.mkdtemp(prefix="bench-new-store-"))
make, ingest = [], []
for i in range(-1, n):  # the first one warms the imports, untimed
    t = time.perf_counter()
    with writer(location(work / f"m{i}")) as w:
        migrate.apply(w)
    t1 = time.perf_counter()
    runstore.open(work / f"i{i}").ingest([tree], on_warning=lambda w: None)
    t2 = time.perf_counter()
    if i >= 0:
        make.append(t1 - t)
        ingest.append(t2 - t1)
print(json.dumps({"make": make, "ingest": ingest}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=HERE.parent / "shared" / "sample-runs" / "sl")
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--src", action="append", default=[], metavar="LABEL=DIR")
    args = ap.parse_args()
    srcs = [tuple(s.split("=", 1)) for s in args.src] or [("this", str(HERE))]
    got: dict[str, dict[str, list[float]]] = {label: {"make": [], "ingest": []}
                                              for label, _ in srcs}
    for _ in range(args.rounds):
        for label, src in srcs:
            env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
            with tempfile.TemporaryDirectory() as tmp:
                out = subprocess.run([sys.executable, "-c", CHILD, str(args.n),
                                      str(args.tree.resolve())], env=env, cwd=tmp,
                                     check=True, capture_output=True, text=True).stdout
            for k, v in json.loads(out.splitlines()[-1]).items():
                got[label][k] += v
    load = os.getloadavg()[0]
    print(f"{args.rounds} rounds x {args.n} stores per checkout; load average {load:.1f}")
    print("| checkout | new store, ms | × first | first ingest of the tree, ms | × first |")
    print("|---|---|---|---|---|")
    first = {k: statistics.median(got[srcs[0][0]][k]) for k in ("make", "ingest")}
    for label, _ in srcs:
        make, ingest = (statistics.median(got[label][k]) for k in ("make", "ingest"))
        print(f"| {label} | {make * 1000:.1f} | {make / first['make']:.2f} | "
              f"{ingest * 1000:.1f} | {ingest / first['ingest']:.2f} |")


if __name__ == "__main__":
    main()
