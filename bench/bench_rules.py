"""Rule text: what reading one `--rule` costs a fresh process, by the way it could be read.

    python bench/bench_rules.py [-n N]

Runs each of these as its own Python process N times (default 15), interleaved round-robin so
every one sees the same machine, and reports the median and best wall time and each one's
excess over the floor (docs/architecture.md, "Rule text", cites the figures):

* floor: `import runstore.health.rules` (the models; no rule read);
* runstore's scanner: the same, then `parse_rule` of one threshold and one trend rule
  (health/grammar.py, what `runstore check --rule` runs);
* sqlglot's DuckDB tokenizer (what the two scanners before it read rules with): the same
  import, then the dialect imported and both rules tokenized;
* lark (a parser generator; the `bench` extra installs it): the same import, then lark
  imported, a grammar of both forms built (LALR) and both rules parsed.

Prints a Markdown table for docs/benchmarks.md, with the machine's load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RULES = ("optim/entropy < 0.05", "drop(env/all/reward/total, 0.8) > 0.2")
FLOOR = "import runstore.health.rules\n"
GRAMMAR = r'''
start: trend | threshold
trend: TREND "(" metric ("," number)? ")" OP number | "stale" OP number
threshold: metric OP number
metric: BARE | QUOTED
number: SIGNED_NUMBER | "(" number ")"
TREND.2: "drop" | "rise"
OP: ">=" | "<=" | ">" | "<"
BARE: /[^\s"'`()\[\]{},;<>=!]+/
QUOTED: /"([^"]|"")*"/ | /'([^']|'')*'/
%import common.SIGNED_NUMBER
%ignore /\s+/
'''
CASES = {
    "floor: import runstore.health.rules": FLOOR,
    "runstore's scanner (health/grammar.py)":
        FLOOR + f"from runstore.health.rules import parse_rule\n"
                f"for r in {RULES!r}: parse_rule(r)\n",
    "sqlglot's DuckDB tokenizer (before)":
        FLOOR + f"from sqlglot.dialects.duckdb import DuckDB\n"
                f"for r in {RULES!r}: DuckDB().tokenize(r)\n",
    "lark, LALR grammar built and used":
        FLOOR + f"import lark\np = lark.Lark({GRAMMAR!r}, parser='lalr')\n"
                f"for r in {RULES!r}: p.parse(r)\n",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=15, help="rounds")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for name, code in CASES.items():  # each must work before it is timed
        subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=REPO)
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.n):
        for name, code in CASES.items():
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=REPO)
            times[name].append(time.perf_counter() - t)
    floor = statistics.median(times[next(iter(CASES))])
    print(f"load average {os.getloadavg()[0]:.1f}; {args.n} interleaved rounds\n")
    print("| process | median, s | best, s | median over the floor, s |")
    print("|---|---|---|---|")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name} | {med:.3f} | {min(ts):.3f} | {med - floor:+.3f} |")


if __name__ == "__main__":
    main()
