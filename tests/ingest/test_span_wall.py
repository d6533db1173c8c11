"""`spans.wall_add_s` (ingest) and `slowest_spans.wall_s` (the view's sum of it) against an
independent interval union computed from the source records.

The reference never looks at the code under test: it keeps the last record of each step of
the timing file (a resumed run re-logs steps), and per (step, name) merges the intervals with
exact rational arithmetic (Fraction), so ties, touching ends and rounding cannot hide behind
float noise. Spans without both wall times (missing, null or NaN) take no part; an inverted
interval (end before start) covers nothing. A record is one step and wall times are relative
to that step, so no span can cross a step boundary in this format.

Three comparisons: `timing.normalize` per (step, name) against the reference (many cases,
no store); a store ingested in two reads of a growing file (a resume re-logging steps, which
takes the delete path) against the reference through `slowest_spans`; and ingest against the
DuckDB sweep migration 0003 uses for old rows, on the same rows including infinite times.
"""

from __future__ import annotations

import importlib.util
import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import runstore
from runstore import resources
from runstore.ingest.normalize import timing
from runstore.ingest.normalize.base import Context
from conftest import examples

NAMES = "xyz"


def _point() -> Any:
    # Mostly a coarse grid (exact ties, touching and nested intervals, zero lengths), sometimes
    # any float in range, sometimes no time at all.
    return st.one_of(st.integers(0, 24).map(lambda i: i / 4),
                     st.floats(0, 1e4, allow_nan=False),
                     st.sampled_from([None, "missing", math.nan]))


def _span() -> Any:
    return st.tuples(st.sampled_from(NAMES), _point(), _point())


def _records() -> Any:
    # Steps out of order and repeated (a resumed run logs a step again); spans in any order.
    return st.lists(st.tuples(st.integers(0, 3), st.lists(_span(), max_size=12)), max_size=8)


def _line(step: int, spans: list[tuple[str, Any, Any]]) -> str:
    out = []
    for name, start, end in spans:
        sp: dict[str, Any] = {"name": name, "duration": 1.0}
        for key, v in (("wall_start", start), ("wall_end", end)):
            if v != "missing":
                sp[key] = v
        out.append(sp)
    return json.dumps({"step": step, "spans": out}) + "\n"  # NaN as the NaN token


def _timed(v: Any) -> bool:
    return isinstance(v, float) and not math.isnan(v)


def union(intervals: list[tuple[float, float]]) -> Fraction:
    """Exact length of the union of closed intervals (an inverted one covers nothing)."""
    total, lo, hi = Fraction(0), None, None
    for a, b in sorted((Fraction(a), Fraction(b)) for a, b in intervals if b >= a):
        if hi is not None and a <= hi:
            hi = max(hi, b)
            continue
        if hi is not None:
            total += hi - lo
        lo, hi = a, b
    return total + (hi - lo if hi is not None else 0)


def reference(records: list[tuple[int, list]]) -> dict[tuple[int, str], Fraction | None]:
    """(step, name) → union length of the live record's timed intervals (None: none timed)."""
    live = {}
    for step, spans in records:
        live[step] = spans  # the later record of a step wins
    out: dict[tuple[int, str], Fraction | None] = {}
    for step, spans in live.items():
        for name, start, end in spans:
            out.setdefault((step, name), None)
        for name in {n for n, _, _ in spans}:
            ivs = [(a, b) for n, a, b in spans if n == name and _timed(a) and _timed(b)]
            if ivs:
                out[(step, name)] = union(ivs)
    return out


def ctx() -> Context:
    return Context(run_id="r", source_id=1, rel_path="r/timing_spans.jsonl")


def _sums(rows: list[dict[str, Any]]) -> dict[tuple[int, str], float | None]:
    out: dict[tuple[int, str], float | None] = {}
    for r in rows:
        key = (r["step"], r["name"])
        v = r["wall_add_s"]
        out[key] = out.get(key) if v is None else (out.get(key) or 0.0) + v
    return out


def _close(got: float | None, want: Fraction | None) -> bool:
    if want is None:
        return got is None
    return got is not None and math.isclose(got, float(want), rel_tol=1e-12, abs_tol=1e-9)


@settings(max_examples=examples(400), deadline=None)
@given(_records())
def test_ingest_wall_add_sums_to_the_union_of_each_step_and_name(records: list) -> None:
    data = "".join(_line(s, sp) for s, sp in records).encode()
    table, _ = timing.normalize(data, 1, ctx())
    rows = table.to_pylist()
    want = reference(records)
    got = _sums(rows)
    assert sorted(got) == sorted(want)
    assert all(_close(got[k], want[k]) for k in want), (got, want)
    for r in rows:
        timed = _timed(r["wall_start_s"]) and _timed(r["wall_end_s"])
        assert (r["wall_add_s"] is not None) == timed
        if timed:  # what one span adds is a part of its own interval
            assert 0 <= r["wall_add_s"] <= max(r["wall_end_s"] - r["wall_start_s"], 0)


def test_hand_computed_unions() -> None:
    """Overlapping, touching, nested, identical, zero-length, inverted and unsorted spans."""
    records = [(0, [("x", 1.0, 3.0), ("x", 0.0, 2.0), ("x", 5.0, 6.0),  # [0,3] + [5,6]
                    ("y", 1.0, 2.0), ("y", 0.0, 4.0), ("y", 0.0, 4.0),  # nested, identical
                    ("z", 2.0, 2.0), ("z", 3.0, 1.0)])]  # zero-length, inverted
    table, _ = timing.normalize("".join(_line(s, sp) for s, sp in records).encode(), 1, ctx())
    assert _sums(table.to_pylist()) == {(0, "x"): 4.0, (0, "y"): 4.0, (0, "z"): 0.0}


def _write_run(run: Path, records: list) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text(json.dumps({"step": 0, "time/total": 10.0}) + "\n")
    (run / "timing_spans.jsonl").write_text("".join(_line(s, sp) for s, sp in records))


@settings(max_examples=examples(12), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(first=_records(), resumed=_records())
def test_store_wall_s_over_a_resumed_run(tmp_path_factory: pytest.TempPathFactory,
                                         first: list, resumed: list) -> None:
    """Two reads of a growing timing file (the second re-logs steps, as a resumed run does):
    the stored rows and the view hold the union of each step's latest record only."""
    base = tmp_path_factory.mktemp("wall")
    run = base / "runs" / "r"
    store = runstore.open(base / "store")
    _write_run(run, first)
    store.ingest([base / "runs"])
    _write_run(run, first + resumed)
    store.ingest([base / "runs"])
    want = reference(first + resumed)
    rows = store.arrow("select step, name, wall_add_s from spans").to_pylist()
    got = _sums(rows)
    assert sorted(got) == sorted(want)
    assert all(_close(got[k], want[k]) for k in want), (got, want)
    per_name: dict[str, Fraction | None] = {}
    for (_, name), v in want.items():
        if v is not None:
            per_name[name] = (per_name.get(name) or Fraction(0)) + v
        else:
            per_name.setdefault(name, None)
    view = {r["name"]: r["wall_s"] for r in
            store.arrow("select name, wall_s from slowest_spans").to_pylist()}
    assert sorted(view) == sorted(per_name)
    assert all(_close(view[n], per_name[n]) for n in per_name), (view, per_name)


def _migration() -> Any:
    path = resources.migrations_dir() / "0003_span_wall.py"
    spec = importlib.util.spec_from_file_location("span_wall_migration", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_INF_POINT = st.one_of(_point(), st.sampled_from([math.inf, -math.inf]))


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3),
                          st.lists(st.tuples(st.sampled_from(NAMES), _INF_POINT, _INF_POINT),
                                   max_size=10)), max_size=6))
def test_ingest_agrees_with_the_migration_sweep(records: list) -> None:
    """What ingest computes and what migration 0003 computes for old rows are the same values,
    span by span up to rounding, infinities (and the NaN of inf - inf) included."""
    import duckdb

    data = "".join(_line(s, sp) for s, sp in records).encode()
    table, _ = timing.normalize(data, 1, ctx())
    mig = _migration()
    con = duckdb.connect()
    con.register("old", table.drop_columns(["wall_add_s"]))
    swept = con.sql(f"select step, span_idx, wall_add_s from ({mig.SWEEP})").fetchall()
    theirs = {(s, i): v for s, i, v in swept}
    ours = {(r["step"], r["span_idx"]): r["wall_add_s"] for r in table.to_pylist()}
    assert ours.keys() == theirs.keys()
    # Per span the two may split a tie of identical intervals differently: compare per
    # (step, name), where the sum is defined.
    names = {(r["step"], r["span_idx"]): r["name"] for r in table.to_pylist()}

    def per_group(values: dict) -> dict:
        out: dict = {}
        for k, v in values.items():
            g = (k[0], names[k])
            if v is not None:
                out[g] = v if out.get(g) is None else out[g] + v
            else:
                out.setdefault(g, None)
        return out

    a, b = per_group(ours), per_group(theirs)
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        assert (x is None) == (y is None), k
        if x is not None:
            assert (math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=1e-12,
                                                                          abs=1e-9), k
