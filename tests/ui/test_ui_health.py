"""The Health page and the Runs page's `rules` column: `kl_health` and every rule of
`runstore check` (the default KL rule plus a runstore.toml's rules), served by a real
`runstore ui` and shown in a real headless Chromium, checked against the rules' definitions
computed straight from the run tree's files (tests/oracle.py), never against runstore's queries.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

import oracle
from ui_harness import UiServer, have_chromium, http, open_page

KL = ("optim/kl_sample_train_v1", "optim/kl_sample_train_v2")
BARE_KL = ("kl_sample_train_v1", "kl_sample_train_v2")
KL_RULE = "kl_sample_train_v1|v2 > 0.145"
# A runstore.toml in the server's working directory: the KL rule's own threshold (above one
# spike that `kl_health`, at the store's 0.01, still flags) and a named rule. Run names are
# chosen so that name order differs from every order the page promises.
TOML = """
[check]
threshold = 0.145

[[check.rule]]
metric = "optim/entropy"
op = "<"
value = 0.3
name = "entropy collapse"

[[check.rule]]
trend = "rise"
metric = "time/total"
op = ">"
value = 1.3
name = "step time up 30%"

[[check.rule]]
trend = "stale"
op = ">"
value = 5
"""
RULES = {KL_RULE: (KL, ">", 0.145), "entropy collapse": ("optim/entropy", "<", 0.3)}
# Trend rules: (kind, metric, weight, op, value); test_trends.py holds their definitions.
TRENDS = {"step time up 30%": ("rise", "time/total", 0.9, ">", 1.3)}
STALE = "stale > 5"  # every run of the tree completed: fires for none
SPECS = [  # (name, RunSpec options)
    ("a/calm", {}),
    ("m/spike_late", {"kl_spike_at": 24}),   # KL-flagged at 0.01, below the rule's 0.145
    ("z/spike_early", {"kl_spike_at": 6}),
    ("b/unprefixed", {"kl_spike_at": 12, "unprefixed_kl": True}),  # logs bare KL and entropy
    ("c/sl", {"kind": "sl", "steps": 20}),
    ("e/rl_quiet", {"steps": 12}),  # fires nothing: sorted among the healthy runs
]


@pytest.fixture(scope="module")
def health_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    import runstore
    from runstore import demo
    from runstore.demo import RunSpec

    base = tmp_path_factory.mktemp("health")
    demo.generate_tree(base / "runs", [RunSpec(name, **{"steps": 30, "logtree": False, **opts})
                                       for name, opts in SPECS], seed=3)
    runstore.open(base / "store").ingest([base / "runs"])
    (base / "cwd").mkdir()
    (base / "cwd" / "runstore.toml").write_text(TOML)
    return base / "runs", base / "store"


@pytest.fixture(scope="module")
def ui_tree(health_tree: tuple[Path, Path]) -> Path:
    return health_tree[0]


@pytest.fixture(scope="module")
def health_server(health_tree: tuple[Path, Path]) -> Iterator[UiServer]:
    with UiServer(health_tree[1], cwd=health_tree[1].parent / "cwd") as s:
        yield s


def expected_firings(tree: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(run, rule) -> the rule's columns, from the source files."""
    from trend_oracle import expected_row, family_series

    out = {}
    for name, (metrics, op, value) in RULES.items():
        for run, row in oracle.check_rule(tree, metrics, op, value).items():
            out[(run, name)] = row
    for name, (kind, metric, w, op, value) in TRENDS.items():
        for run_dir in oracle.run_dirs(tree):
            row = expected_row(family_series(run_dir, metric), kind, w, op, value)
            if row is not None:
                out[(oracle.run_name(tree, run_dir), name)] = row
    return out


def logged(tree: Path, run: str) -> set[str]:
    return {k for _, k in oracle.live_metrics(tree / run)}


def close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return a == b


def api(server: UiServer, path: str, status: int = 200) -> Any:
    r = http(server.url, "GET", "/api/" + path)
    assert r.status == status, (r.status, r.text)
    return r.json()


# -- API -------------------------------------------------------------------------------------

def test_health_answers_every_rule_of_check(health_server: UiServer, ui_tree: Path) -> None:
    res = api(health_server, "health")
    want = expected_firings(ui_tree)
    # The data make the test able to fail: several runs fire, one fires both rules, one is
    # KL-flagged by kl_health but fires no rule.
    runs_fired = [run for run, _ in want]
    assert len(set(runs_fired)) >= 3 and len(runs_fired) > len(set(runs_fired))
    assert oracle.kl_health(ui_tree)["m/spike_late"]["flagged"] and "m/spike_late" not in runs_fired
    assert any(rule in TRENDS for _, rule in want)
    # check's order: the KL rule, then runstore.toml's in the file's order.
    assert [r["rule"] for r in res["rules"]] == [*RULES, *TRENDS, STALE]
    assert [r["kind"] for r in res["rules"]] == ["threshold", "threshold", "rise", "stale"]
    assert [r["smooth"] for r in res["rules"]] == [None, None, 0.9, None]
    # Every run wrote its final checkpoint (completed), so the stale rule fires for none.
    assert all(oracle.has_final_checkpoint(run) for run in oracle.run_dirs(ui_tree))
    cols = res["firings"]["columns"]
    got = {(row[cols.index("run_name")], row[cols.index("rule")]): dict(zip(cols, row))
           for row in res["firings"]["rows"]}
    assert set(got) == set(want)
    for key, exp in want.items():
        for col, value in exp.items():
            assert close(got[key][col], value), (key, col, got[key][col], value)
        # The chart of a firing draws the keys of the rule's metrics that this run logged.
        metrics = RULES[key[1]][0] if key[1] in RULES else TRENDS[key[1]][1]
        names = {k for m in ((metrics,) if isinstance(metrics, str) else metrics)
                 for k in oracle.rule_family(m)}
        assert set(got[key]["chart_keys"]) == names & logged(ui_tree, key[0]) != set()
    assert set(got[("b/unprefixed", KL_RULE)]["chart_keys"]) == set(BARE_KL)
    runs = {name for name, _ in oracle.run_summary(ui_tree).items()}
    for rule in res["rules"]:
        fired = {run for run, r in want if r == rule["rule"]}
        assert rule["fired"] == len(fired)
    assert res["n_runs"] == len(runs)
    assert f"{len({run for run, _ in want})} of {len(runs)} runs fired a rule" in res["summary"]


def test_health_kl_health_is_flagged_first(health_server: UiServer, ui_tree: Path) -> None:
    res = api(health_server, "health")
    want = oracle.kl_health(ui_tree)
    cols = res["kl_health"]["columns"]
    rows = [dict(zip(cols, r)) for r in res["kl_health"]["rows"]]
    assert {r["run_name"] for r in rows} == set(want)
    order = [(not want[r["run_name"]]["flagged"], -want[r["run_name"]]["steps_over"], r["run_name"])
             for r in rows]
    assert order == sorted(order)
    for r in rows:
        for col, value in want[r["run_name"]].items():
            assert close(r[col], value) if value is not None else r[col] is None, (r["run_name"], col)


def test_health_runs_overview_and_the_runs_rules_column(health_server: UiServer, ui_tree: Path) -> None:
    want = expected_firings(ui_tree)
    per_run: dict[str, set[str]] = {}
    for run, rule in want:
        per_run.setdefault(run, set()).add(rule)
    kl = oracle.kl_health(ui_tree)
    overview = api(health_server, "health")["runs"]
    names = sorted(oracle.run_summary(ui_tree))
    assert sorted(r["run_name"] for r in overview) == names
    flagged = [bool(r["rules"]) or bool(r["kl_flagged"]) for r in overview]
    assert flagged == sorted(flagged, reverse=True)  # flagged runs first
    for r in overview:
        assert set(r["rules"]) == per_run.get(r["run_name"], set())
        assert r["kl_flagged"] == (kl[r["run_name"]]["flagged"] if r["run_name"] in kl else None)
    runs = api(health_server, "runs")
    at, rules_at = runs["columns"].index("run_name"), runs["columns"].index("rules")
    assert {row[at]: set(row[rules_at]) for row in runs["rows"]} == \
        {n: per_run.get(n, set()) for n in names}


def test_a_broken_rule_file_is_a_400_and_the_runs_page_still_answers(ui_demo: tuple[Path, Path],
                                                                   tmp_path: Path) -> None:
    (tmp_path / "runstore.toml").write_text(
        '[[check.rule]]\nmetric = "optim/entrpy"\nop = "<"\nvalue = 0.3\n')
    with UiServer(ui_demo[1], cwd=tmp_path) as s:
        err = api(s, "health", status=400)["error"]
        assert "optim/entrpy" in err and "optim/entropy" in err and "Traceback" not in err
        runs = api(s, "runs")
        assert "optim/entrpy" in runs["rules_error"]
        at = runs["columns"].index("rules")
        assert runs["rows"] and all(row[at] is None for row in runs["rows"])


# -- browser ---------------------------------------------------------------------------------

needs_browser = pytest.mark.skipif(
    not have_chromium(), reason="needs Playwright (the test extra) and Debian's chromium at "
    "/usr/bin/chromium (tests/run.sh installs both as root)")


def read_table(page: Any, selector: str) -> tuple[list[str], list[list[str]]]:
    return page.eval_on_selector(selector, """(root) => {
        const t = root.querySelector('table');
        const heads = [...t.querySelectorAll('thead th')].map((th) => th.textContent.trim());
        const rows = [...t.querySelectorAll('tbody tr')].map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent.trim()));
        return [heads, rows];
    }""")


def num(text: str) -> float | None:
    return None if text in ("", "–") else float(text)


@needs_browser
def test_the_health_page_shows_every_firing_flagged_runs_first(health_server: UiServer, browser: Any,
                                                              ui_tree: Path) -> None:
    errors: list[str] = []
    page = open_page(browser, health_server.url + "/health", "health", errors)
    page.wait_for_selector("#health-firings tbody tr")
    want = expected_firings(ui_tree)
    heads, rows = read_table(page, "#health-firings")
    got = {(r[heads.index("run_name")], r[heads.index("rule")]): r for r in rows}
    assert set(got) == set(want)
    for key, exp in want.items():
        row = got[key]
        for col in ("first_step", "last_step", "steps_over", "longest_streak"):
            assert num(row[heads.index(col)]) == exp[col], (key, col)
        assert num(row[heads.index("peak")]) == pytest.approx(exp["peak"], rel=1e-5)
        assert row[heads.index("chart")] == f"chart @ step {exp['first_step']}"

    # A trend rule's chart shows the smoothing the rule judges by.
    (run, exp), = [(r, row) for (r, rule), row in want.items() if rule in TRENDS]
    href = page.locator("#health-firings tbody tr").filter(has_text=run).filter(
        has_text="step time up 30%").locator("a.chart-link").get_attribute("href")
    assert parse_qs(urlsplit(href).query) == {"run": [run], "metric": ["time/total"],
                                              "step": [str(exp["first_step"])], "smooth": ["0.90"]}

    # Runs: flagged first, each with exactly its rules.
    heads, rows = read_table(page, "#health-runs")
    per_run: dict[str, set[str]] = {}
    for run, rule in want:
        per_run.setdefault(run, set()).add(rule)
    kl = oracle.kl_health(ui_tree)
    names = [r[heads.index("run")] for r in rows]
    assert sorted(names) == sorted(oracle.run_summary(ui_tree))
    flagged = [n in per_run or bool(kl.get(n, {}).get("flagged")) for n in names]
    assert flagged == sorted(flagged, reverse=True) and any(flagged) and not all(flagged)
    links = page.eval_on_selector_all("#health-runs tbody tr", """(trs) => trs.map((tr) =>
        [tr.querySelector('td').textContent.trim(), [...tr.querySelectorAll('a.chart-link')].map((a) => a.textContent)])""")
    for name, texts in links:
        assert sorted(texts) == sorted(f"{rule} @ {want[(name, rule)]['first_step']}"
                                       for rule in per_run.get(name, ()))

    # Every cell of a numeric column lines up with its header, a pill ("fired") as well.
    misaligned = page.eval_on_selector_all("#health table.data", """(tables) => tables.flatMap((t) => {
        const heads = [...t.querySelectorAll('thead th')];
        return [...t.querySelectorAll('tbody tr')].flatMap((tr) => [...tr.children].map((td, i) =>
            [heads[i].textContent, getComputedStyle(heads[i]).textAlign, getComputedStyle(td).textAlign]))
            .filter(([, th, td]) => (th === 'right') !== (td === 'right'));
    })""")
    assert misaligned == []
    assert page.locator("#health-rules th.num").count() >= 3

    # kl_health: flagged first, the oracle's numbers.
    heads, rows = read_table(page, "#health-kl")
    assert [r[0] for r in rows] == sorted(kl, key=lambda n: (not kl[n]["flagged"], -kl[n]["steps_over"], n))
    for r in rows:
        assert num(r[heads.index("steps_over")]) == kl[r[0]]["steps_over"]
        assert (r[heads.index("flagged")] == "flagged") == kl[r[0]]["flagged"]
    assert errors == []
    page.close()


@needs_browser
def test_a_firing_links_to_its_chart_at_that_step(health_server: UiServer, browser: Any,
                                                 ui_tree: Path) -> None:
    errors: list[str] = []
    page = open_page(browser, health_server.url + "/health", "health", errors)
    page.wait_for_selector("#health-firings tbody tr")
    # The run that logs KL without `optim/`: its chart must draw the spellings it logged.
    run = "b/unprefixed"
    exp = expected_firings(ui_tree)[(run, KL_RULE)]
    row = page.locator("#health-firings tbody tr").filter(has_text=run).filter(has_text=KL_RULE)
    assert row.count() == 1
    row.locator("a.chart-link").click()
    page.wait_for_selector(f'.panel[data-metric="{BARE_KL[0]}"] .plot[data-lines="1"]')
    q = parse_qs(urlsplit(page.url).query)
    assert urlsplit(page.url).path == "/charts"
    assert q["run"] == [run] and q["step"] == [str(exp["first_step"])]
    assert sorted(q["metric"]) == sorted(BARE_KL)
    # The panel marks that step, and the run's line there is over the rule's threshold.
    panel = f'.panel[data-metric="{BARE_KL[0]}"] .plot'
    shapes = page.eval_on_selector(panel, "(el) => el.layout.shapes.map((s) => [s.x0, s.x1, s.yref || ''])")
    assert [exp["first_step"], exp["first_step"], "paper"] in shapes
    (line,) = page.eval_on_selector(panel, """(el) => el.data.filter((t) => (t.meta || {}).kind === 'raw')
        .map((t) => [Array.from(t.x), Array.from(t.y)])""")
    at = dict(zip(*line))
    live = oracle.live_numbers(ui_tree / run)
    assert at[exp["first_step"]] == pytest.approx(live[(exp["first_step"], BARE_KL[0])], rel=1e-6)
    assert max(live.get((exp["first_step"], k), -1) for k in BARE_KL) > 0.145
    assert errors == []
    page.close()


@needs_browser
def test_the_runs_page_shows_the_rules_firing(health_server: UiServer, browser: Any, ui_tree: Path) -> None:
    errors: list[str] = []
    page = open_page(browser, health_server.url + "/runs", "runs", errors)
    page.wait_for_selector("#runs-table tbody tr")
    per_run: dict[str, set[str]] = {}
    for run, rule in expected_firings(ui_tree):
        per_run.setdefault(run, set()).add(rule)
    shown = page.eval_on_selector_all("#runs-table tbody tr", """(trs) => trs.map((tr) => {
        const cells = [...tr.querySelectorAll('td')];
        return [cells[1].textContent.trim(), [...tr.querySelectorAll('.pill.rule')].map((p) => p.textContent)];
    })""")
    assert {n: set(r) for n, r in shown} == {n: per_run.get(n, set()) for n in oracle.run_summary(ui_tree)}
    deadline = time.monotonic() + 5
    while errors and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert errors == []
    page.close()


@needs_browser
def test_the_health_page_updates_live_when_a_rule_starts_firing(small_tree: Path, tmp_path: Path,
                                                                browser: Any) -> None:
    """Under --watch, a KL spike appended to a run's metrics.jsonl shows up on the open page
    as a new firing, without a reload."""

    import runstore

    store = tmp_path / "store"
    runstore.open(store).ingest([small_tree])
    quiet = [n for n, row in oracle.kl_health(small_tree).items() if not row["flagged"]]
    assert quiet
    run = quiet[0]
    last = max(s for s, _ in oracle.live_metrics(small_tree / run))
    errors: list[str] = []
    with UiServer(store, str(small_tree), "--watch", "0.5", cwd=tmp_path) as s:
        page = open_page(browser, s.url + "/health", "health", errors)
        page.wait_for_selector("#health-kl tbody tr")
        before = {r[0] for r in read_table(page, "#health-runs")[1] if r[2] == "flagged"}
        assert run not in before
        page.evaluate("() => { window.__notReloaded = true; }")
        with (small_tree / run / "metrics.jsonl").open("a") as f:
            f.write(json.dumps({"step": last + 1, KL[0]: 0.5}) + "\n")
        deadline = time.monotonic() + 30
        while True:
            heads, rows = read_table(page, "#health-firings") if page.locator(
                "#health-firings table").count() else ([], [])
            fired = {r[heads.index("run_name")] for r in rows} if rows else set()
            if run in fired or time.monotonic() > deadline:
                break
            page.wait_for_timeout(200)
        assert run in fired
        row = next(r for r in rows if r[heads.index("run_name")] == run)
        assert num(row[heads.index("first_step")]) == last + 1
        assert page.evaluate("() => window.__notReloaded") is True
        assert errors == []
        page.close()


# A store where the stale rule fires: two runs that never finished (one RL,
# which logs the reward and KL of the Charts page's default panels; one SL, which logs
# neither), and one that completed.
STALE_TOML = '[[check.rule]]\ntrend = "stale"\nop = ">="\nvalue = 0\n'
STALE_SPECS = [("r/unfinished", {"final_checkpoint": False, "steps": 17}),
               ("s/sl_unfinished", {"kind": "sl", "final_checkpoint": False, "steps": 13}),
               ("d/done", {"steps": 9})]


@pytest.fixture(scope="module")
def stale_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    import runstore
    from runstore import demo
    from runstore.demo import RunSpec

    base = tmp_path_factory.mktemp("stale")
    demo.generate_tree(base / "runs", [RunSpec(name, **{"logtree": False, **opts})
                                       for name, opts in STALE_SPECS], seed=5)
    # An RL run is complete once it logs progress/done_frac 1: this one crashed before that.
    metrics = base / "runs" / "r/unfinished" / "metrics.jsonl"
    lines = metrics.read_text().splitlines(keepends=True)
    metrics.write_text("".join(ln for ln in lines if json.loads(ln).get("progress/done_frac", 0) < 1))
    runstore.open(base / "store").ingest([base / "runs"])
    (base / "cwd").mkdir()
    (base / "cwd" / "runstore.toml").write_text(STALE_TOML)
    return base / "runs", base / "store"


def stale_chart(tree: Path, run: str) -> tuple[list[str], int]:
    """The keys a stale firing's chart should draw and the step to mark, from metrics.jsonl:
    the default panels' keys the run logged, else the first key logged at its last step."""
    live = oracle.live_metrics(tree / run)
    last = max(step for step, _ in live)
    keys = {k for _, k in live}
    default = [k for k in ("env/all/reward/total", "optim/kl_sample_train_v1", "kl_sample_train_v1")
               if k in keys]
    return default or [min(k for s, k in live if s == last)], last


@needs_browser
def test_a_stale_firing_links_to_the_runs_chart_at_its_last_step(stale_tree: tuple[Path, Path],
                                                                 browser: Any) -> None:
    tree, store = stale_tree
    unfinished = {"r/unfinished", "s/sl_unfinished"}
    assert not any(oracle.has_final_checkpoint(tree / run) for run in unfinished)
    errors: list[str] = []
    with UiServer(store, cwd=tree.parent / "cwd") as s:
        page = open_page(browser, s.url + "/health", "health", errors)
        page.wait_for_selector("#health-firings tbody tr")
        hrefs = page.eval_on_selector_all("#health-firings tbody tr", """(trs) => trs
            .filter((tr) => tr.textContent.includes('stale >= 0'))
            .map((tr) => [tr.querySelector('td').textContent.trim(), tr.querySelector('a.chart-link')?.getAttribute('href')])""")
        assert {run for run, _ in hrefs} == unfinished
        for run, href in hrefs:
            assert href is not None, run
            keys, last = stale_chart(tree, run)
            q = parse_qs(urlsplit(href).query)
            assert urlsplit(href).path == "/charts"
            assert q == {"run": [run], "metric": keys, "step": [str(last)]}, run
        # The RL run's chart is the default panels; the SL run logs neither reward nor KL.
        assert stale_chart(tree, "r/unfinished")[0][0] == "env/all/reward/total"
        assert "reward" not in stale_chart(tree, "s/sl_unfinished")[0][0]

        # Following the SL run's link draws its line, marked at its last step.
        page.locator("#health-firings tbody tr").filter(has_text="s/sl_unfinished") \
            .locator("a.chart-link").click()
        keys, last = stale_chart(tree, "s/sl_unfinished")
        panel = f'.panel[data-metric="{keys[0]}"] .plot[data-lines="1"]'
        page.wait_for_selector(panel)
        shapes = page.eval_on_selector(panel, "(el) => el.layout.shapes.map((s) => [s.x0, s.x1])")
        assert [last, last] in shapes
        steps = page.eval_on_selector(panel, """(el) => el.data.filter((t) => (t.meta || {}).kind === 'raw')
            .map((t) => Array.from(t.x))""")
        assert [max(x) for x in steps] == [last]
        assert errors == []
        page.close()
