"""One odd value, in any artifact, costs at most itself (issue 12, items 2 and 8).

Through real ingests (the CLI and the Python API): integers past 2^53, 2^63, 2^64, the largest
double and Python's 4,300-digit conversion limit in a metrics file large enough for the fast
path (before, one of them stopped every ingest of the tree with a traceback); brackets in
text (before, a logtree whose messages held more than 512 unbalanced brackets lost all its
conversations as "nested too deeply"); and the same class of value in every other artifact.
Expected values are computed here from the written values (Python's `float`, `json.loads`),
and the runs beside the odd one must hold exactly what `oracle` reads from them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import oracle
import runstore
from runstore.ingest.normalize import metrics
from storekit import cli
from test_ingest import RL_CONFIG, counts, expected, make_run, run_id

GOOD = b"".join(json.dumps({"step": i, "loss": 1.0 / (i + 1)}).encode() + b"\n"
                for i in range(5))
# `t` fits int64 (pyarrow reads a column of integers), `u` does not (a column of doubles).
T = [2 ** 53 + 1, -(2 ** 53) - 3, 2 ** 63 - 1, -(2 ** 63), 1_700_000_000_123_456_789]
U = [2 ** 63, -(2 ** 63) - 1, 2 ** 64 + 1, 10 ** 30, 10 ** 400]
HUGE = "9" * 5000  # past Python's int conversion limit: json.loads refuses it by default


def huge_metrics(lines: int) -> bytes:
    out = []
    for i in range(lines):
        u = HUGE if i == 3 else str(U[i % 5])
        out.append(f'{{"step": {i}, "t": {T[i % 5]}, "u": {u}, "pad": "{"x" * 40}"}}')
    return "\n".join(out).encode() + b"\n"


def nearest_double(text: str) -> float:
    """The double a JSON integer is stored as: the nearest one, ±inf past the largest."""
    return float(text)  # Python's float() of the digits: correctly rounded, overflows to inf


def invoke(*args: str) -> object:
    result = cli(None, *args, catch_exceptions=True)
    assert "Traceback" not in (result.stdout + result.stderr), result.stderr
    return result


def stored_values(store: runstore.Store, rid: str) -> dict[tuple[int, str], tuple]:
    rows = store.arrow("select step, key, value, value_str from metrics_raw where run_id = $rid",
                       {"rid": rid}).to_pylist()
    return {(r["step"], r["key"]): (r["value"], r["value_str"]) for r in rows}


def test_big_integers_in_a_large_metrics_file_are_stored_like_any_number(
        tmp_path: Path, store_path: Path) -> None:
    root = tmp_path / "runs"
    big = huge_metrics(3000)
    assert len(big) >= metrics.SMALL  # the fast path's size
    small = huge_metrics(6)
    assert len(small) < metrics.SMALL  # the line decoder's
    runs = {"big": make_run(root, "big", {"config.json": RL_CONFIG, "metrics.jsonl": big}),
            "small": make_run(root, "small", {"config.json": RL_CONFIG, "metrics.jsonl": small}),
            "good": make_run(root, "good", {"config.json": RL_CONFIG, "metrics.jsonl": GOOD})}
    for attempt in range(2):  # before, every later ingest failed the same way
        result = invoke("--store", str(store_path), "ingest", str(root))
        assert result.exit_code == 0, result.stderr
        assert "warning:" not in result.stderr, result.stderr
    store = runstore.open(store_path)
    assert counts(store, run_id(store, runs["good"])) == expected(runs["good"], one_run=True)
    for name, lines in (("big", 3000), ("small", 6)):
        got = stored_values(store, run_id(store, runs[name]))
        assert len(got) == 3 * lines
        for i in range(lines):
            u = HUGE if i == 3 else str(U[i % 5])
            assert got[(i, "t")] == (nearest_double(str(T[i % 5])), None)
            assert got[(i, "u")] == (nearest_double(u), None)
    # The fast and the line path agree on the lines both files share.
    big_rows = stored_values(store, run_id(store, runs["big"]))
    small_rows = stored_values(store, run_id(store, runs["small"]))
    assert {k: v for k, v in big_rows.items() if k[0] < 6} == small_rows
    # And through the Python API into another store, the same rows.
    other = runstore.open(tmp_path / "store2")
    report = other.ingest([root])
    assert report.warnings == []
    assert stored_values(other, run_id(other, runs["big"])) == big_rows
    # The numbers are numbers to the views: the live `metrics` view has them all.
    live = store.sql("select count(*) as n from metrics m join runs r using (run_id) "
                     "where r.run_name = 'big' and m.value is not null")
    assert live["n"][0] == 2 * 3000  # `t` and `u` (`pad` is a string)


BRACKETS = "\x1b[31m[ERROR]\x1b[0m " * 1500 + "[" * 2000 + '{\\"' + "\\" * 3


def logtree_bytes(texts: list[str]) -> bytes:
    """A logtree (indent=2, as upstream writes it) with one conversation per text."""
    kids = [{"tag": "div", "attrs": {}, "children": [],
             "data": {"type": "conversation",
                      "messages": [{"role": "user", "content": t},
                                   {"role": "assistant", "content": t + "]}"}]}}
            for t in texts]
    tree = {"title": "RL Iteration 0", "started_at": "2026-01-01T00:00:00.000000", "path": None,
            "root": {"tag": "body", "attrs": {}, "children": kids}}
    return json.dumps(tree, indent=2).encode()


def deep_logtree(levels: int) -> bytes:
    """A conversation `levels` nodes down (two JSON levels a node), written as text: too deep
    for `json.dumps` to write it."""
    leaf = json.dumps({"tag": "div", "attrs": {}, "children": [], "data": {
        "type": "conversation", "messages": [{"role": "user", "content": "deep"}]}})
    return ('{"title": "t", "root": ' + '{"tag": "div", "attrs": {}, "children": [' * levels
            + leaf + "]}" * levels + "}").encode()


def test_brackets_in_text_never_make_a_file_unreadable(tmp_path: Path,
                                                       store_path: Path) -> None:
    """Transcripts, metric strings and config strings full of unbalanced brackets are stored
    whole; a logtree that truly nests too deeply is refused by name, and nothing else of its
    run, or of the others, is lost."""
    root = tmp_path / "runs"
    texts = [BRACKETS, "{" * 5000, "]" * 700 + "[" * 700, "plain"]
    metrics_line = json.dumps({"step": 0, "note": "[" * 3000, "loss": 0.5}).encode() + b"\n"
    config = json.dumps({"loss_fn": "ppo", "model_name": "[" * 600 + "m",
                         "prompt": "{" * 2000}, indent=2)
    text_run = make_run(root, "text", {
        "config.json": config, "metrics.jsonl": metrics_line,
        "iteration_000000/train_logtree.json": logtree_bytes(texts),
    })
    # 1500 levels: past the bound, and past what Python's own decoder takes (so `oracle`,
    # which uses it, expects no conversation from it either).
    deep_run = make_run(root, "deep", {
        "config.json": RL_CONFIG, "metrics.jsonl": GOOD,
        "iteration_000000/train_logtree.json": deep_logtree(750),
        "iteration_000001/train_logtree.json": logtree_bytes(["fine"]),
    })
    store = runstore.open(store_path)
    report = store.ingest([root])
    assert report.warnings == ["deep/iteration_000000/train_logtree.json: logtree JSON is "
                               "nested too deeply to parse; skipped"]
    assert counts(store) == expected(root)
    rid = run_id(store, text_run)
    rows = store.arrow("select c.conversation_id, m.message_idx, m.content from messages m "
                       "join conversations c using (conversation_id) where c.run_id = $rid",
                       {"rid": rid}).to_pylist()
    got = {(int(r["conversation_id"].split(":")[1]), r["message_idx"]): r["content"]
           for r in rows}
    want = {}
    for k, t in enumerate(texts):
        want[(k, 0)], want[(k, 1)] = t, t + "]}"
    assert got == want
    note = store.sql("select value_str from metrics_raw where run_id = $rid and key = 'note'",
                     {"rid": rid})
    assert note["value_str"].to_list() == ["[" * 3000]
    cfg = store.sql("select model_name from runs where run_id = $rid", {"rid": rid})
    assert cfg["model_name"].to_list() == ["[" * 600 + "m"]
    assert counts(store, run_id(store, deep_run))["conversations"] == 1  # the other logtree


ODD = {
    # artifact: files of a run holding one odd value each (besides good ones)
    "metrics": {"metrics.jsonl": huge_metrics(3000)},
    "timing": {"timing_spans.jsonl": (
        '{"step": 0, "spans": [{"name": "a", "duration": ' + HUGE + ', "wall_start": 1e400, '
        '"wall_end": -0}]}\n{"step": 1, "spans": [{"name": "b", "duration": 1' + "0" * 400
        + ', "wall_start": 0.0, "wall_end": 1.0}]}\n')},
    "trace": {"trace_events.jsonl": (
        '{"name": "a", "ph": "X", "pid": 18446744073709551616, "tid": 1, "ts": 1.0, "dur": 1}\n'
        '{"name": "b", "ph": "X", "pid": 0, "tid": 1, "ts": ' + HUGE + ', "dur": 1}\n'
        '{"name": "c", "ph": "B", "pid": 0, "tid": 1, "ts": 2.0, "args": {"track": "T", '
        '"big": ' + HUGE + ', "n": 1' + "0" * 400 + '}}\n')},
    "checkpoints": {"checkpoints.jsonl": (
        '{"name": "000001", "batch": "' + "1" * 5000 + '", "epoch": ' + HUGE + '}\n'
        '{"name": ' + HUGE + ', "batch": 18446744073709551616, "final": true}\n')},
    "rollouts": {"iteration_000001/train_rollout_summaries.jsonl": (
        '{"split": "train", "iteration": ' + HUGE + ', "group_idx": 0, "traj_idx": 0, '
        '"total_reward": 1' + "0" * 400 + ', "steps": [{"step_idx": 0, "ob_len": '
        + HUGE + ', "reward": ' + HUGE + ', "metrics": {"x": ' + HUGE + '}}]}\n')},
    "config": {"config.json": ('{"loss_fn": "ppo", "learning_rate": ' + HUGE
                               + ', "seed": 1' + "0" * 400 + ', "n": 18446744073709551616}')},
    "logtree": {"iteration_000001/train_logtree.json": json.dumps({
        "title": "t", "root": {"tag": "section", "attrs": {}, "children": [
            {"tag": "h2", "attrs": {}, "children": ["Group Rollout"]},
            {"tag": "div", "attrs": {}, "children": [], "data": {
                "type": "conversation", "messages": [{"role": "user", "content": BRACKETS}]}},
            {"tag": "section", "attrs": {}, "children": [
                {"tag": "h3", "attrs": {}, "children": ["Trajectory Details"]},
                {"tag": "section", "attrs": {}, "children": [
                    {"tag": "h4", "attrs": {}, "children": ["Trajectory " + HUGE + " Episode"]}
                ]}]}]}})},
    "capture": {"capture/train_op.jsonl": (
        '{"kind": "train_op", "op": "optim_step", "scope": {"run_attempt": 0}, '
        '"created_at": -1' + "0" * 400 + ', "status": "ok", "latency_sec": 1.0}\n'
        '{"kind": "train_op", "op": "forward_backward", "scope": {"run_attempt": 0}, '
        '"created_at": 1790411424.5, "status": "ok", "latency_sec": ' + HUGE + '}\n')},
    "file name": {"train_iteration_99999999999999999999_rollout_summaries.jsonl": (
        '{"split": "train", "group_idx": 0, "traj_idx": 0, "steps": []}\n')},
}


@pytest.mark.parametrize("artifact", list(ODD))
def test_one_odd_value_in_any_artifact_stops_nothing(tmp_path: Path, store_path: Path,
                                                     artifact: str) -> None:
    root = tmp_path / "runs"
    files = {"config.json": RL_CONFIG, "metrics.jsonl": GOOD, **ODD[artifact]}
    odd = make_run(root, "odd", files)
    good = make_run(root, "good", {"config.json": RL_CONFIG, "metrics.jsonl": GOOD})
    store = runstore.open(store_path)
    store.ingest([root], on_warning=lambda w: None)
    # The good run is whole, and the odd run's good files are too.
    assert counts(store, run_id(store, good)) == expected(good, one_run=True)
    rid = run_id(store, odd)
    if "metrics.jsonl" not in ODD[artifact]:
        assert counts(store, rid)["metrics_raw"] == 5
    # One row (or value) per odd record, not one file lost: what each artifact keeps.
    one = lambda q: store.sql(q, {"rid": rid}).rows()  # noqa: E731
    if artifact == "metrics":
        assert one("select count(*) from metrics_raw where run_id = $rid")[0][0] == 3 * 3000
    elif artifact == "timing":
        assert one("select step, duration_s, wall_start_s from spans where run_id = $rid "
                   "order by step") == [(0, math.inf, math.inf), (1, math.inf, 0.0)]
    elif artifact == "trace":
        assert one("select name from trace_slices where run_id = $rid") == [("c",)]
    elif artifact == "checkpoints":
        assert one("select batch, epoch, name, seq from checkpoints where run_id = $rid "
                   "order by seq") == [(None, None, "000001", 1), (None, None, None, 2)]
    elif artifact == "rollouts":
        assert one("select iteration, total_reward from trajectories where run_id = $rid") \
            == [(1, math.inf)]
        assert one("select ob_len, reward from rollout_steps where run_id = $rid") \
            == [(None, math.inf)]
    elif artifact == "config":
        assert one("select kind, learning_rate from runs where run_id = $rid") \
            == [("rl", math.inf)]
        assert one("select value_num from config where run_id = $rid and key = 'n'") \
            == [(float(2 ** 64),)]
    elif artifact == "logtree":
        assert one("select content from messages where run_id = $rid") == [(BRACKETS,)]
    elif artifact == "capture":
        # A time past a double's range is no time (it once stopped the file with an
        # OverflowError); the record is kept, as the one beside it.
        assert one("select op, created_at is null from capture_events where run_id = $rid "
                   "order by seq") == [("optim_step", True), ("forward_backward", False)]
    elif artifact == "file name":
        assert one("select iteration, split from trajectories where run_id = $rid") \
            == [(None, "train")]
    again = store.ingest([root], on_warning=lambda w: None)
    assert not any(again.rows_added.values()) and again.bytes_read == 0
    assert len(oracle.run_dirs(root)) == 2
