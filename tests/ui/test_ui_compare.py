"""The Compare page: the config diff of the selected runs (`Store.diff`) with its "differences
only" toggle, and their code.diffs. A real `runstore ui` and a real headless Chromium, checked
against the runs' config.json and code.diff read directly (tests/oracle.py), not runstore."""

from __future__ import annotations

import difflib
import json
import math
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote, urlencode

import pytest

import oracle
from ui_harness import UiServer, chromium_context, have_chromium, http, open_page

RUNS = ["sweep/lr_1e-4", "sweep/lr_3e-4", "sweep/no_code"]


@pytest.fixture(scope="module")
def compare_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Three runs: different learning rates; the second saves every 10.0 (a number equal to
    the first's 10) and has another code.diff; the third lacks `lora_rank` and a code.diff."""
    import runstore
    from runstore import demo
    from runstore.demo import RunSpec

    base = tmp_path_factory.mktemp("compare")
    demo.generate_tree(base / "runs", [RunSpec(RUNS[0], steps=6, learning_rate=1e-4, logtree=False),
                                       RunSpec(RUNS[1], steps=6, learning_rate=3e-4, logtree=False),
                                       RunSpec(RUNS[2], steps=6, learning_rate=1e-4, logtree=False)],
                       seed=2)
    second = base / "runs" / RUNS[1]
    cfg = json.loads((second / "config.json").read_text())
    cfg["save_every"] = float(cfg["save_every"])
    (second / "config.json").write_text(json.dumps(cfg))
    (second / "code.diff").write_text((second / "code.diff").read_text()
                                      + "+    lr_schedule = 'cosine'  # <b>not html</b>\n")
    third = base / "runs" / RUNS[2]
    cfg = json.loads((third / "config.json").read_text())
    del cfg["lora_rank"]
    (third / "config.json").write_text(json.dumps(cfg))
    (third / "code.diff").unlink()
    runstore.open(base / "store").ingest([base / "runs"])
    return base / "runs", base / "store"


@pytest.fixture(scope="module")
def server(compare_tree: tuple[Path, Path]) -> Iterator[UiServer]:
    with UiServer(compare_tree[1]) as s:
        yield s


def configs(tree: Path) -> dict[str, dict[str, Any]]:
    return {r: oracle.flatten(json.loads((tree / r / "config.json").read_text())) for r in RUNS}


def differing(cfgs: dict[str, dict[str, Any]]) -> set[str]:
    """Keys whose values differ (missing differs from anything; numbers by value)."""
    keys = set().union(*cfgs.values())
    out = set()
    for k in keys:
        vals = [cfgs[r].get(k, KeyError) for r in RUNS]
        if any(v is KeyError for v in vals):
            if not all(v is KeyError for v in vals):
                out.add(k)
            continue
        num = [isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals]
        if all(num):
            if len({float(v) for v in vals}) > 1:
                out.add(k)
        elif len({json.dumps(v, sort_keys=True) for v in vals}) > 1:
            out.add(k)
    return out


def code_texts(tree: Path) -> dict[str, str | None]:
    return {r: (tree / r / "code.diff").read_text() if (tree / r / "code.diff").exists() else None
            for r in RUNS}


def same_value(cell: str | None, value: Any) -> bool:
    if cell is None:
        return value is KeyError
    got = json.loads(cell)
    if isinstance(value, float) or isinstance(got, float):
        return math.isclose(float(got), float(value))
    return got == value


def test_diff_api_is_the_configs_difference(server: UiServer, compare_tree: tuple[Path, Path]) -> None:
    tree = compare_tree[0]
    cfgs = configs(tree)
    r = http(server.url, "GET", "/api/diff?" + urlencode({"run": RUNS}, doseq=True))
    assert r.status == 200, r.text
    res = r.json()
    assert res["runs"] == RUNS and res["diff"]["columns"] == ["key", *RUNS]
    rows = {row[0]: row[1:] for row in res["diff"]["rows"]}
    want = differing(cfgs)
    assert {"learning_rate", "lora_rank"} <= want and "save_every" not in want
    assert set(rows) - {"code.diff"} == want and "code.diff" in rows
    for key in want:
        for run, cell in zip(RUNS, rows[key]):
            assert same_value(cell, cfgs[run].get(key, KeyError)), (key, run, cell)
    every = http(server.url, "GET", "/api/diff?" + urlencode({"run": RUNS, "all": 1}, doseq=True)).json()
    keys = set().union(*cfgs.values())
    got = {row[0]: row[-1] for row in every["diff"]["rows"]}
    assert set(got) - {"code.diff"} == keys
    assert {k for k, d in got.items() if d} - {"code.diff"} == want
    # code.diff: each run's text, and the unified diff of each against the first.
    texts = code_texts(tree)
    assert [c["text"] for c in res["code"]] == [texts[r] for r in RUNS]
    a, b = texts[RUNS[0]], texts[RUNS[1]]
    unified = "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True),
                                           f"a/{RUNS[0]}/code.diff", f"b/{RUNS[1]}/code.diff"))
    assert unified in res["code_diff"]
    assert f"b/{RUNS[2]}/code.diff (none)" in res["code_diff"]


@pytest.mark.parametrize("params, fragment", [({}, "run=NAME"), ({"run": ["no/such/run", RUNS[0]]}, "no/such/run")])
def test_diff_errors_are_400(server: UiServer, params: dict[str, Any], fragment: str) -> None:
    r = http(server.url, "GET", "/api/diff?" + urlencode(params, doseq=True))
    assert r.status == 400 and fragment in r.json()["error"] and "Traceback" not in r.text


@pytest.mark.skipif(not have_chromium(), reason="needs Playwright and Debian's chromium")
def test_the_compare_page(server: UiServer, compare_tree: tuple[Path, Path], tmp_path: Path) -> None:
    tree = compare_tree[0]
    cfgs = configs(tree)
    want = differing(cfgs)
    errors: list[str] = []
    with chromium_context(tmp_path / "chromium") as ctx:
        # Two runs from the URL, the third added with the picker.
        page = open_page(ctx, f"{server.url}/compare?run={quote(RUNS[0], safe='')}&run={quote(RUNS[1], safe='')}",
                         "compare", errors)
        page.wait_for_selector('body[data-compared="2"]')
        page.select_option("#compare-add", RUNS[2])
        page.wait_for_selector('body[data-compared="3"]')
        assert page.url.count("run=") == 3

        def read() -> tuple[list[str], list[list[str]]]:
            page.wait_for_selector("#diff-table")  # the page redraws it after each change
            return page.eval_on_selector("#diff-table", """(root) => {
                const t = root.querySelector('table');
                return [[...t.querySelectorAll('thead th')].map((th) => th.textContent.trim()),
                        [...t.querySelectorAll('tbody tr')].map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent))];
            }""")

        heads, rows = read()
        assert heads == ["key", *RUNS]
        shown = {r[0]: r[1:] for r in rows}
        assert set(shown) - {"code.diff"} == want
        for key in want:
            for run, text in zip(RUNS, shown[key]):
                value = cfgs[run].get(key, KeyError)
                assert (text == "(missing)") if value is KeyError else same_value(text, value), (key, run, text)
        assert page.inner_text("#diff-count") == f"{len(rows)} keys differ"

        # Every key, the differing rows marked.
        page.uncheck("#diff-only")
        page.wait_for_selector('body[data-compared="3"]')
        deadline = 50
        while len(read()[1]) == len(rows) and deadline:
            page.wait_for_timeout(100)
            deadline -= 1
        heads, rows_all = read()
        keys = set().union(*cfgs.values())
        assert {r[0] for r in rows_all} - {"code.diff"} == keys and "all=1" in page.url
        marked = set(page.eval_on_selector_all("#diff-table tbody tr.differs", "(trs) => trs.map((tr) => tr.querySelector('td').textContent)"))
        assert marked - {"code.diff"} == want

        # code.diff: the unified diff against the first run, as text (markup shown, not parsed).
        texts = code_texts(tree)
        unified = page.inner_text("#code-unified")
        added = [line for line in texts[RUNS[1]].splitlines() if line not in texts[RUNS[0]].splitlines()]
        assert added and all("+" + line in unified for line in added)
        assert page.locator("#code-unified b").count() == 0 and "<b>not html</b>" in unified
        own = page.eval_on_selector_all("details.code-own", "(els) => els.map((e) => [e.dataset.run, e.querySelector('pre').textContent])")
        assert {r: t for r, t in own} == {r: t for r, t in texts.items() if t is not None}
        assert "no code.diff" in page.inner_text("#code-summary")
        assert errors == []
        page.close()
