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
largest seq of its (run, step, key) is the live one" on random writes. `run_status_at` (a
run's status as of a time) and `running_until` are held to the status rule in words. A step's
wall time is written only in `step_wall_s`; `on_timeline` is "both wall times finite" on every
kind of value, and the only statement that tests a span's wall times for it.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta, timezone
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



STATUS_CASE = st.tuples(
    st.booleans(),  # missing
    st.one_of(st.none(), st.booleans()),  # final_checkpoint
    st.one_of(st.none(), st.floats(allow_nan=True), st.sampled_from([0.99, 1.0, 1.01])),
    st.one_of(st.none(), st.integers(0, 300)),  # seconds from the last change to `as_of`
)


def status_in_words(missing: bool, final: bool | None, done: float | None,
                    age: int | None) -> str:
    """missing; completed once a final checkpoint or done_frac >= 1 (NaN never: it is no
    number); running while the last change is less than 120 s before `as_of`; else idle."""
    if missing:
        return "missing"
    if final or (done is not None and not math.isnan(done) and done >= 1):
        return "completed"
    return "running" if age is not None and age < 120 else "idle"


@settings(max_examples=examples(300), deadline=None, derandomize=True, database=None)
@given(cases=st.lists(STATUS_CASE, min_size=1, max_size=20))
def test_run_status_at_is_its_statement(cases: list[tuple[Any, ...]]) -> None:
    """`run_status_at` (the view `run_status` and the ingest's `runs.status` both apply it) and
    `running_until`, against the rule in words, ages on both sides of the 120 s line."""
    as_of = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    updated = [None if c[3] is None else as_of - timedelta(seconds=c[3]) for c in cases]
    got = CON.execute(
        "select run_status_at(m, f, d, u, $as_of), running_until(u) from (select unnest($m) as "
        "m, unnest($f::boolean[]) as f, unnest($d::double[]) as d, "
        "unnest($u::timestamptz[]) as u, generate_subscripts($m, 1) as i) order by i",
        {"m": [c[0] for c in cases], "f": [c[1] for c in cases], "d": [c[2] for c in cases],
         "u": updated, "as_of": as_of}).fetchall()
    assert [g[0] for g in got] == [status_in_words(*c) for c in cases]
    assert [g[1] for g in got] == [None if u is None else u + timedelta(seconds=120)
                                   for u in updated]


def test_a_step_wall_time_is_written_only_in_its_macro() -> None:
    """No statement runstore runs (the views, the statements, the doctor's, the web UI's)
    takes the latest span end of a step itself: each reads `step_wall_s`. The probe finds the
    macro's own body (so it can fail)."""
    import sqlglot
    from sqlglot import exp

    from sqlprobes import statement_texts

    def restated(sql: str) -> bool:
        return any(isinstance(m.this, exp.Column) and m.this.name == "wall_end_s"
                   for m in sqlglot.parse_one(sql, read="duckdb").find_all(exp.Max))

    texts = statement_texts()
    macro = texts.pop("statements/macros.sql:step_wall_s")
    assert restated("select " + macro.split(" as ", 1)[1]), "the probe no longer finds it"
    assert "ui.queries.TIMING_COMPARE_STEPS" in texts and len(texts) > 40
    assert [name for name, text in texts.items() if restated(text)] == []


def test_on_timeline_is_both_wall_times_finite() -> None:
    values = [None, 0.0, -1.5, 2.0, math.nan, math.inf, -math.inf]
    pairs = [(a, b) for a in values for b in values]
    got = [CON.execute("select on_timeline($a::double, $b::double)",
                       {"a": a, "b": b}).fetchone()[0] for a, b in pairs]
    assert got == [a is not None and b is not None and math.isfinite(a) and math.isfinite(b)
                   for a, b in pairs]


def test_whether_a_span_has_a_place_on_a_timeline_is_written_only_in_its_macro() -> None:
    """No statement runstore runs tests a span's `wall_start_s` for finiteness itself: each
    reads `on_timeline`. The probe finds the macro's own body (so it can fail)."""
    import sqlglot
    from sqlglot import exp

    from sqlprobes import statement_texts

    def restated(sql: str) -> bool:
        return any(c.name == "wall_start_s"
                   for f in sqlglot.parse_one(sql, read="duckdb").find_all(exp.Anonymous)
                   if f.name.lower() == "isfinite" for c in f.find_all(exp.Column))

    texts = statement_texts()
    macro = texts.pop("statements/macros.sql:on_timeline")
    assert restated("select " + re.split(r"\s+as\s+", macro, maxsplit=1)[1]), \
        "the probe no longer finds it"
    assert [name for name, text in texts.items() if restated(text)] == []
