"""Every answer keeps to its character cap and says when it was cut (runstore/agents/answer.py).

What must hold, whatever an answer holds (titles, free text, tables with headers longer than
the whole answer, cells with line breaks, commas and pipes, notes) and whatever cap it has
(`MIN_CHARS`..`MAX_CHARS`), in markdown and CSV: the answer is at most `max_chars` characters;
an answer whose whole text would not fit has a notice line naming the character cap and how
to ask for the rest or for less; an answer whose whole text fits is that text, with no such
notice. The whole text is the same answer rendered without a cap.

End to end, through a real `runstore mcp`: a table whose header alone is larger than the
answer (a 20,000-character column name; an unaliased CASE expression in CSV under
max_chars=1000) comes back within the cap with its notice, and the short names it suggests
bring the rows back.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import examples
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mcpkit import McpSession, csv_rows

from runstore.agents.answer import DEFAULT_CHARS, MAX_CHARS, MIN_CHARS, Answer, Page

UNCAPPED = 10**9

# Text with what makes rendering awkward: line breaks, commas, quotes, pipes, wide characters.
CHARS = st.characters(codec="utf-8", exclude_categories=("Cs",))
AWKWARD = st.text(st.sampled_from("ab ,\"|\n\t\\é漢😀") | CHARS, max_size=12)


def sized(cap: int) -> st.SearchStrategy[int]:
    """A length: small, or anywhere up to twice the cap (to cross it from either side)."""
    return st.integers(0, 60) | st.integers(0, 2 * cap) | st.sampled_from([cap - 400, cap])


@st.composite
def long_text(draw: st.DrawFn, cap: int) -> str:
    """Awkward text of a drawn length (a drawn piece repeated: cheap however long)."""
    piece = draw(AWKWARD.filter(bool))
    n = max(draw(sized(cap)), 0)
    return (piece * (n // len(piece) + 1))[:n]


def said(cap: int) -> st.SearchStrategy[str]:
    """More words for a notice (how to ask for the rest): none as a rule, now and then
    enough to pass the room kept for notices (`ROOM`)."""
    return st.just("") | long_text(cap // 2).map(lambda t: " " + t.replace("\n", " "))


@st.composite
def tables(draw: st.DrawFn, cap: int) -> tuple[pa.Table, Page]:
    """A page of a table: 1–4 columns (text, integers, floats with NaN), 0–5 rows, any
    header length, and where the page sits (offset, limit, total)."""
    width = draw(st.integers(1, 4))
    n = draw(st.integers(0, 5))
    names, columns = [], []
    for i in range(width):
        # Mostly short names (so rows, not the header, meet the cap), some of any length.
        name = draw(st.sampled_from(["short", "short", "long"]))
        names.append(f"{draw(AWKWARD if name == 'short' else long_text(cap))}_{i}")  # unique
        kind = draw(st.sampled_from(["text", "text", "int", "float"]))
        if kind == "text":
            columns.append(pa.array([draw(long_text(cap) | AWKWARD) for _ in range(n)],
                                    pa.string()))
        elif kind == "int":
            columns.append(pa.array(draw(st.lists(st.integers(-2**63, 2**63 - 1),
                                                  min_size=n, max_size=n)), pa.int64()))
        else:
            columns.append(pa.array(draw(st.lists(st.floats(), min_size=n, max_size=n)),
                                    pa.float64()))
    offset = draw(st.integers(0, 3))
    more = draw(st.integers(0, 3))  # rows past the page: a limit notice, not a cut
    total = draw(st.sampled_from([offset + n + more, None]))
    limit = n if more and n else n + 1 + draw(st.integers(0, 3))
    return pa.Table.from_arrays(columns, names=names), Page(offset, limit, total)


@st.composite
def answers(draw: st.DrawFn) -> Answer:
    cap = draw(st.integers(MIN_CHARS, 3_000)
               | st.sampled_from([MIN_CHARS, DEFAULT_CHARS, MAX_CHARS])
               | st.integers(MIN_CHARS, MAX_CHARS))
    out = Answer(max_chars=cap)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["line", "text", "table", "table"]))
        if kind == "line":
            out.line(draw(long_text(cap)).replace("\n", " "))
        elif kind == "text":
            out.text(draw(long_text(cap)), more="ask for less" + draw(said(cap)))
        else:
            table, page = draw(tables(cap))
            out.table(table, page, fmt=draw(st.sampled_from(["markdown", "csv"])),
                      more=draw(st.sampled_from(["ask again with offset={offset}",
                                                 "raise max_chars"])) + draw(said(cap)))
    for _ in range(draw(st.integers(0, 2))):  # notes: short as the tools' are, or not
        out.note("(" + draw(AWKWARD | long_text(cap // 4) | long_text(cap)).replace("\n", " ")
                 + ")")
    return out


def cut_notices(text: str) -> list[str]:
    """The lines of an answer that say it was cut at its character cap."""
    return [ln for ln in text.split("\n")
            if ln.startswith("(") and ln.endswith(")") and "character cap" in ln]


@settings(max_examples=examples(300), deadline=None)
@given(answers())
# The reported answers: a 20,000-character column name under the default cap; a CSV header
# longer than max_chars=1000. And an answer that fits exactly but for its last line break.
@example(Answer().table(pa.table({"c" * 20_000: ["a"], "b": [1]}), Page(0, 50, 1)))
@example(Answer(max_chars=MIN_CHARS).table(pa.table({"CASE " + "x" * 1_400: [None]}),
                                           Page(0, 50, 1), fmt="csv"))
@example(Answer(max_chars=MIN_CHARS).text("x" * (MIN_CHARS - 1) + "\n"))
def test_an_answer_keeps_to_its_cap_and_says_when_it_is_cut(out: Answer) -> None:
    text = out.render()
    whole = dataclasses.replace(out, max_chars=UNCAPPED).render()
    assert len(text) <= out.max_chars, (len(text), text[-500:])
    if len(whole) <= out.max_chars:
        assert text == whole
        assert not cut_notices(text), text[-500:]
        return
    said = cut_notices(text)
    assert said, text[-800:]
    # ... and how to get the rest or a narrower answer.
    assert any(re.search(r"ask|raise max_chars|offset=", notice) for notice in said), said


@pytest.mark.parametrize("fmt", ["markdown", "csv"])
@pytest.mark.parametrize("cap", [MIN_CHARS, DEFAULT_CHARS])
def test_a_header_longer_than_the_answer_says_how_to_narrow_it(fmt: str, cap: int) -> None:
    """The header is cut, not a row shown under a cut header, and the notice under it is the
    last line, whole."""
    table = pa.table({"c" * (2 * cap): ["a", "b"], "b": [1, 2]})
    text = Answer(max_chars=cap).line("title").table(table, Page(0, 50, 2), fmt=fmt).render()
    assert len(text) <= cap
    title, header, notice = text.rstrip("\n").split("\n")
    assert title == "title" and header.endswith("c…") and len(header) > cap // 2
    whole = Answer(max_chars=UNCAPPED).table(table, Page(0, 50, 2), fmt=fmt).render()
    head = "\n".join(whole.split("\n")[:2 if fmt == "markdown" else 1])
    assert header[:-1] == head[:len(header) - 1]
    assert notice == (f"(rows 1–2 of 2 not shown: the table's header alone is {len(head):,} "
                      "characters, more than the answer's character cap leaves room for; "
                      "give long columns short names (expr AS name), ask for fewer columns, "
                      "or raise max_chars)"), notice
    empty = Answer(max_chars=cap).table(table.slice(0, 0), Page(0, 50, 0), fmt=fmt).render()
    assert len(empty) <= cap and "(no rows)" not in empty
    assert empty.rstrip("\n").split("\n")[-1].startswith("(no rows; the table's header alone")


# ---------------------------------------------------------------------------------------------
# Through `runstore mcp`


@pytest.fixture(scope="module")
def session(ui_demo: tuple[Path, Path]):  # type: ignore[no-untyped-def]
    with McpSession(ui_demo[1]) as s:
        yield s
        assert "Traceback" not in s.stderr(), s.stderr()


def last_line(text: str) -> str:
    return text.rstrip("\n").split("\n")[-1]


def test_a_column_name_longer_than_the_answer_is_said_not_cut_silently(
        session: McpSession) -> None:
    long = "c" * 20_000
    text = session.ok("sql", {"query": f'select \'a\' as "{long}", 1 as b'})
    assert len(text) <= DEFAULT_CHARS
    assert text.startswith("| ccc") and "(no rows)" not in text
    notice = last_line(text)
    assert notice.startswith("(rows 1–1 of 1 not shown: the table's header alone is "), notice
    assert "give long columns short names (expr AS name)" in notice and "max_chars" in notice
    # What the notice suggests brings the row back: a short name, or a cap the header fits.
    short = session.ok("sql", {"query": "select 'a' as c, 1 as b"})
    assert short == "| c | b |\n|---|---|\n| a | 1 |\n"
    whole = session.ok("sql", {"query": f'select \'a\' as "{long}", 1 as b',
                               "max_chars": MAX_CHARS})
    assert whole == f"| {long} | b |\n|---|---|\n| a | 1 |\n"


def test_an_unaliased_expression_longer_than_the_answer_is_said(session: McpSession) -> None:
    case = "case " + " ".join(f"when run_id = 'r{i:04d}' then {i}" for i in range(40)) + " end"
    query = f"select {case} from run_summary"
    text = session.ok("sql", {"query": query, "max_chars": 1000, "format": "csv"})
    assert len(text) <= 1000
    header, notice = text.rstrip("\n").split("\n")
    assert header.startswith("CASE ") and header.endswith("…")
    assert notice.startswith("(rows 1–") and "not shown: the table's header alone is " in notice
    assert "character cap" in notice and "short names" in notice, notice
    named = session.ok("sql", {"query": f"select {case} as k from run_summary",
                               "max_chars": 1000, "format": "csv"})
    rows = csv_rows(named)
    assert rows[0] == ["k"] and len(rows) > 1 and "character cap" not in named
