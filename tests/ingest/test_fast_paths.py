"""The fast paths against their reference paths, and the nesting guard, with hypothesis.

* metrics: `metrics._fast` (pyarrow's JSON reader, then one unpivot) and `metrics._slow`
  (Python's decoder, line by line) must give the same rows — bit for bit in `value`, NaN
  equal to NaN — for any lines, whenever the fast one accepts them; when it does, the slow
  one must have nothing to warn about (the fast path cannot warn, so a warning there would be
  a line it stored or dropped silently). The fast path is forced by calling it directly, so
  the 128 KB threshold does not matter; one test goes through `normalize` past it as well.
* timing: `timing.normalize` with pyarrow's reader and with it disabled, the same way.
* `parse.nesting` is the structural depth: equal to the depth of the decoded value for any
  JSON document, whatever its strings hold (brackets, quotes, backslashes, escapes).

Values are written as raw JSON tokens, so the lines can hold what `json.dumps` never writes:
integers of every magnitude (past 2^53, 2^63, 2^64, the largest double and Python's 4,300-digit
conversion limit), `-0`, decimal texts of any length, `NaN`/`Infinity`, duplicate keys.
"""

from __future__ import annotations

import json
import math
import struct
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import oracle
from conftest import REPORT, examples
from runstore.ingest.normalize import metrics, timing, trace, trace_events
from runstore.ingest.normalize.base import Context
from runstore.ingest import parse as jsonl
from runstore.storage.schema import schema

with warnings.catch_warnings():
    # Hypothesis imports this to report a failing case; under filterwarnings=error its own
    # import warnings would turn the report into an INTERNALERROR (as in test_hostile.py).
    warnings.simplefilter("ignore")
    try:
        import hypothesis.extra._patching  # noqa: F401
    except ImportError:
        pass

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FAST = Counter()  # cases each fast path accepted, checked by test_fast_paths_were_exercised
# ... so one xdist worker runs the whole module.
pytestmark = pytest.mark.xdist_group("fast_paths")

# ---------------------------------------------------------------------------------------------
# Tokens

SPECIAL_INTS = [0, 1, -1, 2 ** 53 - 1, 2 ** 53, 2 ** 53 + 1, 2 ** 53 + 2, 2 ** 53 + 3,
                -(2 ** 53) - 1, 2 ** 63 - 1, 2 ** 63, 2 ** 63 + 1, -(2 ** 63), -(2 ** 63) - 1,
                2 ** 64 - 1, 2 ** 64, -(2 ** 64), 10 ** 30, -(10 ** 30), 10 ** 308, 10 ** 309,
                2 ** 1024 - 2 ** 970 - 1, 2 ** 1024 - 2 ** 970, 2 ** 1024, 10 ** 400,
                -(10 ** 400), 1_700_000_000_123_456_789]  # the last: a time.time_ns() stamp
INT_TOKEN = st.one_of(
    st.integers().map(str),
    st.integers(-(2 ** 70), 2 ** 70).map(str),
    st.sampled_from(SPECIAL_INTS).map(str),
    st.sampled_from(["-0", "9" * 4400, "-" + "1" * 5000]),  # -0; past the int conversion limit
)
DECIMAL = st.from_regex(r"-?(0|[1-9][0-9]{0,30})(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,3})?",
                        fullmatch=True)
FLOAT_TOKEN = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    DECIMAL,
    st.sampled_from(["NaN", "Infinity", "-Infinity", "-0.0", "0.0", "1e400", "-1e400",
                     "1E5", "1e-400", "2.4703282292062328e-324", "1.7976931348623157e308"]),
)
NUMBER_TOKEN = st.one_of(INT_TOKEN, FLOAT_TOKEN)
TEXT = st.one_of(st.text(max_size=8),
                 st.sampled_from(["", "\x00", "\ud800", "é", "🙂", "[[{", '"', "\\", "\x1b[31m",
                                  "2020-01-01", "true", "NaN", "Inf"]))


def string_token(text: str, ascii_only: bool) -> str:
    return json.dumps(text, ensure_ascii=ascii_only)


NESTED = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), TEXT),
                      lambda kids: st.one_of(st.lists(kids, max_size=3),
                                             st.dictionaries(TEXT, kids, max_size=3)),
                      max_leaves=5)


@st.composite
def token(draw: st.DrawFn, kind: str, ascii_only: bool) -> str:
    if kind == "int":
        return draw(INT_TOKEN)
    if kind == "float":
        return draw(FLOAT_TOKEN)
    if kind == "number":
        return draw(NUMBER_TOKEN)
    if kind == "string":
        return string_token(draw(TEXT), ascii_only)
    if kind == "bool":
        return draw(st.sampled_from(["true", "false"]))
    if kind == "null":
        return "null"
    return json.dumps(draw(NESTED), ensure_ascii=ascii_only)  # nested


KINDS = ["int", "float", "number", "string", "bool", "nested"]
KEYS = st.one_of(st.sampled_from(["a", "b", "c", "time/total", "é", "env/all/reward/total",
                                  "step2", ""]), TEXT)


@st.composite
def metrics_lines(draw: st.DrawFn, typed: bool) -> list[str]:
    """JSON lines of a metrics file. `typed`: each key keeps one kind of value (or null), as
    real files do, so pyarrow mostly accepts the buffer; else any value anywhere."""
    ascii_only = draw(st.booleans())
    keys = draw(st.lists(KEYS, min_size=1, max_size=5, unique=True))
    kinds = {k: draw(st.sampled_from(KINDS)) for k in keys}
    step_kind = draw(st.sampled_from(["int", "absent", "int", "mixed"] if typed else
                                     ["int", "absent", "mixed", "any"]))
    lines = []
    for i in range(draw(st.integers(1, 12))):
        pairs = []
        if step_kind == "int" or (step_kind == "mixed" and draw(st.booleans())):
            pairs.append(("step", draw(st.one_of(st.integers(0, 10 ** 6).map(str), INT_TOKEN))
                          if not typed else str(draw(st.integers(-5, 10 ** 6)))))
        elif step_kind == "any":
            pairs.append(("step", draw(token(draw(st.sampled_from(KINDS + ["null"])),
                                             ascii_only))))
        # keys in any order, some missing (keys appear late and stop)
        for k in draw(st.permutations(keys)):
            if draw(st.integers(0, 3)) == 0:
                continue
            kind = kinds[k] if typed else draw(st.sampled_from(KINDS))
            value = "null" if draw(st.integers(0, 9)) == 0 else draw(token(kind, ascii_only))
            pairs.append((k, value))
        if not typed and pairs and draw(st.integers(0, 9)) == 0:
            pairs.append(draw(st.sampled_from(pairs)))  # a duplicate key
        sep = draw(st.sampled_from([", ", ","])) if i == 0 else ", "
        lines.append("{" + sep.join(f"{string_token(k, ascii_only)}: {v}" for k, v in pairs)
                     + "}")
    return lines


def encode(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8", "surrogatepass")


def ctx() -> Context:
    return Context(run_id="r", source_id=7, rel_path="run/metrics.jsonl")


def bits(v: float | None) -> Any:
    if v is None:
        return None
    return "nan" if math.isnan(v) else struct.pack("<d", v)


def metric_rows(table: pa.Table) -> list[tuple]:
    assert table.schema == schema("metrics_raw")
    return sorted(((r["run_id"], r["step"], r["key"], bits(r["value"]), r["value_str"],
                    r["seq"], r["pre_resume"], r["source_id"]) for r in table.to_pylist()),
                  key=repr)


def check_metrics(lines: list[str], first_line: int = 1) -> bool:
    data = encode(lines)
    fast_ctx, slow_ctx = ctx(), ctx()
    fast = metrics._fast(data, first_line, fast_ctx, False)
    slow = metrics._slow(data, first_line, slow_ctx, False)
    if fast is None:
        return False
    assert slow_ctx.warnings == [], slow_ctx.warnings
    assert metric_rows(fast) == metric_rows(slow)
    return True


@settings(max_examples=examples(400), **SETTINGS)
@given(lines=metrics_lines(typed=True), first_line=st.integers(1, 10 ** 6))
@example(lines=['{"step": 1, "a": 9007199254740993}', '{"step": 2, "a": 1}'], first_line=1)
@example(lines=['{"step": 1, "t": 1700000000123456789, "x": 0.5}'], first_line=1)
@example(lines=['{"step": 1, "a": 9223372036854775808}', '{"step": 2, "a": -9223372036854775809}',
                '{"step": 3, "a": 18446744073709551616}', '{"step": 4, "a": 1' + "0" * 30 + "}"],
         first_line=1)
@example(lines=['{"step": 1, "a": 1' + "0" * 400 + "}", '{"step": 2, "a": -' + "9" * 5000 + "}"],
         first_line=1)
@example(lines=['{"step": 1, "a": -0}', '{"step": 2, "a": 0.5}'], first_line=1)
def test_metrics_fast_and_line_paths_agree_on_typed_lines(lines: list[str], first_line: int) -> None:
    FAST["metrics typed"] += check_metrics(lines, first_line)
    FAST["metrics typed cases"] += 1


# The full count under every profile: test_fast_paths_were_exercised wants 10 of these
# accepted, and about one in ten is.
@settings(max_examples=400, **SETTINGS)
@given(lines=metrics_lines(typed=False))
@example(lines=['{"step": 1, "a": Inf}'])  # pyarrow reads Inf, Python's decoder does not
@example(lines=['{"step": 1, "a": -NaN}'])
@example(lines=['{"step": 1, "a": 1}{"step": 2, "a": 2}', '{"step": 3, "a": 3}'])  # 2 objects
@example(lines=['{"step": 1, "a": 1, "a": 2}'])
def test_metrics_fast_and_line_paths_agree_on_any_lines(lines: list[str]) -> None:
    FAST["metrics any"] += check_metrics(lines)
    FAST["metrics any cases"] += 1


def test_metrics_past_the_threshold_take_the_fast_path_and_keep_big_integers() -> None:
    """Through `normalize`, a buffer past `SMALL` with integers beyond 2^53 (the fast path's
    checked cast raised here and stopped the ingest): every value is the nearest double."""
    # `t` fits int64 (pyarrow reads an int64 column), `u` does not (a column of doubles)
    t = [2 ** 53 + 1, -(2 ** 53) - 3, 2 ** 63 - 1, -(2 ** 63), 1_700_000_000_123_456_789]
    u = [2 ** 63, -(2 ** 63) - 1, 2 ** 64 + 1, 10 ** 30, 10 ** 400]
    lines = [json.dumps({"step": i, "loss": 0.5, "t": t[i % 5], "u": u[i % 5], "n": i})
             for i in range(3000)]
    data = encode(lines)
    assert len(data) >= metrics.SMALL
    assert metrics._fast(data, 1, ctx(), False) is not None  # the fast path, not a fallback
    table, last = metrics.normalize(data, 1, ctx())
    assert last == 2999
    got = {(r["step"], r["key"]): r["value"] for r in table.to_pylist()}
    assert len(got) == 4 * 3000
    for i in range(3000):
        # Python's correctly rounded double; past the largest double, +-inf
        assert got[(i, "t")] == float(t[i % 5])
        assert got[(i, "u")] == (float(u[i % 5]) if u[i % 5] < 2 ** 1024 else math.inf)
        assert got[(i, "n")] == i and got[(i, "loss")] == 0.5
    assert metric_rows(table) == metric_rows(metrics._slow(data, 1, ctx(), False))


# ---------------------------------------------------------------------------------------------
# timing


PLAIN_NUMBER = st.one_of(
    st.integers(-(2 ** 70), 2 ** 70).filter(bool).map(str),
    st.sampled_from(SPECIAL_INTS[1:]).map(str),
    st.floats(allow_nan=False, allow_infinity=False).filter(bool).map(repr),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e-400", "9" * 4400]))


@st.composite
def timing_lines(draw: st.DrawFn) -> list[str]:
    ascii_only = draw(st.booleans())
    odd = draw(st.integers(0, 2)) == 0  # anything in any field, or the usual types
    lines = []
    for _ in range(draw(st.integers(1, 8))):
        spans = []
        for _ in range(draw(st.integers(0, 5))):
            fields = []
            name_kind = draw(st.sampled_from(["string"] * 4 + (["int", "null", "nested"]
                                                               if odd else [])))
            fields.append(("name", draw(token(name_kind, ascii_only))))
            for f in ("duration", "wall_start", "wall_end"):
                if draw(st.integers(0, 5)) == 0:
                    continue  # missing
                if odd:
                    kind = draw(st.sampled_from(["number", "string", "bool", "null", "nested"]))
                    fields.append((f, draw(token(kind, ascii_only))))
                else:  # numbers pyarrow takes: big integers yes, -0 and 1e400 not
                    fields.append((f, draw(PLAIN_NUMBER)))
            if draw(st.integers(0, 5)) == 0:
                fields.append(("extra", draw(token("nested", ascii_only))))
            spans.append("{" + ", ".join(f'"{k}": {v}' for k, v in fields) + "}")
        step = draw(st.integers(0, 50).map(str)) if not odd or draw(st.booleans()) \
            else draw(token(draw(st.sampled_from(KINDS)), ascii_only))
        lines.append('{"step": ' + step + ', "spans": [' + ", ".join(spans) + "]}")
    return lines


@settings(max_examples=examples(250), **SETTINGS)
@given(lines=timing_lines(), first_line=st.integers(1, 1000))
@example(lines=['{"step": 1, "spans": [{"name": "a", "duration": 1' + "0" * 400 + "}]}"],
         first_line=1)  # an integer beyond the largest double: was a dropped span on one path
@example(lines=['{"step": 1, "spans": [{"name": "a", "duration": -0}]}'], first_line=1)
@example(lines=['{"step": 1, "spans": [{"name": "a", "duration": ' + "9" * 5000 + "}]}"],
         first_line=1)
def test_timing_fast_and_line_paths_agree(lines: list[str], first_line: int) -> None:
    data = encode(lines)
    fast_table = jsonl.fast_table(data, timing.RECORD)
    if fast_table is None or not timing._whole(fast_table):
        FAST["timing cases"] += 1
        return
    fast_ctx, slow_ctx = ctx(), ctx()
    fast, fast_steps = timing.normalize(data, first_line, fast_ctx)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(jsonl, "fast_table", lambda *a, **k: None)
        slow, slow_steps = timing.normalize(data, first_line, slow_ctx)
    assert slow_ctx.warnings == [] and fast_ctx.warnings == []
    assert fast_steps == slow_steps
    assert fast.schema == slow.schema

    def rows(t: pa.Table) -> list[tuple]:
        return [tuple(bits(v) if isinstance(v, float) else v for v in r.values())
                for r in t.to_pylist()]

    assert rows(fast) == rows(slow)
    FAST["timing"] += 1
    FAST["timing cases"] += 1


# ---------------------------------------------------------------------------------------------
# trace


TRACE_TS = st.one_of(st.sampled_from([0, 1, 5, 100, 2500, -3, -2_000_000, 3_000_000]),
                     st.floats(-10, 1000, allow_nan=False))


@st.composite
def trace_lines(draw: st.DrawFn) -> list[str]:
    """A trace file's lines: B/E/X events on two pids, two tracks (and none), a few names,
    a clock that mostly rises and now and then jumps back (a resumed process), repeated
    `process_name` metadata (another resumed process), thread metadata, instants, counters,
    extra args (nested too), and events with a field missing or of the wrong type."""
    clock = draw(st.sampled_from([0.0, 1000.0, 5e9]))
    odd = draw(st.integers(0, 3)) == 0
    lines = []
    for _ in range(draw(st.integers(0, 40))):
        what = draw(st.sampled_from(["B"] * 6 + ["E"] * 6 + ["X", "M", "thread", "i", "C"]
                                    + (["bad"] * 3 if odd else [])))
        pid = draw(st.sampled_from([0, 0, 1]))
        if what == "M":
            ev: dict[str, Any] = {"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                                  "ts": 0, "args": {"name": "MainThread Thread"}}
        elif what == "thread":
            ev = {"name": "thread_name", "ph": "M", "pid": pid, "tid": 11, "ts": 0,
                  "args": {"name": "Task-1"}}
        elif what in ("i", "C"):
            ev = {"name": "mark", "ph": what, "pid": pid, "tid": 11, "ts": clock, "args": {}}
        else:
            step = draw(TRACE_TS)
            clock += step
            ts = int(clock) if draw(st.integers(0, 3)) == 0 else clock
            args: dict[str, Any] = {}
            track = draw(st.sampled_from(["Task-1", "Task-2", "sync:T", None]))
            if track is not None:
                args["track"] = track
            if draw(st.integers(0, 4)):
                args["thread"] = draw(st.sampled_from(["MainThread", "T2"]))
            if draw(st.integers(0, 6)) == 0:
                args.update(draw(st.sampled_from([{"step": 3}, {"foo": 1, "bar": "b"},
                                                  {"state_path": "tinker://x", "n": [1, 2]},
                                                  {"deep": {"a": 1.5}}, {"é": "ü"}])))
            ph = draw(st.sampled_from(["B", "E", "X"])) if what == "bad" else what
            ev = {"name": draw(st.sampled_from(["a", "a", "b", "policy_sample"])), "ph": ph,
                  "pid": pid, "tid": 11, "ts": ts, "args": args, "cat": "async"}
            if ph == "X":
                ev["dur"] = draw(st.sampled_from([0, 1.5, 250, 1e300]))
            if what == "bad":
                field, value = draw(st.sampled_from([
                    ("ts", None), ("ts", "5"), ("ts", math.nan), ("pid", True), ("pid", 1.0),
                    ("args", ["T"]), ("args", None), ("name", None), ("name", 5), ("ph", None),
                    ("ph", 3), ("dur", None), ("tid", None), ("args", {"track": 5})]))
                if value is None:
                    ev.pop(field, None)
                else:
                    ev[field] = value
        lines.append(json.dumps(ev, ensure_ascii=draw(st.booleans())))
    return lines


def trace_rows(table: pa.Table) -> list[tuple]:
    assert table.schema == schema("trace_slices")
    return [tuple(bits(v) if isinstance(v, float) else v for v in r.values())
            for r in table.to_pylist()]


@settings(max_examples=250, **SETTINGS)
@given(lines=trace_lines(), cuts=st.lists(st.integers(0, 40), max_size=3))
@example(lines=[json.dumps(e) for e in [
    {"name": "a", "ph": "B", "pid": 0, "ts": 1.0, "args": {"track": "T"}},
    {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "ts": 0},
    {"name": "a", "ph": "B", "pid": 0, "ts": 9e6, "args": {"track": "T"}},
    {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "ts": 0},
    {"name": "a", "ph": "E", "pid": 0, "ts": 9e6 + 1, "args": {"track": "T", "k": 1}}]],
    cuts=[3])  # a B carried into a new process, twice, across reads
def test_trace_fast_and_line_paths_agree_with_the_oracle(lines: list[str], cuts: list[int]
                                                          ) -> None:
    """A trace read in chunks (the state carried between them through JSON, as the ledger
    does) gives, with pyarrow's reader and with Python's decoder, the same rows, states and
    warnings; and both give what tests/oracle.py's event-by-event reading of the whole file
    gives."""
    bounds = sorted({0, len(lines), *(c for c in cuts if c <= len(lines))})
    got = {}
    for way in ("fast", "line"):
        c = Context(run_id="r", source_id=7, rel_path="run/trace_events.jsonl")
        state: dict | None = None
        rows: list[tuple] = []
        accepted = True
        for lo, hi in zip(bounds, bounds[1:]):
            data = encode(lines[lo:hi])
            ev = trace_events.from_bytes(data, lo + 1) if way == "fast" else None
            if ev is None:
                accepted &= way == "line" or not data
                ev = trace_events.from_records(jsonl.records(data, lo + 1, c))
            table, state, stray = trace._read(ev, state, c.base())
            for line, message in sorted(ev.warnings + stray):
                c.warn(line, message)
            rows += trace_rows(table)
            state = json.loads(json.dumps(state))
        got[way] = (rows, state, c.warnings, trace.open_rows(state, c), accepted)
    assert got["fast"][:4] == got["line"][:4]
    FAST["trace cases"] += 1
    FAST["trace"] += got["fast"][4]
    rows, state, warned, still, _ = got["line"]
    want_rows, want_open, want_warned = oracle.trace_events(
        [(i, json.loads(line)) for i, line in enumerate(lines, 1)])
    base = {"run_id": "r", "source_id": 7}
    assert rows == trace_rows(pa.Table.from_pylist([{**base, **r} for r in want_rows],
                                                   schema=schema("trace_slices")))
    assert still == [{**base, **r} for r in want_open]
    assert [int(w.split(":")[1]) for w in warned] == want_warned


# ---------------------------------------------------------------------------------------------
# What pyarrow's reader must never be given


def test_fast_table_refuses_lines_python_reads_otherwise() -> None:
    for data in (b'{"a": Inf}\n', b'{"a": -Inf}\n', b'{"a": -NaN}\n',
                 b'{"a": 1}{"a": 2}\n{"a": 3}\n', b'{"a": 1} {"b": 2}\n'):
        assert jsonl.fast_table(data) is None, data
    # and what both read alike still goes through
    assert jsonl.fast_table(b'{"a": Infinity, "b": -Infinity, "c": NaN}\n') is not None


def test_a_string_of_closing_brackets_cannot_hide_deep_nesting() -> None:
    """The old guard counted every bracket: `]` in a string lowered the count, and a deeply
    nested value after it reached pyarrow's reader, which crashed the process (SIGSEGV). Run
    in a child process: a regression must fail this test, not kill the test run."""
    import runstore

    script = f"""
import sys
sys.path.insert(0, {str(Path(runstore.__file__).resolve().parents[1])!r})
from runstore.ingest.normalize import metrics
from runstore.ingest.normalize.base import Context
n = 20000
line = b'{{"step": 1, "s": "' + b"]" * n + b'", "deep": ' + b"[" * (n + 10) + b"]" * (n + 10) + b"}}\\n"
pad = b'{{"step": 2, "pad": "' + b"x" * 140_000 + b'"}}\\n'
ctx = Context("r", 1, "run/metrics.jsonl")
table, _ = metrics.normalize(line + pad, 1, ctx)
print(table.num_rows, ctx.warnings)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.startswith("1 ['run/metrics.jsonl:1: skipped: JSON nested too deeply']")


# ---------------------------------------------------------------------------------------------
# Structural depth

# Strings full of what a naive bracket count trips on.
NASTY_TEXT = st.one_of(
    st.text(max_size=12),
    st.text(alphabet='[]{}"\\\x1b\n\t/u', max_size=40),
    st.sampled_from(["\x1b[31m", "[" * 600, "{" * 600, "]" * 600, '\\"[', "\\\\", "\ud800"]),
)
DOC = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), NASTY_TEXT),
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(NASTY_TEXT, kids,
                                                                       max_size=4)),
    max_leaves=30)


def dump(value: Any, style: int) -> bytes:
    text = json.dumps(value, ensure_ascii=style % 2 == 0, indent=2 if style >= 2 else None,
                      allow_nan=True)
    return text.encode("utf-8", "surrogatepass")


@settings(max_examples=examples(500), **SETTINGS)
@given(doc=DOC, style=st.integers(0, 3), wrap=st.sampled_from([0, 0, 1, 3, 600]),
       block=st.sampled_from([1 << 20, 3, 7]))
def test_nesting_is_the_depth_of_the_document(doc: Any, style: int, wrap: int,
                                              block: int) -> None:
    for _ in range(wrap):  # sometimes deeper than the limit, with closers in strings beside
        doc = [doc, "]]]"]
    data = dump(doc, style % 2 if wrap > 100 else style)  # indent=2 encodes recursively
    with pytest.MonkeyPatch.context() as m:
        m.setattr(jsonl, "_SCAN_BLOCK", block)  # blocks carry their state across
        assert jsonl.nesting(data) == oracle.depth_of(doc)


@settings(max_examples=examples(300), **SETTINGS)
@given(docs=st.lists(DOC, min_size=1, max_size=6), style=st.integers(0, 1),
       block=st.sampled_from([1 << 20, 5]))
def test_nesting_per_line_is_the_deepest_line(docs: list[Any], style: int, block: int) -> None:
    data = b"".join(dump(d, style) + b"\n" for d in docs)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(jsonl, "_SCAN_BLOCK", block)
        assert jsonl.nesting(data, per_line=True) == max(oracle.depth_of(d) for d in docs)
    # the cheap bound the fast path takes first never says less than the depth
    assert jsonl._openers_per_line(data) >= max(oracle.depth_of(d) for d in docs)


def test_nesting_deeper_than_python_can_decode() -> None:
    for depth in (511, 512, 513, 5000):
        data = b'{"s": "' + b"]" * 3000 + b'", "d": ' + b"[" * depth + b"]" * depth + b"}"
        assert jsonl.nesting(data) == depth + 1
    ok = b'{"s": "' + b"[{" * 3000 + b'\\"[[\\\\", "d": [[1]]}'
    assert jsonl.nesting(ok) == 3
    assert jsonl.loads(ok)["s"] == "[{" * 3000 + '"[[\\'


def test_loads_refuses_only_real_depth() -> None:
    deep = b"[" * 513 + b"]" * 513
    with pytest.raises(RecursionError):
        jsonl.loads(deep)
    assert oracle.depth_of(jsonl.loads(b"[" * 512 + b"]" * 512)) == 512


def test_integers_past_the_conversion_limit_are_numbers() -> None:
    ctx_ = ctx()
    got = list(jsonl.records(b'{"a": ' + b"9" * 5000 + b', "b": -' + b"1" * 4400 + b'}\n'
                             b'{"a": 1}\n', 1, ctx_))
    assert ctx_.warnings == []
    assert got == [(1, {"a": math.inf, "b": -math.inf}), (2, {"a": 1})]


def test_fast_paths_were_exercised() -> None:
    """The differential tests above prove little if the fast path refused every case."""
    ran = {name: FAST[name] for name in ("metrics typed", "metrics any", "timing", "trace")
           if FAST[f"{name} cases"]}
    if not ran:
        pytest.skip("the differential tests did not run")
    REPORT["fast path accepted (cases)"] = ", ".join(
        f"{name} {n}/{FAST[name + ' cases']}" for name, n in ran.items())
    for name, n in ran.items():
        want = 10 if name == "metrics any" else FAST[f"{name} cases"] // 4
        assert n >= want, (name, FAST)
