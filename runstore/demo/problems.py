"""The `problems` scenario: one run per finding of `runstore doctor`, planted, plus healthy runs.

Contract: `problem_specs()` returns the scenario's specs: under `problems/`, one RL run per
finding of the doctor's catalogue (`RunSpec.problem` names it; `kl_spike` and `not_finite`
use the generator's own KL knobs) and healthy runs (`problems/healthy/...`: RL in both
layouts and multi-turn, SL, DPO) on which no finding may fire. `PLANTED_FROM` is the step from
which each problem shows (`PROBLEM_STEPS` steps a run). `Planted(spec)` is what an RL builder
asks while it writes a problem run: the step's success level, the eval level, a group's
success probability, a trajectory's changes, a row's extra keys, the sampling slowdown and
where the run stops. A spec without a problem never reaches this module, so every other
tree is written exactly as before. Standard library only, no I/O, no clock.

What each problem writes, from step `PLANTED_FROM` on unless said (docs/doctor.md defines what
fires):

* `reward_stuck`: from step 0, every trajectory is wrong and well formed: reward exactly 0;
* `parse_errors`: 70% of responses unformatted (`env/all/format` about 0.3);
* `no_improvement`: from step 0, a flat success level (0.35);
* `reward_collapse`: the success level falls to 0.1;
* `entropy_collapse`: `optim/entropy` at 2% of its start, and the level frozen at 75% of
  where it got to;
* `length_at_limit`: every response exactly `max_tokens` long;
* `no_signal`: each group's trajectories all succeed or all fail;
* `rollout_errors`: 12 failed rollouts a step (`rollout_errors/*`, cumulative);
* `stale_policy`: `async/staleness_*` of 3 to 4 steps (1 or less before);
* `slow_steps`: sampling 6 times slower;
* `crashed`: the run stops after 24 of its 40 steps, with no final checkpoint;
* `eval_gap`: the eval level falls from 0.7 (to step 16) to 0.05 (from step 36) while
  training improves;
* `kl_spike` (`kl_spike_at`) and `not_finite` (NaN KL at 3 steps, `nan_kl_at`).
"""

from __future__ import annotations

import random
from typing import Any

from .specs import RunSpec

PROBLEM_STEPS = 40
PLANTED_FROM = 20
CRASH_AFTER = 24  # the crashed run's last step is 23
NAN_STEPS = (25, 26, 27)


def problem_specs() -> list[RunSpec]:
    """The scenario's runs (see the module): 13 planted RL runs, the two planted by the
    generator's own KL knobs, and 5 healthy runs."""
    # 64 trajectories a step, as a small real run samples: a batch of 16 is noisy enough that
    # the drop rule's debiased EMA can take a lucky first batch for the run's best.
    rl = dict(kind="rl", layout="iteration_dirs", steps=PROBLEM_STEPS, learning_rate=1e-4,
              groups=8, group_size=8, eval_every=10, save_every=10, logtree=False,
              rollouts_every=5)
    planted = ("reward_stuck", "parse_errors", "no_improvement", "reward_collapse",
               "entropy_collapse", "length_at_limit", "no_signal", "rollout_errors",
               "stale_policy", "slow_steps", "crashed", "eval_gap")
    specs = [RunSpec("problems/kl_spike", kl_spike_at=PLANTED_FROM, **rl),
             RunSpec("problems/not_finite", nan_kl_at=NAN_STEPS, **rl)]
    for name in planted:
        extra: dict[str, Any] = {}
        if name == "crashed":
            extra["final_checkpoint"] = False
        if name == "eval_gap":
            extra["eval_every"] = 4
        specs.append(RunSpec(f"problems/{name}", problem=name, **{**rl, **extra}))
    specs += [
        RunSpec("problems/healthy/rl_dirs", **{**rl, "eval_every": 5}),
        RunSpec("problems/healthy/rl_flat", **{**rl, "layout": "flat", "eval_every": 5}),
        RunSpec("problems/healthy/rl_tool", multi_turn=True, **{**rl, "eval_every": 5}),
        RunSpec("problems/healthy/sl", kind="sl", steps=60, learning_rate=2e-4, eval_every=20,
                save_every=20),
        RunSpec("problems/healthy/dpo", kind="dpo", steps=40, learning_rate=1e-5,
                eval_every=10, save_every=20),
    ]
    return specs


class Planted:
    """What a problem run changes while its builder writes it (see the module)."""

    def __init__(self, spec: RunSpec) -> None:
        self.problem = spec.problem
        self.multi_turn = spec.multi_turn
        self.max_tokens = 1024 if spec.multi_turn else 2048  # the config's max_tokens
        self.step = 0  # the step being written
        self.errors = 0  # rollout_errors/total so far (cumulative, as tinker-cookbook logs it)
        self.entropy_start: float | None = None
        self.frozen: float | None = None  # entropy_collapse's level from PLANTED_FROM on

    @property
    def on(self) -> bool:
        return self.step >= PLANTED_FROM

    def stop(self, steps: int) -> int:
        """Where the run's only process stops."""
        return CRASH_AFTER if self.problem == "crashed" else steps

    def level(self, step: int, level: float) -> float:
        """The success level of the training batch at `step`."""
        if self.problem == "no_improvement":
            return 0.35
        if step >= PLANTED_FROM:
            if self.problem == "reward_collapse":
                return 0.1
            if self.problem == "entropy_collapse":
                # Frozen below where it got to: the reward stalls as the policy stops exploring.
                if self.frozen is None:
                    self.frozen = 0.75 * level
                return self.frozen
        return level

    def eval_level(self, step: int, level: float) -> float:
        """The success level of the eval batches at `step`."""
        if self.problem != "eval_gap":
            return level
        if step < 16:
            return 0.7
        return max(0.05, 0.7 - 0.65 * (step - 16) / 20)

    def group_p(self, p: float, rng: random.Random) -> float:
        """A group's success probability: all or nothing for `no_signal`."""
        if self.problem == "no_signal" and self.on:
            return 1.0 if rng.random() < p else 0.0
        return p

    def trajectory(self, t: Any, rng: random.Random) -> None:
        """Change one sampled trajectory in place."""
        if self.problem == "reward_stuck":
            t.correct, t.fmt, t.offset = False, True, t.offset or 1
        elif self.problem == "parse_errors" and self.on:
            t.fmt = rng.random() >= 0.7
        elif self.problem == "length_at_limit" and self.on:
            t.acs = [self.max_tokens] * len(t.acs)

    def row(self, step: int, row: dict[str, Any], prefix: str, rng: random.Random) -> None:
        """Add or change keys of the step's metrics row."""
        entropy_key = prefix + "entropy"
        if self.problem == "entropy_collapse" and isinstance(row.get(entropy_key), float):
            if self.entropy_start is None:
                self.entropy_start = row[entropy_key]
            if step >= PLANTED_FROM:
                row[entropy_key] = self.entropy_start * rng.uniform(0.015, 0.025)
        if self.problem == "rollout_errors" and step >= PLANTED_FROM:
            self.errors += 12
            timeouts = (self.errors * 2) // 3
            row["rollout_errors/APITimeoutError"] = float(timeouts)
            row["rollout_errors/RuntimeError"] = float(self.errors - timeouts)
            row["rollout_errors/total"] = float(self.errors)
            row["rollout_errors/groups_skipped"] = 0.0
        if self.problem == "stale_policy":
            low, high = (3, 4) if step >= PLANTED_FROM else (0, 1)
            values = [rng.randint(low, high) for _ in range(4)]
            row["async/staleness_max"] = max(values)
            row["async/staleness_min"] = min(values)
            row["async/staleness_mean"] = sum(values) / len(values)

    def slowdown(self) -> float:
        """How much slower sampling is at the step being written."""
        return 6.0 if self.problem == "slow_steps" and self.on else 1.0
