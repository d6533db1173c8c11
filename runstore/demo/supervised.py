"""SL and DPO runs: one metrics row, spans and checkpoints per step, and SL's logs.log.

Contract: `_SLRunBuilder` and `_DPORunBuilder` are the `_RunBuilder`s of `kind="sl"` and
`kind="dpo"`. Both follow tinker-cookbook 0.6.1 and write no per-iteration files; checkpoint k
is saved at step k (RL saves it during step k-1). DPO rows always carry `state_path` strings at
checkpoint steps, as upstream's DPO trainer logs them.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .config import _dpo_config, _sl_config
from .logs import _LogText
from .run import _clamp, _RunBuilder
from .spans import _Spans, _timing_metrics
from .specs import FAKE_HOME


class _SLRunBuilder(_RunBuilder):
    """A supervised-learning run (train_sl): NLL falls with a speed set by the learning rate."""

    def training_step(self, step: int, *, superseded: bool) -> list[dict[str, Any]]:
        return [self._sl_step(step)]

    def _config(self) -> dict[str, Any]:
        return _sl_config(self.spec, log_path=self.log_path)

    def _sl_step(self, step: int) -> dict[str, Any]:
        spec, rng = self.spec, self.rng
        x = (step + 1) / spec.steps
        speed = _clamp(spec.learning_rate / 1e-4, 0.2, 5.0) ** 0.5
        nll = 0.8 + 1.5 * math.exp(-3.0 * speed * x) + rng.gauss(0, 0.03)
        is_eval = spec.eval_every > 0 and step % spec.eval_every == 0
        regular, rolling = self._save_due(step)
        num_tokens = rng.randint(190_000, 265_000)
        loss_tokens = int(num_tokens * rng.uniform(0.38, 0.43))
        self.cum_tokens["trained"] += num_tokens
        cost = num_tokens * 6e-7
        self.cum_cost += cost
        spans = self._sl_spans(step, is_eval, regular, rolling)
        row: dict[str, Any] = {"step": step, "epoch": 0, "progress": x,
                               "learning_rate": spec.learning_rate * (1.0 - step / spec.steps)}
        if (regular or rolling) and spec.string_metric:
            row["state_path"] = self._state_path(f"{step:06d}")
        if is_eval:
            row["test/nll"] = nll + 0.25 + rng.gauss(0, 0.02)
        row.update({"num_sequences": 128, "num_tokens": num_tokens, "num_loss_tokens": loss_tokens,
                    "train_mean_nll": nll})
        for k in ("sampled", "prefill_cached", "prefill_uncached", "trained"):
            row["tokens/" + k] = num_tokens if k == "trained" else 0
        for k, v in self.cum_tokens.items():
            row["tokens/cumulative/" + k] = v
        row["cost/step_usd"] = cost
        row["cost/cumulative_usd"] = self.cum_cost
        row["train_mean_bpb"] = nll * 0.37
        row.update(_timing_metrics(spans.items, rng))
        if spec.nulls_in_metrics and step % 5 == 3:
            row["train_mean_bpb"] = None
        if regular or rolling:
            self._checkpoint(f"{step:06d}", step, rolling=rolling)
        self._close_step(step, spans)
        return row

    def _sl_spans(self, step: int, is_eval: bool, regular: bool, rolling: bool) -> _Spans:
        rng, trace = self.rng, self.spec.trace
        spans = _Spans(rng)
        t0 = self.clock
        t = spans.add("get_batch", t0, rng.uniform(0.1, 0.5), 1)
        if is_eval:
            t = spans.add("evals", t + 1e-6, rng.uniform(4, 10), 1)
        t = spans.add("submit_batch", t0, t - t0 + 1e-7, 0)
        if regular or rolling:
            name = f"{step:06d}"
            track = f"rolling_checkpoint_{name}" if rolling else "Task-1"
            save = rng.uniform(1.5, 3.5)
            if trace:
                spans.add("save_state", t + 1e-5, 3e-4 - rng.random() * 1e-12, 1, track=track)
                if regular:
                    spans.add("save_weights_for_sampler", t + 2e-5, save * 0.5, 1, track=track)
            spans.add("save_checkpoint_async", t, save, 0, track=track,
                      end_args=self._ckpt_args(name, rolling=rolling))
        d = rng.uniform(3.0, 5.5)
        spans.add("step", t, d, 1)
        spans.add("finish_batch", t, d + 1e-7, 0)
        return spans

    def _logs_log(self, per_process: list[list[tuple[int | None, str]]]) -> str | None:
        log = _LogText()
        log.command(f"{FAKE_HOME}/train_sl.py log_path={self.log_path}")
        log.info("tinker_cookbook.utils.ml_log", 729, f"Logging to: {self.log_path}")
        for lines in per_process:
            for step, line in lines:
                log.info("tinker_cookbook.utils.ml_log", 236,
                         f"Wrote metrics to {self.log_path}/metrics.jsonl")
                if step is not None and step % 10 == 0:
                    row = json.loads(line)
                    keys = [k for k in row if k != "step" and isinstance(row[k], (int, float))][:6]
                    log.table(f"Step {step}", [(k, row[k]) for k in keys])
        return log.text()


class _DPORunBuilder(_RunBuilder):
    """A DPO run (train_dpo): loss falls, accuracy and the chosen/rejected margin rise."""

    def training_step(self, step: int, *, superseded: bool) -> list[dict[str, Any]]:
        return [self._dpo_step(step)]

    def _config(self) -> dict[str, Any]:
        return _dpo_config(self.spec, log_path=self.log_path)

    def _dpo_step(self, step: int) -> dict[str, Any]:
        spec, rng = self.spec, self.rng
        x = step / spec.steps
        is_eval = spec.eval_every > 0 and (step % spec.eval_every == 0 or step == spec.steps - 1)
        regular, rolling = self._save_due(step)
        loss = 0.35 + 0.6 * math.exp(-2.5 * x) + rng.gauss(0, 0.03)
        acc = _clamp(0.52 + 0.35 * (1 - math.exp(-2.5 * x)) + rng.gauss(0, 0.02), 0.0, 1.0)
        chosen, rejected = rng.gauss(0.25, 0.08), -rng.uniform(0.15, 0.45)
        spans = self._dpo_spans(step, is_eval, regular)
        row: dict[str, Any] = {"step": step, "epoch": 0}
        if regular:
            row["state_path"] = self._state_path(f"{step:06d}")  # a string in a metric column
        if is_eval:
            row["test/dpo_loss"] = loss + 0.12 + rng.gauss(0, 0.02)
            row["test/accuracy"] = acc - 0.03
        timing = _timing_metrics(spans.items, rng)
        row.update({"num_pairs": 64, "num_tokens": rng.randint(55_000, 90_000),
                    "learning_rate": spec.learning_rate * (1.0 - x), "progress": x,
                    "dpo_loss": loss, "accuracy": acc,
                    "margin": chosen - rejected + rng.gauss(0.3, 0.2),
                    "chosen_reward": chosen, "rejected_reward": rejected})
        row.update(timing)
        row["batch_time"] = timing["time/total"]
        if spec.nulls_in_metrics and step % 5 == 3:
            row["margin"] = None
        if regular or rolling:
            self._checkpoint(f"{step:06d}", step, rolling=rolling)
        self._close_step(step, spans)
        return row

    def _dpo_spans(self, step: int, is_eval: bool, regular: bool) -> _Spans:
        rng = self.rng
        spans = _Spans(rng)
        t = self.clock
        if regular:
            d = rng.uniform(2.5, 3.8)
            spans.add("save_checkpoint_async", t, d, 1,
                      end_args=self._ckpt_args(f"{step:06d}", rolling=False))
            t = spans.add("save_checkpoint", t, d + 1e-7, 0)
        if is_eval:
            t = spans.add("evals", t, rng.uniform(4, 9), 0)
        if step == 0:
            t = spans.add("infrequent_evals", t, rng.uniform(15, 25), 0)
        t = spans.add("get_batch", t, rng.uniform(0.15, 0.6), 0)
        t = spans.add("get_ref_logprobs", t, rng.uniform(1.0, 2.5), 0)
        spans.add("step", t, rng.uniform(2.0, 4.5), 0)
        return spans
