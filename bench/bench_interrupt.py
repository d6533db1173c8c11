"""Interrupt benchmark: how long after Ctrl-C a running query's process has ended.

    python bench/bench_interrupt.py [--store DIR] [--repeat N] [--after SECONDS]

Runs `runstore sql` over a query that would run for hours (a cross join of two 10^8-row
ranges) as a real process, N times each way, side by side in one run:

1. SIGINT `--after` seconds into the query (the query has started: the test hook
   `RUNSTORE_TEST_POINTS` names it): the time from the signal to the process's end;
2. `--timeout SECONDS` (the query's time limit, the interrupt Ctrl-C reuses): the time from
   the limit to the process's end.

Both end the same way (DuckDB's interrupt on the query's cursor, then the process exits), so
their ratio shows what Ctrl-C adds to the interrupt itself; the promise (docs/reliability.md
§16) is under a second. Prints a Markdown table for docs/benchmarks.md. The store defaults to
one `runstore demo` writes into a temporary directory (the query reads no table).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUERY = "select count(*) from range(100000000) a, range(100000000) b"


def command(store: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "runstore", "--store", str(store), "sql", QUERY, *args]


def after_ctrl_c(store: Path, after: float, work: Path) -> float:
    points = work / "points"
    points.unlink(missing_ok=True)
    env = {**os.environ, "RUNSTORE_TEST_POINTS": str(points)}
    with subprocess.Popen(command(store), env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True) as proc:
        while not (points.exists() and "query" in points.read_text()):
            if proc.poll() is not None:
                raise SystemExit(f"the query ended first: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.005)
        time.sleep(after)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait()
        took = time.monotonic() - sent
        err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 130 or err.strip() != "interrupted":
        raise SystemExit(f"not interrupted: exit {proc.returncode}, {err!r}")
    return took


def after_time_limit(store: Path, after: float, work: Path) -> float:
    points = work / "points"
    points.unlink(missing_ok=True)
    env = {**os.environ, "RUNSTORE_TEST_POINTS": str(points)}
    with subprocess.Popen(command(store, "--timeout", str(after)), env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
        # The limit's clock starts before the guard, a moment before the query point.
        while not (points.exists() and "query" in points.read_text()):
            time.sleep(0.005)
        started = time.monotonic()
        proc.wait()
        took = time.monotonic() - started - after
        err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 5:
        raise SystemExit(f"not stopped by its limit: exit {proc.returncode}, {err!r}")
    return max(took, 0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="a store (default: a fresh `runstore demo`)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--after", type=float, default=1.0,
                        help="seconds into the query (default: 1)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="runstore-bench-interrupt-") as tmp:
        work = Path(tmp)
        store = args.store
        if store is None:
            subprocess.run([sys.executable, "-m", "runstore", "demo", str(work / "demo")],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            store = work / "demo" / "store"
        ctrl_c, limit = [], []
        for _ in range(args.repeat):  # interleaved, so machine load falls on both alike
            ctrl_c.append(after_ctrl_c(store, args.after, work))
            limit.append(after_time_limit(store, args.after, work))
    print(f"| way the query is stopped ({args.repeat} runs, {args.after:g} s into it) "
          "| median, s | max, s |")
    print("|---|---|---|")
    print(f"| SIGINT (Ctrl-C) | {statistics.median(ctrl_c):.3f} | {max(ctrl_c):.3f} |")
    print(f"| --timeout (time limit) | {statistics.median(limit):.3f} | {max(limit):.3f} |")
    print(f"| ratio, Ctrl-C / time limit (medians) | "
          f"{statistics.median(ctrl_c) / max(statistics.median(limit), 1e-9):.2f} | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
