"""The macros `plain_writes`, `live_write` and `write_rank` (sql/statements/macros.sql) against
their words.

`plain_writes` decides, over rows of the per-key summary `metric_keys`, whether the writes they
describe need no latest-write rule: one live file (every `source_id` the same, none unknown),
every read's steps after the ones before (`steps_exact`), and as many stepped writes as steps.
The `metrics` view, `last_steps`, `run_summary` and the doctor all read it; here it is held to a
Python statement of the same sentence on random groups of summary rows, in a DuckDB connection
where `macros.create` (what every query connection runs) has made it, grouped as the view groups
them.
`live_write` is held to "logged at a step, in the live file (a null `pre_resume` is the live
file)" on every combination. `write_rank`, the latest-write rule, is held to "the write with the
largest seq of its (run, step, key) is the live one" on random writes.
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


WRITE = st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 3), st.sampled_from(["k", "l"]))


@settings(max_examples=examples(200), deadline=None, derandomize=True, database=None)
@given(writes=st.lists(WRITE, max_size=20), order=st.randoms(use_true_random=False))
def test_write_rank_keeps_the_last_write_of_each_step(writes: list[tuple[str, int, str]],
                                                      order: Any) -> None:
    seqs = list(range(len(writes)))
    order.shuffle(seqs)  # rows arrive in any order; seq is the line each was written at
    rows = [(*w, s) for w, s in zip(writes, seqs)]
    got = CON.execute(
        "select run_id, step, key, seq from (select *, write_rank(run_id, step, key, seq) as rn "
        "from (select unnest($r) as run_id, unnest($s) as step, unnest($k) as key, "
        "unnest($q) as seq)) where rn = 1",
        {"r": [r[0] for r in rows], "s": [r[1] for r in rows], "k": [r[2] for r in rows],
         "q": [r[3] for r in rows]}).fetchall()
    last: dict[tuple[str, int, str], int] = {}
    for run, step, key, seq in rows:
        last[(run, step, key)] = max(seq, last.get((run, step, key), -1))
    assert sorted(got) == sorted((*at, seq) for at, seq in last.items())


def test_live_write_is_a_step_in_the_live_file() -> None:
    cases = [(step, pre) for step in (None, 0, 7) for pre in (None, False, True)]
    got = CON.execute("select live_write(s, p) from (select unnest($s) as s, unnest($p) as p, "
                      "generate_subscripts($s, 1) as i) order by i",
                      {"s": [c[0] for c in cases], "p": [c[1] for c in cases]}).fetchall()
    assert [g for (g,) in got] == [step is not None and pre is not True for step, pre in cases]

