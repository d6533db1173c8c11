"""Unit tests for the normalizers: config, checkpoints, rollouts, logtree, trace, timing spans.

Expected rows are written out by hand from the inputs (not computed with the code under test).
The last section runs over the real sample runs when `../shared/sample-runs` exists.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from pathlib import Path

import pytest

from runstore.storage import schema
from runstore.ingest.normalize.base import Context
from runstore.ingest.normalize import checkpoints, config, logtree, rollouts, timing, trace

RUN = "run-1"
SRC = 42


def make_ctx(rel_path: str = "f", split: str | None = None, iteration: int | None = None) -> Context:
    return Context(run_id=RUN, source_id=SRC, rel_path=rel_path, split=split, iteration=iteration)


BASE = {"run_id": RUN, "source_id": SRC}
NO_MSG_EXTRAS = {"tool_call_id": None, "name": None, "trainable": None}
NO_STEP_EXTRAS = {"stop_reason": None, "extra": None}


def lines(*objs):
    """(line_number, object) pairs, 1-based, as `runstore.ingest.parse.records` yields them."""
    return list(enumerate(objs, start=1))


# =============================================================================================
# config


CONFIG_BYTES = b"""{
  "learning_rate": 1e-05,
  "dataset_builder": {
    "__type__": "pkg.recipes.math_rl.math_env.MathDatasetBuilder",
    "group_size": 4,
    "inner": {}
  },
  "model_name": "meta-llama/Llama-3.1-8B-Instruct",
  "evaluator_builders": [{"name": "aime"}],
  "enable_trace": true,
  "kl": NaN,
  "label": "caf\\u00e9",
  "wandb_project": null,
  "loss_fn": "importance_sampling"
}"""


def test_config_rows_flatten_nested_dicts_and_type_each_leaf():
    ctx = make_ctx("config.json")
    rows = config.normalize(CONFIG_BYTES, ctx)["config"]
    assert ctx.warnings == []
    by_key = {r["key"]: r for r in rows}
    assert [r["key"] for r in rows] == [
        "learning_rate",
        "dataset_builder.__type__",
        "dataset_builder.group_size",
        "dataset_builder.inner",
        "model_name",
        "evaluator_builders",
        "enable_trace",
        "kl",
        "label",
        "wandb_project",
        "loss_fn",
    ]
    expect = {
        "learning_rate": ("1e-05", 1e-05, None),
        "dataset_builder.__type__": (
            '"pkg.recipes.math_rl.math_env.MathDatasetBuilder"',
            None,
            "pkg.recipes.math_rl.math_env.MathDatasetBuilder",
        ),
        "dataset_builder.group_size": ("4", 4.0, None),
        "dataset_builder.inner": ("{}", None, None),
        "model_name": ('"meta-llama/Llama-3.1-8B-Instruct"', None, "meta-llama/Llama-3.1-8B-Instruct"),
        "evaluator_builders": ('[{"name": "aime"}]', None, None),
        "enable_trace": ("true", 1.0, None),
        "label": ('"café"', None, "café"),
        "wandb_project": ("null", None, None),
        "loss_fn": ('"importance_sampling"', None, "importance_sampling"),
    }
    for key, (value, num, text) in expect.items():
        row = by_key[key]
        assert (row["value"], row["value_num"], row["value_str"]) == (value, num, text), key
        assert row["run_id"] == RUN and row["source_id"] == SRC
    assert by_key["kl"]["value"] == "NaN" and math.isnan(by_key["kl"]["value_num"])
    schema.to_arrow("config", rows)  # exactly the table's columns


def test_config_summarize():
    ctx = make_ctx("config.json")
    summary = config.summarize(CONFIG_BYTES, ctx)
    assert summary["kind"] == "rl"
    assert summary["model_name"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert summary["learning_rate"] == 1e-05
    text = summary["config_json"]
    assert "\n" not in text  # compact
    back = json.loads(text)
    assert back["dataset_builder"]["group_size"] == 4 and math.isnan(back["kl"])


def test_config_summarize_ignores_non_numeric_learning_rate_and_model_name():
    s = config.summarize(b'{"learning_rate": "1e-4", "model_name": 7}', make_ctx())
    assert s["learning_rate"] is None and s["model_name"] is None
    s = config.summarize(b'{"learning_rate": true}', make_ctx())
    assert s["learning_rate"] is None
    s = config.summarize(b'{"learning_rate": 3}', make_ctx())
    assert s["learning_rate"] == 3.0


@pytest.mark.parametrize(
    "cfg, kind",
    [
        ({"dpo_beta": 0.1, "loss_fn": "x", "num_epochs": 1}, "dpo"),
        ({"loss_fn": "ppo", "num_epochs": 1}, "rl"),
        ({"num_epochs": 3}, "sl"),
        ({"x": {"dpo_beta": 0.1, "loss_fn": "x"}}, "unknown"),  # top-level keys only
        ({"dataset_builder": {"__type__": "tinker_cookbook.recipes.math_rl.math_env.MathDatasetBuilder"}}, "rl"),
        ({"dataset_builder": {"__type__": "pkg.tool_use.Gsm8kToolRLDatasetBuilder"}}, "rl"),
        ({"dataset_builder": {"__type__": "pkg.SupervisedDatasetBuilder"}}, "sl"),
        ({"dataset_builder": {"__type__": "pkg.recipes.chat_sl.chat_datasets.Tulu3Builder"}}, "sl"),
        ({"dataset_builder": {"__type__": "pkg.preference.dpo_datasets.DPODatasetBuilderFromComparisons"}}, "dpo"),
        ({"dataset_builder": {"__type__": "pkg.preference.ComparisonBuilder"}}, "dpo"),
        ({"dataset_builder": {"__type__": "pkg.data.Thing"}}, "unknown"),
        ({"dataset_builder": {"__type__": 3}}, "unknown"),
        ({"dataset_builder": "not a dict"}, "unknown"),
        ({}, "unknown"),
    ],
)
def test_infer_kind(cfg, kind):
    assert config.infer_kind(cfg) == kind


@pytest.mark.parametrize("data", [b"", b"   \n", b'{"learning_rate": 1e-4, "mod', b"[1, 2]", b'"text"', b"\xff\xfe\x00garbage"])
def test_config_bad_input_warns_and_yields_nothing(data):
    ctx = make_ctx("config.json")
    assert config.normalize(data, ctx) == {"config": []}
    assert len(ctx.warnings) == 1 and ctx.warnings[0].startswith("config.json: ")
    ctx = make_ctx("config.json")
    assert config.summarize(data, ctx) == {
        "config_json": None,
        "kind": "unknown",
        "model_name": None,
        "learning_rate": None,
    }
    assert len(ctx.warnings) == 1


# =============================================================================================
# checkpoints


def test_checkpoints_known_keys_extra_and_bad_types():
    ctx = make_ctx("checkpoints.jsonl")
    recs = lines(
        {"name": "000020", "batch": 20, "state_path": "tinker://m/weights/000020",
         "sampler_path": "tinker://m/sampler_weights/000020"},
        {"name": "000010", "batch": 10, "epoch": 0, "state_path": "tinker://m/weights/000010",
         "elapsed_tokens": 123, "rolling": True},
        {"name": "final", "batch": "abc", "epoch": 1.0, "final": "yes",
         "cumulative_tokens": {"sampled": 5, "trained": 7}},
        [1, 2],
        {"batch": "7"},
    )
    rows = checkpoints.normalize(recs, ctx)["checkpoints"]
    assert rows == [
        {**BASE, "seq": 1, "name": "000020", "batch": 20, "epoch": None, "final": None,
         "state_path": "tinker://m/weights/000020", "sampler_path": "tinker://m/sampler_weights/000020",
         "rolling": None, "extra": None},
        {**BASE, "seq": 2, "name": "000010", "batch": 10, "epoch": 0, "final": None,
         "state_path": "tinker://m/weights/000010", "sampler_path": None, "rolling": True,
         "extra": '{"elapsed_tokens": 123}'},
        {**BASE, "seq": 3, "name": "final", "batch": None, "epoch": 1, "final": None,
         "state_path": None, "sampler_path": None, "rolling": None,
         "extra": '{"cumulative_tokens": {"sampled": 5, "trained": 7}}'},
        {**BASE, "seq": 5, "name": None, "batch": 7, "epoch": None, "final": None,
         "state_path": None, "sampler_path": None, "rolling": None, "extra": None},
    ]
    assert len(ctx.warnings) == 2
    assert ctx.warnings[0].startswith("checkpoints.jsonl:3: ") and "batch" in ctx.warnings[0] and "final" in ctx.warnings[0]
    assert ctx.warnings[1].startswith("checkpoints.jsonl:4: ")
    schema.to_arrow("checkpoints", rows)


# =============================================================================================
# rollouts


# Fields of newer rollout summary versions (absent from schema_version 1 records).
NO_NEWER_FIELDS = {"status": None, "error_type": None, "error_message": None,
                   "stop_reason": None, "model_name": None, "conversation": None}


def test_rollouts_rows():
    ctx = make_ctx("iteration_000003/train_rollout_summaries.jsonl", split="train", iteration=3)
    good = {
        "schema_version": 1, "split": "eval/test", "iteration": 20, "group_idx": 1, "traj_idx": 2,
        "tags": ["gsm8k", "hard"], "sampling_client_step": 19, "total_reward": 1.0, "final_reward": 1.0,
        "trajectory_metrics": {"correct": 1.0, "num_tool_calls": 2},
        "steps": [
            {"step_idx": 0, "ob_len": 225, "ac_len": 303, "reward": 0.0, "episode_done": False,
             "metrics": {"tool_call_ok": 1.0}, "logs": {"tool_output": "1188", "latency_ms": 59}},
            {"step_idx": 1, "ob_len": 547, "ac_len": 139, "reward": 0.5, "episode_done": True,
             "metrics": {}, "logs": {}},
        ],
        "final_ob_len": 0,
    }
    minimal = {"group_idx": 0, "traj_idx": 0, "total_reward": float("-inf"), "steps": []}
    rows = rollouts.normalize(lines(good, minimal), ctx)
    assert ctx.warnings == []
    assert rows["trajectories"] == [
        {**BASE, "split": "eval/test", "iteration": 20, "group_idx": 1, "traj_idx": 2,
         "tags": ["gsm8k", "hard"], "sampling_client_step": 19, "total_reward": 1.0, "final_reward": 1.0,
         "final_ob_len": 0, "n_steps": 2, "metrics": '{"correct": 1.0, "num_tool_calls": 2}',
         **NO_NEWER_FIELDS},
        {**BASE, "split": "train", "iteration": 3, "group_idx": 0, "traj_idx": 0, "tags": None,
         "sampling_client_step": None, "total_reward": float("-inf"), "final_reward": None,
         "final_ob_len": None, "n_steps": 0, "metrics": None, **NO_NEWER_FIELDS},
    ]
    assert rows["rollout_steps"] == [
        {**BASE, "split": "eval/test", "iteration": 20, "group_idx": 1, "traj_idx": 2, "step_idx": 0,
         "ob_len": 225, "ac_len": 303, "reward": 0.0, "episode_done": False,
         "metrics": '{"tool_call_ok": 1.0}', "logs": '{"tool_output": "1188", "latency_ms": 59}', **NO_STEP_EXTRAS},
        {**BASE, "split": "eval/test", "iteration": 20, "group_idx": 1, "traj_idx": 2, "step_idx": 1,
         "ob_len": 547, "ac_len": 139, "reward": 0.5, "episode_done": True, "metrics": "{}", "logs": "{}", **NO_STEP_EXTRAS},
    ]
    schema.to_arrow("trajectories", rows["trajectories"])
    schema.to_arrow("rollout_steps", rows["rollout_steps"])


def test_rollouts_wrong_types_are_coerced_or_nulled_with_one_warning_per_line():
    ctx = make_ctx("train_iteration_000005_rollout_summaries.jsonl", split="train", iteration=5)
    bad = {
        "split": 7, "iteration": "five", "group_idx": "x", "traj_idx": 2.0, "tags": "solo",
        "total_reward": "bad", "final_reward": True, "sampling_client_step": 4.5,
        "trajectory_metrics": {"m": float("nan")},
        "steps": ["not a step", {"ob_len": 3.0, "ac_len": True, "reward": 1, "episode_done": 1,
                                 "metrics": {"a": float("nan")}, "logs": None}],
    }
    rows = rollouts.normalize(lines(bad, "not an object", {"steps": {"a": 1}}), ctx)
    assert rows["trajectories"] == [
        {**BASE, "split": "train", "iteration": 5, "group_idx": None, "traj_idx": 2, "tags": ["solo"],
         "sampling_client_step": None, "total_reward": None, "final_reward": None, "final_ob_len": None,
         "n_steps": 2, "metrics": '{"m": NaN}', **NO_NEWER_FIELDS},
        {**BASE, "split": "train", "iteration": 5, "group_idx": None, "traj_idx": None, "tags": None,
         "sampling_client_step": None, "total_reward": None, "final_reward": None, "final_ob_len": None,
         "n_steps": None, "metrics": None, **NO_NEWER_FIELDS},
    ]
    assert rows["rollout_steps"] == [
        {**BASE, "split": "train", "iteration": 5, "group_idx": None, "traj_idx": 2, "step_idx": 1,
         "ob_len": 3, "ac_len": None, "reward": 1.0, "episode_done": True, "metrics": '{"a": NaN}',
         "logs": None, **NO_STEP_EXTRAS},
    ]
    per_line = Counter(w.split(": ", 1)[0] for w in ctx.warnings)
    assert per_line == {
        "train_iteration_000005_rollout_summaries.jsonl:1": 1,
        "train_iteration_000005_rollout_summaries.jsonl:2": 1,
        "train_iteration_000005_rollout_summaries.jsonl:3": 1,
    }
    for field in ("split", "iteration", "group_idx", "total_reward", "final_reward",
                  "sampling_client_step", "steps[0]", "steps[1].ac_len"):
        assert field in ctx.warnings[0], field


# =============================================================================================
# logtree


def el(tag, *children, cls=None, data=None):
    node = {"tag": tag, "attrs": {"class": cls} if cls else {}, "children": list(children)}
    if data is not None:
        node["data"] = data
    return node


def section(header, *body, level=3):
    return el("section", el(f"h{level}", header), el("div", *body, cls="lt-section-body"), cls="lt-section")


def conv(*messages):
    return el("div", data={"type": "conversation", "messages": list(messages)})


def table(rows):
    return el("table", el("thead", el("tr", el("th", "key"), el("th", "value"))),
              el("tbody", *[el("tr", el("td", k), el("td", v)) for k, v in rows]))


def episode(k, turns, total):
    return section(f"Trajectory {k} Episode",
                   section("Episode Details",
                           *[section(f"Turn {t}", table([("ob_len", "1"), ("ac_len", "2"), ("step_reward", "0.000")]), level=6)
                             for t in range(1, turns + 1)],
                           table([("num_turns", str(turns)), ("final_ob_len", "0"), ("total_return", total)]),
                           level=5),
                   level=4)


def single_turn_unit(question, answer, reward):
    return [
        section("Prompt", conv({"role": "system", "content": "sys"}, {"role": "user", "content": question})),
        section("Policy Response", conv({"role": "assistant", "content": answer})),
        section("Reward", table([("correct", "True"), ("reward", reward)])),
    ]


def tree_bytes(root, title="RL Iteration 3"):
    return json.dumps({"title": title, "started_at": "2026-01-01T00:00:00.000000", "path": None, "root": root},
                      indent=2).encode()


def single_turn_tree():
    # Group 0 logs trajectory 1 (reward 1) before trajectory 0 (reward 0): completion order.
    # Group 1 has two trajectories with the same signature (1 turn, reward 0): ambiguous.
    group0 = section("Group Rollout",
                     *single_turn_unit("q0", "a-traj1", "1.000"),
                     *single_turn_unit("q0", "a-traj0", "0.000"),
                     section("Trajectory Details", episode(0, 1, "0.000"), episode(1, 1, "1.000")),
                     level=2)
    group1 = section("Group Rollout",
                     *single_turn_unit("q1", "x", "0.000"),
                     *single_turn_unit("q1", "y", "0.000"),
                     section("Trajectory Details", episode(0, 1, "0.000"), episode(1, 1, "0.000")),
                     level=2)
    extra = section("Q&amp;A &lt;notes&gt;", conv({"role": "user", "content": "loose"}), level=2)
    root = el("body", el("h1", "RL Iteration 3", cls="lt-title"), el("p", "intro"), group0, group1, extra, cls="lt-root")
    return tree_bytes(root)


def test_logtree_single_turn_layout():
    ctx = make_ctx("train_iteration_000003_logtree.json", split="train", iteration=3)
    out = logtree.normalize(single_turn_tree(), ctx)
    assert ctx.warnings == []
    conv_cols = [(c["conversation_id"], c["section"], c["group_idx"], c["traj_idx"], c["n_messages"]) for c in out["conversations"]]
    assert conv_cols == [
        ("42:0", "Group Rollout / Prompt", 0, 1, 2),
        ("42:1", "Group Rollout / Policy Response", 0, 1, 1),
        ("42:2", "Group Rollout / Prompt", 0, 0, 2),
        ("42:3", "Group Rollout / Policy Response", 0, 0, 1),
        ("42:4", "Group Rollout / Prompt", 1, None, 2),
        ("42:5", "Group Rollout / Policy Response", 1, None, 1),
        ("42:6", "Group Rollout / Prompt", 1, None, 2),
        ("42:7", "Group Rollout / Policy Response", 1, None, 1),
        ("42:8", "Q&A <notes>", None, None, 1),
    ]
    for c in out["conversations"]:
        assert (c["split"], c["iteration"], c["title"], c["run_id"], c["source_id"]) == ("train", 3, "RL Iteration 3", RUN, SRC)
    assert out["messages"][:3] == [
        {**BASE, "conversation_id": "42:0", "message_idx": 0, "role": "system", "content": "sys", "parts": None, "tool_calls": None, **NO_MSG_EXTRAS},
        {**BASE, "conversation_id": "42:0", "message_idx": 1, "role": "user", "content": "q0", "parts": None, "tool_calls": None, **NO_MSG_EXTRAS},
        {**BASE, "conversation_id": "42:1", "message_idx": 0, "role": "assistant", "content": "a-traj1", "parts": None, "tool_calls": None, **NO_MSG_EXTRAS},
    ]
    assert len(out["messages"]) == 13
    schema.to_arrow("conversations", out["conversations"])
    schema.to_arrow("messages", out["messages"])


def multi_turn_tree():
    call = {"type": "function", "id": "call_1", "function": {"name": "calculator", "arguments": "{\"expression\": \"2*3\"}"}}
    big = "x" * 200_000 + "\x00" + "tail"

    def convo(tool_outputs, final):
        msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": "q"}]
        for out in tool_outputs:
            msgs.append({"role": "assistant",
                         "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "calc"},
                                     {"type": "image", "image": "data:..."}],
                         "tool_calls": [call]})
            msgs.append({"role": "tool", "content": out, "tool_call_id": "call_1", "name": "calculator"})
        msgs.append({"role": "assistant", "content": final,
                     "unparsed_tool_calls": [{"raw_text": "<tool>oops", "error": "bad json"}]})
        return conv(*msgs)

    group = section("Group Rollout",
                    section("Conversation", convo(["6"], big)),            # 2 turns, reward 0 → traj 1
                    section("Reward", table([("reward", "0.000")])),
                    section("Conversation", convo(["6", "7"], "done")),    # 3 turns, reward 1 → traj 0
                    section("Reward", table([("reward", "1.000")])),
                    section("Trajectory Details", episode(0, 3, "1.000"), episode(1, 2, "0.000")),
                    level=2)
    return tree_bytes(el("body", group))


def test_logtree_multi_turn_tool_calls_nul_and_big_content():
    ctx = make_ctx("iteration_000000/train_logtree.json", split="train", iteration=0)
    out = logtree.normalize(multi_turn_tree(), ctx)
    assert ctx.warnings == []
    assert [(c["section"], c["group_idx"], c["traj_idx"], c["n_messages"]) for c in out["conversations"]] == [
        ("Group Rollout / Conversation", 0, 1, 5),
        ("Group Rollout / Conversation", 0, 0, 7),
    ]
    m = [r for r in out["messages"] if r["conversation_id"] == "42:0"]
    assert [r["role"] for r in m] == ["system", "user", "assistant", "tool", "assistant"]
    assert m[2]["content"] == "hmm\ncalc"
    assert json.loads(m[2]["parts"]) == [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "calc"},
                                         {"type": "image", "image": "data:..."}]
    assert json.loads(m[2]["tool_calls"]) == [
        {"type": "function", "id": "call_1", "function": {"name": "calculator", "arguments": "{\"expression\": \"2*3\"}"}}]
    assert m[3]["content"] == "6" and m[3]["tool_calls"] is None and m[3]["parts"] is None
    assert m[4]["content"] == "x" * 200_000 + "\x00" + "tail"
    assert json.loads(m[4]["tool_calls"]) == [{"type": "unparsed", "unparsed": {"raw_text": "<tool>oops", "error": "bad json"}}]
    table_ = schema.to_arrow("messages", out["messages"])
    assert "\x00" in table_.column("content")[4].as_py()


def test_logtree_bad_messages_are_reported_not_fatal():
    root = el("body", conv({"role": 3, "content": {"odd": 1}}, "not a message", {"role": "user"}),
              el("div", data={"type": "conversation", "messages": "nope"}),
              el("div", data={"type": "other"}))
    ctx = make_ctx("t_logtree.json")
    out = logtree.normalize(tree_bytes(root, title=None), ctx)
    assert [(c["conversation_id"], c["n_messages"], c["section"], c["title"], c["group_idx"]) for c in out["conversations"]] == [
        ("42:0", 2, None, None, None), ("42:1", 0, None, None, None)]
    assert out["messages"] == [
        {**BASE, "conversation_id": "42:0", "message_idx": 0, "role": None, "content": None, "parts": '{"odd": 1}', "tool_calls": None, **NO_MSG_EXTRAS},
        {**BASE, "conversation_id": "42:0", "message_idx": 2, "role": "user", "content": None, "parts": None, "tool_calls": None, **NO_MSG_EXTRAS},
    ]
    assert len(ctx.warnings) == 2


@pytest.mark.parametrize("data", [b"", b"\n", b"null", b"[]", b'{"title": "x"}', b'{"root": 5}', b"not json"])
def test_logtree_empty_or_invalid(data):
    ctx = make_ctx("eval_test_logtree.json")
    assert logtree.normalize(data, ctx) == {"conversations": [], "messages": []}
    assert len(ctx.warnings) == 1 and ctx.warnings[0].startswith("eval_test_logtree.json: ")


def test_logtree_truncated_file():
    data = single_turn_tree()
    for cut in (len(data) // 3, len(data) - 2):
        ctx = make_ctx("t_logtree.json")
        assert logtree.normalize(data[:cut], ctx) == {"conversations": [], "messages": []}
        assert len(ctx.warnings) == 1


def test_logtree_absurd_nesting_does_not_crash():
    depth = 100_000
    data = ('{"title": "t", "root": ' + '{"tag": "div", "children": [' * depth + "]}" * depth + "}").encode()
    ctx = make_ctx("t_logtree.json")
    assert logtree.normalize(data, ctx) == {"conversations": [], "messages": []}
    assert len(ctx.warnings) == 1


# Text that a bracket count takes for nesting: ANSI colours, a regex, half a printed list,
# escaped quotes and backslashes next to brackets.
BRACKET_TEXTS = [
    "\x1b[31mERROR\x1b[0m " * 2000,
    "[" * 3000 + " unbalanced",
    "{" * 3000 + '"\\[' * 10,
    "]" * 2000 + "}" * 2000,
    "re.compile(r'^\\[(\\d+)\\]\\s*{') and a \\" + '"quote" [[[',
    "[1, 2, [3, [4, " * 400,
]


def test_logtree_brackets_in_text_are_not_nesting():
    """Before, the nesting pre-check counted the brackets inside strings and refused such a
    file as "nested too deeply": every conversation of it was lost."""
    convs = [conv({"role": "user", "content": t},
                  {"role": "assistant", "content": [{"type": "text", "text": t[::-1]}],
                   "tool_calls": [{"type": "function", "id": "c", "function": {
                       "name": "run", "arguments": json.dumps({"code": t})}}]},
                  {"role": "tool", "content": t + "]", "tool_call_id": "c", "name": "run"})
             for t in BRACKET_TEXTS]
    data = tree_bytes(el("body", *[section(f"Case {i} [", c) for i, c in enumerate(convs)]))
    assert data.count(b"[") + data.count(b"{") > 20_000
    ctx = make_ctx("iteration_000001/train_logtree.json", split="train", iteration=1)
    out = logtree.normalize(data, ctx)
    assert ctx.warnings == []
    assert len(out["conversations"]) == len(BRACKET_TEXTS)
    got = {(m["conversation_id"], m["message_idx"]): m for m in out["messages"]}
    for k, t in enumerate(BRACKET_TEXTS):
        assert got[(f"42:{k}", 0)]["content"] == t
        assert got[(f"42:{k}", 1)]["content"] == t[::-1]
        assert json.loads(json.loads(got[(f"42:{k}", 1)]["tool_calls"])[0]["function"][
            "arguments"]) == {"code": t}
        assert got[(f"42:{k}", 2)]["content"] == t + "]"
    assert [c["section"] for c in out["conversations"]] == [
        f"Case {i} [" for i in range(len(BRACKET_TEXTS))]


def test_logtree_truly_too_deep_is_refused_by_name():
    node = conv({"role": "user", "content": "deep"})
    for _ in range(300):  # two JSON levels a node: 600 levels, past the 512 bound
        node = el("div", node)
    ctx = make_ctx("iteration_000001/train_logtree.json")
    assert logtree.normalize(tree_bytes(el("body", node)), ctx) == {"conversations": [],
                                                                    "messages": []}
    assert ctx.warnings == ["iteration_000001/train_logtree.json: logtree JSON is nested too "
                            "deeply to parse; skipped"]


def test_logtree_episode_number_past_the_int_limit():
    """`Trajectory <5,000 digits> Episode`: int() raised past Python's conversion limit and the
    exception stopped the ingest."""
    group = section("Group Rollout", *single_turn_unit("q", "a", "1.000"),
                    section("Trajectory Details", episode("9" * 5000, 1, "1.000")), level=2)
    ctx = make_ctx("t_logtree.json")
    out = logtree.normalize(tree_bytes(el("body", group)), ctx)
    assert [c["traj_idx"] for c in out["conversations"]] == [None, None]  # not matched
    assert ctx.warnings == []


def test_checkpoint_digit_string_past_the_int_limit():
    ctx = make_ctx("checkpoints.jsonl")
    out = checkpoints.normalize(lines({"name": "x", "batch": "1" * 5000, "epoch": "0" * 30 + "7"}),
                                ctx)
    assert [(r["batch"], r["epoch"]) for r in out["checkpoints"]] == [(None, 7)]
    assert len(ctx.warnings) == 1 and "batch=" in ctx.warnings[0]


def test_timing_integer_beyond_a_double_is_infinite_not_a_dropped_span():
    ctx = make_ctx("timing_spans.jsonl")
    data = (b'{"step": 1, "spans": [{"name": "a", "duration": 1' + b"0" * 400
            + b', "wall_start": 0.0, "wall_end": 1.0}]}\n\n')  # the blank line: the line path
    table, steps = timing.normalize(data, 1, ctx)
    assert ctx.warnings == [] and steps == [1]
    assert table.column("duration_s").to_pylist() == [math.inf]


def test_logtree_depth_cap(monkeypatch):
    monkeypatch.setattr(logtree, "MAX_DEPTH", 4)
    deep = conv({"role": "user", "content": "deep"})
    for _ in range(6):
        deep = el("div", deep)
    root = el("body", conv({"role": "user", "content": "shallow"}), deep)
    ctx = make_ctx("t_logtree.json")
    out = logtree.normalize(tree_bytes(root), ctx)
    assert [m["content"] for m in out["messages"]] == ["shallow"]
    assert len(ctx.warnings) == 1 and "deeper" in ctx.warnings[0]


# =============================================================================================
# trace


def B(name, ts, track, pid=0, tid=5, thread="MainThread", **extra):
    return {"name": name, "ph": "B", "pid": pid, "tid": tid, "ts": ts,
            "args": {"track": track, "thread": thread, **extra}, "cat": "async"}


def E(name, ts, track, pid=0, tid=5, thread="MainThread", **extra):
    return {"name": name, "ph": "E", "pid": pid, "tid": tid, "ts": ts,
            "args": {"track": track, "thread": thread, **extra}, "cat": "async"}


def M_thread(track, pid=0, tid=5):
    return {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "ts": 0, "args": {"name": track}}


def M_proc(pid=0, thread="MainThread"):
    return {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "ts": 0, "args": {"name": f"{thread} Thread"}}


def slice_row(name, start, dur, track, depth, segment=0, pid=0, thread="MainThread", args=None):
    return {**BASE, "name": name, "start_us": start, "dur_us": dur, "pid": pid, "track": track,
            "thread": thread, "args": args, "depth": depth, "segment": segment}


def test_trace_pairs_by_track_not_tid_and_merges_args():
    ctx = make_ctx("trace_events.jsonl")
    events = lines(
        B("train", 1000.0, "Task-1"),
        M_thread("Task-1"),
        M_proc(),
        B("step", 1100.0, "Task-1"),
        # Task-2 collides with Task-1 on tid 5 and uses the same span name "step".
        B("step", 1150.0, "Task-2", foo=1),
        M_thread("Task-2"),
        E("step", 1200.0, "Task-1", step=3),
        E("step", 1400.0, "Task-2", foo=2, bar="b"),
        E("train", 2000.0, "Task-1"),
    )
    out, state = trace.normalize(events, None, ctx)
    assert ctx.warnings == []
    assert out["trace_slices"] == [
        slice_row("step", 1100.0, 100.0, "Task-1", depth=1, args='{"step": 3}'),
        slice_row("step", 1150.0, 250.0, "Task-2", depth=0, args='{"foo": 2, "bar": "b"}'),
        slice_row("train", 1000.0, 1000.0, "Task-1", depth=0),
    ]
    assert trace.open_rows(state, ctx) == []
    json.dumps(state)  # JSON-serialisable
    schema.to_arrow("trace_slices", out["trace_slices"])


def test_trace_same_name_nested_on_one_track_pairs_lifo():
    ctx = make_ctx("trace_events.jsonl")
    out, _ = trace.normalize(lines(B("f", 0.0, "T"), B("f", 1.0, "T"), E("f", 2.0, "T"), E("f", 5.0, "T")), None, ctx)
    assert out["trace_slices"] == [slice_row("f", 1.0, 1.0, "T", depth=1), slice_row("f", 0.0, 5.0, "T", depth=0)]


def test_trace_unmatched_b_open_rows_and_stray_e():
    ctx = make_ctx("trace_events.jsonl")
    events = lines(B("outer", 10.0, "T", k="v"), B("inner", 11.0, "T"), E("inner", 12.0, "T"), E("nobody", 13.0, "T"))
    out, state = trace.normalize(events, None, ctx)
    assert out["trace_slices"] == [slice_row("inner", 11.0, 1.0, "T", depth=1)]
    assert trace.open_rows(state, ctx) == [slice_row("outer", 10.0, None, "T", depth=0, args='{"k": "v"}')]
    assert len(ctx.warnings) == 1 and ctx.warnings[0].startswith("trace_events.jsonl:4: ")


def test_trace_bad_events_are_skipped_with_line():
    ctx = make_ctx("trace_events.jsonl")
    events = lines(
        {"name": "x", "ph": "B", "pid": 0, "args": {"track": "T"}},               # 1 no ts
        {"name": "x", "ph": "B", "pid": 0, "ts": "5", "args": {"track": "T"}},    # 2 ts string
        {"name": "x", "ph": "B", "pid": True, "ts": 5.0, "args": {"track": "T"}}, # 3 pid bool
        {"name": "x", "ph": "B", "pid": 0, "ts": 5.0, "args": ["T"]},             # 4 args list
        [1, 2, 3],                                                                 # 5 not an object
        {"name": "c", "ph": "C", "pid": 0, "ts": 5.0, "args": {}},                 # 6 counter: unsupported
        {"name": "i", "ph": "i", "pid": 0, "ts": 5.0, "args": {}},                 # 7 instant: silent skip
        {"name": "x", "ph": "B", "pid": 0, "ts": float("nan"), "args": {}},        # 8 NaN ts
        {"name": "thread_name", "ph": "M", "pid": 0, "ts": 0, "args": {}},         # 9 M without tid
        {"name": "x", "ph": "X", "pid": 0, "ts": 5.0, "dur": 2.5, "args": {"track": "T", "a": 1}},  # ok
        {"name": "y", "ph": "X", "pid": 0, "ts": 5.0, "args": {"track": "T"}},     # 11 X without dur
        {"ph": "B", "pid": 0, "ts": 1.0, "args": {}},                              # 12 no name
        {"name": "z", "pid": 0, "ts": 1.0, "args": {}},                            # 13 no ph
    )
    out, state = trace.normalize(events, None, ctx)
    assert out["trace_slices"] == [slice_row("x", 5.0, 2.5, "T", depth=0, thread=None, args='{"a": 1}')]
    warned = sorted(int(w.split(":")[1]) for w in ctx.warnings)
    assert warned == [1, 2, 3, 4, 5, 6, 8, 9, 11, 12, 13]
    assert trace.open_rows(state, ctx) == []


def resumed_trace():
    """Process A (clock ~1e6 µs) is killed with `step` open; process B appends (clock ~5e9 µs:
    forward, so only the repeated process_name marks the restart). Then a third process whose
    clock is far lower (the timestamp rule). Pids restart at 0 and track names repeat."""
    return lines(
        B("train", 1_000_000.0, "Task-1", tid=11),   # 1
        M_thread("Task-1", tid=11),                  # 2
        M_proc(),                                    # 3
        B("step", 1_000_100.0, "Task-1", tid=11),    # 4 never ends (process killed)
        B("save", 1_000_150.0, "sync:T2", pid=1, tid=12, thread="T2"),  # 5 never ends
        M_thread("sync:T2", pid=1, tid=12),          # 6
        M_proc(pid=1, thread="T2"),                  # 7
        # --- process B: its first B comes before the metadata that reveals it
        B("train", 5_000_000_000.0, "Task-1", tid=77),  # 8
        M_thread("Task-1", tid=77),                      # 9
        M_proc(),                                        # 10 repeated pid 0 → new segment
        B("step", 5_000_000_100.0, "Task-1", tid=77),    # 11
        E("step", 5_000_000_300.0, "Task-1", tid=77, step=7),  # 12
        E("train", 5_000_001_000.0, "Task-1", tid=77),   # 13
        # --- process C: clock restarted far lower; no metadata repeat needed
        B("train", 2_000.0, "Task-1", tid=99),           # 14
        E("train", 2_500.0, "Task-1", tid=99),           # 15
        B("left_open", 2_600.0, "Task-1", tid=99),       # 16
    )


RESUMED_FINAL = [
    # segment 0 closes when line 10 arrives: its open B's become unmatched rows, in arrival order
    slice_row("train", 1_000_000.0, None, "Task-1", depth=0, segment=0),
    slice_row("step", 1_000_100.0, None, "Task-1", depth=1, segment=0),
    slice_row("save", 1_000_150.0, None, "sync:T2", depth=0, segment=0, pid=1, thread="T2"),
    slice_row("step", 5_000_000_100.0, 200.0, "Task-1", depth=1, segment=1, args='{"step": 7}'),
    slice_row("train", 5_000_000_000.0, 1000.0, "Task-1", depth=0, segment=1),
    slice_row("train", 2_000.0, 500.0, "Task-1", depth=0, segment=2),
]
RESUMED_OPEN = [slice_row("left_open", 2_600.0, None, "Task-1", depth=0, segment=2)]


def test_trace_resumed_process_starts_new_segments():
    ctx = make_ctx("trace_events.jsonl")
    out, state = trace.normalize(resumed_trace(), None, ctx)
    assert ctx.warnings == []
    assert out["trace_slices"] == RESUMED_FINAL
    assert trace.open_rows(state, ctx) == RESUMED_OPEN


def test_trace_incremental_chunks_match_one_call():
    events = resumed_trace()
    # every single cut point, and a few three-way splits; state goes through JSON like the ledger
    splits = [[k] for k in range(len(events) + 1)] + [[3, 8], [8, 9], [9, 10], [1, 15]]
    for cuts in splits:
        ctx = make_ctx("trace_events.jsonl")
        state = None
        rows = []
        bounds = [0, *cuts, len(events)]
        for lo, hi in zip(bounds, bounds[1:]):
            out, state = trace.normalize(events[lo:hi], state, ctx)
            rows += out["trace_slices"]
            state = json.loads(json.dumps(state))
        assert rows == RESUMED_FINAL, cuts
        assert trace.open_rows(state, ctx) == RESUMED_OPEN, cuts
        assert ctx.warnings == []


def test_trace_state_is_not_mutated():
    ctx = make_ctx("trace_events.jsonl")
    _, state = trace.normalize(lines(B("a", 1.0, "T")), None, ctx)
    snapshot = json.dumps(state, sort_keys=True)
    trace.normalize([(2, E("a", 2.0, "T"))], state, ctx)
    assert json.dumps(state, sort_keys=True) == snapshot
    assert len(trace.open_rows(state, ctx)) == 1


# =============================================================================================
# spans


def brute_nest(starts, ends, names):
    """The rule written independently: all pairs; ancestors complete later, bear another name."""
    depths, parents = [], []
    for i in range(len(starts)):
        anc = [j for j in range(len(starts))
               if j > i and names[j] != names[i]
               and starts[j] <= starts[i] + 1e-6 and ends[j] >= ends[i] - 1e-6]
        depths.append(len(anc))
        parents.append(names[min(anc, key=lambda j: (ends[j] - starts[j], j))] if anc else None)
    return depths, parents


def timing_lines(steps):
    """timing_spans.jsonl text for [(step, [(name, start, end), ...]), ...]."""
    return "".join(json.dumps({"step": st, "spans": [
        {"name": n, "duration": e - s, "wall_start": s, "wall_end": e} for n, s, e in sp]}) + "\n"
        for st, sp in steps).encode()


def nest_of(starts, ends, names, step=0):
    table, _ = timing.normalize(timing_lines([(step, list(zip(names, starts, ends)))]), 1, make_ctx("timing_spans.jsonl"))
    return table.column("depth").to_pylist(), table.column("parent").to_pylist()


def test_nest_hand_example():
    # completion order: two children, their parent, the root; then a later top-level span
    starts = [0.0, 1.0, 0.0, 0.0, 3.0]
    ends = [1.0, 2.0, 2.5, 3.0, 4.0]
    assert nest_of(starts, ends, ["a", "b", "parent", "root", "other"]) == (
        [2, 2, 1, 0, 0], ["parent", "parent", "root", None, None])


def test_nest_equal_bounds_chain_and_float_noise():
    # run_single_evaluation, run_evaluations_parallel, run_evals: identical bounds
    assert nest_of([0.0, 0.0, 0.0], [5.0, 5.0, 5.0], ["s", "p", "e"]) == ([2, 1, 0], ["p", "e", None])
    # the child starts 2.4e-7 s "before" its parent and ends 1e-7 s "after" it
    assert nest_of([0.0, 2.384e-07], [1.0000001, 1.0], ["c", "p"]) == ([1, 0], ["p", None])
    # beyond the tolerance it is not contained
    assert nest_of([0.0, 2e-06], [1.0, 1.0], ["c", "p"]) == ([0, 0], [None, None])


def test_nest_concurrent_calls_of_one_span_are_siblings():
    # two concurrent policy_sample calls starting together, then their parent
    assert nest_of([0.0, 0.0, 0.0], [1.0, 2.0, 2.0], ["ps", "ps", "rollout"]) == (
        [1, 1, 0], ["rollout", "rollout", None])


def test_nest_small_and_degenerate():
    assert nest_of([1.0], [2.0], ["x"]) == ([0], [None])
    nan = float("nan")
    assert nest_of([0.0, nan, 0.0], [1.0, 2.0, 3.0], ["a", "b", "c"]) == ([1, 0, 0], ["c", None, None])


def test_timing_later_record_of_a_step_wins_and_steps_are_sorted():
    text = timing_lines([(1, [("a", 0.0, 1.0)]), (0, [("b", 0.0, 1.0)]), (1, [("c", 0.0, 2.0), ("d", 0.0, 3.0)])])
    table, steps = timing.normalize(text, 1, make_ctx("timing_spans.jsonl"))
    assert steps == [0, 1]
    assert table.select(["step", "name", "span_idx"]).to_pylist() == [
        {"step": 0, "name": "b", "span_idx": 0}, {"step": 1, "name": "c", "span_idx": 0},
        {"step": 1, "name": "d", "span_idx": 1}]


def test_nest_matches_brute_force_on_random_spans():
    rng = random.Random(7)
    records = []
    for step in range(600):
        n = rng.randint(1, 25)
        sp = []
        for _ in range(n):
            a = rng.choice([0.0, 1.0, 2.0, rng.random() * 4, 1.0 + rng.choice([3e-7, -3e-7, 2e-6])])
            sp.append((rng.choice("abcd"), a, a + rng.choice([0.0, 1.0, 3e-7, rng.random() * 3, -0.25])))
        records.append((step, sp))
    table, _ = timing.normalize(timing_lines(records), 1, make_ctx("timing_spans.jsonl"))
    got = table.select(["step", "depth", "parent"]).to_pylist()
    want = []
    for step, sp in records:
        d, p = brute_nest([s for _, s, _ in sp], [e for _, _, e in sp], [n for n, _, _ in sp])
        want += [{"step": step, "depth": x, "parent": y} for x, y in zip(d, p)]
    assert got == want


# =============================================================================================
# the real sample runs


SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "sample-runs"
needs_samples = pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"sample runs not found at {SAMPLES}")


def count_conversation_nodes(node) -> tuple[int, int]:
    convs = msgs = 0
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            d = n.get("data")
            if isinstance(d, dict) and d.get("type") == "conversation":
                convs += 1
                msgs += len(d.get("messages", []))
            stack.extend(n.get("children", []))
    return convs, msgs


@needs_samples
def test_samples_logtrees():
    files = sorted(SAMPLES.rglob("*_logtree.json"))
    assert len(files) > 40
    total = matched = 0
    for path in files:
        ctx = make_ctx(path.name)
        out = logtree.normalize(path.read_bytes(), ctx)
        assert ctx.warnings == [], path
        want_convs, want_msgs = count_conversation_nodes(json.loads(path.read_bytes())["root"])
        assert len(out["conversations"]) == want_convs, path
        assert len(out["messages"]) == want_msgs == sum(c["n_messages"] for c in out["conversations"]), path
        schema.to_arrow("conversations", out["conversations"])
        schema.to_arrow("messages", out["messages"])
        # the tool-use run: tool outputs identify each trajectory in the rollout summaries
        summaries = path.with_name(path.name.replace("_logtree.json", "_rollout_summaries.jsonl"))
        if "gsm8k" in str(path) and summaries.exists():
            recs = [json.loads(line) for line in summaries.read_text().splitlines()]
            by_outputs = {}
            for r in recs:
                outs = tuple(s["logs"]["tool_output"] for s in r["steps"] if "tool_output" in s["logs"])
                by_outputs.setdefault(outs, []).append((r["group_idx"], r["traj_idx"]))
            tools: dict[str, list[str]] = {}
            for m in out["messages"]:
                if m["role"] == "tool":
                    tools.setdefault(m["conversation_id"], []).append(m["content"])
            for c in out["conversations"]:
                # group_idx is right when the conversation's tool outputs occur in that group
                # (exactly once; the same outputs may occur in another group too)
                candidates = by_outputs[tuple(tools.get(c["conversation_id"], []))]
                truth = [t for t in candidates if t[0] == c["group_idx"]]
                assert len(truth) == 1, (path, c, candidates)
                if c["traj_idx"] is not None:
                    assert c["traj_idx"] == truth[0][1], (path, c)
                    matched += 1
                total += 1
    assert total > 200 and matched > 50  # some are matched, none wrongly


@needs_samples
def test_samples_traces():
    for path in sorted(SAMPLES.rglob("trace_events.jsonl")):
        recs = [(i, json.loads(line)) for i, line in enumerate(path.read_text().splitlines(), start=1)]
        ctx = make_ctx("trace_events.jsonl")
        out, state = trace.normalize(recs, None, ctx)
        assert ctx.warnings == []
        n_b = sum(1 for _, e in recs if e.get("ph") == "B")
        n_e = sum(1 for _, e in recs if e.get("ph") == "E")
        rows = out["trace_slices"]
        assert len(rows) + len(trace.open_rows(state, ctx)) == n_b
        assert sum(r["dur_us"] is not None for r in rows) == n_e
        assert all(r["dur_us"] >= 0 for r in rows if r["dur_us"] is not None)
        schema.to_arrow("trace_slices", rows)


@needs_samples
def test_samples_rollouts_checkpoints_configs_spans():
    for path in sorted(SAMPLES.rglob("*_rollout_summaries.jsonl")):
        recs = [json.loads(line) for line in path.read_text().splitlines()]
        ctx = make_ctx(path.name)
        out = rollouts.normalize(list(enumerate(recs, 1)), ctx)
        assert ctx.warnings == []
        assert len(out["trajectories"]) == len(recs)
        assert len(out["rollout_steps"]) == sum(len(r["steps"]) for r in recs)
        schema.to_arrow("trajectories", out["trajectories"])
        schema.to_arrow("rollout_steps", out["rollout_steps"])
    for path in sorted(SAMPLES.rglob("checkpoints.jsonl")):
        recs = [json.loads(line) for line in path.read_text().splitlines()]
        ctx = make_ctx(path.name)
        rows = checkpoints.normalize(list(enumerate(recs, 1)), ctx)["checkpoints"]
        assert ctx.warnings == [] and len(rows) == len(recs)
        assert all(r["name"] for r in rows)
        schema.to_arrow("checkpoints", rows)
    kinds = {}
    for path in sorted(SAMPLES.rglob("config.json")):
        ctx = make_ctx("config.json")
        kinds[path.parent.relative_to(SAMPLES).as_posix()] = config.summarize(path.read_bytes(), ctx)["kind"]
        assert config.normalize(path.read_bytes(), ctx)["config"]
        assert ctx.warnings == []
    assert kinds == {
        "math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5": "rl",
        "math_rl_sweep/llama-3.1-8b-instruct/lr_1e-5": "rl",
        "gsm8k_tool_rl/sweep/lr_3e-4/seed_1": "rl",
        "sl/tulu3_qwen3-8b_lr2e-4": "sl",
        "dpo/hh_llama-3.1-8b_beta0.1": "dpo",
    }
    for path in sorted(SAMPLES.rglob("timing_spans.jsonl")):
        last = {}
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            last[rec["step"]] = rec["spans"]
        want = []
        for step in sorted(last):
            sp = last[step]
            d, p = brute_nest([s["wall_start"] for s in sp], [s["wall_end"] for s in sp], [s["name"] for s in sp])
            assert d[-1] == 0  # the last span to complete has nothing completing after it
            want += [{"step": step, "depth": x, "parent": y} for x, y in zip(d, p)]
        table, _ = timing.normalize(path.read_bytes(), 1, make_ctx("timing_spans.jsonl"))
        assert table.select(["step", "depth", "parent"]).to_pylist() == want
