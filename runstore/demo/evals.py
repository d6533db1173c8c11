"""A generated eval store: what tinker-cookbook 0.6.1's `EvalStore` writes for benchmark runs.

Contract: `_eval_store(rng, evaluations, clock)` returns `{relative path: text}` of an eval
store directory: `runs.jsonl` (one index line per eval run, appended as runs are created),
and per eval run `runs/<id>/metadata.json` (`RunMetadata`, indent 2, its `scores` filled as
`finalize_run` leaves them), `runs/<id>/summary.json`, and per benchmark
`runs/<id>/<benchmark>/result.json` and `trajectories.jsonl` (one `StoredTrajectory` a line,
in completion order). `evaluations` are `(model_name, checkpoint_path, checkpoint_name,
skill, log_path)`: a checkpoint of a run (its sampler path) or the base model (None, None);
`skill` in [0, 1] sets how often it answers right. Eval run ids are `<checkpoint name or
base>_<timestamp>_<6 hex digits>`, timestamps naive ISO times as `datetime.now()` gives
them. Pure: randomness from `rng`, time from `clock`.
"""

from __future__ import annotations

import random
from datetime import datetime, timezone
from typing import Any, Sequence

from .encoding import _dumps, _jsonl
from .text import _problem

BENCHMARKS = ("gsm8k", "math500")
EXAMPLES = {"gsm8k": 8, "math500": 6}
CONFIG = {"max_examples": 40, "max_tokens": 2048, "temperature": 0.6, "num_samples": 1}


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).replace(tzinfo=None).isoformat()


def _trajectory(rng: random.Random, benchmark: str, idx: int, skill: float) -> dict[str, Any]:
    question, answer, _ = _problem(rng)
    correct = rng.random() < skill
    failed = not correct and rng.random() < 0.1
    given = answer if correct else answer + rng.choice((-3, -1, 1, 7))
    ob, ac = 30 + rng.randint(0, 20), 40 + rng.randint(0, 120)
    turns = [{"role": "user", "content": f"Solve the problem step by step. {question}",
              "token_count": ob, "metadata": {}}]
    if not failed:
        turns.append({"role": "assistant", "content": f"<think>...</think> \\boxed{{{given}}}",
                      "token_count": ac, "metadata": {}})
    return {"idx": idx, "benchmark": benchmark,
            "example_id": f"{benchmark}_{rng.getrandbits(48):012x}", "turns": turns,
            "reward": 1.0 if correct else (0.0 if failed else -0.1),
            "metrics": {"format": 1.0, "correct": 1.0 if correct else 0.0,
                        "_eval_turns": len(turns) - 1, "_eval_ac_tokens": 0 if failed else ac,
                        "_eval_ob_tokens": ob},
            "logs": {"expected": str(answer), "extracted": "" if failed else str(given)},
            "error": "TimeoutError('sampling timed out')" if failed else None,
            "time_seconds": rng.uniform(5.0, 40.0)}


def _eval_store(rng: random.Random, evaluations: Sequence[tuple[str, str | None, str | None,
                                                                 float, str]],
                clock: float) -> dict[str, str]:
    files: dict[str, str] = {}
    index: list[str] = []
    for model_name, path, name, skill, log_path in evaluations:
        clock += rng.uniform(30.0, 60.0)
        stamp = datetime.fromtimestamp(clock, timezone.utc).strftime("%Y%m%d_%H%M%S")
        run_id = f"{name or 'base'}_{stamp}_{rng.getrandbits(24):06x}"
        timestamp = _iso(clock)
        scores: dict[str, float] = {}
        summary: dict[str, Any] = {}
        for bench in BENCHMARKS:
            trajs = [_trajectory(rng, bench, i, skill) for i in range(EXAMPLES[bench])]
            order = sorted(trajs, key=lambda t: t["time_seconds"])  # completion order
            files[f"runs/{run_id}/{bench}/trajectories.jsonl"] = _jsonl(_dumps(t) for t in order)
            n_correct = sum(t["metrics"]["correct"] == 1.0 for t in trajs)
            n_errors = sum(t["error"] is not None for t in trajs)
            score = n_correct / len(trajs)
            ac = sum(t["metrics"]["_eval_ac_tokens"] for t in trajs)
            ob = sum(t["metrics"]["_eval_ob_tokens"] for t in trajs)
            n_turns = sum(t["metrics"]["_eval_turns"] for t in trajs)
            result = {"name": bench, "score": score, "num_examples": len(trajs),
                      "num_correct": n_correct, "num_errors": n_errors, "num_truncated": 0,
                      "metrics": {"total_ac_tokens": ac, "total_ob_tokens": ob,
                                  "total_turns": n_turns,
                                  "turns_per_episode": n_turns / len(trajs),
                                  "ac_tokens_per_turn": ac / max(n_turns, 1),
                                  "ob_tokens_per_turn": ob / len(trajs)},
                      "time_seconds": max(t["time_seconds"] for t in trajs),
                      "pass_at_k": {}}
            files[f"runs/{run_id}/{bench}/result.json"] = _dumps(result, indent=2)
            scores[bench] = score
            summary[bench] = {"score": score, "num_examples": len(trajs),
                              "num_correct": n_correct}
        metadata = {"run_id": run_id, "model_name": model_name, "checkpoint_path": path,
                    "checkpoint_name": name, "benchmarks": list(BENCHMARKS),
                    "timestamp": timestamp, "config": {**CONFIG, "log_path": log_path},
                    "scores": scores}
        files[f"runs/{run_id}/metadata.json"] = _dumps(metadata, indent=2)
        files[f"runs/{run_id}/summary.json"] = _dumps(summary, indent=2)
        index.append(_dumps({"run_id": run_id, "timestamp": timestamp, "model": model_name,
                             "checkpoint": name}))
    files["runs.jsonl"] = _jsonl(index)
    return files
