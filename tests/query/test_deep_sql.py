"""Deeply nested SQL at every entry point: an answer or a clean `Error:` line, never a traceback.

Issue 12 item 4: about 40 levels of parentheses, subqueries or function calls made sqlglot
raise `RecursionError` out of `runstore sql`, `runs --where`, `check --rule` and
`store.sql()`. Now `runstore sql` / `store.sql()` ask DuckDB's own parser first, so a query
DuckDB runs (up to its limit of 1000 levels) runs, with the right answer, and one beyond it
gets DuckDB's limit as a plain error; a `--where` condition or a `--rule` number that sqlglot
cannot parse (it must, to build the statement as a tree) gets a clean error saying so. Each
form is tried at depths 30 to 2000, through the CLI (CliRunner, and a real process for the
deepest) and through Python.
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import oracle
import runstore
from conftest import examples
from runstore.errors import RunstoreError
from runstore.query.guard import nests_deeper_than
from storekit import cli

DEPTHS = [30, 40, 50, 100, 500, 999, 1000, 2000]

# (query at depth d, its answer): each nests d levels of one construct.
FORMS: dict[str, Callable[[int], tuple[str, Any]]] = {
    "parentheses": lambda d: ("select " + "(" * d + "1" + ")" * d + " as x", 1),
    "function calls": lambda d: ("select " + "abs(" * d + "-1" + ")" * d + " as x", 1),
    "subqueries": lambda d: ("select * from " + "(select * from " * d + "(select 1 as x)"
                             + ")" * d, 1),
    "case": lambda d: ("select " + "case when true then " * d + "1" + " end" * d + " as x", 1),
    "where": lambda d: ("select count(*) as x from runs where " + "(" * d + "true" + ")" * d,
                        None),  # None: the number of runs
}
RUNS_IN_TREE = 3


@pytest.fixture(scope="module")
def store_dir(shared_small_store: Path) -> Path:
    return shared_small_store


def clean_error(result: Any) -> str:
    """The one `Error:` line of a refused command (no traceback, nothing on stdout)."""
    assert result.exit_code == 2, (result.exit_code, result.stdout[:200])
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ") and "Traceback" not in result.stderr
    assert "RecursionError" not in result.stderr
    return result.stderr


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("form", sorted(FORMS))
def test_sql_runs_or_refuses_cleanly(store_dir: Path, form: str, depth: int) -> None:
    query, want = FORMS[form](depth)
    want = RUNS_IN_TREE if want is None else want
    result = cli(store_dir, "sql", query, "-F", "csv")
    try:
        api = runstore.open(store_dir).sql(query).item()
    except RunstoreError as e:
        api = e
    if depth <= 500:  # DuckDB runs these: so must runstore, with the answer
        assert result.exit_code == 0, result.stderr
        assert result.stdout == f"x\n{want}\n"
        assert api == want
        return
    if result.exit_code == 0:
        assert result.stdout == f"x\n{want}\n" and api == want
    else:
        message = clean_error(result)
        assert depth >= 997 and "nests more than 1000 levels deep" in message, message
        assert isinstance(api, RunstoreError) and str(api) in message


def test_deepest_query_in_a_real_process(store_dir: Path) -> None:
    query, _ = FORMS["function calls"](2000)
    proc = subprocess.run([sys.executable, "-m", "runstore", "--store", str(store_dir), "sql",
                           query], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("Error: the query nests more than 1000 levels deep")
    assert "Traceback" not in proc.stderr


# sqlglot's limit depends on how deep the Python stack already is (click adds frames), so
# between these two depths each entry point may answer or refuse, each on its own.
WORKS_UP_TO, REFUSED_FROM = 30, 100


@pytest.mark.parametrize("depth", DEPTHS)
def test_runs_where(store_dir: Path, _small_template: Path, depth: int) -> None:
    cond = "(" * depth + "kind = 'rl'" + ")" * depth
    want = sorted(oracle.run_name(_small_template, r) for r in oracle.run_dirs(_small_template)
                  if oracle.run_kind(r) == "rl")
    result = cli(store_dir, "runs", "--where", cond, "-F", "csv")
    if result.exit_code == 0:
        assert depth < REFUSED_FROM
        assert [r["run_label"] for r in csv.DictReader(io.StringIO(result.stdout))] == want
    else:
        assert depth > WORKS_UP_TO, result.stderr
        assert "--where condition nests too deeply" in clean_error(result)
    try:
        assert runstore.open(store_dir).runs(where=cond)["run_name"].to_list() == want
        assert depth < REFUSED_FROM
    except RunstoreError as e:
        assert depth > WORKS_UP_TO and "--where condition nests too deeply" in str(e), e


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("side", ["number", "metric"])
def test_check_rule(store_dir: Path, depth: int, side: str) -> None:
    """A number in parentheses is a number (while sqlglot can read it); a metric in
    parentheses is not a metric name (quote a name that holds brackets)."""
    rule = ("optim/entropy < " + "(" * depth + "-5" + ")" * depth if side == "number"
            else "(" * depth + "optim/entropy" + ")" * depth + " < -5")
    result = cli(store_dir, "check", "--no-default-rules", "--rule", rule, "-F", "csv")
    try:
        api: Any = runstore.open(store_dir).check(rules=[rule], default_rules=False).height
    except RunstoreError as e:
        api = e
    for outcome in (result, api):
        ok = outcome == 0 if outcome is api else outcome.exit_code == 0
        if ok:  # entropy is never below -5: nothing fires
            assert side == "number" and depth < REFUSED_FROM
            if outcome is result:
                assert result.stdout.splitlines()[0].startswith("run_name,rule")
            continue
        assert side == "metric" or depth > WORKS_UP_TO
        message = clean_error(result) if outcome is result else str(api)
        if outcome is result:
            assert result.exit_code == 2
        assert "cannot read" in message and ("nests too deeply" in message
                                             or "is not a metric name" in message), message


# DuckDB's parser needs memory and time growing with the square of how deep it is where it
# meets a mistake (a few thousand levels take gigabytes, past any `memory_limit`): a
# text nested deeper than DuckDB evaluates is refused before the parser sees it. Each form
# nests `d` levels and holds a mistake (or ends) at its deepest point.
HOSTILE: dict[str, Callable[[int], str]] = {
    "unclosed parentheses": lambda d: "select " + "(" * d + "1",
    "a mistake deep inside": lambda d: "select " + "(" * d + "1 +" + ")" * d,
    "prefix operators": lambda d: "select " + "- " * d + "1 +",
    "operators between comments": lambda d: "select " + "- /* (a) */ " * d + "1 +",
    "subqueries": lambda d: "select * from " + "(select * from " * d + "(select",
    "parentheses and operators": lambda d: "select " + "(-" * (d // 2) + "1",
}


@pytest.mark.parametrize("form", sorted(HOSTILE))
def test_a_text_nested_past_the_limit_is_refused_before_duckdb_parses_it(
        store_dir: Path, form: str) -> None:
    """20,000 levels in a real process held to 512 MB (far less than DuckDB's parser would
    need), and 1,500 through Python: the depth is named, not the memory or a syntax error."""
    proc = subprocess.run([sys.executable, "-m", "runstore", "--store", str(store_dir),
                           "sql", "--memory-limit", "512MB", "-"], input=HOSTILE[form](20_000),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr[:300]
    assert proc.stderr.startswith("Error: the query nests more than 1000 levels deep")
    with pytest.raises(RunstoreError, match="nests more than 1000 levels deep"):
        runstore.open(store_dir).sql(HOSTILE[form](1500))


def test_a_mistake_at_the_limit_is_still_duckdbs_syntax_error(store_dir: Path) -> None:
    """At 1000 levels the text reaches DuckDB's parser, which says what is wrong with it;
    parentheses inside strings, quoted names and comments are no nesting at all."""
    with pytest.raises(RunstoreError, match="syntax error"):
        runstore.open(store_dir).sql(HOSTILE["unclosed parentheses"](1000))
    hidden = "'" + "(" * 3000 + "'"
    query = f'select length({hidden}) as "((((" /* {"(" * 3000} */ -- {"(" * 3000}\n'
    assert runstore.open(store_dir).sql(query).item() == 3000


# Pieces of SQL text and what each does to the nesting: +1/-1 a parenthesis, "op" a prefix
# operator, "operand" a value (it ends a run of operators), None nothing (a comment, a comma).
PIECES = [("(", +1), (")", -1), ("- ", "op"), ("+ ", "op"), ("~ ", "op"), ("1 ", "operand"),
          ("x ", "operand"), ("'a(('", "operand"), ('"b(("', "operand"), ("$$ ((( $$", "operand"),
          ("/* (( */", None), ("-- ((\n", None), (", ", None), ("'''('", "operand")]


def reference_depth(pieces: list[int]) -> int:
    """The deepest point of a text made of `PIECES`: open parentheses plus operators in a
    row, from what the generator put there (no tokenizer)."""
    depth = run = deepest = 0
    for i in pieces:
        effect = PIECES[i][1]
        if effect == "operand":
            run = 0
        elif effect == "op":
            run += 1
        elif isinstance(effect, int):
            depth = max(0, depth + effect)
        deepest = max(deepest, depth + run)
    return deepest


@settings(max_examples=examples(300), deadline=None)
@given(pieces=st.lists(st.integers(0, len(PIECES) - 1), max_size=60),
       limit=st.integers(0, 30), padded=st.booleans())
def test_nesting_is_read_from_duckdbs_tokens(pieces: list[int], limit: int,
                                             padded: bool) -> None:
    """`nests_deeper_than` against the generator's own account, with and without a string
    of 1,000 parentheses in front (which makes the text long enough to be tokenized)."""
    text = "select " + "".join(PIECES[i][0] for i in pieces)
    if padded:
        text = "select '" + "(" * 1000 + "', " + text[len("select "):]
    assert nests_deeper_than(text, limit) == (reference_depth(pieces) > limit), text
