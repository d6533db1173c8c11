"""The token-level capture of a generated RL run: `capture/sample.jsonl` and `capture/train_op.jsonl`.

Contract: `_Capture(rng, run_label, model_id)` collects the records tinker-cookbook's
`capture.instrument` wrappers make and `JsonlFileSink` appends (raw records, one per SDK call):
`samples(...)` one `sample` record per turn of each trajectory of a batch (the prompt as many
token ids as the turn's observation, the sampled tokens and their logprobs as many as its
action, `stop_reason`), `train_ops(...)` the `forward_backward` and `optim_step` records of a
step (and `save_weights_for_sampler` at a checkpoint), `cancelled(...)` sample records without
sequences (a call cancelled or failed when the process died). The scope carries what user code
set (`run_id` the run's name, `run_attempt`, `split`, `iteration`, `group_idx`, `traj_idx`,
`purpose`); `created_at` is the call's time, and the lines of a step are written in completion
order. `files()` is `{relative path: text}`. Randomness comes only from `rng` (the run's own
stream for these files, so adding them changes nothing else the run writes).

`_capture_lines(rng, n_distinct)` makes the lines of a large synthetic capture file for
benchmarks and crash tests: `n_distinct` sample records of realistic size (prompts of 200-1200
tokens, samples of 50-800 tokens with their logprobs, one record in 50 a cancelled call
without sequences), each a template that `tree.write_capture` repeats with other coordinates.
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from .encoding import _dumps, _jsonl
from .rollouts import _Group

VOCAB = 151_000
SAMPLING_PARAMS = {"max_tokens": 1024, "temperature": 1.0, "top_p": 1, "top_k": -1,
                   "seed": None}


class _Capture:
    def __init__(self, rng: random.Random, run_label: str, model_id: str) -> None:
        self.rng = rng
        self.run_label = run_label
        self.model_id = model_id
        self.session = f"{model_id}:sample:0"
        self.sample_lines: list[str] = []
        self.op_lines: list[str] = []
        self.attempt = 0

    def new_attempt(self, attempt: int, session: int) -> None:
        """A resumed process: the next `run_attempt`, a new sampling session."""
        self.attempt = attempt
        self.session = f"{self.model_id}:sample:{session}"

    def _scope(self, **coords: Any) -> dict[str, Any]:
        return {"run_id": self.run_label, "run_attempt": self.attempt, **coords}

    def _tokens(self, n: int) -> list[int]:
        rng = self.rng
        return [rng.randrange(VOCAB) for _ in range(n)]

    def samples(self, t0: float, iteration: int, split: str, purpose: str,
                groups: Sequence[_Group]) -> float:
        """One record per turn of every trajectory of `groups`, called from `t0` on; the
        lines appended in completion order. Returns when the last call completed."""
        rng = self.rng
        done: list[tuple[float, str]] = []
        for gi, group in enumerate(groups):
            for ti, traj in enumerate(group.trajs):
                t = t0 + rng.uniform(0.0, 0.5)
                for ob, ac in zip(traj.obs, traj.acs):
                    latency = rng.uniform(1.0, 8.0)
                    logprobs = [-rng.expovariate(3.0) for _ in range(ac)]
                    record = {
                        "kind": "sample",
                        "scope": self._scope(split=split, iteration=iteration, group_idx=gi,
                                             traj_idx=ti, purpose=purpose),
                        "created_at": t, "num_samples": 1, "sampling_session_id": self.session,
                        "seq_id": rng.getrandbits(62), "prompt_tokens": self._tokens(ob),
                        "prompt_length": ob, "sampling_params": dict(SAMPLING_PARAMS),
                        "samples": [{"tokens": self._tokens(ac), "logprobs": logprobs,
                                     "stop_reason": "stop" if ac < 380 else "length"}],
                        "status": "ok", "latency_sec": latency,
                    }
                    done.append((t + latency, _dumps(record)))
                    t += latency + rng.uniform(0.05, 0.4)
        done.sort(key=lambda d: d[0])
        self.sample_lines += [line for _, line in done]
        return max((d[0] for d in done), default=t0)

    def cancelled(self, t0: float, iteration: int, n: int, *, status: str,
                  error: str | None = None) -> None:
        """`n` sample calls that ended without sequences (`cancelled`, or `error`)."""
        rng = self.rng
        for i in range(n):
            ob = rng.randint(140, 260)
            record: dict[str, Any] = {
                "kind": "sample",
                "scope": self._scope(split="train", iteration=iteration, group_idx=i % 2,
                                     traj_idx=i, purpose="rollout"),
                "created_at": t0 + i * rng.uniform(0.1, 0.6), "num_samples": 1,
                "sampling_session_id": self.session, "seq_id": rng.getrandbits(62),
                "prompt_tokens": self._tokens(ob), "prompt_length": ob,
                "sampling_params": dict(SAMPLING_PARAMS),
                "latency_sec": rng.uniform(2.0, 60.0), "status": status}
            if error is not None:
                record["error"] = error
            self.sample_lines.append(_dumps(record))

    def train_ops(self, t0: float, n_data: int, lr: float, checkpoint: str | None) -> None:
        """The training calls of one step (and the sampler save of a checkpoint)."""
        rng = self.rng
        scope = self._scope()
        ops: list[dict[str, Any]] = []
        if checkpoint is not None:
            ops.append({"kind": "train_op", "op": "save_weights_for_sampler", "scope": scope,
                        "created_at": t0 + 5.5, "model_id": self.model_id, "name": checkpoint,
                        "status": "ok", "latency_sec": rng.uniform(3.0, 7.0)})
        fb = {"kind": "train_op", "op": "forward_backward", "scope": scope, "created_at": t0,
              "model_id": self.model_id, "num_data": n_data, "status": "ok",
              "metrics": {"loss:sum": rng.gauss(0.0, 30.0)}, "latency_sec": rng.uniform(20, 45)}
        opt = {"kind": "train_op", "op": "optim_step", "scope": scope,
               "created_at": t0 + 0.0004, "model_id": self.model_id,
               "hyperparams": {"learning_rate": lr, "beta1": 0.9, "beta2": 0.95, "eps": 1e-08,
                               "weight_decay": 0.0, "grad_clip_norm": 0.0},
               "status": "ok", "latency_sec": rng.uniform(2.0, 3.5)}
        # The optimizer step returns first: records are written as calls complete.
        ops += [opt, fb]
        self.op_lines += [_dumps(op) for op in ops]

    def files(self) -> dict[str, str]:
        out = {}
        if self.sample_lines:
            out["capture/sample.jsonl"] = _jsonl(self.sample_lines)
        if self.op_lines:
            out["capture/train_op.jsonl"] = _jsonl(self.op_lines)
        return out


def _capture_lines(rng: random.Random, n_distinct: int) -> list[tuple[str, str]]:
    """(head, tail) of `n_distinct` sample records: the record's line is `head`, the scope's
    iteration, group and trajectory, then `tail` (see `tree.write_capture`)."""
    cap = _Capture(rng, "bench", "00000000-0000-0000-0000-000000000000")
    out = []
    for i in range(n_distinct):
        ob, ac = rng.randint(200, 1200), rng.randint(50, 800)
        record: dict[str, Any] = {
            "kind": "sample", "scope": {"run_id": "bench", "run_attempt": 0, "split": "train",
                                        "iteration": 0, "group_idx": 0, "traj_idx": 0,
                                        "purpose": "rollout"},
            "created_at": 1790411432.0 + i, "num_samples": 1, "sampling_session_id": cap.session,
            "seq_id": rng.getrandbits(62), "prompt_tokens": cap._tokens(ob), "prompt_length": ob,
            "sampling_params": dict(SAMPLING_PARAMS)}
        if i % 50 == 49:
            record.update({"latency_sec": rng.uniform(1.0, 30.0), "status": "cancelled"})
        else:
            record.update({"samples": [{"tokens": cap._tokens(ac),
                                        "logprobs": [-rng.expovariate(3.0) for _ in range(ac)],
                                        "stop_reason": "stop"}],
                           "status": "ok", "latency_sec": rng.uniform(1.0, 8.0)})
        line = _dumps(record)
        head, tail = line.split('"iteration": 0, "group_idx": 0, "traj_idx": 0')
        out.append((head, tail))
    return out
