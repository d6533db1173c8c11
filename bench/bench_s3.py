"""A store on S3: the requests and the time of an ingest, a no-op re-ingest, a query, the doctor.

    python bench/bench_s3.py [--tree TREE] [--repeat N] [--base CHECKOUT] [--latency MS]

Starts a moto S3 server on 127.0.0.1 (bench_scale's `Moto`, from the test extra's
`moto[server]`; stopped at the end), and for each checkout (this one; with `--base`, that one
too, e.g. a worktree at the commit before a change), N times, interleaved: a full ingest of
TREE (default: the demo tree, generated under a temporary directory) into a new store in a new
bucket, a no-op re-ingest of it, and `select count(*) from metrics` and `store.doctor()` (a
statement per finding) on it. Each step runs in a process of its own with the checkout first on
PYTHONPATH and times itself in process (`time.perf_counter` around the call, start-up not
included); the requests it made are counted from the server's request log, by method and by
what they ask for (a Delta log's commits, listings, table files, runstore's own objects).
Prints a Markdown table: the median time of each step and its request counts (the counts do not
vary between repeats unless the code does).

On S3 every request is a round trip (tens of milliseconds to a real region, not the
sub-millisecond of a local server), so the request count is the figure that carries over.
`--latency MS` puts a proxy in front of the server that holds each request MS milliseconds
before passing it on (one wait per request, not per packet of its body): the times then say
what requests made one after the other cost against a distant service.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import Moto  # noqa: E402 - beside this file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from s3proxy import HeldRequests  # noqa: E402 - the S3 tests' proxy

STEP = r"""
import json, sys, time
import runstore
step, store, tree = sys.argv[1:4]
s = runstore.open(store)
t = time.perf_counter()
if step == "query":
    s.sql("select count(*) as n from metrics")
elif step == "doctor":
    s.doctor()
else:
    s.ingest([tree])
print(json.dumps(time.perf_counter() - t))
"""

STEPS = ("ingest", "no-op ingest", "query", "doctor")


def kind(line: str) -> str | None:
    """What one logged request asks for: method and target, or None for a non-request line."""
    m = re.search(r'"(GET|HEAD|PUT|POST|DELETE) (\S+)', line)
    if not m:
        return None
    method, target = m.groups()
    if "list-type=" in target:
        return "LIST"
    if "/_delta_log/" in target:
        return f"{method} delta log"
    if "/_runstore/" in target:
        return f"{method} runstore"
    if target.endswith(".parquet"):
        return f"{method} table file"
    return f"{method} other"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, default=None)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base", type=Path, default=None)
    ap.add_argument("--latency", type=float, default=0.0, metavar="MS")
    args = ap.parse_args()
    here = Path(__file__).resolve().parents[1]
    sides = {"this checkout": here}
    if args.base:
        sides[args.base.name] = args.base.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-s3-") as tmp:
        tree = args.tree
        if tree is None:
            sys.path.insert(0, str(here))
            from runstore import demo

            tree = Path(tmp) / "runs"
            demo.generate_tree(tree, demo.default_specs(), seed=5)
        log = Path(tmp) / "requests.log"
        moto = Moto(log)
        env = {**os.environ, **moto.env}
        proxy = None
        if args.latency:
            proxy = HeldRequests(moto.env["AWS_ENDPOINT_URL"], args.latency / 1000)
            env["AWS_ENDPOINT_URL"] = proxy.url
        try:
            times = collections.defaultdict(list)
            counts: dict[tuple[str, str], collections.Counter] = {}
            for _ in range(args.repeat):
                for side, src in sides.items():
                    bucket = f"bench-{uuid.uuid4().hex[:12]}"
                    moto.bucket(bucket)
                    store = f"s3://{bucket}/store"
                    for step in STEPS:
                        seen = len(log.read_text().splitlines())
                        p = subprocess.run(
                            [sys.executable, "-c", STEP, step.split()[-1], store, str(tree)],
                            env={**env, "PYTHONPATH": str(src)}, capture_output=True,
                            text=True, check=True, cwd=tmp)  # not a checkout's directory
                        times[side, step].append(json.loads(p.stdout.splitlines()[-1]))
                        time.sleep(0.2)  # let the server write its last log lines
                        lines = log.read_text().splitlines()[seen:]
                        counts[side, step] = collections.Counter(
                            k for k in map(kind, lines) if k)
        finally:
            if proxy is not None:
                proxy.close()
            moto.stop()
    kinds = sorted({k for c in counts.values() for k in c})
    print(f"{args.repeat} repeats, interleaved; tree {tree if args.tree else 'demo'}; "
          f"{args.latency:g} ms a request\n")
    print("| checkout | step | median s | requests | " + " | ".join(kinds) + " |")
    print("|---|---|---|---|" + "---|" * len(kinds))
    for side in sides:
        for step in STEPS:
            c = counts[side, step]
            print(f"| {side} | {step} | {statistics.median(times[side, step]):.3f} | "
                  f"{sum(c.values())} | " + " | ".join(str(c[k]) for k in kinds) + " |")


if __name__ == "__main__":
    main()
