"""The guard's recorded verdicts on runstore's own named statements (runstore.query.recorded).

The committed record equals what the guard answers for every named statement today; the
commands that run named statements parse none of them; and a verdict is used only for the very
text it was recorded for: another text (a user's, an edited statement), a damaged record or a
malformed entry is parsed, and a text the guard refuses stays refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gen_docs as docs
import runstore
from runstore.errors import QueryError
from runstore.query import guard, recorded, views
from runstore.query.statements.frames import fixed_shapes
from runstore.resources import statements

REPO = Path(__file__).resolve().parents[2]


def named_statements() -> dict[str, str]:
    return {f"{p.stem}.{name}": text for p in sorted((REPO / "sql" / "statements").glob("*.sql"))
            for name, text in statements(p.stem).items()}


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the guard asks DuckDB's parser about from here on (none kept from before)."""
    texts: list[str] = []
    real_parse = guard._guard
    monkeypatch.setattr(guard, "_verdicts", type(guard._verdicts)())
    monkeypatch.setattr(guard, "_guard", lambda q, con: (texts.append(q), real_parse(q, con))[1])
    return texts


def test_sql_statement_verdicts_json_is_generated() -> None:
    assert (REPO / "sql" / recorded.VERDICT_FILE).read_text() == docs.statement_verdicts(), \
        ("sql/statement_verdicts.json is stale: "
         "python tools/gen_docs.py verdicts -o sql/statement_verdicts.json")


def test_every_named_query_and_fixed_shape_is_recorded_as_the_guard_answers_it() -> None:
    # Independently of the generator: each named statement the guard lets through, and each
    # text of the builders with a few shapes, has an entry with the guard's own answer; each
    # named statement it refuses (the macros) has none.
    record = json.loads((REPO / "sql" / recorded.VERDICT_FILE).read_text())
    parser = views._parser()
    let_through = 0
    texts = {**named_statements(), **{f"frames.{k}": v for k, v in fixed_shapes().items()}}
    for name, text in texts.items():
        try:
            checked = guard._guard(text, parser)
        except QueryError:
            assert name not in record and recorded.verdict(text) is None, name
            continue
        let_through += 1
        assert recorded.verdict(text) == (checked.params, checked.tables, checked.defines), name
    assert let_through == len(record) >= 80


def test_commands_running_named_statements_parse_none_of_them(
        shared_demo_store: Path, tmp_path: Path, parsed: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    # `check` (its threshold statement), the report's sections and a trace run named
    # statements: the guard answers each from the record, never from DuckDB's parser.
    named = set(named_statements().values())
    asked: list[str] = []
    real_guard = guard.guard
    monkeypatch.setattr(guard, "guard", lambda q, con: (asked.append(q), real_guard(q, con))[1])
    store = runstore.open(shared_demo_store)
    try:
        assert store.check().height >= 1
        assert store.report(tmp_path / "report.html").stat().st_size > 0
    finally:
        store.close()
    ran_named = [q for q in asked if q in named]
    assert len(ran_named) >= 4  # the check's statement and the report's sections
    assert not [q[:60] for q in parsed if q in named]


@pytest.mark.parametrize("record", ["right", "other text", "damaged", "malformed", "none"])
def test_a_recorded_verdict_is_used_only_for_its_own_text(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: str) -> None:
    # The record here lies about what the statement reads, so which answer came back says
    # where it came from.
    text = "select run_id from runs join (select run_id from checkpoints) using (run_id)"
    answer: object = {"params": [], "tables": ["spans"], "defines": []}
    if record == "malformed":
        answer = {"params": [], "tables": "spans", "defines": []}
    lie = {"x.y": {recorded.digest(text if record != "other text" else text + " "): answer}}
    if record == "damaged":
        (tmp_path / recorded.VERDICT_FILE).write_text(json.dumps(lie)[:-3])
    elif record != "none":
        (tmp_path / recorded.VERDICT_FILE).write_text(json.dumps(lie))
    monkeypatch.setattr(recorded, "sql_dir", lambda: tmp_path)
    monkeypatch.setattr(guard, "_verdicts", type(guard._verdicts)())
    checked = guard.guard(text, views._parser())
    want = {"spans"} if record == "right" else {"checkpoints", "runs"}
    assert checked.tables == frozenset(want)


def test_a_refused_text_is_never_taken_from_the_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Recorded verdicts are only for texts the guard let through: a write whose digest is
    # not in the record (as none is: the generator records no refusal) is parsed and refused,
    # whatever else the record holds.
    record = json.loads((REPO / "sql" / recorded.VERDICT_FILE).read_text())
    (tmp_path / recorded.VERDICT_FILE).write_text(json.dumps(record))
    monkeypatch.setattr(recorded, "sql_dir", lambda: tmp_path)
    monkeypatch.setattr(guard, "_verdicts", type(guard._verdicts)())
    text = next(iter(named_statements().values()))
    for hostile in ("drop table runs", f"{text}; drop table runs", f"create view v as {text}"):
        with pytest.raises(QueryError, match="only runs queries"):
            guard.guard(hostile, views._parser())


def test_a_trend_rule_a_plots_key_notes_and_compares_groups_parse_no_statement(
        shared_demo_store: Path, parsed: list[str]) -> None:
    # `check` with a trend rule beside the threshold rule, the notes `plot metric` prints
    # about keys some runs lack and the groups `compare --group-by auto` draws, over every run
    # and over a scope: every statement is named or one of the builders' fixed shapes.
    from runstore.health.trends import parse_trend

    store = runstore.open(shared_demo_store)
    try:
        for runs in (None, "gsm8k_tool_rl/*"):
            result = store.check_result(rules=[parse_trend("drop(env/all/reward/total) > 0.2"),
                                               parse_trend("stale > 1")], runs=runs)
            assert sum(result.checked) >= 2
            store.key_notes(["optim/kl_sample_train_v2", "env/all/reward/total"], runs=runs)
            assert store.groups(runs=runs, group_by="auto").height >= 2
    finally:
        store.close()
    assert parsed == []


def test_diff_and_a_trace_parse_no_statement(
        shared_demo_store: Path, parsed: list[str]) -> None:
    # Every statement `runstore diff` and `runstore trace` run is a named one (RUN resolution
    # included): the guard parses none of them.
    store = runstore.open(shared_demo_store)
    try:
        runs = store.sql("select run_name from runs where kind = 'rl' order by run_name")
        first, second = runs["run_name"][0], runs["run_name"][1]
        assert parsed == [runs_query := parsed[0]] and "kind = 'rl'" in runs_query  # a user's
        parsed.clear()
        assert store.diff_rows([first, second], all=True).data
        assert len(store.trace(first)) > 0
    finally:
        store.close()
    assert parsed == []
