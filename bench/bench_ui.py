"""Web UI benchmark: the issue's targets for `runstore ui`, measured against a real server.

    python bench/bench_ui.py --store DIR [--runs N] [--no-browser]

Starts `runstore ui` on 127.0.0.1 (any free port) over the store (e.g. the 100-run × 2000-step
benchmark store of bench_ingest.py, or a 1,000-run store of bench_scale.py) and measures, each
the best of 3 after one warm-up request:

1. `GET /api/runs` (targets: ≤ 0.3 s);
2. `GET /api/series` for `env/all/reward/total` over the first N runs (default 100), raw and
   with `smooth=0.9`, wall time and body size (targets: ≤ 0.3 s and ≤ 1.5 MB), plus one cold
   request for a metric not asked before (the per-snapshot cache cannot help it);
3. navigation to a drawn chart in headless Chromium: from `page.goto(/charts?...)` to the
   reward panel holding its lines (target: ≤ 2 s), unless --no-browser;
4. the server process's peak RSS from /proc (target: ≤ 500 MB).

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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
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
        if not args.no_browser and have_chromium():
            runs_q = "&".join(f"run={quote(n, safe='')}" for n in names)
            url = f"{base}/charts?{runs_q}&metric={quote('env/all/reward/total', safe='')}"
            with chromium_context() as ctx:
                times = []
                for _ in range(3):
                    page = ctx.new_page()
                    t = time.perf_counter()
                    page.goto(url)
                    page.wait_for_selector('.panel[data-metric="env/all/reward/total"] '
                                           '.plot[data-drawn]', state="attached", timeout=60_000)
                    times.append(time.perf_counter() - t)
                    page.close()
            rows.append(("navigation to a drawn chart (Chromium)", f"{min(times):.3f} s", ""))
        rows.append(("server peak RSS", f"{peak_rss_mb(server.pid):.0f} MB", ""))
    print("| measure | time | size |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    main()
