"""Hostile input, generated with hypothesis: the ingest never crashes and loses nothing.

Every file kind runstore reads (metrics, pre-resume copies, checkpoints, timing spans, trace
events, rollout summaries, logtrees, config, code.diff, capture, logs.log, an eval store's
metadata, results and trajectories) is generated from records whose every field may have the
wrong type, then mutated: cut anywhere, random bytes, invalid UTF-8, NUL, deep nesting, a huge
line, NaN/Infinity for every number, an integer past 2^63, the largest double or Python's
4,300-digit limit, duplicate keys, BOMs, CRLF endings, an empty file, a file repeated past the
fast path's 128 KB. Two tiers:

* `test_hostile_file`: many cases through `process.process_file` (the pure per-file read and
  normalize step of an ingest), read whole and, for append-only files, in two reads across a
  cut. No exception escapes; each warning is one line `run/file[:line]: message`; every
  complete line that is not JSON (by an independent decoder here) is reported as `file:line`
  with its true line number; the rows produced cast to their table's schema; and a metrics
  file yields exactly one row per non-null value of each usable line.
* `test_hostile_ingest`: fewer cases through a real ingest into a copy of a store that already
  holds three good runs. Hostile files arrive as a new run, as bytes appended to good runs'
  files, as good write-once files rewritten with garbage, and as directories or special files
  named like run files. No exception escapes; every row stored before is still stored; a
  second ingest adds nothing.

The number of cases run is printed at the end of the pytest run ("hostile cases: N"); the
figure and the command are in docs/reliability.md. `$HOSTILE_FILE_CASES` and
`$HOSTILE_INGEST_CASES` change the numbers; `$HOSTILE_DUMP=FILE` writes each per-file case to
FILE before running it, to find the case when one kills the process outright (a segfault
in a C extension is not an exception hypothesis can report).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import oracle
import runstore
from conftest import REPORT, SMALL_SPECS, examples
from runstore import demo
from runstore.storage import schema
from runstore.ingest.discover import APPEND_ONLY, run_id_for, scan_run
from runstore.ingest.process import FileTask, process_file

with warnings.catch_warnings():
    # Hypothesis imports this module to report a failing case; under filterwarnings=error
    # its own import warnings (libcst) would turn the report into an INTERNALERROR.
    warnings.simplefilter("ignore")
    try:
        import hypothesis.extra._patching  # noqa: F401
    except ImportError:
        pass

# A failing case holding a huge line would otherwise turn its own report into an error.
# One xdist worker runs the whole module: test_report_case_count counts the cases the tests
# before it generated.
pytestmark = [pytest.mark.filterwarnings("ignore:Generating overly large repr"),
              pytest.mark.xdist_group("hostile")]

FILE_CASES = int(os.environ.get("HOSTILE_FILE_CASES", examples(2000)))  # tier 1, all kinds together
INGEST_CASES = int(os.environ.get("HOSTILE_INGEST_CASES", examples(100)))  # tier 2
SETTINGS = dict(deadline=None, derandomize=True, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture,
                                       HealthCheck.large_base_example])

# ---------------------------------------------------------------------------------------------
# Values: right types sometimes, anything JSON can say otherwise.

ODD_TEXT = st.sampled_from(["", "\x00", "\ud800", "\udfff", "é", "\u2028", "\ufeff", "NaN",
                            "a\nb", "\\", '"', "Infinity", "null", "{", "🙂" * 3])
TEXT = st.one_of(st.text(max_size=12), ODD_TEXT)
NUMBER = st.one_of(st.integers(-(2 ** 70), 2 ** 70), st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([2 ** 63, -(2 ** 63) - 1, 10 ** 400, -(10 ** 400), 1e308]))
SCALAR = st.one_of(st.none(), st.booleans(), NUMBER, TEXT)
ANY = st.recursive(SCALAR, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                  st.dictionaries(TEXT, kids, max_size=3)),
                   max_leaves=8)


def field(right: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly the right type, sometimes anything."""
    return st.one_of(right, right, ANY)


def record(required: dict[str, st.SearchStrategy],
           optional: dict[str, st.SearchStrategy] | None = None) -> st.SearchStrategy:
    base = st.fixed_dictionaries({k: field(v) for k, v in required.items()},
                                 optional={k: field(v) for k, v in (optional or {}).items()})
    extra = st.dictionaries(TEXT, ANY, max_size=3)
    return st.one_of(st.builds(lambda a, b: {**a, **b}, base, extra), base, ANY)


INT = st.one_of(st.integers(0, 10 ** 6), st.sampled_from([2 ** 63, 10 ** 400]))
FLOAT = st.floats(allow_nan=True, allow_infinity=True)
METRICS = record({"step": INT}, {f"m{i}": NUMBER for i in range(4)} | {"s": TEXT})
CHECKPOINTS = record({"name": TEXT, "batch": INT},
                     {"epoch": INT, "final": st.booleans(), "state_path": TEXT,
                      "sampler_path": TEXT, "rolling": st.booleans()})
SPAN = record({"name": TEXT, "duration": FLOAT, "wall_start": FLOAT, "wall_end": FLOAT})
TIMING = record({"step": INT, "spans": st.lists(SPAN, max_size=4)})
TRACE = record({"name": st.sampled_from(["a", "b", "thread_name", "process_name"]),
                "ph": st.sampled_from(["B", "E", "M", "X", "i", "Q"]),
                "pid": st.integers(0, 3), "tid": st.integers(0, 5),
                "ts": st.floats(0, 1e7), "args": st.fixed_dictionaries(
                    {"track": field(st.sampled_from(["T1", "T2"]))},
                    optional={"thread": TEXT, "name": TEXT, "step": INT})},
               {"cat": TEXT, "dur": FLOAT})
STEP = record({"step_idx": INT, "ob_len": INT, "ac_len": INT, "reward": FLOAT,
               "episode_done": st.booleans()},
              {"metrics": st.dictionaries(TEXT, NUMBER, max_size=2),
               "logs": st.dictionaries(TEXT, SCALAR, max_size=2)})
ROLLOUT = record({"schema_version": st.just(1), "split": st.just("train"), "iteration": INT,
                  "group_idx": INT, "traj_idx": INT, "tags": st.lists(TEXT, max_size=2),
                  "sampling_client_step": st.one_of(st.none(), INT), "total_reward": FLOAT,
                  "final_reward": FLOAT, "steps": st.lists(STEP, max_size=3),
                  "final_ob_len": INT},
                 {"trajectory_metrics": st.dictionaries(TEXT, NUMBER, max_size=2)})
MESSAGE = record({"role": st.sampled_from(["system", "user", "assistant", "tool"]),
                  "content": st.one_of(TEXT, st.lists(record(
                      {"type": st.sampled_from(["text", "thinking", "image"]), "text": TEXT,
                       "thinking": TEXT}), max_size=2))},
                 {"tool_calls": st.lists(ANY, max_size=2), "name": TEXT,
                  "trainable": st.booleans()})
NODE = st.recursive(
    record({"tag": st.sampled_from(["div", "section", "h2", "table", "p"]),
            "attrs": st.dictionaries(TEXT, TEXT, max_size=2), "children": st.just([])},
           {"data": record({"type": st.just("conversation"),
                            "messages": st.lists(MESSAGE, max_size=3)})}),
    lambda kids: record({"tag": st.sampled_from(["section", "div"]), "attrs": st.just({}),
                         "children": st.lists(st.one_of(kids, TEXT), max_size=4)}),
    max_leaves=6)
LOGTREE = record({"title": TEXT, "started_at": TEXT, "path": st.one_of(st.none(), TEXT),
                  "root": NODE})
CONFIG = st.one_of(record({"model_name": TEXT, "learning_rate": FLOAT, "loss_fn": TEXT,
                           "dataset_builder": st.dictionaries(TEXT, ANY, max_size=3)}), ANY)
# tinker-cookbook 0.6.1's token-level capture records (capture/instrument.py) and logs.log.
SEQUENCE = record({"tokens": st.lists(INT, max_size=4), "logprobs": st.lists(FLOAT, max_size=4)},
                  {"stop_reason": TEXT})
CAPTURE = record({"kind": st.sampled_from(["sample", "train_op"]),
                  "scope": record({"run_id": TEXT, "run_attempt": INT, "iteration": INT,
                                   "group_idx": INT, "traj_idx": INT, "split": TEXT}),
                  "created_at": FLOAT, "prompt_tokens": st.lists(INT, max_size=4),
                  "samples": st.lists(SEQUENCE, max_size=3)},
                 {"seq_id": INT, "status": TEXT, "op": TEXT, "event_id": TEXT,
                  "latency_sec": FLOAT, "model_path": TEXT})
# An eval store's files (tinker_cookbook.stores.EvalStore): an eval run's metadata, a
# benchmark's result and its trajectories, each where the store keeps them (`runs/<id>/`).
EVAL_RUN = "runs/e1"
EVAL_KINDS = frozenset({"eval_metadata", "eval_result", "eval_trajectories"})
EVAL_METADATA = record({"run_id": TEXT, "model_name": TEXT,
                        "benchmarks": st.lists(TEXT, max_size=3), "timestamp": TEXT,
                        "scores": st.dictionaries(TEXT, NUMBER, max_size=2)},
                       {"checkpoint_path": st.one_of(st.none(), TEXT),
                        "checkpoint_name": st.one_of(st.none(), TEXT),
                        "config": st.dictionaries(TEXT, ANY, max_size=3)})
EVAL_RESULT = record({"name": TEXT, "score": FLOAT, "num_examples": INT, "num_correct": INT},
                     {"num_errors": INT, "num_truncated": INT, "time_seconds": FLOAT,
                      "metrics": st.dictionaries(TEXT, NUMBER, max_size=2),
                      "pass_at_k": st.dictionaries(TEXT, FLOAT, max_size=2)})
EVAL_TRAJECTORY = record({"idx": INT, "example_id": TEXT, "reward": FLOAT,
                          "turns": st.lists(record({"role": TEXT, "content": TEXT},
                                                   {"token_count": INT}), max_size=3)},
                         {"benchmark": TEXT, "error": st.one_of(st.none(), TEXT),
                          "time_seconds": FLOAT,
                          "metrics": st.dictionaries(TEXT, NUMBER, max_size=2),
                          "logs": st.dictionaries(TEXT, SCALAR, max_size=2)})
LOG_TEXT = st.lists(st.one_of(st.sampled_from([
    "root:791 [INFO] Command line invocation: a.py", "x.y:3 [ERROR] boom",
    "Traceback (most recent call last):", '  File "a.py", line 1', "ValueError: v", ""]),
    st.text(max_size=20)), max_size=8).map("\n".join)

# (file name relative to the run, how records become bytes, record strategy)
KINDS: dict[str, tuple[str, str, st.SearchStrategy]] = {
    "metrics": ("metrics.jsonl", "lines", METRICS),
    "metrics_pre_resume": ("metrics.jsonl.pre_resume_000007", "lines", METRICS),
    "checkpoints": ("checkpoints.jsonl", "lines", CHECKPOINTS),
    "timing_spans": ("timing_spans.jsonl", "lines", TIMING),
    "trace_events": ("trace_events.jsonl", "lines", TRACE),
    "rollouts": ("iteration_000003/train_rollout_summaries.jsonl", "lines", ROLLOUT),
    "logtree": ("train_iteration_000004_logtree.json", "json", LOGTREE),
    "config": ("config.json", "json", CONFIG),
    "code_diff": ("code.diff", "text", st.text(max_size=200)),
    "capture": ("capture/sample.jsonl", "lines", CAPTURE),
    "logs": ("logs.log", "text", LOG_TEXT),
    "eval_metadata": (f"{EVAL_RUN}/metadata.json", "json", EVAL_METADATA),
    "eval_result": (f"{EVAL_RUN}/gsm8k/result.json", "json", EVAL_RESULT),
    "eval_trajectories": (f"{EVAL_RUN}/gsm8k/trajectories.jsonl", "lines", EVAL_TRAJECTORY),
}
RUN_KINDS = sorted(set(KINDS) - EVAL_KINDS)  # the kinds a run directory holds

# ---------------------------------------------------------------------------------------------
# Bytes: serialise, then mutate.


def dumps(obj: Any, ascii_only: bool, indent: int | None = None) -> bytes:
    text = json.dumps(obj, allow_nan=True, ensure_ascii=ascii_only, indent=indent)
    return text.encode("utf-8", "surrogatepass")  # lone surrogates become invalid UTF-8


def duplicate_keys(line: bytes) -> bytes:
    if line.startswith(b"{"):
        rest = line[1:].lstrip()
        sep = b"" if rest.startswith(b"}") else b", "
        return b'{"step": 3, "dup": 1, "dup": "x"' + sep + rest
    return line


NAN_NUMBERS = re.compile(rb"(?<=[:\[,] )-?\d+(\.\d+)?([eE][-+]?\d+)?(?=[,\]}])")


@st.composite
def mutate(draw: st.DrawFn, data: bytes) -> bytes:
    """Apply 0-3 mutations to `data`."""
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["cut", "random", "utf8", "nul", "bom", "crlf", "nan",
                                   "deep", "huge", "empty", "blank", "bigint", "large"]))
        pos = draw(st.integers(0, len(data))) if data else 0
        if op == "cut":
            data = data[:pos]
        elif op == "random":
            data = data[:pos] + draw(st.binary(min_size=1, max_size=40)) + data[pos:]
        elif op == "utf8":
            data = data[:pos] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80",
                                                      b"\xf8\x88\x80"])) + data[pos:]
        elif op == "nul":
            data = data[:pos] + b"\x00" + data[pos:]
        elif op == "bom":
            data = b"\xef\xbb\xbf" + data if draw(st.booleans()) else \
                b"\n".join(b"\xef\xbb\xbf" + line for line in data.split(b"\n"))
        elif op == "crlf":
            data = data.replace(b"\n", b"\r\n")
        elif op == "nan":
            token = draw(st.sampled_from([b"NaN", b"Infinity", b"-Infinity"]))
            data = NAN_NUMBERS.sub(token, data)
        elif op in ("deep", "huge"):
            if op == "deep":
                depth = draw(st.sampled_from([50, 400, 900, 990, 1500, 100_000]))
                line = b'{"step": 1, "deep": ' + b"[" * depth + b"]" * depth + b"}"
            else:
                size = draw(st.sampled_from([70_000, 200_000, 1_500_000]))
                line = b'{"step": 2, "huge": "' + b"x" * size + b'"}'
            cut = data.rfind(b"\n", 0, pos) + 1
            data = data[:cut] + line + b"\n" + data[cut:]
        elif op == "bigint":
            # One number becomes an integer past Python's 4,300-digit conversion limit (or
            # just past 2^63 / the largest double), which json.dumps cannot write.
            numbers = list(NAN_NUMBERS.finditer(data))
            if numbers:
                m = numbers[draw(st.integers(0, len(numbers) - 1))]
                token = draw(st.sampled_from([b"9" * 5000, b"-" + b"1" * 4400, b"1" + b"0" * 400,
                                              b"9223372036854775808", b"9007199254740993"]))
                data = data[:m.start()] + token + data[m.end():]
        elif op == "large":
            # Past the metrics fast path's 128 KB (the timing one has no threshold).
            if data:
                data = data * min(4000, 140_000 // len(data) + 1)
        elif op == "empty":
            data = b""
        elif op == "blank":
            data = data[:pos] + b"\n \n\t\n" + data[pos:]
    return data


@st.composite
def hostile_file(draw: st.DrawFn, kind: str | None = None,
                 kinds: list[str] | None = None) -> tuple[str, str, bytes]:
    """(kind, path relative to the run or eval store, bytes); of one of `kinds` (all)."""
    kind = kind or draw(st.sampled_from(kinds or sorted(KINDS)))
    rel, shape, records = KINDS[kind]
    ascii_only = draw(st.booleans())
    if shape == "lines":
        lines = [dumps(r, ascii_only) for r in draw(st.lists(records, max_size=8))]
        lines = [duplicate_keys(line) if draw(st.booleans()) and i == 0 else line
                 for i, line in enumerate(lines)]
        data = b"".join(line + b"\n" for line in lines)
    elif shape == "json":
        data = dumps(draw(records), ascii_only, indent=draw(st.sampled_from([None, 2])))
    else:
        data = draw(records).encode("utf-8", "surrogatepass")
    return kind, rel, draw(mutate(data))


# ---------------------------------------------------------------------------------------------
# An independent reading of what must be reported and stored.


def complete_lines(data: bytes, append_only: bool) -> list[tuple[int, bytes]]:
    """(line number, bytes) of the lines a reader consumes: up to the last newline for
    append-only files, everything for write-once ones."""
    if append_only:
        data = data[: data.rfind(b"\n") + 1]
        parts = data.split(b"\n")[:-1]
    else:
        parts = data.split(b"\n")
    return [(i, raw) for i, raw in enumerate(parts, start=1) if raw.strip()]


MAX_NESTING = 512  # documented bound: JSON nested deeper is refused (text in strings is not nesting)


def _parse_int(text: str) -> int | float:
    # The documented rule: an integer past Python's conversion limit is the float it rounds to.
    return int(text) if len(text.lstrip("-")) <= 4300 else float(text)


def decode(raw: bytes) -> tuple[bool, Any]:
    try:
        text = raw.decode("utf-8")
        obj = json.loads(text[1:] if text.startswith("\ufeff") else text, parse_int=_parse_int)
    except (ValueError, RecursionError):  # RecursionError: deeper than json.loads goes
        return False, None
    return oracle.depth_of(obj) <= MAX_NESTING, obj


def bad_lines(data: bytes, append_only: bool) -> set[int]:
    return {i for i, raw in complete_lines(data, append_only) if not decode(raw)[0]}


def metric_values(data: bytes, append_only: bool = True) -> int:
    """Rows a metrics file must give: one per non-null value of each object line whose step
    is missing, null or an integer (an integral float counts)."""
    n = 0
    for _, raw in complete_lines(data, append_only):
        ok, obj = decode(raw)
        if not ok or not isinstance(obj, dict):
            continue
        step = obj.get("step")
        if step is not None and (isinstance(step, bool) or not (
                isinstance(step, int) or (isinstance(step, float) and step.is_integer()))):
            continue
        if isinstance(step, (int, float)) and not -(2 ** 63) <= step < 2 ** 63:
            continue
        n += sum(1 for k, v in obj.items() if k != "step" and v is not None)
    return n


WARNING = re.compile(r"^(?P<path>[^\n]+?)(?::(?P<line>\d+))?: (?P<msg>[^\n]+)$")


def warned_lines(warnings: list[str], path: str) -> set[int]:
    """Line numbers of the warnings about `path`; every warning must be well formed."""
    out = set()
    for w in warnings:
        m = WARNING.match(w)
        assert m, f"malformed warning {w!r}"
        if m.group("path") == path and m.group("line"):
            out.add(int(m.group("line")))
    return out


# ---------------------------------------------------------------------------------------------
# Tier 1: one file at a time through the per-file worker


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile_files")


@pytest.fixture(scope="module")
def deleter() -> Iterator[ThreadPoolExecutor]:
    """A thread that deletes what an ingest case leaves (`shutil.rmtree`) while the next one
    runs: deleting is disk waits, not work, and need not hold the cases up. Done by the
    module's end. (The per-file tier deletes its own: any change to that test's source changes
    the cases its derandomized run draws.)"""
    with ThreadPoolExecutor(1, thread_name_prefix="hostile-rmtree") as pool:
        yield pool


def process(run: Path, rel: str, entry: Any = None) -> Any:
    found = [f for f in scan_run(str(run), "run").files if f.rel_path == rel]
    assert len(found) == 1, rel
    task = FileTask(str(run), run_id_for(str(run)), "run", found[0], entry)
    return process_file(task)


def check_result(res: Any, kind: str, rel: str, data: bytes, first_line: int = 1) -> None:
    append_only = kind in APPEND_ONLY
    assert all("\n" not in w for w in res.warnings), res.warnings
    warned = warned_lines(res.warnings, f"run/{rel}")
    if KINDS[kind][1] == "lines":
        want = {i + first_line - 1 for i in bad_lines(data, append_only)}
        assert want <= warned, (sorted(want - warned), res.warnings)
    for table, parts in res.appends.items():
        pa.concat_tables(parts).cast(schema.schema(table))  # what Writer.commit does
    if kind in ("metrics", "metrics_pre_resume"):
        got = sum(t.num_rows for t in res.appends.get("metrics_raw", []))
        assert got == metric_values(data, append_only)


CASES = Counter()


@pytest.mark.slow
@settings(max_examples=FILE_CASES, **SETTINGS)
@given(case=hostile_file(), split=st.floats(0, 1))
# Cases found while writing this test, kept so they run every time (each crashed once).
@example(case=("timing_spans", "timing_spans.jsonl", b'null\n{"step": 1, "spans": null}\n'),
         split=0.0)  # pyarrow segfault
@example(case=("metrics", "metrics.jsonl", b'{"step": 1, "deep": ' + b"[" * 20000 + b"]" * 20000
               + b"}\n" + b'{"step": 2, "pad": "' + b"x" * 140_000 + b'"}\n'),
         split=0.5)  # pyarrow segfault (deep nesting, fast path)
@example(case=("timing_spans", "timing_spans.jsonl",
               b'{"step": 0, "spans": [{"name": "a\\ud800", "duration": 1.0}]}\n\n'),
         split=0.0)  # lone surrogate on the line-decoder path
@example(case=("timing_spans", "timing_spans.jsonl", b'{"step": 0, "spans": [null]}\n'),
         split=0.0)
@example(case=("metrics", "metrics.jsonl", b'{"step": ' + b"1" * 30 + b', "a": 1}\n'),
         split=0.0)  # a step beyond int64
@example(case=("checkpoints", "checkpoints.jsonl", '{"name": "x", "batch": "²"}\n'.encode()),
         split=0.0)
@example(case=("logtree", "train_iteration_000004_logtree.json",
               b'{"title": "", "root": {"tag": "section", "attrs": {}, "children": '
               b'[{"tag": [], "attrs": {}, "children": []}]}}'), split=0.0)
def test_hostile_file(scratch: Path, case: tuple[str, str, bytes], split: float) -> None:
    kind, rel, data = case
    CASES["file"] += 1
    run = scratch / f"r{CASES['file']}"
    (run / rel).parent.mkdir(parents=True, exist_ok=True)
    if kind in EVAL_KINDS:  # an eval store, by its shape: runs.jsonl and a run's metadata
        (run / "runs.jsonl").write_text('{"run_id": "e1"}\n')
        if kind != "eval_metadata":
            (run / EVAL_RUN / "metadata.json").write_text('{"run_id": "e1"}')
    elif kind != "config":
        (run / "config.json").write_text("{}")
    (run / rel).write_bytes(data)
    if os.environ.get("HOSTILE_DUMP"):
        Path(os.environ["HOSTILE_DUMP"]).write_bytes(repr((kind, rel, data, split)).encode())
    try:
        res = process(run, rel)
        check_result(res, kind, rel, data)
        if kind in APPEND_ONLY and res.entry is not None:
            # The same bytes in two reads: first up to a cut, then the rest appended.
            cut = int(len(data) * split)
            (run / rel).write_bytes(data[:cut])
            first = process(run, rel)
            check_result(first, kind, rel, data[:cut])
            with open(run / rel, "ab") as f:
                f.write(data[cut:])
            os.utime(run / rel, ns=(1, 10 ** 18))  # a new mtime, whatever the clock says
            entry = first.entry
            second = process(run, rel, entry)
            if entry is not None and cut == len(data):
                # Nothing appended, yet the mtime moved: rewritten in place, so read whole.
                check_result(second, kind, rel, data)
                assert second.deletes, "a same-size rewrite must replace the file's rows"
            elif entry is not None:
                consumed = data[:entry.offset]
                check_result(second, kind, rel, data[entry.offset:], first_line=entry.lines + 1)
                assert consumed.count(b"\n") == entry.lines
    finally:
        shutil.rmtree(run)


# ---------------------------------------------------------------------------------------------
# Tier 2: real ingests into a store that already holds good runs

TABLES = list(schema.TABLES)


class Base(dict):
    """The templates and the rows they hold (a short repr: hypothesis prints its arguments)."""

    def __repr__(self) -> str:
        return f"Base({self['tree']})"


CONFIG_COLS = "run_id, kind, model_name, learning_rate, config"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory,
         deleter: ThreadPoolExecutor) -> dict[str, Any]:
    """A good tree and a store holding it, as templates; per case they are copied back to
    the same paths (run ids are hashes of the paths; copies keep every mtime). The rows the
    template holds, and its runs' configs, are read once: nothing writes the templates."""
    top = tmp_path_factory.mktemp("hostile_ingest")
    tree_t, store_t = top / "tree_template", top / "store_template"
    demo.generate_tree(tree_t, SMALL_SPECS, seed=3)
    tree, store = top / "tree", top / "store"
    shutil.copytree(tree_t, tree)
    runstore.open(store).ingest([tree])
    shutil.copytree(store, store_t)
    rows = rows_of(runstore.open(store))
    configs = runstore.open(store_t).arrow(f"select {CONFIG_COLS} from runs").to_pylist()
    return Base(tree=tree, store=store, tree_t=tree_t, store_t=store_t, rows=rows,
                configs=configs, used=top / "used", deleter=deleter)


def rows_of(store: runstore.Store) -> dict[str, Counter]:
    out = {}
    for t in TABLES:
        # One query per table (asking for the column names first cost as much again).
        rows = store.arrow(f"select * from {t}")
        rows = rows.drop_columns([c for c in ("ingested_at", "status", "source_updated_at")
                                  if c in rows.column_names])
        out[t] = Counter(tuple(repr(v) for v in r.values()) for r in rows.to_pylist())
    return out


def reset(base: dict[str, Any]) -> None:
    """The tree and the store as their templates (the last case's are moved aside, a
    rename, for the deleter)."""
    used = base["used"] / str(CASES["ingest"])
    used.mkdir(parents=True)
    for key in ("tree", "store"):
        base[key].rename(used / key)
        shutil.copytree(base[key + "_t"], base[key], symlinks=True)
    base["deleter"].submit(shutil.rmtree, used)


GOOD_RUNS = ["a/rl_dirs", "a/rl_flat", "b/c/sl"]
ODD_ENTRIES = ["dir:metrics.jsonl", "dir:iteration_000002/train_logtree.json",
               "fifo:trace_events.jsonl", "devzero:timing_spans.jsonl",
               "dangling:checkpoints.jsonl", "loop:iteration_000009", "dir:config.json"]


@st.composite
def ingest_case(draw: st.DrawFn) -> list[tuple[str, Any]]:
    actions: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(1, 4))):
        what = draw(st.sampled_from(["new_run", "append", "rewrite", "odd"]))
        if what == "new_run":
            files = draw(st.lists(hostile_file(kinds=RUN_KINDS), min_size=1, max_size=3,
                                  unique_by=lambda c: c[1]))
            actions.append(("new_run", files))
        elif what == "append":
            kind = draw(st.sampled_from(sorted(APPEND_ONLY & set(RUN_KINDS))))
            _, _, data = draw(hostile_file(kind))
            actions.append(("append", (draw(st.sampled_from(GOOD_RUNS)), KINDS[kind][0],
                                       data)))
        elif what == "rewrite":
            actions.append(("rewrite", (draw(st.sampled_from(GOOD_RUNS)),
                                        draw(st.sampled_from(["config.json", "logtree",
                                                              "rollouts"])),
                                        draw(st.integers(0, 10 ** 6)))))
        else:
            actions.append(("odd", (draw(st.sampled_from(["hostile_odd"] + GOOD_RUNS)),
                                    draw(st.sampled_from(ODD_ENTRIES)))))
    return actions


def apply(tree: Path, actions: list[tuple[str, Any]]) -> tuple[set[str], list[tuple[str, bytes]]]:
    """Make the changes; (files rewritten with garbage, appended (path, bytes))."""
    rewritten: set[str] = set()
    appended: list[tuple[str, bytes]] = []
    for n, (what, arg) in enumerate(actions):
        if what == "new_run":
            run = tree / f"hostile{n}"
            run.mkdir()
            if not any(rel == "config.json" for _, rel, _ in arg):
                (run / "config.json").write_text('{"loss_fn": "x"}')
            for _, rel, data in arg:
                (run / rel).parent.mkdir(parents=True, exist_ok=True)
                (run / rel).write_bytes(data)
        elif what == "append":
            name, rel, data = arg
            path = tree / name / rel
            if path.is_file():
                with open(path, "ab") as f:
                    f.write(data)
                appended.append((f"{name}/{rel}", data))
        elif what == "rewrite":
            name, which, cut = arg
            run = tree / name
            files = {"config.json": [run / "config.json"],
                     "logtree": sorted(run.rglob("*_logtree.json")),
                     "rollouts": sorted(run.rglob("*_rollout_summaries.jsonl"))}[which]
            # An earlier `odd` action may have put a directory or a link at such a name.
            files = [p for p in files if p.is_file() and not p.is_symlink()]
            if files:
                path = files[cut % len(files)]
                data = path.read_bytes()
                # Cut inside the JSON (never parseable) or garbage: nothing in it reads.
                garbage = data[: 1 + cut % max(1, len(data) - 2)] if which != "rollouts" \
                    else b"\xff" + data[: cut % max(1, len(data))].replace(b"\n", b" ")
                path.write_bytes(garbage)
                rewritten.add(path.relative_to(tree).as_posix())
        else:
            name, odd = arg
            run = tree / name
            run.mkdir(exist_ok=True)
            if name == "hostile_odd" and odd != "dir:config.json" \
                    and not (run / "config.json").exists():
                (run / "config.json").write_text("{}")
            how, rel = odd.split(":")
            path = run / rel
            if path.exists() or path.is_symlink():
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            if how == "dir":
                path.mkdir()
                (path / "inner.jsonl").write_text('{"step": 1}\n')
            elif how == "fifo":
                os.mkfifo(path)
            elif how == "devzero":
                path.symlink_to("/dev/zero")
            elif how == "dangling":
                path.symlink_to(run / "no_such_file")
            elif how == "loop":
                path.symlink_to(run)
    return rewritten, appended


def contains(big: Counter, small: Counter) -> bool:
    return not (small - big)


@pytest.mark.slow
@settings(max_examples=INGEST_CASES, **SETTINGS)
@given(actions=ingest_case())
# A directory where a logtree was, then a rewrite of "the" logtree (found by CI's longer run).
@example(actions=[("odd", ("a/rl_dirs", "dir:iteration_000002/train_logtree.json")),
                  ("rewrite", ("a/rl_dirs", "logtree", 5816))])
# Lines appended to a plain-text log are no JSON, and no mistake (found after logs.log came).
@example(actions=[("append", ("b/c/sl", "logs.log",
                              b"root:791 [INFO] Command line invocation: a.py\n"
                              b"root:791 [INFO] Command line invocation: a.py"))])
def test_hostile_ingest(base: dict[str, Any], actions: list[tuple[str, Any]]) -> None:
    CASES["ingest"] += 1
    reset(base)
    tree, store_path = base["tree"], base["store"]
    rewritten, appended = apply(tree, actions)
    store = runstore.open(store_path)
    warnings: list[str] = []
    report = store.ingest([tree], on_warning=warnings.append)
    assert report.warnings == warnings
    assert all("\n" not in w and WARNING.match(w) for w in warnings), warnings
    text_files = {name for name, how, _ in KINDS.values() if how == "text"}
    for rel, data in appended:
        if rel.rsplit("/", 1)[-1] in text_files:
            continue  # plain text (logs.log, code.diff): every line is a line, none is bad JSON
        # Appended lines are numbered after the good ones already read.
        start = (tree / rel).read_bytes()[: -len(data) or None].count(b"\n") if data else 0
        got = warned_lines(warnings, rel)
        assert {start + i for i in bad_lines(data, True)} <= got, (rel, warnings)
    for rel in rewritten:
        assert any(w.startswith(rel) for w in warnings), (rel, warnings)
    # A timing step logged again replaces the spans stored for it (a resumed run): those
    # baseline rows may go, by design.
    relogged = set()
    for rel, data in appended:
        if rel.endswith("timing_spans.jsonl"):
            rid = repr(run_id_for(str((tree / rel).parent.resolve())))
            for _, raw in complete_lines(data, True):
                ok, obj = decode(raw)
                if ok and isinstance(obj, dict) and isinstance(obj.get("spans"), list):
                    relogged.add((rid, repr(obj.get("step"))))
    # Every row stored before is still stored (runs rows are rewritten for updated runs:
    # their ids stay).
    now = rows_of(store)
    for t in TABLES:
        # A summary's rows are per read of a file: when a grown file is read whole again (the
        # tree was copied back, so its files have new inode numbers), its rows are made again
        # for the whole file; what they add up to is checked in tests/ingest/test_summaries.py.
        if t == "runs" or t in schema.SUMMARY_TABLES:
            continue
        before = base["rows"][t]
        if t == "spans":
            before = Counter({r: n for r, n in before.items() if r[:2] not in relogged})
        assert contains(now[t], before), (t, list(before - now[t])[:3])
    ids_before = {r[0] for r in base["rows"]["runs"]}
    assert ids_before <= {r[0] for r in now["runs"]}
    # What the good runs' configs said stays said (their config.json only ever gets garbage).
    new = {r["run_id"]: r for r in store.arrow(f"select {CONFIG_COLS} from runs").to_pylist()}
    assert all(new[r["run_id"]] == r for r in base["configs"])
    again = store.ingest([tree], on_warning=lambda w: None)
    assert not any(again.rows_added.values()), again.rows_added


def test_report_case_count() -> None:
    """Runs last in this module: the number of generated cases, for the terminal summary."""
    total = CASES["file"] + CASES["ingest"]
    REPORT["hostile cases"] = total
    REPORT["hostile cases (per-file / full ingest)"] = f"{CASES['file']} / {CASES['ingest']}"
    print(f"hostile cases: {total} ({CASES['file']} per-file, {CASES['ingest']} full ingest)")
