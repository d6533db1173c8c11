"""The Charts page over `Store.keys` and `Store.compare`: the searchable key list, grouping by a
config key or `auto` with a std or min–max band, smoothing of grouped curves, x by wall time,
all in the query string. A real `runstore ui` and a real headless Chromium, checked against
plain-Python statistics of the demo tree's files (tests/analysis_oracle.py, tests/oracle.py),
never against runstore's own answers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

import pytest

import analysis_oracle as ao
from ui_harness import UiServer, have_chromium, http, open_page

REWARD = "env/all/reward/total"
KL = "optim/kl_sample_train_v1"
GSM = ["gsm8k_tool_rl/sweep/lr_1e-4/seed_0", "gsm8k_tool_rl/sweep/lr_1e-4/seed_1",
       "gsm8k_tool_rl/sweep/lr_3e-4/seed_0", "gsm8k_tool_rl/sweep/lr_3e-4/seed_1",
       "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"]


def q(name: str) -> str:
    return quote(name, safe="")


def api(server: UiServer, path: str, params: Any, status: int = 200) -> Any:
    r = http(server.url, "GET", f"/api/{path}?" + urlencode(params, doseq=True))
    assert r.status == status, (r.status, r.text)
    return r.json()


def lr_label(tree: Path, run: str) -> str:
    lr = ao.config(tree / run)["learning_rate"]
    return f"learning_rate={lr!r}"


def expected(tree: Path, runs: list[str], group_of: dict[str, Any], **kw: Any) -> dict[Any, dict[float, dict]]:
    """group -> x -> the stats, from the files."""
    cells = ao.curves({r: tree / r for r in runs}, kw.pop("key", REWARD), group_of, **kw)
    out: dict[Any, dict[float, dict]] = {}
    for (g, x), stats in cells.items():
        out.setdefault(g, {})[x] = stats
    return out


def lo_hi(stats: dict[str, Any], band: str, prefix: str = "") -> tuple[float, float]:
    if band == "minmax":
        return stats[prefix + "min"], stats[prefix + "max"]
    std = stats[prefix + "std"] or 0.0
    return stats[prefix + "mean"] - std, stats[prefix + "mean"] + std


# -- API -------------------------------------------------------------------------------------

def test_keys_are_every_metric_key_of_the_files(ui_server: UiServer, ui_tree: Path) -> None:
    res = api(ui_server, "keys", {})
    got = {r[0]: tuple(r[1:]) for r in res["rows"]}
    assert res["columns"] == ["key", "n_runs", "n_points", "first_step", "last_step", "type"]
    assert got == ao.keys(ui_tree)
    some = api(ui_server, "keys", {"run": GSM[:2], "like": "reward"})
    want = {k: v for k, v in ao.keys(ui_tree, set(GSM[:2])).items() if "reward" in k.lower()}
    assert {r[0]: tuple(r[1:]) for r in some["rows"]} == want and want


@pytest.mark.parametrize("band", ["std", "minmax"])
def test_series_grouped_by_a_config_key(ui_server: UiServer, ui_tree: Path, band: str) -> None:
    res = api(ui_server, "series", {"metric": REWARD, "run": GSM, "group_by": "learning_rate",
                                    "band": band, "smooth": 0.8})
    group_of = {r: lr_label(ui_tree, r) for r in GSM}
    want = expected(ui_tree, GSM, group_of, w=0.8)
    assert res["group_by"] == ["learning_rate"] and res["lines"] == []
    assert {g["group"] for g in res["groups"]} == set(want) and len(want) == 3
    for g in res["groups"]:
        assert sorted(g["runs"]) == sorted(r for r in GSM if group_of[r] == g["group"])
        cells = want[g["group"]]
        assert g["x"] == sorted(cells) and g["n_points"] == len(cells)
        for x, mean, lo, hi, n in zip(g["x"], g["mean"], g["lo"], g["hi"], g["n"]):
            stats = cells[x]
            assert n == stats["n"]
            assert mean == pytest.approx(stats["mean"], rel=1e-6, abs=1e-9)
            wlo, whi = lo_hi(stats, band)
            assert (lo, hi) == (pytest.approx(wlo, rel=1e-6, abs=1e-9), pytest.approx(whi, rel=1e-6, abs=1e-9))
        for x, mean, lo, hi in zip(g["smooth_x"], g["smooth_mean"], g["smooth_lo"], g["smooth_hi"]):
            stats = cells[x]
            assert mean == pytest.approx(stats["smooth_mean"], rel=1e-6, abs=1e-9)
            wlo, whi = lo_hi(stats, band, "smooth_")
            assert (lo, hi) == (pytest.approx(wlo, rel=1e-6, abs=1e-9), pytest.approx(whi, rel=1e-6, abs=1e-9))


def test_series_auto_groups_by_every_key_but_the_seeds(ui_server: UiServer, ui_tree: Path) -> None:
    def seed_like(key: str) -> bool:
        last = key.rsplit(".", 1)[-1].lower()
        return last == "seed" or last.endswith("_seed") or last in (
            "log_path", "log_dir", "wandb_name", "run_name", "session_name")

    configs = {r: {k: v for k, v in ao.config(ui_tree / r).items() if not seed_like(k)} for r in GSM}
    classes: list[list[str]] = []
    for r in GSM:
        for c in classes:
            if configs[c[0]] == configs[r]:
                c.append(r)
                break
        else:
            classes.append([r])
    res = api(ui_server, "series", {"metric": REWARD, "run": GSM, "group_by": "auto"})
    assert res["group_by"] == "auto"
    assert sorted(sorted(g["runs"]) for g in res["groups"]) == sorted(sorted(c) for c in classes)
    group_of = {r: i for i, c in enumerate(classes) for r in c}
    want = expected(ui_tree, GSM, group_of)
    for g in res["groups"]:
        cells = want[group_of[g["runs"][0]]]
        assert g["mean"] == pytest.approx([cells[x]["mean"] for x in g["x"]], rel=1e-6, abs=1e-9)


def test_series_by_wall_time(ui_server: UiServer, ui_tree: Path) -> None:
    runs = GSM[:3]
    res = api(ui_server, "series", {"metric": REWARD, "run": runs, "x": "time"})
    assert res["x"] == "time" and res["group_by"] is None
    want = expected(ui_tree, runs, {r: r for r in runs}, x="time")
    assert sorted(g["group"] for g in res["groups"]) == sorted(runs)
    for g in res["groups"]:
        cells = want[g["group"]]
        assert [round(x, 6) for x in g["x"]] == pytest.approx(sorted(cells), rel=1e-6)
        assert g["mean"] == pytest.approx([cells[x]["mean"] for x in sorted(cells)], rel=1e-6, abs=1e-9)


def logged_at(run: Path, step: int) -> float | None:
    """The wall time at which `run` logged `step` on the x=time axis, from metrics.jsonl: the
    sum of its finite time/total durations after its first timed step, up to `step`."""
    durations = sorted((s, d) for s, d in ao.series(run, ao.TIME_KEY).items() if ao.finite(d))
    if step not in dict(durations):
        return None
    return sum(d for s, d in durations[1:] if s <= step)


def test_series_by_wall_time_places_the_marked_step(ui_server: UiServer, ui_tree: Path) -> None:
    runs = GSM[:3]
    step = 7
    res = api(ui_server, "series", {"metric": REWARD, "run": runs, "x": "time", "mark_step": step})
    want = {r: logged_at(ui_tree / r, step) for r in runs}
    assert all(t is not None and t > 0 for t in want.values()) and len(set(want.values())) == 3
    assert [m["run_label"] for m in res["step_marks"]] == sorted(runs)
    for m in res["step_marks"]:
        assert m["time_s"] == pytest.approx(want[m["run_label"]], rel=1e-9)
    # Grouped, every run of every group gets its mark; a step no run logged gets none; by step
    # there is nothing to place (the page marks x=step itself).
    grouped = api(ui_server, "series", {"metric": REWARD, "run": GSM, "x": "time",
                                        "group_by": "learning_rate", "mark_step": step})
    assert sorted(m["run_label"] for m in grouped["step_marks"]) == sorted(GSM)
    assert api(ui_server, "series", {"metric": REWARD, "run": runs, "x": "time",
                                     "mark_step": 10 ** 9})["step_marks"] == []
    assert "step_marks" not in api(ui_server, "series", {"metric": REWARD, "run": runs,
                                                         "group_by": "auto", "mark_step": step})
    assert "mark_step" in api(ui_server, "series", {"metric": REWARD, "x": "time",
                                                    "mark_step": "seven"}, status=400)["error"]


def test_grouped_kl_marks_the_groups_over_the_threshold(ui_server: UiServer, ui_tree: Path) -> None:
    res = api(ui_server, "series", {"metric": KL, "run": GSM, "group_by": "learning_rate"})
    group_of = {r: lr_label(ui_tree, r) for r in GSM}
    want = expected(ui_tree, GSM, group_of, key=KL)
    marked = {g["group"]: list(zip(g["over_x"], g["over_y"])) for g in res["groups"]}
    for group, cells in want.items():
        over = [(x, s["max"]) for x, s in sorted(cells.items()) if s["max"] is not None and s["max"] > 0.01]
        assert [x for x, _ in marked[group]] == [x for x, _ in over]
        assert [y for _, y in marked[group]] == pytest.approx([y for _, y in over], rel=1e-6)
    assert sum(len(v) for v in marked.values()) > 0


def test_grouped_downsampling_keeps_a_spike_in_the_band(tmp_path: Path) -> None:
    """Three seeds x 6,000 steps, one single-step KL spike in one of them: the group's line
    is cut to at most max_points, and the spike is still the band's top and marked."""
    import json
    import random

    import runstore

    rng = random.Random(7)
    spike_at = 4321
    for seed in range(3):
        run = tmp_path / "runs" / f"sweep/seed_{seed}"
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"learning_rate": 1e-4, "seed": seed}))
        with (run / "metrics.jsonl").open("w") as f:
            for step in range(6000):
                kl = 0.5 if (seed == 1 and step == spike_at) else rng.uniform(0.001, 0.003)
                f.write(json.dumps({"step": step, KL: kl}) + "\n")
    runstore.open(tmp_path / "store").ingest([tmp_path / "runs"])
    with UiServer(tmp_path / "store") as s:
        res = api(s, "series", {"metric": KL, "group_by": "auto", "band": "minmax"})
    (g,) = res["groups"]
    assert g["n_points"] == 6000 and len(g["x"]) <= res["max_points"] <= 2000
    assert max(g["hi"]) == 0.5 and g["x"][g["hi"].index(0.5)] == spike_at
    assert list(zip(g["over_x"], g["over_y"])) == [(spike_at, 0.5)]
    assert sorted(g["runs"]) == [f"sweep/seed_{i}" for i in range(3)]


@pytest.mark.parametrize("params, fragment", [
    ({"group_by": "no.such.key"}, "no.such.key"), ({"x": "epoch"}, "x is step, time"),
    ({"group_by": "learning_rate", "band": "iqr"}, "band is std"),
    ({"group_by": ["auto", "learning_rate"]}, "auto"),
])
def test_series_group_errors_are_400(ui_server: UiServer, params: dict[str, Any], fragment: str) -> None:
    res = api(ui_server, "series", {"metric": REWARD, **params}, status=400)
    assert fragment in res["error"] and "Traceback" not in res["error"]


# -- browser ---------------------------------------------------------------------------------

needs_browser = pytest.mark.skipif(not have_chromium(), reason="needs Playwright and Debian's chromium")


def traces(page: Any, metric: str) -> list[dict[str, Any]]:
    return page.eval_on_selector(f'.panel[data-metric="{metric}"] .plot', """(el) =>
        el.data.map((t) => ({x: Array.from(t.x || []), y: Array.from(t.y || []), meta: t.meta || {}}))""")


def wait_drawn(page: Any, metric: str, before: str | None, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    sel = f'.panel[data-metric="{metric}"] .plot'
    while page.get_attribute(sel, "data-drawn") in (before, None):
        assert time.monotonic() < deadline, "the panel was not drawn again"
        page.wait_for_timeout(50)


@needs_browser
def test_grouping_bands_and_smoothing_in_the_browser(ui_server: UiServer, browser: Any, ui_tree: Path) -> None:
    errors: list[str] = []
    runs = "&".join(f"run={q(r)}" for r in GSM)
    page = open_page(browser, f"{ui_server.url}/charts?{runs}&metric={q(REWARD)}", "charts", errors)
    page.wait_for_selector(f'.panel[data-metric="{REWARD}"] .plot[data-lines="{len(GSM)}"]')
    before = page.get_attribute(f'.panel[data-metric="{REWARD}"] .plot', "data-drawn")
    # Group by learning rate from the picker: the URL says so, one mean line per rate.
    page.select_option("#group-add", "learning_rate")
    wait_drawn(page, REWARD, before)
    assert parse_qs(urlsplit(page.url).query)["group_by"] == ["learning_rate"]
    group_of = {r: lr_label(ui_tree, r) for r in GSM}
    want = expected(ui_tree, GSM, group_of)
    got = traces(page, REWARD)
    means = {t["meta"]["group"]: t for t in got if t["meta"].get("kind") == "mean"}
    assert set(means) == set(want)
    for group, t in means.items():
        assert t["x"] == sorted(want[group])
        assert t["y"] == pytest.approx([want[group][x]["mean"] for x in t["x"]], rel=1e-6, abs=1e-9)
        lo = next(x for x in got if x["meta"] == {"group": group, "kind": "band-lo"})
        hi = next(x for x in got if x["meta"] == {"group": group, "kind": "band-hi"})
        stats = [want[group][x] for x in lo["x"]]
        assert lo["y"] == pytest.approx([s["mean"] - (s["std"] or 0) for s in stats], rel=1e-6, abs=1e-9)
        assert hi["y"] == pytest.approx([s["mean"] + (s["std"] or 0) for s in stats], rel=1e-6, abs=1e-9)
    legend = page.inner_text("#chart-legend")
    for group in want:
        n = sum(1 for r in GSM if group_of[r] == group)
        assert f"{group} ({n} run{'s' if n > 1 else ''})" in legend

    # The min–max band.
    before = page.get_attribute(f'.panel[data-metric="{REWARD}"] .plot', "data-drawn")
    page.select_option("#band", "minmax")
    wait_drawn(page, REWARD, before)
    assert "band=minmax" in page.url
    got = traces(page, REWARD)
    for group in want:
        hi = next(x for x in got if x["meta"] == {"group": group, "kind": "band-hi"})
        assert hi["y"] == pytest.approx([want[group][x]["max"] for x in hi["x"]], rel=1e-6, abs=1e-9)

    # Smoothing: the smoothed mean (mean over runs of each run's EMA) drawn, raw mean faint.
    before = page.get_attribute(f'.panel[data-metric="{REWARD}"] .plot', "data-drawn")
    page.eval_on_selector("#smooth", "(el) => { el.value = '0.7'; el.dispatchEvent(new Event('input')); el.dispatchEvent(new Event('change')); }")
    wait_drawn(page, REWARD, before)
    want_s = expected(ui_tree, GSM, group_of, w=0.7)
    got = traces(page, REWARD)
    for group in want_s:
        t = next(x for x in got if x["meta"] == {"group": group, "kind": "smoothed"})
        assert t["y"] == pytest.approx([want_s[group][x]["smooth_mean"] for x in t["x"]], rel=1e-6, abs=1e-9)
    opacity = page.eval_on_selector(f'.panel[data-metric="{REWARD}"] .plot',
                                    "(el) => el.data.filter((t) => (t.meta || {}).kind === 'mean').map((t) => t.opacity)")
    assert opacity and all(o < 0.5 for o in opacity)

    # Reload the URL: the same view comes back from the query string alone.
    url = page.url
    page.goto(url)
    page.wait_for_selector(f'.panel[data-metric="{REWARD}"] .plot[data-lines="{len(want)}"]')
    assert page.input_value("#band") == "minmax" and page.input_value("#smooth") == "0.7"
    assert page.locator('#group-chips .chip[data-key="learning_rate"]').count() == 1
    assert errors == []
    page.close()


@needs_browser
def test_the_key_list_searches_every_key_and_toggles_panels(ui_server: UiServer, browser: Any, ui_tree: Path) -> None:
    errors: list[str] = []
    page = open_page(browser, f"{ui_server.url}/charts?metric={q(REWARD)}", "charts", errors)
    page.wait_for_selector("#key-list .key")
    every = ao.keys(ui_tree)
    assert page.inner_text("#key-count") == f"{len(every)} of {len(every)} keys"
    # A long key wraps after a separator, never inside a word ("ac_tokens_per_t | urn"), and
    # still reads as the whole key.
    lines = """(node) => { const r = document.createRange(); r.selectNodeContents(node);
        return new Set([...r.getClientRects()].map((b) => Math.round(b.top))).size; }"""
    shown = page.eval_on_selector_all("#key-list .key .mono", f"""(els) => {{ const lines = {lines};
        return els.map((el) => [el.textContent, lines(el),
            [...el.childNodes].filter((n) => n.nodeType === 3).map((n) => [n.textContent, lines(n)])]); }}""")
    assert [text for text, _, _ in shown] == \
        page.eval_on_selector_all("#key-list .key", "(els) => els.map((e) => e.dataset.key)")
    assert any(n > 1 for _, n, _ in shown), "no key wraps: the check below would prove nothing"
    for text, _, pieces in shown:
        assert all(n == 1 for _, n in pieces), (text, pieces)
    page.fill("#key-filter", "ENTROPY")
    want = sorted(k for k in every if "entropy" in k.lower())
    deadline = time.monotonic() + 5
    while page.eval_on_selector_all("#key-list .key", "(els) => els.map((e) => e.dataset.key)") != want:
        assert time.monotonic() < deadline
        page.wait_for_timeout(50)
    page.click('#key-list .key[data-key="optim/entropy"]')
    page.wait_for_selector('.panel[data-metric="optim/entropy"] .plot[data-lines]')
    assert parse_qs(urlsplit(page.url).query)["metric"] == [REWARD, "optim/entropy"]
    page.click('#key-list .key[data-key="optim/entropy"]')  # again: the panel goes
    page.wait_for_selector('.panel[data-metric="optim/entropy"]', state="detached")
    assert parse_qs(urlsplit(page.url).query)["metric"] == [REWARD]
    assert errors == []
    page.close()


@needs_browser
def test_wall_time_axis_in_the_browser(ui_server: UiServer, browser: Any, ui_tree: Path) -> None:
    errors: list[str] = []
    runs = GSM[:2]
    page = open_page(browser, f"{ui_server.url}/charts?{'&'.join(f'run={q(r)}' for r in runs)}&metric={q(REWARD)}",
                     "charts", errors)
    page.wait_for_selector(f'.panel[data-metric="{REWARD}"] .plot[data-lines="2"]')
    before = page.get_attribute(f'.panel[data-metric="{REWARD}"] .plot', "data-drawn")
    page.select_option("#x-axis", "time")
    wait_drawn(page, REWARD, before)
    assert "x=time" in page.url
    want = expected(ui_tree, runs, {r: r for r in runs}, x="time")
    for t in traces(page, REWARD):
        if t["meta"].get("kind") != "mean":
            continue
        cells = want[t["meta"]["group"]]
        assert [round(x, 6) for x in t["x"]] == pytest.approx(sorted(cells), rel=1e-6)
        assert t["y"] == pytest.approx([cells[x]["mean"] for x in sorted(cells)], rel=1e-6, abs=1e-9)
    title = page.eval_on_selector(f'.panel[data-metric="{REWARD}"] .plot', "(el) => el.layout.xaxis.title.text")
    assert "wall time" in title
    assert errors == []
    page.close()


@needs_browser
def test_wall_time_axis_marks_the_step_at_each_runs_time(ui_server: UiServer, browser: Any,
                                                         ui_tree: Path) -> None:
    errors: list[str] = []
    runs = GSM[:2]
    step = 12
    page = open_page(browser, f"{ui_server.url}/charts?{'&'.join(f'run={q(r)}' for r in runs)}"
                     f"&metric={q(REWARD)}&x=time&step={step}", "charts", errors)
    plot = f'.panel[data-metric="{REWARD}"] .plot[data-lines="2"]'
    page.wait_for_selector(plot)
    marks = page.eval_on_selector(plot, """(el) => el.layout.shapes.filter((s) => s.yref === 'paper')
        .map((s) => [s.name, s.x0, s.x1])""")
    want = {r: logged_at(ui_tree / r, step) for r in runs}
    assert all(t is not None for t in want.values()) and want[runs[0]] != want[runs[1]]
    assert sorted(name for name, _, _ in marks) == sorted(f"step {step}: {r}" for r in runs)
    for name, x0, x1 in marks:
        run = name.split(": ", 1)[1]
        assert x0 == x1 == pytest.approx(want[run], rel=1e-9)
    label = page.eval_on_selector(plot, "(el) => el.layout.annotations.map((a) => [a.text, a.x])")
    assert [f"step {step}", min(want.values())] in [[t, pytest.approx(x)] for t, x in label]
    assert f"step {step} marked" in page.text_content("#step-note")
    assert errors == []
    page.close()
