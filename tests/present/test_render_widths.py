"""The table format lines columns up on a terminal and keeps run-label headers apart.

* Widths: `columns` below, written apart from runstore's, counts a text's terminal columns
  (East Asian wide or full-width: 2, a combining mark: 0, anything else: 1). Hypothesis over
  tables whose names and cells hold CJK, emoji, full-width, combining and other non-ASCII
  characters, at random terminal widths: every line of a table takes the same number of
  columns (the last column is a `|` in every line, so no line ends in padding), each cell
  lies within its column, and is its value, whole or cut to a start and an end of it with
  one `…` between; a table printed as blocks starts every value at one column.
  `text_width` agrees with `columns` on any text.
* The `diff` defect: run columns are named by run labels, which can share all but their end.
  When the terminal has room, both headers are whole (they were cut at `MAX_CELL`, 40
  characters, to the same `…l…` text); at any width they differ, and a cut one shows where
  (neither label starts with the text before the other's `…` and ends with the text after):
  `render` over random label pairs, and `runstore diff` and `runstore runs` through the CLI
  on a tree with such runs and one named `weird/uni-🧪-ключ`.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from conftest import examples
from runstore.cli import main
from runstore.present.cutting import text_width
from runstore.present.render import IDENTIFYING, render
from runstore.query.rows import Rows


def columns(text: str) -> int:
    """The terminal columns `text` takes, character by character."""
    total = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        total += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return total


def cells_of(line: str, widths: list[int]) -> list[str]:
    """A table line cut into its columns (`widths[i]` terminal columns each, two apart);
    fails when a character crosses a column's edge or stands in a gap. A combining mark
    goes with the character before it."""
    clusters: list[list] = []  # [first column, the column after it, text]
    at = 0
    for char in line:
        if columns(char) == 0 and clusters:
            clusters[-1][2] += char
            continue
        clusters.append([at, at + columns(char), char])
        at += columns(char)
    cells, start = [], 0
    for width in widths:
        end = start + width
        inside = [c for c in clusters if start <= c[0] < end]
        assert all(c[1] <= end for c in inside), (line, widths)
        cells.append("".join(c[2] for c in inside))
        assert all(c[2] == " " for c in clusters if end <= c[0] < end + 2), (line, widths)
        start = end + 2
    assert all(c[0] < start for c in clusters), (line, widths)
    return cells


def is_cut_of(shown: str, value: str) -> bool:
    head, _, tail = shown.partition("…")
    return shown.count("…") == 1 and value.startswith(head) and value.endswith(tail)


# Letters of every width, marks that combine, and none that starts a value with a mark.
LETTERS = "ab/_-.0é" + "ключ" + "日本語模型" + "🧪🚀" + "ＡＢ" + "ｱ" + "\u0301\u0308"
MARKS = "\u0301\u0308"
TEXT = st.text(alphabet=LETTERS, max_size=45).map(lambda t: t.lstrip(MARKS))
NAMES = st.one_of(st.sampled_from(["run_label", "key", "ключ", "日本語の列", "🧪_score",
                                   "smooth_mean", "smooth_min", "note"]),
                  st.text(alphabet=LETTERS, min_size=1, max_size=16)
                  .map(lambda t: t.lstrip(MARKS) or "x"))


@st.composite
def tables(draw: st.DrawFn) -> tuple[Rows, list[bool]]:
    names = draw(st.lists(NAMES, min_size=1, max_size=5, unique=True))  # none is `|`
    n = draw(st.integers(0, 4))
    numeric = [draw(st.booleans()) for _ in names]
    cols = [draw(st.lists(st.integers(-10**9, 10**9) | st.none() if num else TEXT | st.none(),
                          min_size=n, max_size=n)) for num in numeric]
    # A last column of `|`: every line ends at the table's right edge.
    return Rows([*names, "|"], [*numeric, False],
                [(*(c[i] for c in cols), "|") for i in range(n)]), [*numeric, False]


@settings(max_examples=examples(400), deadline=None)
@given(tables(), st.integers(10, 200), st.booleans())
def test_every_line_of_a_table_is_as_wide_on_a_terminal(
        case: tuple[Rows, list[bool]], width: int, wide: bool) -> None:
    table, numeric = case
    text = render(table, "table", width=width, wide=wide)
    lines = text.splitlines()
    names = table.column_names
    if lines[0].startswith("-[ row "):  # blocks: each value starts at one column
        label = max(columns(n) for n in names)
        for line in lines[:-1]:
            if not line.startswith("-[ row "):
                name, _ = cells_of(line, [label, 10**6])
                assert name.rstrip() in names, (line, text)
        return
    grid = lines[:-1]
    assert lines[-1].startswith(f"({table.num_rows} row"), text
    widths = [len(dashes) for dashes in lines[1].split("  ")]
    assert {columns(line) for line in grid} == {sum(widths) + 2 * (len(widths) - 1)}, text
    if table.num_rows and not wide:
        assert columns(lines[1]) <= width, text
    for name, shown in zip(names, cells_of(lines[0], widths)):
        shown = shown.strip()
        assert shown == name or (not wide and name not in IDENTIFYING
                                 and is_cut_of(shown, name)), (name, shown, text)
    for row, line in zip(table.data, lines[2:]):
        for value, cell, num, name in zip(row, cells_of(line, widths), numeric, names):
            cell = cell.strip()
            if value is None or num:
                assert cell == ("" if value is None else str(value)), (value, cell, text)
            else:
                assert cell == value or (not wide and name not in IDENTIFYING
                                         and is_cut_of(cell, value)), (value, cell, text)


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet=LETTERS + " \t", max_size=30))
def test_text_width_counts_terminal_columns(text: str) -> None:
    assert text_width(text) == columns(text)


# ---------------------------------------------------------------------------------------------
# Run labels that differ only at their end (`runstore diff`'s run columns)


@st.composite
def label_pairs(draw: st.DrawFn) -> tuple[str, str]:
    shared = draw(st.text(alphabet="abcxyz/_-.8日", min_size=30, max_size=80))
    ends = draw(st.lists(st.text(alphabet="0123456789e-_/", min_size=1, max_size=8),
                         min_size=2, max_size=2, unique=True))
    return shared + ends[0], shared + ends[1]


@settings(max_examples=examples(400), deadline=None)
@given(label_pairs(), st.integers(20, 300))
def test_run_label_headers_stay_whole_when_they_fit_and_apart_always(
        labels: tuple[str, str], width: int) -> None:
    first, second = labels
    rows = [("learning_rate", "1e-05", "4e-05"), ("log_path", '"/home/r/a"', '"/home/r/b"'),
            ("code.diff", "A: 12 lines, 3456 bytes", "B: 12 lines, 3460 bytes")]
    text = render(Rows(["key", first, second], [False] * 3, rows), "table", width=width)
    lines = text.splitlines()
    if lines[0].startswith("-[ row "):  # blocks name every column whole
        assert sum(line.startswith(first + "  ") for line in lines) == len(rows), text
        assert sum(line.startswith(second + "  ") for line in lines) == len(rows), text
        return
    widths = [len(dashes) for dashes in lines[1].split("  ")]
    key, shown_first, shown_second = (h.strip() for h in cells_of(lines[0], widths))
    assert key == "key"
    assert shown_first != shown_second, text
    for shown, label, other in ((shown_first, first, second), (shown_second, second, first)):
        assert shown == label or (is_cut_of(shown, label) and not is_cut_of(shown, other)), (
            shown, label, text)
    # Room for both whole: the key column, the labels (wider than their cells), two gaps.
    needed = max(len(r[0]) for r in rows) + max(columns(first), len(rows[2][1])) + \
        max(columns(second), len(rows[2][2])) + 4
    if needed <= width:
        assert (shown_first, shown_second) == (first, second), text


LONG = "math_rl_sweep/llama-3.1-8b-instruct/grpo_long_context_ablation"
ODD = "weird/uni-🧪-ключ"


@pytest.fixture(scope="module")
def long_labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import runstore
    from runstore import demo
    from runstore.demo.specs import RunSpec

    root = tmp_path_factory.mktemp("long-labels")
    quick = dict(steps=3, eval_every=0, save_every=0, logtree=False)
    specs = [RunSpec(f"{LONG}/lr_1e-5", learning_rate=1e-5, **quick),
             RunSpec(f"{LONG}/lr_4e-5", learning_rate=4e-5, **quick),
             RunSpec(ODD, **{**quick, "steps": 5})]
    demo.generate_tree(root / "runs", specs, seed=1)
    runstore.open(root / "store").ingest([root / "runs"], on_warning=lambda text: None)
    return root / "store"


def run_at(width: int, store: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["--store", str(store), *args],
                                env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("width", [250, 160, 120, 100, 80, 60])
def test_diff_shows_both_run_labels_whole_or_told_apart(long_labels: Path, width: int) -> None:
    out = run_at(width, long_labels, "diff", f"{LONG}/lr_1e-5", f"{LONG}/lr_4e-5", "-F",
                 "table")
    header = out.splitlines()[0].split()
    assert header[0] == "key" and len(header) == 3, out
    if width >= 2 * len(f"{LONG}/lr_1e-5") + len("learning_rate") + 4:
        assert header[1:] == [f"{LONG}/lr_1e-5", f"{LONG}/lr_4e-5"], out
    assert header[1].endswith("lr_1e-5") and header[2].endswith("lr_4e-5"), out
    assert max(map(columns, out.splitlines()[:-1])) <= width


def test_runs_line_up_a_run_named_with_an_emoji(long_labels: Path) -> None:
    out = run_at(100, long_labels, "runs", "-c", "run_label,last_step", "-F", "table")
    lines = out.splitlines()
    assert any(line.startswith(ODD + " ") for line in lines), out
    # last_step is right-aligned: every line of the table ends at one column.
    assert len({columns(line) for line in lines[:-1]}) == 1, out
    assert [re.split(r"\s{2,}", line) for line in lines if line.startswith(ODD)] == [[ODD, "5"]]
