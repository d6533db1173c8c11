"""The aggregate macro `plain_writes` (sql/statements/macros.sql) against its statement in words.

`plain_writes` decides, over rows of the per-key summary `metric_keys`, whether the writes they
describe need no latest-write rule: one live file (every `source_id` the same, none unknown),
every read's steps after the ones before (`steps_exact`), and as many stepped writes as steps.
The `metrics` view, `run_summary` and the doctor all read it; here it is held to a Python
statement of the same sentence on random groups of summary rows, in a DuckDB connection where
`macros.create` (what every query connection runs) has made it, grouped as the view groups them.
"""

from __future__ import annotations

from typing import Any

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import examples
from runstore.query import macros

ROW = st.fixed_dictionaries({
    "steps_exact": st.booleans(),
    "source_id": st.one_of(st.none(), st.integers(0, 2)),
    "n_points": st.integers(0, 4),
    "n_numbers": st.integers(0, 4),
    "n_strings": st.integers(0, 2),
    "n_stepless": st.integers(0, 2),
})


def plain_in_words(rows: list[dict[str, Any]]) -> bool:
    one_file = all(r["source_id"] is not None for r in rows) and \
        len({r["source_id"] for r in rows}) == 1
    written = sum(r["n_numbers"] + r["n_strings"] - r["n_stepless"] for r in rows)
    return all(r["steps_exact"] for r in rows) and one_file and \
        written == sum(r["n_points"] for r in rows)


CON = duckdb.connect(":memory:")
macros.create(CON)
COLUMNS = ["steps_exact", "source_id", "n_points", "n_numbers", "n_strings", "n_stepless"]


@settings(max_examples=examples(200), deadline=None, derandomize=True, database=None)
@given(groups=st.lists(st.lists(ROW, min_size=1, max_size=4), min_size=1, max_size=5))
def test_plain_writes_is_its_statement(groups: list[list[dict[str, Any]]]) -> None:
    rows = [(g, r) for g, rs in enumerate(groups) for r in rs]
    params = {"g": [g for g, _ in rows], **{c: [r[c] for _, r in rows] for c in COLUMNS}}
    got = dict(CON.execute(
        "select g, plain_writes(steps_exact, source_id, n_points, n_numbers, n_strings, "
        "n_stepless) from (select unnest($g) as g, unnest($steps_exact) as steps_exact, "
        "unnest($source_id) as source_id, unnest($n_points) as n_points, "
        "unnest($n_numbers) as n_numbers, unnest($n_strings) as n_strings, "
        "unnest($n_stepless) as n_stepless) group by g", params).fetchall())
    assert got == {g: plain_in_words(rs) for g, rs in enumerate(groups)}
