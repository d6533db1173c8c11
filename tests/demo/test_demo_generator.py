"""Tests of runstore.demo: the generated trees have the properties the rest of runstore relies on.

Every check reads the files back with the standard library only (json, os), independently of
runstore's own readers.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest

from runstore import demo
from runstore.demo import RunSpec

KL_KEYS = ("optim/kl_sample_train_v1", "optim/kl_sample_train_v2",
           "kl_sample_train_v1", "kl_sample_train_v2")


# --------------------------------------------------------------------------- helpers


def read_rows(path: Path, *, allow_cut: bool = False) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    rows = []
    for i, line in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except ValueError:
            assert allow_cut and i == len(lines) - 1 and not text.endswith("\n"), (path, i)
    return rows


def live_values(rows: list[dict[str, Any]]) -> dict[tuple[int | None, str], Any]:
    """Merge rows per (step, key); the later value wins (pre-0.6 duplicate resumes)."""
    merged: dict[tuple[int | None, str], Any] = {}
    for row in rows:
        for key, value in row.items():
            if key != "step":
                merged[(row.get("step"), key)] = value
    return merged


def max_kl(rows: list[dict[str, Any]]) -> float:
    values = [v for (_, k), v in live_values(rows).items()
              if k in KL_KEYS and isinstance(v, float) and math.isfinite(v)]
    return max(values, default=0.0)


def found_runs(root: Path) -> set[str]:
    """Directories holding config.json or metrics.jsonl, without looking inside runs."""
    runs = set()
    for dirpath, dirnames, filenames in os.walk(root):
        if "config.json" in filenames or "metrics.jsonl" in filenames:
            runs.add(Path(dirpath).relative_to(root).as_posix())
            dirnames[:] = []
    return runs


def by_name(specs: list[RunSpec]) -> dict[str, RunSpec]:
    return {s.name: s for s in specs}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def default_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunSpec]]:
    root = tmp_path_factory.mktemp("default")
    return root, demo.generate_tree(root)


@pytest.fixture(scope="module")
def awkward_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunSpec]]:
    root = tmp_path_factory.mktemp("awkward")
    return root, demo.generate_tree(root, demo.awkward_specs())


# --------------------------------------------------------------------------- the default tree


def test_runs_and_decoys(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, specs = default_tree
    runs = {s.name for s in specs if s.is_run}
    decoys = [s for s in specs if s.decoy is not None]
    assert len(decoys) == 4 and len(runs) >= 10
    assert {s.name for s in specs if not s.is_run} == {s.name for s in decoys} | {
        s.name for s in specs if s.evals_of}  # eval stores are not runs either
    for name in runs:
        d = root / name
        assert (d / "config.json").is_file() or (d / "metrics.jsonl").is_file(), name
    for spec in decoys:
        d = root / spec.name
        assert d.is_dir()
        assert not (d / "config.json").exists() and not (d / "metrics.jsonl").exists()
    assert found_runs(root) == runs
    assert (root / "math_rl_sweep/notes/metrics.json").is_file()
    assert (root / "gsm8k_tool_rl/backup/lr_1e-4/metrics.jsonl.bak").is_file()
    assert (root / "configs/math_rl/config.yaml").is_file()
    empty = root / "gsm8k_tool_rl/sweep/lr_3e-3/seed_0"
    assert [p.name for p in empty.iterdir()] == ["iteration_000001"]
    assert not any((empty / "iteration_000001").iterdir())


def test_default_tree_is_small_and_nested(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, specs = default_tree
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert size < 10_000_000
    depths = {len(Path(s.name).parts) for s in specs if s.is_run}
    assert {2, 3, 4} <= depths
    kinds = {s.kind for s in specs if s.is_run}
    assert kinds == {"rl", "sl", "dpo"}


SUMMARY_KEYS = {f"tokens/{part}/{k}" for part in ("cumulative", "discarded")
                for k in ("sampled", "prefill_cached", "prefill_uncached", "trained")} | {
    "cost/cumulative_usd", "cost/discarded_usd"}


def test_metrics_lines_parse(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, specs = default_tree
    for spec in specs:
        if not spec.is_run:
            continue
        text = (root / spec.name / "metrics.jsonl").read_text(encoding="utf-8")
        assert text.endswith("\n")
        rows = read_rows(root / spec.name / "metrics.jsonl")
        assert rows and all(list(r)[0] == "step" for r in rows if "step" in r)
        # Rows without a step are `log_summary` rows: the async trainer's cost summaries.
        assert spec.async_rl == any("step" not in r for r in rows), spec.name
        assert all(set(r) <= {*SUMMARY_KEYS} for r in rows if "step" not in r)
        assert text.isascii()


def test_exactly_one_run_crosses_kl_threshold(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, specs = default_tree
    crossing = {s.name for s in specs if s.is_run
                and max_kl(read_rows(root / s.name / "metrics.jsonl")) > 0.01}
    assert crossing == {"gsm8k_tool_rl/sweep/lr_1e-3/seed_0"}
    spike = by_name(specs)["gsm8k_tool_rl/sweep/lr_1e-3/seed_0"]
    rows = read_rows(root / spike.name / "metrics.jsonl")
    assert all(r["optim/kl_sample_train_v1"] > 0.01 for r in rows
               if "optim/kl_sample_train_v1" in r and r["step"] >= spike.kl_spike_at)
    # The superseded (pre-resume) rows of the resumed run did spike.
    resumed = root / "gsm8k_tool_rl/sweep/lr_3e-4/seed_1"
    assert max_kl(read_rows(resumed / "metrics.jsonl.pre_resume_000020")) > 0.01


def test_truncate_resume(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, specs = default_tree
    spec = by_name(specs)["gsm8k_tool_rl/sweep/lr_3e-4/seed_1"]
    run = root / spec.name
    assert spec.resumed_at == 20 and spec.resume_style == "truncate"
    pre_text = (run / "metrics.jsonl.pre_resume_000020").read_text()
    live_text = (run / "metrics.jsonl").read_text()
    pre = read_rows(run / "metrics.jsonl.pre_resume_000020")
    live = read_rows(run / "metrics.jsonl")
    pre_steps = [r["step"] for r in pre]
    assert pre_steps == list(range(max(pre_steps) + 1)) and max(pre_steps) >= 20
    # Byte copy: the kept prefix is identical, the re-done steps differ.
    kept = "".join(line + "\n" for line in pre_text.splitlines() if json.loads(line)["step"] < 20)
    assert live_text.startswith(kept)
    live_steps = [r["step"] for r in live]
    assert live_steps == list(range(spec.steps)) + [spec.steps, spec.steps]
    # Timing spans are not truncated: the re-done steps appear twice.
    span_steps = [json.loads(l)["step"] for l in (run / "timing_spans.jsonl").read_text().splitlines()]
    assert span_steps == list(range(max(pre_steps) + 1)) + list(range(20, spec.steps))
    # The resumed process restarts pid numbering and re-emits metadata.
    events = read_rows(run / "trace_events.jsonl")
    process_names = [i for i, e in enumerate(events) if e["name"] == "process_name" and e["pid"] == 0]
    assert len(process_names) == 2
    checkpoints = read_rows(run / "checkpoints.jsonl")
    assert [c["name"] for c in checkpoints] == ["000010", "000020", "000030", "final"]


def test_duplicate_resume(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, specs = default_tree
    spec = by_name(specs)["math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5"]
    run = root / spec.name
    assert not list(run.glob("metrics.jsonl.pre_resume_*"))
    steps = [r["step"] for r in read_rows(run / "metrics.jsonl")]
    crash = steps.index(20, steps.index(20) + 1)  # where the resumed process starts
    assert steps[:crash] == list(range(crash)) and steps[crash:] == list(range(20, spec.steps + 1))


def test_layout_file_names(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, _ = default_tree
    flat = root / "math_rl_sweep/qwen3-8b/lr_1e-5"
    for name in ("train_iteration_000000_rollout_summaries.jsonl",
                 "train_iteration_000000_logtree.json", "train_iteration_000000.html",
                 "train_iteration_000039_rollout_summaries.jsonl",
                 "eval_test_iteration_000010_rollout_summaries.jsonl",
                 "eval_test_iteration_000040_logtree.json", "eval_test_iteration_000040.html"):
        assert (flat / name).is_file(), name
    assert not list(flat.glob("iteration_*"))
    dirs = root / "gsm8k_tool_rl/sweep/lr_1e-4/seed_0"
    for name in ("iteration_000000/train_rollout_summaries.jsonl",
                 "iteration_000000/train_logtree.json", "iteration_000000/train.html",
                 "iteration_000000/eval_test_logtree.json",
                 "iteration_000000/eval_aime2025_rollout_summaries.jsonl",
                 "iteration_000029/train_rollout_summaries.jsonl"):
        assert (dirs / name).is_file(), name
    final = sorted(p.name for p in (dirs / "iteration_000030").iterdir())
    assert final and all(n.startswith("eval_") for n in final)
    assert not list(dirs.glob("train_iteration_*"))


def test_rl_rows_match_rollouts(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, _ = default_tree
    run = root / "gsm8k_tool_rl/sweep/lr_1e-4/seed_1"
    rows = {r["step"]: r for r in read_rows(run / "metrics.jsonl") if "progress/batch" in r}
    for step in (0, 7, 29):
        trajs = read_rows(run / f"iteration_{step:06d}/train_rollout_summaries.jsonl")
        mean = sum(t["total_reward"] for t in trajs) / len(trajs)
        assert rows[step]["env/all/reward/total"] == pytest.approx(mean)
        assert rows[step]["env/all/total_episodes"] == len(trajs)
        for t in trajs:
            assert list(t) == ["schema_version", "split", "iteration", "group_idx", "traj_idx",
                               "tags", "sampling_client_step", "total_reward", "final_reward",
                               "trajectory_metrics", "steps", "final_ob_len"]
            assert t["total_reward"] == pytest.approx(
                sum(s["reward"] for s in t["steps"]) + t["final_reward"])
            assert t["steps"][-1]["episode_done"] is True


def test_rl_row_families(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, _ = default_tree
    new = read_rows(root / "gsm8k_tool_rl/sweep/lr_1e-4/seed_0/metrics.jsonl")
    assert list(new[1])[:4] == ["step", "progress/batch", "optim/lr", "progress/done_frac"]
    assert "test/env/all/reward/total" in new[0] and "aime2025/env/all/reward/total" in new[0]
    assert "tokens/cumulative/trained" in new[1] and "cost/step_usd" in new[1]
    assert new[1]["time/total"] > 0 and "time/policy_sample:count" in new[1]
    final_eval, summary = new[-2], new[-1]
    assert final_eval["step"] == summary["step"] == 30
    assert all(k == "step" or not k.startswith(("env/", "optim/")) for k in final_eval)
    assert set(summary) == {"step", "cost/cumulative_usd"} | {
        f"tokens/{a}/{b}" for a in ("cumulative", "discarded")
        for b in ("sampled", "prefill_cached", "prefill_uncached", "trained")}
    old = read_rows(root / "math_rl_sweep/qwen3-8b/lr_1e-4/metrics.jsonl")
    assert not any(k.startswith(("tokens/", "cost/")) for r in old for k in r)
    assert set(old[-1]) - {"step"} and all(k.startswith("test/") for k in old[-1] if k != "step")
    rewards = [r["env/all/reward/total"] for r in old if "env/all/reward/total" in r]
    assert sum(rewards[-10:]) > sum(rewards[:10])  # a rising curve


def test_timing_spans_and_time_metrics(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, _ = default_tree
    run = root / "math_rl_sweep/qwen3-8b/lr_3e-5"
    rows = {r["step"]: r for r in read_rows(run / "metrics.jsonl") if "progress/batch" in r}
    for line in (run / "timing_spans.jsonl").read_text().splitlines()[:5]:
        record = json.loads(line)
        spans = record["spans"]
        ends = [s["wall_end"] for s in spans]
        assert ends == sorted(ends)  # completion order
        assert min(s["wall_start"] for s in spans) == 0.0
        names = [s["name"] for s in spans]
        assert names.count("policy_sample") >= 2 and "train_step" in names
        row = rows[record["step"]]
        assert row["time/policy_sample:count"] == names.count("policy_sample")
        assert row["time/train_step"] == next(s["duration"] for s in spans if s["name"] == "train_step")
        parent = next(s for s in spans if s["name"] == "do_train_step_and_get_sampling_client")
        child = next(s for s in spans if s["name"] == "train_step")
        assert parent["wall_start"] <= child["wall_start"] and child["wall_end"] <= parent["wall_end"]


def test_trace_events(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, _ = default_tree
    events = read_rows(root / "sl/tulu3_qwen3-8b_lr2e-4/trace_events.jsonl")
    assert {e["ph"] for e in events} == {"B", "E", "M"}
    seen: set[tuple[int, int]] = set()
    open_spans: dict[tuple[int, str, str], int] = {}
    for e in events:
        if e["ph"] == "M":
            assert e["ts"] == 0 and "cat" not in e
            if e["name"] == "thread_name":
                assert (e["pid"], e["tid"]) not in seen
                seen.add((e["pid"], e["tid"]))
            continue
        assert list(e) == ["name", "ph", "pid", "tid", "ts", "args", "cat"]
        assert e["cat"] == "async" and isinstance(e["ts"], float)
        key = (e["pid"], e["args"]["track"], e["name"])
        open_spans[key] = open_spans.get(key, 0) + (1 if e["ph"] == "B" else -1)
        assert open_spans[key] >= 0
    assert events[-1]["ph"] == "B"  # the flusher lost the final end events
    assert sum(open_spans.values()) >= 1


def test_checkpoints(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, _ = default_tree
    sl = read_rows(root / "sl/tulu3_qwen3-8b_lr2e-4/checkpoints.jsonl")
    order = ["name", "batch", "epoch", "final", "state_path", "sampler_path"]
    for record in sl:
        known = [k for k in record if k in order]
        assert known == [k for k in order if k in record]
        if record.get("rolling"):
            assert "sampler_path" not in record and record["state_path"].startswith("tinker://")
    assert sl[-1]["name"] == "final" and sl[-1]["batch"] == 0 and sl[-1]["epoch"] == 1
    assert any(r.get("rolling") for r in sl) and any("sampler_path" in r for r in sl[:-1])
    dpo_rows = read_rows(root / "dpo/hh_llama-3.1-8b_beta0.1/metrics.jsonl")
    assert any(isinstance(r.get("state_path"), str) for r in dpo_rows)


def test_configs_and_code_diff(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, specs = default_tree
    for spec in specs:
        if not spec.is_run:
            continue
        text = (root / spec.name / "config.json").read_text()
        config = json.loads(text)
        assert text == json.dumps(config, indent=2)
        assert config["log_path"] == f"/home/researcher/runs/{spec.name}"
        if spec.kind == "rl":
            assert "loss_fn" in config and "__type__" in config["dataset_builder"]
        elif spec.kind == "dpo":
            assert "dpo_beta" in config and "num_epochs" in config
        else:
            assert "num_epochs" in config and "loss_fn" not in config and "dpo_beta" not in config
        diff = (root / spec.name / "code.diff").read_text()
        assert diff.startswith("### module: tinker_cookbook (not in a git repository)\n")


def test_logtree_structure(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, _ = default_tree
    for path, first_sections in (
            ("gsm8k_tool_rl/sweep/lr_1e-4/seed_0/iteration_000000/train_logtree.json",
             ["Conversation", "Reward"]),
            ("math_rl_sweep/qwen3-8b/lr_1e-5/train_iteration_000000_logtree.json",
             ["Prompt", "Policy Response", "Reward"])):
        text = (root / path).read_text()
        assert text.isascii()
        doc = json.loads(text)
        assert text == json.dumps(doc, indent=2)
        assert list(doc) == ["title", "started_at", "path", "root"]
        assert doc["path"].endswith(".html") and doc["path"].startswith("/home/researcher/runs/")
        body = doc["root"]
        assert body["tag"] == "body" and [c["tag"] for c in body["children"][:3]] == ["h1", "div", "p"]
        group = body["children"][3]
        assert group["children"][0] == {"tag": "h2", "attrs": {"class": "lt-h2"},
                                        "children": ["Group Rollout"]}
        titles = [s["children"][0]["children"][0] for s in group["children"][1]["children"]]
        assert titles[: len(first_sections)] == first_sections
        assert titles[-1] == "Trajectory Details"
        conversation = group["children"][1]["children"][0]["children"][1]["children"][0]
        assert conversation["children"] == [] and conversation["data"]["type"] == "conversation"
        html_path = root / path.replace("_logtree.json", ".html")
        assert html_path.read_text(encoding="utf-8").startswith("<!doctype html>")
    non_ascii = (root / "gsm8k_tool_rl/sweep/lr_1e-4/seed_0/iteration_000000/train_logtree.json").read_text()
    assert "\\u" in non_ascii


def test_mtimes_are_in_the_past(default_tree: tuple[Path, list[RunSpec]]) -> None:
    root, _ = default_tree
    now = time.time()
    for path in root.rglob("*"):
        if path.is_file():
            assert now - path.stat().st_mtime > 3600, path


def test_deterministic(tmp_path: Path) -> None:
    specs = [s for s in demo.default_specs() if s.name.startswith(("gsm8k_tool_rl/sweep/lr_3e-4", "sl/"))]
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    demo.generate_tree(a, specs, seed=3)
    demo.generate_tree(b, specs, seed=3, workers=2)
    demo.generate_tree(c, specs, seed=4)

    def contents(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}

    assert contents(a) == contents(b)
    assert contents(a) != contents(c)


# --------------------------------------------------------------------------- the awkward tree


def test_awkward_cases(awkward_tree: tuple[Path, list[RunSpec]]) -> None:
    root, specs = awkward_tree
    runs = {s.name for s in specs if s.is_run}
    assert found_runs(root) == runs
    assert {len(Path(n).parts) for n in runs} == {2, 3, 4}
    a = root / "awkward"

    def rows(name: str, **kw: Any) -> list[dict[str, Any]]:
        return read_rows(a / name / "metrics.jsonl", **kw)

    # KL edge cases.
    exact = [r["optim/kl_sample_train_v1"] for r in rows("kl/exact_threshold")
             if "optim/kl_sample_train_v1" in r]
    assert exact.count(0.01) == 1 and max(exact) == 0.01
    nan = [r["optim/kl_sample_train_v1"] for r in rows("kl/nan_only") if "optim/kl_sample_train_v1" in r]
    assert nan and all(math.isnan(v) for v in nan)
    assert "NaN" in (a / "kl/nan_only/metrics.jsonl").read_text()
    inf = [r["optim/kl_sample_train_v1"] for r in rows("kl/infinity") if "optim/kl_sample_train_v1" in r]
    assert inf.count(math.inf) == 2 and "Infinity" in (a / "kl/infinity/metrics.jsonl").read_text()
    v2only = [r for r in rows("kl/v2_only_spike") if "optim/kl_sample_train_v1" in r]
    assert max(r["optim/kl_sample_train_v1"] for r in v2only) < 0.01
    assert max(r["optim/kl_sample_train_v2"] for r in v2only) > 0.01
    unprefixed = rows("kl/unprefixed_names")
    assert "kl_sample_train_v1" in unprefixed[0] and "entropy" in unprefixed[0]
    assert not any(k.startswith("optim/kl") for r in unprefixed for k in r)
    for style in ("truncate", "duplicate"):
        name = f"kl/spike_overwritten/{style}"
        assert max_kl(rows(name)) < 0.01
        all_rows = rows(name)
        if style == "truncate":
            all_rows = read_rows(a / name / "metrics.jsonl.pre_resume_000005")
        assert max(r["optim/kl_sample_train_v1"] for r in all_rows
                   if "optim/kl_sample_train_v1" in r) > 0.01

    # Run-level oddities.
    assert sorted(p.name for p in (a / "config_only").iterdir()) == ["config.json"]
    assert (a / "empty_metrics/metrics.jsonl").stat().st_size == 0
    assert not (a / "metrics_only/config.json").exists() and rows("metrics_only")
    cut_text = (a / "cut_last_line/metrics.jsonl").read_text()
    assert not cut_text.endswith("\n")
    with pytest.raises(ValueError):
        json.loads(cut_text.rsplit("\n", 1)[1])
    assert len(rows("cut_last_line", allow_cut=True)) == len(cut_text.split("\n")) - 1

    # Values.
    assert any(isinstance(r.get("state_path"), str) for r in rows("values/strings"))
    assert any(v is None for r in rows("values/nulls") for v in r.values())
    assert any(v is None for r in rows("values/dpo_strings_and_nulls") for v in r.values())
    assert any(isinstance(r.get("state_path"), str) for r in rows("values/dpo_strings_and_nulls"))
    assert sum("step" not in r for r in rows("values/stepless_rows")) == 3
    drift = [r for r in rows("values/schema_drift") if "progress/batch" in r]
    starts = [("env/all/format_parse" in r) for r in drift]
    stops = [("optim/entropy" in r) for r in drift]
    assert not starts[0] and starts[-1] and stops[0] and not stops[-1]

    # Logtrees.
    truncated = (a / "logtree/truncated/iteration_000000/train_logtree.json").read_text()
    assert truncated
    with pytest.raises(ValueError):
        json.loads(truncated)
    assert (a / "logtree/empty/train_iteration_000000_logtree.json").stat().st_size == 0
    json.loads((a / "logtree/empty/train_iteration_000010_logtree.json").read_text())
    huge = json.loads((a / "logtree/huge_nul_message/iteration_000000/train_logtree.json").read_text())
    texts: list[str] = []

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            for m in node.get("data", {}).get("messages", []):
                parts = m["content"] if isinstance(m["content"], list) else [{"text": m["content"]}]
                texts.extend(p.get("text", "") for p in parts)
            for child in node["children"]:
                collect(child)

    collect(huge["root"])
    big = [t for t in texts if len(t) >= 200_000]
    assert len(big) == 1 and "\x00" in big[0]

    # Trace with a lost tail.
    events = read_rows(a / "trace/unmatched_tail/trace_events.jsonl")
    assert events[-1]["ph"] == "B"


# --------------------------------------------------------------------------- append_steps


@pytest.mark.parametrize("name", ["gsm8k_tool_rl/sweep/lr_1e-4/seed_1", "math_rl_sweep/qwen3-8b/lr_1e-4",
                                  "sl/tulu3_qwen3-8b_lr2e-4", "dpo/hh_llama-3.1-8b_beta0.1"])
def test_append_steps(tmp_path: Path, name: str) -> None:
    spec = by_name(demo.default_specs())[name]
    demo.generate_tree(tmp_path, [spec])
    run = tmp_path / name
    before = (run / "metrics.jsonl").read_text().splitlines()
    spans_before = (run / "timing_spans.jsonl").read_text().splitlines()
    last = max(json.loads(l)["step"] for l in before)
    demo.append_steps(run, 5, seed=1)
    after = (run / "metrics.jsonl").read_text().splitlines()
    assert after[: len(before)] == before and len(after) == len(before) + 5
    new = [json.loads(l) for l in after[len(before):]]
    assert [r["step"] for r in new] == list(range(last + 1, last + 6))
    # Same key families as before (per-tag env keys and time/ keys come and go between rows).
    old_keys = {k for line in before for k in json.loads(line)}
    for row in new:
        assert set(row) <= old_keys | {k for k in row if k.startswith("time/")}
    spans_after = (run / "timing_spans.jsonl").read_text().splitlines()
    assert len(spans_after) == len(spans_before) + 5
    assert [json.loads(l)["step"] for l in spans_after[-5:]] == list(range(last + 1, last + 6))
    if "tokens/cumulative/trained" in new[0]:
        prev = max(json.loads(l).get("tokens/cumulative/trained", 0) for l in before)
        assert new[0]["tokens/cumulative/trained"] > prev
    # A live run: its files were just modified.
    assert time.time() - (run / "metrics.jsonl").stat().st_mtime < 60


def test_append_steps_after_cut_line(tmp_path: Path) -> None:
    spec = RunSpec("x/cut", steps=6, eval_every=3, save_every=3, logtree=False, cut_last_line=True,
                   final_checkpoint=False)
    demo.generate_tree(tmp_path, [spec])
    run = tmp_path / "x/cut"
    demo.append_steps(run, 3)
    lines = (run / "metrics.jsonl").read_text().split("\n")
    assert lines[-1] == ""
    parsed = []
    for line in lines[:-1]:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            pass  # the old cut line, now terminated by a newline
    assert len(parsed) == len(lines) - 2
    assert [r["step"] for r in parsed][-3:] == [5, 6, 7]


# --------------------------------------------------------------------------- specs and bench


def test_bench_specs_shape(tmp_path: Path) -> None:
    specs = demo.bench_specs(4, 60)
    assert len(specs) == 4 and len({s.name for s in specs}) == 4
    assert {s.layout for s in specs} == {"flat", "iteration_dirs"}
    demo.generate_tree(tmp_path, specs[:2], workers=2)
    rows = read_rows(tmp_path / specs[0].name / "metrics.jsonl")
    widths = [len(r) for r in rows if "progress/batch" in r]
    assert 50 <= sum(widths) / len(widths) <= 75
    spans = [len(json.loads(l)["spans"])
             for l in (tmp_path / specs[1].name / "timing_spans.jsonl").read_text().splitlines()]
    assert 40 <= sum(spans) / len(spans) <= 60
    full = demo.bench_specs()
    assert len(full) == 100 and all(s.steps == 2000 and s.rollouts_every == 250 for s in full)


SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "sample-runs"


@pytest.mark.skipif(not SAMPLES.is_dir(), reason="needs ../shared/sample-runs")
def test_bench_real_profile_writes_the_rows_tinker_cookbook_writes(tmp_path: Path) -> None:
    """The 'real' benchmark rows have the keys, key order and value types of the sample runs
    that tinker-cookbook 0.6.1's writers wrote (flat layout, with and without tracing)."""
    specs = demo.bench_specs(4, 30, profile="real")
    traced, plain = specs[1], specs[3]
    assert traced.trace and not plain.trace and traced.layout == plain.layout == "flat"
    demo.generate_tree(tmp_path, [traced, plain])
    sample = SAMPLES / "math_rl_sweep" / "llama-3.1-8b-instruct"

    def training_rows(path: Path) -> list[dict[str, Any]]:
        return [r for r in read_rows(path) if "optim/kl_sample_train_v1" in r]

    for spec, real in ((traced, sample / "lr_4e-5"), (plain, sample / "lr_1e-5")):
        want = training_rows(real / "metrics.jsonl")
        got = training_rows(tmp_path / spec.name / "metrics.jsonl")
        # The commonest key list is the plain training row (no eval, no checkpoint).
        def commonest(rows: list[dict[str, Any]]) -> list[str]:
            lists = [list(r) for r in rows]
            return max(lists, key=lists.count)

        want_keys, got_keys = commonest(want), commonest(got)
        assert got_keys == want_keys and len(want_keys) in (46, 53)
        types = lambda rows: {(k, type(v).__name__) for r in rows for k, v in r.items()}  # noqa: E731
        assert {t for t in types(got) if t[0] in want_keys} <= types(want)
    wide = demo.bench_specs(4, 30)
    assert wide[1].metric_keys == 60 and not wide[1].trace


def test_spec_validation(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        RunSpec("../escape")
    with pytest.raises(ValueError):
        RunSpec("a", kind="ppo")
    with pytest.raises(ValueError):
        demo.generate_tree(tmp_path, [RunSpec("a"), RunSpec("a/b")])  # run inside a run
