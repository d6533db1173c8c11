"""runstore.analysis.diff: config diffs and code.diff summaries, against the run files.

Expected answers come from config.json and code.diff read with plain json/difflib in the test.
"""

from __future__ import annotations

import difflib
import doctest
import json
import math
from pathlib import Path

import pytest

import analysis_oracle as ao
import runstore
from runstore import demo
from runstore.analysis import diff as diff_mod
from runstore.analysis import runs as runs_mod
from runstore.demo import RunSpec
from runstore.errors import QueryError, UsageError


@pytest.fixture(scope="module")
def demo_store(_demo_template: Path, shared_demo_store: Path) -> tuple[Path, runstore.Store]:
    return _demo_template, runstore.open(shared_demo_store)


def text(v: object) -> str:
    return json.dumps(v, ensure_ascii=False, allow_nan=True)


def expected(root: Path, names: list[str], everything: bool = False) -> dict[str, list]:
    """key -> [cell per run] (+ differs when `everything`), from config.json itself."""
    runs = ao.runs(root)
    configs = [ao.config(runs[n]) or {} for n in names]
    out = {}
    for key in sorted(set().union(*configs)):
        values = [c.get(key, ...) for c in configs]
        def norm(v: object) -> object:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                return ("t", text(v))
            return ("n", "nan" if math.isnan(v) else float(v))
        differs = len({norm(v) if v is not ... else ... for v in values}) > 1
        if differs or everything:
            cells = [None if v is ... else text(v) for v in values]
            out[key] = cells + ([differs] if everything else [])
    return out


def rows(df) -> dict[str, list]:  # type: ignore[no-untyped-def]
    return {r[0]: list(r[1:]) for r in df.rows()}


@pytest.mark.parametrize("names", [
    ["gsm8k_tool_rl/sweep/lr_1e-4/seed_0", "gsm8k_tool_rl/sweep/lr_1e-3/seed_0"],
    ["math_rl_sweep/qwen3-8b/lr_1e-5", "sl/tulu3_qwen3-8b_lr2e-4", "dpo/hh_llama-3.1-8b_beta0.1"],
])
@pytest.mark.parametrize("everything", [False, True])
def test_diff_matches_config_json(demo_store: tuple[Path, runstore.Store], names: list[str],
                                  everything: bool) -> None:
    root, store = demo_store
    df = diff_mod.diff(store, names, all=everything)
    assert df.columns == ["key", *names] + (["differs"] if everything else [])
    got = rows(df)
    code = got.pop("code.diff", None)
    assert got == expected(root, names, everything)
    assert list(got) == sorted(got)
    # Demo runs share one code.diff: not a difference; with `all`, the same letter and size.
    if not everything:
        assert code is None
        return
    assert df["key"].to_list()[-1] == "code.diff"
    body = (ao.runs(root)[names[0]] / "code.diff").read_text(encoding="utf-8")
    lines = len(body.splitlines())
    assert code == [f"A: {lines} lines, {len(body.encode())} bytes"] * len(names) + [False]


@pytest.fixture(scope="module")
def odd_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runstore.Store]:
    """Runs whose configs hold the cases a diff must keep apart, and code.diffs that differ."""
    base = tmp_path_factory.mktemp("diff_odd")
    root = base / "runs"
    demo.generate_tree(root, [RunSpec(f"sweep/r{i}", steps=3, eval_every=0, save_every=0,
                                      logtree=False) for i in range(4)], seed=1)
    edits = [
        {"x": None, "n": 1, "flag": True, "nested": {"a": [1, 2]}, "s": "null", "nan": math.nan},
        {"n": 1.0, "flag": 1, "nested": {"a": [1, 2]}, "s": None, "nan": math.nan},
        {"x": None, "n": 1e-4, "flag": True, "nested": {"a": [2, 1]}, "s": "null"},
        {"x": None, "n": 0.0001, "flag": True, "nested": {}, "s": "null", "nan": math.nan},
    ]
    for i, extra in enumerate(edits):
        run = root / "sweep" / f"r{i}"
        cfg = json.loads((run / "config.json").read_text())
        cfg.update(extra)
        (run / "config.json").write_text(json.dumps(cfg, indent=1))
        if i == 1:
            (run / "code.diff").write_text("diff --git a/x b/x\n-old\n+new\n")
        if i == 3:
            (run / "code.diff").unlink()
    store = runstore.open(base / "store")
    store.ingest([root])
    return root, store


def test_missing_is_not_null_and_numbers_compare_as_numbers(
        odd_store: tuple[Path, runstore.Store]) -> None:
    root, store = odd_store
    names = [f"sweep/r{i}" for i in range(4)]
    got = rows(diff_mod.diff(store, names, all=True))
    assert got["x"] == ["null", None, "null", "null", True]  # r1 lacks x: missing, not null
    assert got["s"] == ['"null"', "null", '"null"', '"null"', True]  # a string "null" is text
    assert got["n"][-1] is True and got["n"][:4] == ["1", "1.0", "0.0001", "0.0001"]
    assert got["flag"] == ["true", "1", "true", "true", True]  # a boolean is not the number 1
    assert got["nan"] == ["NaN", "NaN", None, "NaN", True]
    assert got["nested.a"] == ["[1, 2]", "[1, 2]", "[2, 1]", None, True]
    assert got["nested"] == [None, None, None, "{}", True]
    assert got["model_name"][-1] is False
    for key, cells in got.items():
        if key != "code.diff":
            assert cells == expected(root, names, True)[key]
    # 1 and 1.0 are equal numbers; 1e-4 and 0.0001 too; NaN equals NaN.
    two = rows(diff_mod.diff(store, ["sweep/r0", "sweep/r1"]))
    assert "n" not in two and "nan" not in two and "flag" in two
    assert "n" not in rows(diff_mod.diff(store, ["sweep/r2", "sweep/r3"]))


def test_code_diff_summaries_and_unified_diff(odd_store: tuple[Path, runstore.Store]) -> None:
    root, store = odd_store
    names = [f"sweep/r{i}" for i in range(4)]
    got = rows(diff_mod.diff(store, names))["code.diff"]
    files = [root / n / "code.diff" for n in names]
    body = [f.read_text() if f.exists() else None for f in files]
    def summary(letter: str, t: str) -> str:
        n = len(t.splitlines())
        return f"{letter}: {n} line{'s' if n != 1 else ''}, {len(t.encode())} bytes"
    assert got == [summary("A", body[0]), summary("B", body[1]), summary("A", body[2]), None]
    assert "code.diff" not in rows(diff_mod.diff(store, ["sweep/r0", "sweep/r2"]))
    out = diff_mod.code_diffs(store, names)
    want = "".join(difflib.unified_diff(body[0].splitlines(keepends=True),
                                        body[1].splitlines(keepends=True),
                                        "a/sweep/r0/code.diff", "b/sweep/r1/code.diff"))
    assert want in out
    assert "# sweep/r2/code.diff: identical to sweep/r0's\n" in out
    assert "+++ b/sweep/r3/code.diff (none)\n" in out
    assert all(line.startswith("-") for line in out.split("(none)\n", 1)[1].split("@@")[-1]
               .splitlines()[1:])


def test_runs_are_resolved_like_trace_and_plot_spans(
        demo_store: tuple[Path, runstore.Store]) -> None:
    store = demo_store[1]
    df = diff_mod.diff(store, ["gsm8k_tool_rl/sweep/lr_1e-3", "math_rl_sweep/*/lr_4e-5"])
    assert df.columns[1:] == ["gsm8k_tool_rl/sweep/lr_1e-3/seed_0",
                              "math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5"]
    with pytest.raises(QueryError, match=r"'gsm8k_tool_rl/sweep/lr_1e-4' matches 2 runs \("
                                         r"gsm8k_tool_rl/sweep/lr_1e-4/seed_0, "
                                         r"gsm8k_tool_rl/sweep/lr_1e-4/seed_1\); give one "
                                         r"run_name or a narrower GLOB"):
        diff_mod.diff(store, ["gsm8k_tool_rl/sweep/lr_1e-4", "sl/*"])
    with pytest.raises(QueryError, match=r"'math_rl_sweep/\*' matches 4 runs"):
        diff_mod.diff(store, ["math_rl_sweep/*", "sl/*"])
    with pytest.raises(QueryError, match=r"no run is named or matches 'nope' \(`runstore runs`"):
        diff_mod.diff(store, ["nope", "sl/*"])
    with pytest.raises(UsageError, match="both name run sl/tulu3_qwen3-8b_lr2e-4"):
        diff_mod.diff(store, ["sl/*", "sl/tulu3_qwen3-8b_lr2e-4"])


def test_the_resolution_rule_is_scope_one_run_plus_prefix(
        demo_store: tuple[Path, runstore.Store]) -> None:
    from runstore.present import scope

    store = demo_store[1]
    names = store.sql("select run_name from runs order by 1")["run_name"].to_list()
    patterns = names + ["*seed_1", "sl/*", "gsm8k_tool_rl/*/lr_1e-3/*", "dpo*", "x*", "*"]
    for p in patterns:
        try:
            want: object = scope.one_run(store, p)
        except QueryError as e:
            want = str(e)
        try:
            got = tuple(runs_mod.resolve(store, [p])[0][:2])  # (run_id, label), as one_run
        except QueryError as e:
            got = str(e)
        assert got == want, p
    # What scope.one_run refuses and the prefix step adds:
    assert runs_mod.resolve(store, ["dpo/hh"])[0][1] == "dpo/hh_llama-3.1-8b_beta0.1"


def test_doctests(demo_store: tuple[Path, runstore.Store]) -> None:
    result = doctest.testmod(diff_mod, extraglobs={"store": demo_store[1]},
                             optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 3 and result.failed == 0


@pytest.mark.parametrize("scope", [5, 2.5, [5], ["a/b", None], b"x", object()])
def test_a_run_scope_that_is_no_text_is_a_usage_error(demo_store: tuple[Path, runstore.Store],
                                                      scope: object) -> None:
    # Every Python twin that takes RUN patterns reads them by one rule, and a value of the
    # wrong type is a usage error there, not a TypeError from deep inside.
    _, store = demo_store
    calls = [lambda: store.runs(name=scope), lambda: store.keys(runs=scope),
             lambda: store.check(runs=scope), lambda: store.doctor(scope),
             lambda: store.compare("env/all/reward/total", runs=scope)]
    for call in calls:
        with pytest.raises(UsageError, match="run_name, run_id, directory or GLOB"):
            call()
