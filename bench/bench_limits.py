"""What the memory limit costs a short command: whole processes, paired A/B, side by side.

    python bench/bench_limits.py [--store DIR] [--base REV] [-n N]

On a store (default: the one `runstore demo` writes, made in a temporary directory), runs each
pair of processes N times (default 15), A then B, and prints for each pair the median wall
time of A and of B and the median of the N ratios A/B (pairing keeps the ratio honest on a
machine whose speed drifts), and the same for CPU time (user + system, as the OS accounts
each finished process and its children), which a loaded machine moves less:

* `runstore sql "select 1"` against the floor, a bare `python -c "import duckdb;
  duckdb.sql('select 1').fetchall()"` (issue 31: at most 1.5x). This command caps its own
  process (`query/memory.py`), which costs a `/proc/self/status` read and two `setrlimit`
  calls;
* with `--base REV` (an earlier commit, exported as bench_revisions.py exports one and run
  with it first on `PYTHONPATH`), the same command against that commit's: what the cap adds;
* a process that opens the store and answers one `store.arrow("select 1", isolated=True)`
  against one that answers `store.arrow("select 1")` in its own process: what a worker
  process (start-up, warm-up, the Arrow IPC answer) would cost a one-shot command, which is
  why `runstore sql` caps itself instead.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_revisions import export, timed  # noqa: E402 - beside this file

# As bench_latency.py: bytecode written once (an installed package has it), not per run.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

ONE_QUERY = ("import sys, runstore; store = runstore.open(sys.argv[1]); "
             "store.arrow('select 1', isolated=sys.argv[2] == 'isolated'); store.close()")


def pairs(store: Path, base: Path | None, base_rev: str | None) -> list[tuple[str, list[str], dict[str, str], str,
                                                        list[str], dict[str, str]]]:
    py = sys.executable
    here = {**ENV, "PYTHONPATH": str(HERE.parent)}
    # -P: `-m` would otherwise put the working directory (a checkout, often) first on the
    # path, ahead of the PYTHONPATH that picks each side's code.
    cli = [py, "-P", "-m", "runstore", "--store", str(store), "sql", "select 1"]
    out = [('runstore sql "select 1"', cli, here,
            "floor: python -c \"import duckdb; duckdb.sql('select 1').fetchall()\"",
            [py, "-c", "import duckdb; duckdb.sql('select 1').fetchall()"], here)]
    if base is not None:
        out.append(('runstore sql "select 1"', cli, here,
                    f'runstore sql "select 1" at {base_rev}', cli,
                    {**ENV, "PYTHONPATH": str(base)}))
    out.append(('one store.arrow("select 1", isolated=True)', [py, "-c", ONE_QUERY, str(store),
                                                               "isolated"], here,
                'one store.arrow("select 1")', [py, "-c", ONE_QUERY, str(store), "own"], here))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", type=Path, default=None)
    ap.add_argument("--base", default=None, metavar="REV",
                    help="an earlier commit, to compare the command with")
    ap.add_argument("-n", type=int, default=15)
    args = ap.parse_args()
    store = args.store
    if store is None:
        where = Path(tempfile.mkdtemp(prefix="runstore-bench-limits-"))
        subprocess.run([sys.executable, "-m", "runstore", "demo", str(where)], check=True,
                       capture_output=True, env={**ENV, "PYTHONPATH": str(HERE.parent)})
        store = where / "store"
    base = None
    if args.base is not None:
        base = export(args.base, Path(tempfile.mkdtemp(prefix="runstore-bench-base-")) / "code")
    load = os.getloadavg()[0]
    rows = []
    for name_a, cmd_a, env_a, name_b, cmd_b, env_b in pairs(store.resolve(), base, args.base):
        timed(cmd_a, env_a), timed(cmd_b, env_b)  # warm the page cache and __pycache__
        a, b = [], []
        for _ in range(args.n):
            a.append(timed(cmd_a, env_a))
            b.append(timed(cmd_b, env_b))
        rows.append((name_a, name_b) + tuple(
            f(i) for i in (0, 1) for f in (
                lambda i: statistics.median(x[i] for x in a),
                lambda i: statistics.median(y[i] for y in b),
                lambda i: statistics.median(x[i] / y[i] for x, y in zip(a, b)))))
    print(f"Load average {load:.2f} before, {os.getloadavg()[0]:.2f} after; {args.n} pairs each, "
          "A then B.\n")
    print("| A | B | A wall, s | B wall, s | A/B wall | A CPU, s | B CPU, s | A/B CPU |")
    print("|---|---|---|---|---|---|---|---|")
    for name_a, name_b, *figures in rows:
        print(f"| {name_a} | {name_b} | " + " | ".join(
            f"{v:.2f}" if i % 3 == 2 else f"{v:.3f}" for i, v in enumerate(figures)) + " |")


if __name__ == "__main__":
    main()
