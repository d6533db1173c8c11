"""The doctor's findings on the Health page: a real `runstore ui` over the `problems` scenario
(a run per finding, demo.problem_specs) and a real headless Chromium. What the page shows is
checked against tests/doctor_oracle.py (the findings computed from the run files), and each
finding's chart link against the keys its run logged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

import doctor_oracle as do
import runstore
from runstore import demo
from ui_harness import UiServer, have_chromium, http, open_page

SEED = 5


@pytest.fixture(scope="module")
def problems_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, UiServer]]:
    base = tmp_path_factory.mktemp("ui_problems")
    demo.generate_tree(base / "runs", demo.problem_specs(), seed=SEED)
    runstore.open(base / "store").ingest([base / "runs"])
    # An empty working directory: no runstore.toml but the doctor's defaults.
    with UiServer(base / "store", cwd=base) as server:
        yield base / "runs", server


def expected(root: Path) -> set[tuple[str, str]]:
    """(run, finding) for every finding the oracle fires on the tree."""
    return {(run, name) for name, finding in do.FINDINGS.items()
            for run, v in finding(root).items() if v.fired}


def logged(root: Path) -> dict[str, set[str]]:
    """run -> the keys it logged a number at a step for (live file)."""
    return {name: do.logged_keys(run) for name, run in do.runs(root).items()}


def test_the_health_answer_holds_the_findings(problems_server: tuple[Path, UiServer]) -> None:
    root, server = problems_server
    reply = http(server.url, "GET", "/api/health")
    assert reply.status == 200, reply.text
    doc = reply.json()["findings"]
    assert doc["error"] is None and doc["n_checked"] == 14
    got = {(r["run_name"], r["finding"]) for r in doc["rows"]}
    assert got == expected(root)
    keys = logged(root)
    for r in doc["rows"]:
        assert r["chart_keys"] and set(r["chart_keys"]) <= keys[r["run_name"]], r
        assert r["evidence"] and r["to_try"] and r["statement"].startswith("SELECT")
    severities = [r["severity"] for r in doc["rows"]]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)
    overview = {r["run_name"]: set(r["findings"]) for r in reply.json()["runs"]}
    for run, finding in got:
        assert finding in overview[run]


needs_browser = pytest.mark.skipif(
    not have_chromium(), reason="needs Playwright (the test extra) and Debian's chromium at "
    "/usr/bin/chromium (tests/run.sh installs both as root)")


@needs_browser
def test_the_health_page_shows_each_finding_with_a_chart_link(
        problems_server: tuple[Path, UiServer], browser: Any,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    root, server = problems_server
    errors: list[str] = []
    page = open_page(browser, server.url + "/health", "health", errors)
    page.wait_for_selector("#doctor-findings .finding")
    cards = page.eval_on_selector_all("#doctor-findings .finding", """(cards) => cards.map((c) => ({
        finding: c.dataset.finding, run: c.dataset.run,
        evidence: c.querySelector('.evidence').textContent,
        link: c.querySelector('a.chart-link') && c.querySelector('a.chart-link').getAttribute('href'),
        statement: c.querySelector('.statement code').textContent}))""")
    assert {(c["run"], c["finding"]) for c in cards} == expected(root)
    shot = tmp_path_factory.mktemp("shots") / "health-findings.png"
    page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
    kl = next(c for c in cards if c["finding"] == "kl_spike")
    query = parse_qs(urlsplit(kl["link"]).query)
    assert query["run"] == ["problems/kl_spike"] and query["step"] == ["20"]
    assert set(query["metric"]) == {"optim/kl_sample_train_v1", "optim/kl_sample_train_v2"}
    # Following the link draws the chart of that run at that step.
    page.click("#doctor-findings .finding[data-finding='kl_spike'] a.chart-link")
    page.wait_for_selector('body[data-ready="charts"]', state="attached")
    assert "/charts" in page.url and "problems%2Fkl_spike" in page.url
    # The Runs table of the page links each run's findings too.
    page.goto(server.url + "/health")
    page.wait_for_selector('body[data-ready="health"]', state="attached")
    links = page.eval_on_selector_all("#health-runs a.finding-link",
                                      "(as) => as.map((a) => a.textContent)")
    assert "reward_stuck @ 0" in links and "not_finite @ 25" in links
    assert errors == []
