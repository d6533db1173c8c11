"""Screenshots of every chart and the report for docs/charts.md (a doc tool, not in the wheel).

Usage: `python tools/chart_screenshots.py [--out docs/img] [--measure-runs 200]` builds the
demo store (`gen_docs.build_demo_store`, seed 7), writes every chart and the report to HTML in
a temporary directory, screenshots each into `--out` (headless Chromium: tests/browser.py),
then generates a tree of `--measure-runs` short runs, ingests it, writes its report and
prints the report's size (the figure docs/charts.md quotes). Nothing here is needed at run
time; it only documents.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
sys.path[:0] = [str(TOOLS), str(TOOLS.parent / "tests"), str(TOOLS.parent)]

from browser import screenshot  # noqa: E402  (tests/browser.py)
from gen_docs import build_demo_store  # noqa: E402

# ---------------------------------------------------------------------------------------------
# The docs build
# ---------------------------------------------------------------------------------------------

# file stem, Store method, its arguments, screenshot size
CHARTS: tuple[tuple[str, str, dict[str, object], tuple[int, int]], ...] = (
    ("metric", "plot_metric", {"keys": ["env/all/reward/total"], "color_by": "learning_rate",
                               "smooth": 0.8}, (1000, 600)),
    ("kl", "plot_kl", {}, (1000, 600)),
    ("rewards", "plot_rewards", {"runs": "gsm8k_tool_rl/*"}, (1000, 600)),
    ("spans", "plot_spans", {"run": "math_rl_sweep/qwen3-8b/lr_1e-4", "step": 10}, (1000, 1000)),
)
REPORT_SIZE = (1100, 1500)


def build_charts(store: object, workdir: Path) -> dict[str, Path]:
    """Every chart of CHARTS and the report as HTML files in `workdir`."""
    from runstore.present import charts, report

    out = {name: charts.write_html(getattr(store, method)(**kwargs), workdir / f"{name}.html")
           for name, method, kwargs, _ in CHARTS}
    out["report"] = report.write(store, workdir / "report.html")  # type: ignore[arg-type]
    return out


def measure_report(n_runs: int, workdir: Path, *, steps: int = 20) -> dict[str, float]:
    """Generate `n_runs` short RL runs, ingest them, write their report; sizes and times."""
    from runstore import demo
    from runstore.present import report
    from runstore.store import Store

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
    parser = argparse.ArgumentParser(prog="python tools/chart_screenshots.py",
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
