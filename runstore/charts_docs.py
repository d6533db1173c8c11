"""Screenshots for docs/charts.md, and the headless-Chromium helpers they (and tests) use.

Contract: `find_chromium()` returns the path of a Chromium/Chrome binary or None;
`screenshot(page, png, width=, height=)` renders a local HTML file headless into a PNG;
`dump_dom(page)` returns the DOM after the page's scripts ran and Chromium's log (console
messages, uncaught errors). Both run Chromium with a
throw-away profile, no sandbox, no GPU and no background networking, and raise
`RuntimeError` with Chromium's stderr when it fails.

`python -m runstore.charts_docs [--out docs/img] [--measure-runs 200]` builds the demo store
(`runstore.docs.build_demo_store`, seed 7), writes every chart and the report to HTML in a
temporary directory, screenshots each into `--out`, then generates a tree of `--measure-runs`
short runs, ingests it, writes its report and prints the report's size (the figure
docs/charts.md quotes). Nothing here is needed at run time; it only documents.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync",
                  "--hide-scrollbars", "--force-device-scale-factor=1")


def find_chromium() -> str | None:
    """`$RUNSTORE_CHROMIUM`, else the first Chromium/Chrome binary on PATH, else None."""
    explicit = os.environ.get("RUNSTORE_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    chromium = find_chromium()
    if chromium is None:
        raise RuntimeError("no Chromium found: install it (`apt-get install chromium`) or set "
                           "$RUNSTORE_CHROMIUM to its path")
    with tempfile.TemporaryDirectory(prefix="runstore-chromium-") as profile:
        cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited with {proc.returncode}: {proc.stderr[-2000:]}")
    return proc


def screenshot(page: str | Path, png: str | Path, *, width: int = 1000, height: int = 600,
               timeout: float = 120.0) -> Path:
    """Render the local HTML file `page` headless and write a `width`×`height` PNG."""
    out = Path(png).absolute()
    out.unlink(missing_ok=True)
    _run([f"--screenshot={out}", f"--window-size={width},{height}",
          "--virtual-time-budget=5000", Path(page).absolute().as_uri()], timeout)
    if not out.is_file():
        raise RuntimeError(f"chromium wrote no screenshot to {out}")
    return out


@dataclass(frozen=True)
class PageDump:
    dom: str  # the DOM once the page's scripts ran, as HTML text
    log: str  # Chromium's log: console messages and uncaught errors ("CONSOLE(...)")


def dump_dom(page: str | Path, *, timeout: float = 120.0) -> PageDump:
    """Load the local HTML file `page` headless; its DOM after the scripts ran, and the log."""
    proc = _run(["--dump-dom", "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0",
                 Path(page).absolute().as_uri()], timeout)
    return PageDump(proc.stdout, proc.stderr)


# ---------------------------------------------------------------------------------------------
# The docs build
# ---------------------------------------------------------------------------------------------

# file stem, Store method, its arguments, screenshot size
CHARTS: tuple[tuple[str, str, dict[str, object], tuple[int, int]], ...] = (
    ("metric", "plot_metric", {"keys": ["env/all/reward/total"], "color_by": "learning_rate",
                               "smooth": 5}, (1000, 600)),
    ("kl", "plot_kl", {}, (1000, 600)),
    ("rewards", "plot_rewards", {"runs": "gsm8k_tool_rl/*"}, (1000, 600)),
    ("spans", "plot_spans", {"run": "math_rl_sweep/qwen3-8b/lr_1e-4", "step": 10}, (1000, 1000)),
)
REPORT_SIZE = (1100, 1500)


def build_charts(store: object, workdir: Path) -> dict[str, Path]:
    """Every chart of CHARTS and the report as HTML files in `workdir`."""
    from .present import charts, report

    out = {name: charts.write_html(getattr(store, method)(**kwargs), workdir / f"{name}.html")
           for name, method, kwargs, _ in CHARTS}
    out["report"] = report.write(store, workdir / "report.html")  # type: ignore[arg-type]
    return out


def measure_report(n_runs: int, workdir: Path, *, steps: int = 20) -> dict[str, float]:
    """Generate `n_runs` short RL runs, ingest them, write their report; sizes and times."""
    from . import demo
    from .present import report
    from .store import Store

    specs = [demo.RunSpec(f"sweep/run_{i:03d}", steps=steps, eval_every=10, save_every=10,
                          logtree=False, rollouts_every=0, learning_rate=(1e-5, 1e-4, 1e-3)[i % 3],
                          layout="flat" if i % 2 else "iteration_dirs",
                          kl_spike_at=steps // 2 if i % 25 == 7 else None)
             for i in range(n_runs)]
    demo.generate_tree(workdir / "runs", specs, seed=1)
    store = Store(workdir / "store")
    store.ingest([workdir / "runs"])
    t0 = time.perf_counter()
    path = report.write(store, workdir / "report.html")
    seconds = time.perf_counter() - t0
    from plotly.offline import get_plotlyjs

    return {"runs": n_runs, "steps": steps, "bytes": path.stat().st_size,
            "plotlyjs_bytes": len(get_plotlyjs().encode()), "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    from .docs import build_demo_store

    parser = argparse.ArgumentParser(prog="python -m runstore.charts_docs",
                                     description="Screenshot every chart and the report for docs/.")
    parser.add_argument("--out", default="docs/img", help="directory for the PNG files")
    parser.add_argument("--measure-runs", type=int, default=200,
                        help="runs in the tree whose report size is measured (0: skip)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="runstore-charts-docs-") as tmp:
        work = Path(tmp)
        store = build_demo_store(work)
        pages = build_charts(store, work)
        sizes = {name: size for name, _, _, size in CHARTS}
        for name, page in pages.items():
            width, height = sizes.get(name, REPORT_SIZE)
            png = screenshot(page, out / f"{name}.png", width=width, height=height)
            print(f"{png}: {png.stat().st_size / 1e3:.0f} kB", file=sys.stderr)
        if args.measure_runs:
            m = measure_report(args.measure_runs, work / "measure")
            print(f"report of {m['runs']} runs x {m['steps']} steps: {m['bytes']:,} bytes "
                  f"({m['bytes'] / 1e6:.2f} MB, of which plotly.js {m['plotlyjs_bytes']:,}); "
                  f"written in {m['seconds']:.2f} s")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
