"""Printing a large result: `render` of plain rows in each text format, per checkout.

    python bench/bench_render.py --store DIR [--rows N] [-n N] [--rounds R] [--src LABEL=DIR ...]

For each checkout (`--src LABEL=DIR`, repeatable; default this one), a process that imports
that checkout's runstore, fetches the first N rows (default 30,000) of `metrics` of the store
as plain rows (`Store.rows`, what `runstore sql` prints), and times `render(rows, FORMAT)` for
table (200 columns wide), csv, json and jsonl, and the csv module writing the same rows as
they are (the floor: no value turned into text by runstore) n times each (default 9); the
processes run interleaved for R rounds (default 3) so each checkout sees the same machine.
Prints the median of each, in ms, and each checkout's ratio to the first. The outputs of every
checkout are checked to be the same text.
"""

from __future__ import annotations

import argparse
import hashlib
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
import csv, hashlib, io, json, sys, time
import runstore
from runstore.present.render import render

store, n_rows, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = runstore.open(store).rows(
    f"select * from metrics order by run_id, key, step limit {n_rows}")

def floor():
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows.data)
    return buf.getvalue()

out, digest = {}, {}
for name, f in (("table", lambda: render(rows, "table", width=200)),
                ("csv", lambda: render(rows, "csv")), ("json", lambda: render(rows, "json")),
                ("jsonl", lambda: render(rows, "jsonl")), ("floor", floor)):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        text = f()
        times.append(time.perf_counter() - t)
    out[name] = times
    digest[name] = hashlib.sha256(text.encode()).hexdigest()
print(json.dumps({"times": out, "digest": digest, "rows": rows.num_rows}))
"""

MEASURES = ("table", "csv", "json", "jsonl", "floor")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True)
    ap.add_argument("--rows", type=int, default=30_000)
    ap.add_argument("-n", type=int, default=9)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--src", action="append", default=[], metavar="LABEL=DIR")
    args = ap.parse_args()
    srcs = [tuple(s.split("=", 1)) for s in args.src] or [("this", str(HERE))]
    got: dict[str, dict[str, list[float]]] = {label: {m: [] for m in MEASURES}
                                              for label, _ in srcs}
    digests: dict[str, set[str]] = {m: set() for m in MEASURES}
    n_rows = 0
    for _ in range(args.rounds):
        for label, src in srcs:
            env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
            with tempfile.TemporaryDirectory() as tmp:
                out = subprocess.run([sys.executable, "-c", CHILD, str(args.store.resolve()),
                                      str(args.rows), str(args.n)], env=env, cwd=tmp,
                                     check=True, capture_output=True, text=True).stdout
            answer = json.loads(out.splitlines()[-1])
            n_rows = answer["rows"]
            for m in MEASURES:
                got[label][m] += answer["times"][m]
                digests[m].add(answer["digest"][m])
    different = [m for m in MEASURES if len(digests[m]) > 1]
    if different:
        sys.exit(f"the checkouts print different text for {', '.join(different)}")
    load = os.getloadavg()[0]
    print(f"{n_rows} rows; {args.rounds} rounds x {args.n} renders per checkout; "
          f"load average {load:.1f}; the same text from every checkout")
    print("| checkout | table, ms | × first | csv, ms | × first | json, ms | × first "
          "| jsonl, ms | × first | csv module alone, ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    first = {m: statistics.median(got[srcs[0][0]][m]) for m in MEASURES}
    for label, _ in srcs:
        med = {m: statistics.median(got[label][m]) for m in MEASURES}
        cells = [f"{med[m] * 1000:.1f} | {med[m] / first[m]:.2f}" for m in MEASURES[:-1]]
        print(f"| {label} | {' | '.join(cells)} | {med['floor'] * 1000:.1f} |")


if __name__ == "__main__":
    main()
