"""The table format never cuts what tells rows (and columns) apart.

* Hypothesis over random tables and widths: the values and headers of identifying columns
  (`IDENTIFYING`, and the columns the caller names in `whole`) are printed whole, in the
  table or in its blocks; every other header that is cut still differs from every other
  header (no other starts with the text before its `…` and ends with the text after), and
  keeps its start (`smooth_me…`) wherever its start alone would tell it apart; numbers are
  never cut.
* `runstore compare` at 60, 100 and 160 columns: four groups by two keys keep four whole
  labels and whole key columns and headers (the issue's `learn…_log=0` four times), and the
  smoothed statistics' headers stay told apart.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from runstore.cli import main
from runstore.present.render import IDENTIFYING, render

NAMES = st.one_of(st.sampled_from(sorted(IDENTIFYING)), st.sampled_from(
    ["learning_rate", "dataset_builder.group_size", "smooth_mean", "smooth_min",
     "smooth_max", "smooth_std", "smooth_n", "n", "n_nan", "mean", "min", "max", "std",
     "step", "a", "ab", "abc", "comment"]),
    st.text(alphabet="abcdefghij_.", min_size=1, max_size=14))
CELL = st.one_of(st.text(alphabet="abcdefghij/=, .-", max_size=50), st.none())


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Table, list[str]]:
    names = draw(st.lists(NAMES, min_size=1, max_size=8, unique=True))
    n = draw(st.integers(0, 5))
    columns = {}
    for name in names:
        if draw(st.booleans()):
            columns[name] = pa.array(draw(st.lists(
                st.floats(-1e12, 1e12, allow_nan=False) | st.none(), min_size=n, max_size=n)),
                pa.float64())
        else:
            columns[name] = pa.array(draw(st.lists(CELL, min_size=n, max_size=n)), pa.string())
    whole = draw(st.lists(st.sampled_from(names), unique=True, max_size=2))
    return pa.table(columns), whole


def header_cells(line: str, widths: list[int]) -> list[str]:
    cells, at = [], 0
    for w in widths:
        cells.append(line[at:at + w].strip())
        at += w + 2
    return cells


@given(tables(), st.integers(20, 160))
@settings(max_examples=400, deadline=None)
def test_identifying_columns_and_distinct_headers(case: tuple[pa.Table, list[str]],
                                                  width: int) -> None:
    table, whole = case
    text = render(table, "table", width=width, whole=whole)
    lines = text.splitlines()
    names = table.column_names
    identifying = [n for n in names if n in IDENTIFYING or n in whole]
    rows = table.to_pylist()
    label = max(len(n) for n in names)
    if lines[0].startswith("-[ row "):  # blocks: every column `name  value`, identifying whole
        for r in rows:
            for n in identifying:
                if isinstance(r[n], str) and r[n].strip():
                    assert f"{n.ljust(label)}  {r[n]}".rstrip() in lines, (n, r[n], text)
        return
    # A table: the dashes line gives each column's width.
    widths = [len(d) for d in lines[1].split("  ")]
    headers = header_cells(lines[0], widths)
    for name, shown in zip(names, headers):
        if name in identifying:
            assert shown == name, (name, shown, text)
        elif shown != name:  # cut: a start of it, …, an end of it
            head, _, tail = shown.partition("…")
            assert shown.count("…") == 1 and name.startswith(head) and name.endswith(tail), (
                name, shown)
            others = [o for o in names if o != name]
            assert not any(o.startswith(head) and o.endswith(tail) for o in others), (
                name, shown, names)
            width = widths[names.index(name)]
            if not any(o.startswith(name[:width - 1]) for o in others):  # its start would do
                assert shown == name[:width - 1] + "…", (name, shown, names)
    for r, line in zip(rows, lines[2:]):
        for name, cell in zip(names, header_cells(line, widths)):
            value = r[name]
            if not isinstance(value, str) or name not in identifying:
                continue  # numbers are shown rounded, never cut (test_query_cli.py)
            assert cell == value.strip(), (name, value, cell, text)


# ---------------------------------------------------------------------------------------------
# runstore compare


@pytest.fixture(scope="module")
def store(ui_demo: tuple[Path, Path]) -> Path:
    return ui_demo[1]


@pytest.mark.parametrize("width", [60, 100, 160])
def test_compare_keeps_group_labels_and_keys_whole(store: Path, width: int) -> None:
    args = ["--store", str(store), "compare", "env/all/reward/total", "--runs",
            "gsm8k_tool_rl/*", "--group-by", "learning_rate,num_groups_to_log", "--smooth",
            "0.9"]
    rows = json.loads(CliRunner().invoke(main, [*args, "-F", "json"]).stdout)
    labels = sorted({r["group"] for r in rows})
    assert len(labels) == 4 and all(", num_groups_to_log=" in g for g in labels)
    out = CliRunner().invoke(main, [*args, "-F", "table"], env={"COLUMNS": str(width)}).stdout
    shown = set(re.findall(r"learning_rate=[0-9.e-]+, num_groups_to_log=\d", out))
    assert shown == set(labels), out[:2000]
    assert "…" not in "".join(re.findall(r"learning_rate=\S*", out))
    lines = out.splitlines()
    if lines[0].startswith("-[ row "):
        assert sum(line.startswith("group ") for line in lines) == len(rows)
    else:
        header = lines[0].split()
        assert header[:3] == ["group", "learning_rate", "num_groups_to_log"], header
        cut = [h for h in header if h.endswith("…")]
        assert len({h for h in cut}) == len(cut)
        assert not any(a != b and b.startswith(a[:-1]) for a in cut for b in header)
