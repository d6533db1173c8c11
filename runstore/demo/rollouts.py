"""Simulated RL rollouts: trajectories, groups, the env metric families and rollout summaries.

Contract: `_Traj` and `_Group` are plain records filled in by the RL run builder from its own
random stream; everything here only derives from them. `_env_family(prefix, groups, mt)` is the
`<prefix>{ac_tokens_per_turn, ..., by_group/*}` metric family of `metrics.jsonl`, and
`_rollout_summaries(...)` the text of one `*_rollout_summaries.jsonl` file. No I/O, no clock.
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import Any, Sequence

from .encoding import _dumps, _jsonl
from .text import _problem


class _Traj:
    __slots__ = ("correct", "fmt", "offset", "obs", "acs", "cached", "tool_ok", "latency")

    def __init__(self) -> None:
        self.correct = False
        self.fmt = True
        self.offset = 0  # how far the given answer is from the reference (0 when correct)
        self.obs: list[int] = []
        self.acs: list[int] = []
        self.cached = 0
        self.tool_ok: list[bool] = []
        self.latency: list[int] = []

    def tool_output(self, answer: int, i: int) -> str:
        """What the calculator returned for tool call i (the trajectory's own arithmetic)."""
        return str(answer + self.offset) if self.tool_ok[i] else "Error: could not parse expression"

    @property
    def turns(self) -> int:
        return len(self.acs)

    def step_rewards(self, multi_turn: bool) -> list[float]:
        if multi_turn:
            return [0.0] * len(self.acs)
        # Single-turn math: correctness plus a 0.1 penalty for an unparsable answer.
        return [(1.0 if self.correct else 0.0) + (0.0 if self.fmt else -0.1)]

    def final_reward(self, multi_turn: bool) -> float:
        return (1.0 if self.correct else 0.0) if multi_turn else 0.0

    def total_reward(self, multi_turn: bool) -> float:
        return sum(self.step_rewards(multi_turn)) + self.final_reward(multi_turn)


class _Group:
    __slots__ = ("tags", "trajs", "seed")

    def __init__(self, tags: list[str], trajs: list[_Traj], seed: int) -> None:
        self.tags = tags
        self.trajs = trajs
        self.seed = seed  # seeds the problem and transcript text, built only when written

    def problem(self) -> tuple[str, int, str]:
        return _problem(random.Random(self.seed))


@lru_cache(maxsize=None)
def _family_keys(prefix: str, multi_turn: bool) -> tuple[str, ...]:
    names = ["ac_tokens_per_turn", "ob_tokens_per_turn", "turns_per_episode", "total_episodes",
             "total_turns", "total_ac_tokens", "total_ob_tokens", "total_cached_ob_tokens",
             "reward/total"]
    if multi_turn:
        names += ["tool_call_ok", "format", "correct", "num_tool_calls"]
    else:
        names += ["format", "correct"]
    names += ["by_group/frac_mixed", "by_group/frac_all_good", "by_group/frac_all_bad"]
    return tuple(prefix + n for n in names)


def _env_family(prefix: str, groups: Sequence[_Group], multi_turn: bool) -> dict[str, Any]:
    """The `<prefix>{ac_tokens_per_turn, ..., by_group/*}` family, computed from trajectories."""
    episodes = turns = ac = ob = cached = 0
    reward = fmt = correct = 0.0
    tool_calls = tool_ok = 0
    mixed = good = bad = 0
    for group in groups:
        n_correct = 0
        for t in group.trajs:
            episodes += 1
            turns += len(t.acs)
            ac += sum(t.acs)
            ob += sum(t.obs)
            cached += t.cached
            reward += t.total_reward(multi_turn)
            fmt += t.fmt
            correct += t.correct
            n_correct += t.correct
            tool_calls += len(t.tool_ok)
            tool_ok += sum(t.tool_ok)
        if n_correct == len(group.trajs):
            good += 1
        elif n_correct == 0:
            bad += 1
        else:
            mixed += 1
    n_groups = max(len(groups), 1)
    values: list[Any] = [ac / max(turns, 1), ob / max(turns, 1), turns / max(episodes, 1),
                         episodes, turns, ac, ob, cached, reward / max(episodes, 1)]
    if multi_turn:
        values += [tool_ok / max(tool_calls, 1), fmt / max(episodes, 1),
                   correct / max(episodes, 1), tool_calls / max(episodes, 1)]
    else:
        values += [fmt / max(episodes, 1), correct / max(episodes, 1)]
    values += [mixed / n_groups, good / n_groups, bad / n_groups]
    return dict(zip(_family_keys(prefix, multi_turn), values))


def _rollout_summaries(split: str, iteration: int, groups: list[_Group], mt: bool,
                       newer: str | None = None) -> str:
    """One `*_rollout_summaries.jsonl` file: a line per trajectory (schema_version 1; with
    `newer`, the model's name, also the fields of newer summary versions: `status` with
    `error_type` and `error_message` for a trajectory that failed, `stop_reason`,
    `model_name` and a short `conversation`)."""
    lines = []
    for gi, group in enumerate(groups):
        question, answer = group.problem()[:2] if mt or newer else ("", 0)
        for ti, t in enumerate(group.trajs):
            rewards = t.step_rewards(mt)
            steps = []
            for si in range(t.turns):
                last = si == t.turns - 1
                if mt:
                    metrics = ({"format": 1.0 if t.fmt else 0.0} if last
                               else {"tool_call_ok": 1.0 if t.tool_ok[si] else 0.0})
                    logs = {} if last else {"tool_output": t.tool_output(answer, si),
                                            "latency_ms": t.latency[si]}
                else:
                    metrics = {"format": float(t.fmt), "correct": float(t.correct)}
                    logs = {}
                steps.append({"step_idx": si, "ob_len": t.obs[si], "ac_len": t.acs[si],
                              "reward": rewards[si], "episode_done": last,
                              "metrics": metrics, "logs": logs})
            record = {
                "schema_version": 1, "split": split, "iteration": iteration,
                "group_idx": gi, "traj_idx": ti, "tags": list(group.tags),
                "sampling_client_step": iteration,
                "total_reward": t.total_reward(mt), "final_reward": t.final_reward(mt),
                "trajectory_metrics": ({"correct": 1.0 if t.correct else 0.0,
                                        "num_tool_calls": len(t.tool_ok)} if mt else {}),
                "steps": steps, "final_ob_len": 0,
            }
            if newer is not None:
                failed = (iteration + gi + ti) % 11 == 5
                record.update({"status": "error" if failed else "ok",
                               "stop_reason": "length" if t.acs[-1] > 380 else "stop",
                               "model_name": newer,
                               "conversation": [{"role": "user", "content": question},
                                                {"role": "assistant",
                                                 "content": f"\\boxed{{{answer + t.offset}}}"}]})
                if failed:
                    record.update({"error_type": "RuntimeError",
                                   "error_message": "sandbox exited with code 137 (OOMKilled) "
                                                    "while running calculator"})
            lines.append(_dumps(record))
    return _jsonl(lines)
