"""Web UI benchmark: the issue's targets for `runstore ui`, measured against a real server.

    python bench/bench_ui.py --store DIR [--runs N] [--no-browser] [--screenshot PNG]
    python bench/bench_ui.py --make 1000 [--steps 200] [--out bench/out/ui] [--runs 100]
    python bench/bench_ui.py --make 100 --steps 2000 [--out bench/out/ui]

`--store` names an existing store (e.g. the 100-run × 2000-step benchmark store of
bench_ingest.py). `--make N` writes bench_scale.py's tree for N runs (`demo.bench_specs(N,
steps)`, seed 0: the same tree bench_scale.py measures) under `--out` and ingests it, unless
both are there already. Then it starts `runstore ui` on 127.0.0.1 (any free port) and
measures, each the best of 3 after one warm-up request:

1. `GET /api/runs` (target: ≤ 0.3 s), and the Health page's `GET /api/health`; beside it,
   `store.runs()` in this process, the computation the server's per-snapshot cache hides;
2. `GET /api/series` for `env/all/reward/total` over the first N runs (default 100), raw and
   with `smooth=0.9`, wall time and body size (targets: ≤ 0.3 s and ≤ 1.5 MB), plus one cold
   request for a metric not asked before (the per-snapshot cache cannot help it); and the
   `Store.compare` lines: grouped `auto` and by `learning_rate` with smoothing, and by wall
   time, each cold (a first request) and warm;
3. `GET /api/keys`, `GET /api/diff` of 10 runs, `GET /api/timing/compare` of two runs;
4. navigation to a drawn chart in headless Chromium: from `page.goto(/charts?...)` to the
   reward panel holding its lines (target: ≤ 2 s), raw and grouped, and to a drawn Health
   page, unless --no-browser;
5. the server process's peak RSS from /proc (target: ≤ 500 MB).

Prints a Markdown table for docs/benchmarks.md. Run it on a quiet machine: the figures are
wall times.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlencode

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from ui_harness import UiServer, chromium_context, have_chromium, http  # noqa: E402


def timed(base: str, path: str, n: int = 3) -> tuple[float, int]:
    http(base, "GET", path)  # warm-up (and, for cached answers, fills the cache)
    best, size = float("inf"), 0
    for _ in range(n):
        t = time.perf_counter()
        r = http(base, "GET", path)
        best = min(best, time.perf_counter() - t)
        assert r.status == 200, r.text[:300]
        size = len(r.body)
    return best, size


def cold(base: str, path: str) -> tuple[float, int]:
    t = time.perf_counter()
    r = http(base, "GET", path)
    assert r.status == 200, r.text[:300]
    return time.perf_counter() - t, len(r.body)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def make_store(n: int, steps: int, out: Path) -> Path:
    """bench_scale.py's tree of `n` runs under `out`, ingested into `out/store_N_STEPS`."""
    import subprocess

    from runstore import demo

    tree, store = out / f"tree_{n}_{steps}", out / f"store_{n}_{steps}"
    if not tree.is_dir():
        demo.generate_tree(tree, demo.bench_specs(n, steps), seed=0, workers=2)
    if not store.is_dir():
        subprocess.run([sys.executable, "-m", "runstore", "--store", str(store), "ingest", "-q",
                        str(tree)], check=True)
    return store


def browse(ctx: object, url: str, selector: str, shot: Path | None = None) -> float:
    """Best of 3: from `page.goto(url)` to `selector` in the page (for a chart, the panel's plot
    marked `data-drawn`: its first traces drawn). With `shot`, a screenshot of the last visit
    taken at that moment, to look at."""
    times = []
    for i in range(3):
        page = ctx.new_page()  # type: ignore[attr-defined]
        t = time.perf_counter()
        page.goto(url)
        page.wait_for_selector(selector, state="attached", timeout=60_000)
        times.append(time.perf_counter() - t)
        if shot is not None and i == 2:
            page.screenshot(path=str(shot), full_page=True)
        page.close()
    return min(times)


def runs_uncached(store: str, n: int = 3) -> float:
    """Best of `n` of `store.runs()` in this process (after one warm-up call that opens the
    snapshot): the computation behind `/api/runs` that the server's cache hides."""
    import runstore

    s = runstore.open(store)
    s.runs()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        s.runs()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store")
    ap.add_argument("--make", type=int, metavar="N", help="build bench_scale.py's N-run store")
    ap.add_argument("--steps", type=int, default=200, help="steps per run for --make")
    ap.add_argument("--out", type=Path, default=HERE / "out" / "ui")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--screenshot", type=Path,
                    help="save the drawn chart page here (PNG) at the moment it was timed")
    args = ap.parse_args()
    if (args.store is None) == (args.make is None):
        ap.error("give --store DIR or --make N")
    if args.make is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        args.store = str(make_store(args.make, args.steps, args.out))
    rows: list[tuple[str, str, str]] = []
    with UiServer(args.store) as server:
        base = server.url
        names = [r[1] for r in http(base, "GET", "/api/runs").json()["rows"]][: args.runs]
        t, size = timed(base, "/api/runs")
        rows.append(("GET /api/runs", f"{t:.3f} s", f"{size / 1e3:.0f} kB"))
        q = {"metric": "env/all/reward/total", "run": names}
        t, size = timed(base, "/api/series?" + urlencode(q, doseq=True))
        rows.append((f"GET /api/series, {len(names)} runs", f"{t:.3f} s", f"{size / 1e3:.0f} kB"))
        t, size = timed(base, "/api/series?" + urlencode({**q, "smooth": 0.9}, doseq=True))
        rows.append((f"GET /api/series, {len(names)} runs, smooth=0.9", f"{t:.3f} s",
                     f"{size / 1e3:.0f} kB"))
        t, size = cold(base, "/api/series?" + urlencode({**q, "metric": "optim/kl_sample_train_v1"},
                                                         doseq=True))
        rows.append((f"GET /api/series, {len(names)} runs, first request", f"{t:.3f} s",
                     f"{size / 1e3:.0f} kB"))
        for label, extra in [("group_by=auto", {"group_by": "auto"}),
                             ("group_by=learning_rate, smooth=0.9",
                              {"group_by": "learning_rate", "smooth": 0.9}),
                             ("x=time", {"x": "time"})]:
            path = "/api/series?" + urlencode({**q, **extra}, doseq=True)
            t, size = cold(base, path)
            rows.append((f"GET /api/series, {len(names)} runs, {label}, first request",
                         f"{t:.3f} s", f"{size / 1e3:.0f} kB"))
            t, size = timed(base, path)
            rows.append((f"GET /api/series, {len(names)} runs, {label}", f"{t:.3f} s",
                         f"{size / 1e3:.0f} kB"))
        for label, path in [("GET /api/health", "/api/health"), ("GET /api/keys", "/api/keys"),
                            ("GET /api/diff, 10 runs",
                             "/api/diff?" + urlencode({"run": names[:10]}, doseq=True))]:
            t, size = cold(base, path)
            rows.append((f"{label}, first request", f"{t:.3f} s", f"{size / 1e3:.0f} kB"))
            t, size = timed(base, path)
            rows.append((label, f"{t:.3f} s", f"{size / 1e3:.0f} kB"))
        timing = [r[0] for r in http(base, "GET", "/api/timing/runs").json()["rows"]]
        if len(timing) >= 2:
            t, size = timed(base, "/api/timing/compare?" + urlencode({"run": timing[0],
                                                                     "vs": timing[1]}))
            rows.append(("GET /api/timing/compare", f"{t:.3f} s", f"{size / 1e3:.0f} kB"))
        if not args.no_browser and have_chromium():
            runs_q = "&".join(f"run={quote(n, safe='')}" for n in names)
            url = f"{base}/charts?{runs_q}&metric={quote('env/all/reward/total', safe='')}"
            drawn = '.panel[data-metric="env/all/reward/total"] .plot[data-drawn]'
            with chromium_context() as ctx:
                rows.append(("navigation to a drawn chart (Chromium)",
                             f"{browse(ctx, url, drawn, args.screenshot):.3f} s", ""))
                rows.append(("navigation to a drawn grouped chart (auto, smooth=0.9)",
                             f"{browse(ctx, url + '&group_by=auto&smooth=0.90', drawn):.3f} s", ""))
                rows.append(("navigation to a drawn Health page",
                             f"{browse(ctx, base + '/health', '#health-kl'):.3f} s", ""))
        rows.append(("server peak RSS", f"{peak_rss_mb(server.pid):.0f} MB", ""))
    rows.insert(1, ("`store.runs()`: what /api/runs computes when a snapshot lands, uncached",
                    f"{runs_uncached(args.store):.3f} s", ""))
    print("| measure | time | size |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    main()
