"""Screenshots of every `runstore ui` page over the demo store, for docs/ui.md.

Usage: python tools/ui_screenshots.py [--out docs/img/ui] [--store DIR]

Writes the demo tree and store into a temporary directory (unless --store names one), starts
`runstore ui` on 127.0.0.1 (any free port), opens each page in headless Chromium (Debian's
/usr/bin/chromium through Playwright) in a representative state and saves one PNG per page.
Not shipped in the wheel. The demo's transcripts hold Chinese text and emoji: without fonts
for them (Debian: fonts-wqy-microhei, fonts-noto-color-emoji) Chromium draws empty boxes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from ui_harness import UiServer, chromium_context, open_page  # noqa: E402

SELECTED = ["math_rl_sweep/qwen3-8b/lr_1e-4", "math_rl_sweep/qwen3-8b/lr_1e-5",
            "math_rl_sweep/qwen3-8b/lr_3e-5", "math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5",
            "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"]


# Pages whose table is wider than the window: shot in a window as wide as the table (up to
# MAX_WIDTH), so that the columns the docs describe are in the picture.
FIT_WIDTH = {"runs.png", "health.png"}
MAX_WIDTH = 2000


def runs_q(names: list[str]) -> str:
    return "&".join(f"run={quote(n, safe='')}" for n in names)


def shots(base: str) -> list[tuple[str, str, str, str | None, bool]]:
    """(file, page name, URL, selector to click after load or None, whole page or the
    first screen)."""
    sel = runs_q(SELECTED)
    sql = quote("select run_name, max_kl_v1, steps_over, first_step_over, longest_streak_over\n"
                "from kl_health order by max_kl_v1 desc", safe="")
    gsm = runs_q(["gsm8k_tool_rl/sweep/lr_1e-4/seed_0", "gsm8k_tool_rl/sweep/lr_1e-4/seed_1",
                  "gsm8k_tool_rl/sweep/lr_3e-4/seed_0", "gsm8k_tool_rl/sweep/lr_3e-4/seed_1",
                  "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"])
    compare = runs_q(["math_rl_sweep/qwen3-8b/lr_1e-4", "math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5",
                      "gsm8k_tool_rl/sweep/lr_1e-4/seed_0"])
    return [
        ("runs.png", "runs", f"{base}/runs?{sel}&col=dataset_builder.group_size", None, True),
        ("charts.png", "charts", f"{base}/charts?{sel}&metric=env/all/reward/total"
         "&metric=optim/kl_sample_train_v1&metric=optim/entropy&metric=time/total&smooth=0.8",
         None, True),
        ("charts-grouped.png", "charts", f"{base}/charts?{gsm}&metric=env/all/reward/total"
         "&metric=optim/kl_sample_train_v1&group_by=learning_rate&band=minmax&smooth=0.6",
         None, False),
        ("compare.png", "compare", f"{base}/compare?{compare}", None, False),
        ("health.png", "health", f"{base}/health", None, True),
        ("sql.png", "sql", f"{base}/sql?q={sql}", None, True),
        ("checkpoints.png", "checkpoints", f"{base}/checkpoints?{sel}", None, True),
        ("timing.png", "timing",
         f"{base}/timing?focus={quote('gsm8k_tool_rl/sweep/lr_1e-4/seed_0', safe='')}&step=12",
         None, True),
        ("timing-compare.png", "timing",
         f"{base}/timing?focus={quote('gsm8k_tool_rl/sweep/lr_1e-4/seed_0', safe='')}"
         f"&vs={quote('gsm8k_tool_rl/sweep/lr_1e-3/seed_0', safe='')}&step=12", None, False),
        ("rollouts.png", "rollouts",
         f"{base}/rollouts?focus={quote('gsm8k_tool_rl/sweep/lr_1e-4/seed_0', safe='')}"
         "&split=train&iteration=0", "#trajectories tbody tr", True),
        ("rollouts-search.png", "rollouts",
         f"{base}/rollouts?focus={quote('math_rl_sweep/qwen3-8b/lr_1e-4', safe='')}"
         "&search=boxed", None, True),
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(REPO / "docs" / "img" / "ui"))
    ap.add_argument("--store", default=None)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="runstore-ui-shots-"))
    store = Path(args.store) if args.store else tmp / "store"
    if not args.store:
        import runstore
        from runstore import demo

        demo.generate_tree(tmp / "runs", seed=demo.DEMO_SEED)
        runstore.open(store).ingest([tmp / "runs"])
    with UiServer(store) as server, chromium_context(tmp / "chromium") as ctx:
        for name, page_name, url, click, full in shots(server.url):
            errors: list[str] = []
            page = open_page(ctx, url, page_name, errors)
            if click:
                page.click(click)
                page.wait_for_selector("#conversation .msg", timeout=10_000)
            if name in FIT_WIDTH:
                extra = page.evaluate("""() => Math.max(0, ...[...document.querySelectorAll(
                    '.table-wrap')].map((e) => e.scrollWidth - e.clientWidth))""")
                page.set_viewport_size({"width": min(MAX_WIDTH, 1440 + extra + 8), "height": 900})
            page.wait_for_timeout(800)  # plotly's transitions
            page.screenshot(path=str(out / name), full_page=full)
            print(f"wrote {out / name}" + (f"  (console errors: {errors})" if errors else ""))
            page.close()


if __name__ == "__main__":
    main()
