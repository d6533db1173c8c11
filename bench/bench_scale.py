"""How cost grows with the size of the work: ingest and query cost for 10 … 1,000 runs.

    python bench/bench_scale.py [--sizes 10,100,300,1000] [--steps 200] [--s3] [--out bench/out/scale]

For each size N it writes N RL runs (`demo.bench_specs(N, steps)`: ~60 metric keys a row,
~48 spans a step; rollouts and logtrees every 250 steps, so at the default 200 steps only at
step 0), ingests them into a fresh store in a fresh process (wall time, peak RSS), and times
in a fresh process, best of 3 after one warm-up, the latency of `kl_health`,
`reward_trends`, `slowest_spans` and a `transcripts` search. With `--s3` it does the same with
the store on a local S3 endpoint (a moto server on 127.0.0.1 that this script starts and stops).

It fits each measurement against N with least squares on log-log axes (the exponent says
linear, sub- or super-linear), extrapolates to 10,000 and 100,000 runs under the assumptions
printed with the table, writes the figures as Markdown and JSON, and plots them with plotly
(HTML, plus a PNG when headless Chromium is available).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUERIES = {
    "kl_health": "select * from kl_health",
    "reward_trends": "select run_id, max(reward_ma10) from reward_trends group by run_id",
    "slowest_spans": "select * from slowest_spans where rank <= 3",
    "transcripts search": "select run_name, iteration from transcripts where role = 'assistant' and content like '%answer is 4%'",
}
TIMER = r"""
import json, sys, time, runstore
store = runstore.open(sys.argv[1])
out = {}
for name, sql in json.loads(sys.argv[2]).items():
    store.arrow(sql)  # warm-up: builds the snapshot's database, loads file metadata
    best = min((lambda t: (store.arrow(sql), time.perf_counter() - t)[1])(time.perf_counter())
               for _ in range(3))
    out[name] = best
print(json.dumps(out))
"""


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MB and stdout of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read() if proc.stdout else b""
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} failed: {err.decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024, out.decode()


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


class Moto:
    """A moto S3 server on 127.0.0.1, started and stopped by this script (bench_s3.py too);
    with `log`, its request log is written to that file."""

    def __init__(self, log: Path | None = None) -> None:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        out = log.open("w") if log else subprocess.DEVNULL
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                      "-p", str(self.port)], stdout=out, stderr=out)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        self.env = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                    "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{self.port}"}

    def bucket(self, name: str) -> None:
        import boto3

        boto3.client("s3", **{"endpoint_url": self.env["AWS_ENDPOINT_URL"],
                              "aws_access_key_id": "bench", "aws_secret_access_key": "bench",
                              "region_name": "us-east-1"}).create_bucket(Bucket=name)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def fit(ns: list[int], ys: list[float]) -> tuple[float, float]:
    """y ≈ a · N^b by least squares on logs; returns (a, b)."""
    xs = [math.log(n) for n in ns]
    ls = [math.log(max(y, 1e-9)) for y in ys]
    mx, my = sum(xs) / len(xs), sum(ls) / len(ls)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ls)) / sum((x - mx) ** 2 for x in xs)
    return math.exp(my - b * mx), b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,100,300,1000")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--s3", action="store_true", help="also measure with the store on a local S3 endpoint")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "scale")
    ap.add_argument("--report-only", action="store_true", help="redo the tables and plot from results.json")
    args = ap.parse_args()
    if args.report_only:
        report(json.loads((args.out / "results.json").read_text()), args.out)
        return
    sizes = [int(s) for s in args.sizes.split(",")]

    from runstore import demo

    args.out.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    results: list[dict] = []
    moto = Moto() if args.s3 else None
    try:
        for n in sizes:
            tree = args.out / f"tree_{n}"
            if not tree.is_dir():
                demo.generate_tree(tree, demo.bench_specs(n, args.steps), seed=0, workers=2)
            size_mb = tree_bytes(tree) / 1e6
            targets = [("local", str(args.out / f"store_{n}"), dict(os.environ))]
            if moto is not None:
                bucket = f"scale-{n}-{int(time.time())}"
                moto.bucket(bucket)
                targets.append(("s3", f"s3://{bucket}/store", {**os.environ, **moto.env}))
            for where, store, env in targets:
                if where == "local":
                    shutil.rmtree(store, ignore_errors=True)
                wall, rss, _ = timed([py, "-m", "runstore", "--store", store, "ingest", "-q", str(tree)], env)
                _, _, out = timed([py, "-c", TIMER, store, json.dumps(QUERIES)], env)
                row = {"runs": n, "where": where, "tree_mb": round(size_mb, 1),
                       "ingest_s": round(wall, 2), "ingest_rss_mb": round(rss), **{
                           f"{k}_s": round(v, 4) for k, v in json.loads(out).items()}}
                results.append(row)
                print(json.dumps(row), flush=True)
                if where == "local":
                    shutil.rmtree(store, ignore_errors=True)
    finally:
        if moto is not None:
            moto.stop()
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    report(results, args.out)


def report(results: list[dict], out: Path) -> None:
    metrics = ["ingest_s", "ingest_rss_mb"] + [f"{k}_s" for k in QUERIES]
    lines = ["| where | runs | tree MB | " + " | ".join(metrics) + " |",
             "|---|---|---|" + "---|" * len(metrics)]
    for r in results:
        lines.append(f"| {r['where']} | {r['runs']} | {r['tree_mb']} | "
                     + " | ".join(str(r[m]) for m in metrics) + " |")
    lines += ["", "| where | measurement | exponent b (y ≈ a·N^b, all sizes) | per run, from the two "
              "largest sizes | 10,000 runs (linear) | 100,000 runs (linear) | 10,000 runs (power law) |",
              "|---|---|---|---|---|---|---|"]
    for where in sorted({r["where"] for r in results}):
        rows = sorted((r for r in results if r["where"] == where), key=lambda r: r["runs"])
        if len(rows) < 2:
            continue
        ns = [r["runs"] for r in rows]
        for m in metrics:
            a, b = fit(ns, [r[m] for r in rows])
            # Linear model through the two largest sizes: fixed costs (process start, opening
            # the snapshot) are the intercept, the slope is the cost of one more run.
            (n1, y1), (n2, y2) = [(r["runs"], r[m]) for r in rows[-2:]]
            slope = (y2 - y1) / (n2 - n1)
            lin = lambda n: y2 + slope * (n - n2)  # noqa: E731 - a two-point line
            lines.append(f"| {where} | {m} | {b:.2f} | {slope:.3g} | {lin(1e4):.3g} | "
                         f"{lin(1e5):.3g} | {a * 1e4 ** b:.3g} |")
    text = "\n".join(lines) + "\n"
    (out / "results.md").write_text(text)
    print(text)
    plot(results, out)


def plot(results: list[dict], out: Path) -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, subplot_titles=("ingest, s", "query latency, s"))
    for where in sorted({r["where"] for r in results}):
        rows = [r for r in results if r["where"] == where]
        ns = [r["runs"] for r in rows]
        fig.add_trace(go.Scatter(x=ns, y=[r["ingest_s"] for r in rows], mode="lines+markers",
                                 name=f"ingest ({where})"), row=1, col=1)
        for k in QUERIES:
            fig.add_trace(go.Scatter(x=ns, y=[r[f"{k}_s"] for r in rows], mode="lines+markers",
                                     name=f"{k} ({where})"), row=1, col=2)
    fig.update_xaxes(type="log", title_text="runs")
    fig.update_yaxes(type="log")
    fig.update_layout(width=1100, height=500, title="runstore: cost against number of runs")
    html = out / "scale.html"
    fig.write_html(html, include_plotlyjs=True)
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from browser import find_chromium, screenshot

        if find_chromium():
            screenshot(html, out / "scale.png", width=1100, height=500)
    except Exception as e:  # a missing browser only costs the PNG
        print(f"no PNG: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
