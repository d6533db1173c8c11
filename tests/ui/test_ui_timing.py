"""The Timing page's "which run got slower" between two runs, over a real `runstore ui` and in
a real headless Chromium, against the runs' timing_spans.jsonl read directly
(tests/oracle.py's `live_spans`: the last record of each step), not runstore's queries."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote, urlencode

import pytest

import oracle
from ui_harness import UiServer, chromium_context, have_chromium, http, open_page

FAST, SLOW = "a/fast", "b/slow"


@pytest.fixture(scope="module")
def timing_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two runs whose spans differ: b/slow's `train_step` spans take 3x as long and it has
    fewer steps (per-step and per-call numbers must still compare)."""
    import json

    import runstore
    from runstore import demo
    from runstore.demo import RunSpec

    base = tmp_path_factory.mktemp("timing")
    demo.generate_tree(base / "runs", [RunSpec(FAST, steps=24, logtree=False),
                                       RunSpec(SLOW, steps=16, logtree=False)], seed=11)
    path = base / "runs" / SLOW / "timing_spans.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        for span in rec["spans"]:
            if span["name"] == "train_step":
                extra = 2 * span["duration"]
                span["duration"] += extra
                span["wall_end"] += extra
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    runstore.open(base / "store").ingest([base / "runs"])
    return base / "runs", base / "store"


@pytest.fixture(scope="module")
def server(timing_tree: tuple[Path, Path]) -> Iterator[UiServer]:
    with UiServer(timing_tree[1]) as s:
        yield s


def expected(tree: Path, a: str, b: str) -> dict[str, Any]:
    """The comparison from the source files: step wall time = the latest span end of the
    step; per name: calls, mean duration, summed durations / steps with spans."""
    out: dict[str, Any] = {"steps": {}, "names": {}}
    per: dict[str, dict[str, dict[str, float]]] = {}
    for run in (a, b):
        spans = oracle.live_spans(tree / run)
        walls = [max(s["wall_end"] for s in step) for step in spans.values()]
        out["steps"][run] = {"n_steps": len(spans), "median_step_s": statistics.median(walls),
                             "mean_step_s": sum(walls) / len(walls), "max_step_s": max(walls)}
        durations: dict[str, list[float]] = {}
        for step in spans.values():
            for s in step:
                durations.setdefault(s["name"], []).append(float(s["duration"]))
        per[run] = {n: {"calls": len(d), "mean": sum(d) / len(d), "per_step": sum(d) / len(spans)}
                    for n, d in durations.items()}
    for name in set(per[a]) | set(per[b]):
        x, y = per[a].get(name), per[b].get(name)
        out["names"][name] = {
            "calls_a": x and x["calls"], "calls_b": y and y["calls"],
            "mean_s_a": x and x["mean"], "mean_s_b": y and y["mean"],
            "per_step_s_a": x and x["per_step"], "per_step_s_b": y and y["per_step"],
            "added_s": (y["per_step"] if y else 0) - (x["per_step"] if x else 0)}
    return out


def close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


def test_compare_api_says_which_run_got_slower(server: UiServer, timing_tree: tuple[Path, Path]) -> None:
    tree = timing_tree[0]
    r = http(server.url, "GET", "/api/timing/compare?" + urlencode({"run": FAST, "vs": SLOW}))
    assert r.status == 200, r.text
    res = r.json()
    want = expected(tree, FAST, SLOW)
    for side, run in (("run", FAST), ("vs", SLOW)):
        assert res["steps"][side]["run_name"] == run
        for col, value in want["steps"][run].items():
            assert close(res["steps"][side][col], value), (side, col)
    assert res["slower"] == SLOW
    assert close(res["ratio"], want["steps"][SLOW]["mean_step_s"] / want["steps"][FAST]["mean_step_s"])
    cols = res["spans"]["columns"]
    rows = [dict(zip(cols, row)) for row in res["spans"]["rows"]]
    assert {r["name"] for r in rows} == set(want["names"])
    for row in rows:
        for col, value in want["names"][row["name"]].items():
            assert close(row[col], value), (row["name"], col, row[col], value)
    added = [r["added_s"] for r in rows]
    assert added == sorted(added, reverse=True)
    assert rows[0]["name"] == "train_step"  # what was made slower accounts for most of it
    # The other way round: the same numbers, mirrored.
    back = http(server.url, "GET", "/api/timing/compare?" + urlencode({"run": SLOW, "vs": FAST})).json()
    assert back["slower"] == SLOW and close(back["ratio"], 1 / res["ratio"])


@pytest.mark.parametrize("params, status", [({"run": FAST}, 400), ({"run": FAST, "vs": "no/such"}, 400),
                                            ({"vs": FAST}, 400)])
def test_compare_bad_parameters(server: UiServer, params: dict[str, str], status: int) -> None:
    r = http(server.url, "GET", "/api/timing/compare?" + urlencode(params))
    assert r.status == status and r.json()["error"] and "Traceback" not in r.text


@pytest.mark.skipif(not have_chromium(), reason="needs Playwright and Debian's chromium")
def test_the_timing_page_compares_two_runs(server: UiServer, timing_tree: tuple[Path, Path],
                                           tmp_path: Path) -> None:
    tree = timing_tree[0]
    want = expected(tree, FAST, SLOW)
    errors: list[str] = []
    with chromium_context(tmp_path / "chromium") as ctx:
        page = open_page(ctx, f"{server.url}/timing?focus={quote(FAST, safe='')}", "timing", errors)
        page.wait_for_selector("#waterfall .wf-row[data-name]")
        page.select_option("#vs-picker", SLOW)
        page.wait_for_selector(f'body[data-compared="{SLOW}"]')
        assert f"vs={quote(SLOW, safe='')}" in page.url
        verdict = page.inner_text("#compare-verdict")
        slow, fast = want["steps"][SLOW]["mean_step_s"], want["steps"][FAST]["mean_step_s"]
        assert verdict.startswith(f"{SLOW} is slower")
        assert f"{(slow / fast - 1) * 100:.1f}% more than {FAST}" in verdict
        rows = page.eval_on_selector("#compare-spans", """(root) => {
            const t = root.querySelector('table');
            const heads = [...t.querySelectorAll('thead th')].map((th) => th.textContent.trim());
            return [...t.querySelectorAll('tbody tr')].map((tr) => Object.fromEntries(
                [...tr.querySelectorAll('td')].map((td, i) => [heads[i], td.textContent.trim()])));
        }""")
        assert [r["name"] for r in rows] == sorted(want["names"], key=lambda n: (-want["names"][n]["added_s"], n))
        for r in rows:
            exp = want["names"][r["name"]]
            assert float(r["added s/step (vs − run)"].lstrip("+")) == pytest.approx(exp["added_s"], rel=1e-4, abs=1e-9)
            assert float(r["s/step (vs)"]) == pytest.approx(exp["per_step_s_b"], rel=1e-4)
            assert int(r["calls (run)"]) == exp["calls_a"]
        # Both runs' step times are drawn, one line each, step by step.
        lines = page.eval_on_selector("#compare-plot", "(el) => el.data.map((t) => [t.name, Array.from(t.x), Array.from(t.y)])")
        for name, xs, ys in lines:
            spans = oracle.live_spans(tree / name)
            assert xs == sorted(spans)
            assert ys == pytest.approx([max(s["wall_end"] for s in spans[x]) for x in xs], rel=1e-6)
        assert sorted(n for n, _, _ in lines) == [FAST, SLOW]
        # The legend names both runs and covers none of the plot area (it once hid the top of
        # the lines), and no axis line is drawn at step 0 (where it looked like a marked step).
        legend, area = page.eval_on_selector("#compare-plot", """(el) => [el.querySelector('.legend'),
            el.querySelector('.draglayer .nsewdrag')].map((n) => { const r = n.getBoundingClientRect();
            return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; })""")
        assert area["bottom"] - area["top"] > 50 and legend["bottom"] > legend["top"]
        assert legend["bottom"] <= area["top"] + 0.5, (legend, area)
        assert page.locator("#compare-plot .legend .traces").count() == 2
        assert page.locator("#compare-plot .xzl").count() == 0
        assert page.locator("#timing-compare .error").count() == 0
        assert errors == []
        page.close()
