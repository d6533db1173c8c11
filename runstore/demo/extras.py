"""What a generated 0.6.1 RL run writes beyond the logging guide: async rows, capture, logs.log.

Contract: `_Extras(builder, rng)` is owned by an RL run builder (`rl.py`) and adds, per its
spec's flags, what tinker-cookbook 0.6.1's trainers write besides the guide's files:

* `async_rl`: `rows_of_step` wraps a step's training row as the async trainer logs it: the
  training row gains `training_client/step`, `sampling_client/step_*`, `async/staleness_*`
  and (once a rollout failed) the cumulative `rollout_errors/*`; before step 0 and every odd
  step comes a step-less `log_summary` row of the cumulative tokens and cost
  (`DiscardedWorkLog`); an evaluation is logged one step late (`log_metrics_event`), at the
  evaluated weights' step, with its `eval/snapshot/*` coordinates, `eval/by_step|by_cost|
  by_time/<name>` copies of each eval metric and `eval/timing/*`; `final_rows` turns the
  final eval into such a row and adds `cost/discarded_usd` to the cost row.
* `capture`: the token-level capture of every sample call (`capture.py`), `run_attempt`
  counting the processes.
* `logs`: `logs.log` (`logs.py`): per process its command line, then per step the trainer's
  records and a metrics table now and then; a process that dies (the first of a resumed run,
  or the last of a run with `crash`) ends with the sweep runner's `Run failed` record and its
  traceback; a completed run says so; `next_in_sweep` appends that point's `Configuration:`
  block, as a sequential sweep's runner logs it into the previous run's file.
* `crash`: the last step's pending sample calls become `cancelled` capture records, and its
  rollout summaries are left as the `.NAME.PID.tmp` an interrupted atomic write leaves
  (`leftover_tmp`).
* `rollout_status`: the rollout summaries carry newer fields (`rollouts.py`).

Randomness comes from `rng`, the run's stream for these artefacts alone, so a run's other files
are what they would be without them.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Sequence

from .capture import _Capture
from .logs import _LogText
from .rollouts import _Group
from .specs import FAKE_HOME, FAKE_MODULE_PATH

if TYPE_CHECKING:
    from .run import _RunBuilder

TRAIN = "tinker_cookbook.rl.train"
ML_LOG = "tinker_cookbook.utils.ml_log"
CKPT = "tinker_cookbook.checkpoint_utils"
RESUME_ERROR = "ConnectionResetError: [Errno 104] Connection reset by peer"
TMP_PID = 29285


class _Extras:
    def __init__(self, builder: "_RunBuilder", rng: random.Random) -> None:
        self.b = builder
        self.spec = builder.spec
        self.rng = rng
        self.capture = (_Capture(rng, builder.spec.name.rsplit("/", 1)[-1], builder.model_id)
                        if self.spec.capture else None)
        self.log = _LogText() if self.spec.logs else None
        self.pending: list[dict[str, Any]] = []  # eval rows waiting to be logged
        self.errors: dict[str, int] = {}  # cumulative rollout errors
        self.discarded_usd = 0.0
        self.started = 0.0
        self.next_config: dict[str, Any] | None = None  # set by the tree writer

    # -- processes --------------------------------------------------------------------------

    def start_process(self, index: int) -> None:
        b, log = self.b, self.log
        self.started = b.clock
        if self.capture is not None:
            self.capture.new_attempt(index, index)
        if log is None:
            return
        log.command(f"{FAKE_HOME}/launch_tool_sweep.py 'learning_rate=[2e-5,8e-5]'")
        log.info(ML_LOG, 729, f"Logging to: {b.log_path}")
        if index == 0:
            log.info(CKPT, 396, f"No checkpoints found at {b.log_path}/checkpoints.jsonl")
        else:
            resume = f"{self.spec.resumed_at:06d}"
            log.info(CKPT, 410, f"Resuming from checkpoint: {b._state_path(resume)}")
        log.info(TRAIN, 2620, f"Will train on {self.spec.steps} batches")

    def end_process(self, index: int, last: bool) -> None:
        spec, log = self.spec, self.log
        died = (not last) or spec.crash is not None
        if died and self.capture is not None:
            self.capture.cancelled(self.b.clock, self._last_step, 3, status="cancelled")
        if log is None:
            return
        if died:
            log.record("tinker_cookbook.recipes.chat_sl.sweep.runner", 202, "ERROR",
                       f"Run failed: {spec.name.rsplit('/', 1)[-1]}")
            frames = [
                (f"{FAKE_MODULE_PATH}/recipes/chat_sl/sweep/runner.py", 200, "_run_sequential",
                 "_run_single(main_fn, base_config, overrides, log_path)"),
                (f"{FAKE_MODULE_PATH}/rl/train.py", 2653, "main", "await training_func("),
                (f"{FAKE_MODULE_PATH}/rl/train.py", 1550, "training_loop",
                 "_maybe_export_rollout_summary_jsonl("),
                (f"{FAKE_MODULE_PATH}/stores/storage.py", 248, "write", "tmp.write_bytes(data)"),
            ]
            log.traceback(frames, spec.crash if last and spec.crash else RESUME_ERROR)
        elif last:
            if spec.final_checkpoint:
                self.checkpoint_saved("final")
            log.info(TRAIN, 2687, "Training completed successfully")
        if last and self.next_config is not None:
            log.configuration(self.next_config)

    # -- steps ---------------------------------------------------------------------------------

    def samples(self, step: int, batch: Sequence[_Group],
                evals: dict[str, list[_Group]]) -> None:
        """The capture of one step's sample calls (evals first, then the training batch)."""
        self._last_step = step
        if self.capture is None:
            return
        t = self.b.clock
        for label, groups in evals.items():
            t = self.capture.samples(t, step, label, "eval", groups)
        t = self.capture.samples(t, step, "train", "rollout", batch)
        n_data = sum(len(g.trajs) for g in batch)
        checkpoint = f"{step + 1:06d}" if self.b._save_due(step + 1)[0] else None
        self.capture.train_ops(t + self.rng.uniform(1.0, 5.0), n_data, self.spec.learning_rate,
                               checkpoint)

    def rows_of_step(self, step: int, row: dict[str, Any],
                     evals: dict[str, Any]) -> list[dict[str, Any]]:
        """The metrics rows step `step` logs (see the module); `evals`: its eval metrics."""
        self._log_step(step, row)
        if not self.spec.async_rl:
            row.update(evals)
            return [row]
        rng = self.rng
        out: list[dict[str, Any]] = []
        if step == 0 or step % 2 == 1:
            out.append(self._summary(None))
        lag = 1 if step > 0 and rng.random() < 0.5 else 0
        row["training_client/step"] = step
        for stat in ("max", "min", "mean"):
            row[f"sampling_client/step_{stat}"] = max(step - (lag if stat != "max" else 0), 0)
            row[f"async/staleness_{stat}"] = lag if stat != "min" else 0
        if rng.random() < 0.4:
            kind = "RuntimeError" if rng.random() < 0.7 else "APITimeoutError"
            self.errors[kind] = self.errors.get(kind, 0) + 1
            self.errors["total"] = self.errors.get("total", 0) + 1
        row.update({f"rollout_errors/{k}": float(v) for k, v in sorted(self.errors.items())})
        out.append(row)
        out += self.pending  # the evaluation of an earlier step arrives now
        self.pending = [self._eval_row(step, evals)] if evals else []
        return out

    def _log_step(self, step: int, row: dict[str, Any]) -> None:
        log = self.log
        if log is None:
            return
        log.info(TRAIN, 1513, f"[training_loop] Step {step}: Will train on batch, num groups: "
                              f"{self.spec.groups}")
        if self.rng.random() < 0.3:
            log.warning("tinker_cookbook.rl.rollout_strategy", 248,
                        "Trajectory failed (RuntimeError): sandbox exited with code 137 "
                        "(OOMKilled) while running calculator (retries_remaining=2)")
        log.info(ML_LOG, 236, f"Wrote metrics to {self.b.log_path}/metrics.jsonl")
        if step % 4 == 0:
            keys = [k for k in ("env/all/reward/total", "optim/kl_sample_train_v1",
                                "cost/cumulative_usd", "progress/done_frac") if k in row]
            log.table(f"Step {step}", [(k, row[k]) for k in keys])

    def checkpoint_saved(self, name: str) -> None:
        if self.log is not None:
            paths = {"state_path": self.b._state_path(name),
                     "sampler_path": f"tinker://{self.b.model_id}/sampler_weights/{name}"}
            self.log.info(CKPT, 465, f"Saved checkpoints: {paths}")

    def _summary(self, step: int | None) -> dict[str, Any]:
        """The cumulative tokens and cost as `DiscardedWorkLog` (or the final row) logs them."""
        b = self.b
        self.discarded_usd += self.rng.uniform(0.0, 0.0005)
        row: dict[str, Any] = {} if step is None else {"step": step}
        row.update({f"tokens/cumulative/{k}": v for k, v in b.cum_tokens.items()})
        row.update({f"tokens/discarded/{k}": int(v * 0.2) if k != "trained" else 0
                    for k, v in b.cum_tokens.items()})
        row["cost/cumulative_usd"] = b.cum_cost
        row["cost/discarded_usd"] = self.discarded_usd
        return row

    def _eval_row(self, step: int, evals: dict[str, Any]) -> dict[str, Any]:
        """An evaluation of the weights of `step`, as `log_metrics_event` logs it."""
        rng, b = self.rng, self.b
        elapsed = b.clock - self.started
        row: dict[str, Any] = {"step": step, **evals,
                               "eval/snapshot/training_step": step,
                               "eval/snapshot/elapsed_seconds": elapsed,
                               "eval/snapshot/cumulative_cost_usd": b.cum_cost,
                               "eval/completed_elapsed_seconds": elapsed + rng.uniform(60, 300)}
        for axis in ("step", "cost", "time"):
            row.update({f"eval/by_{axis}/{k}": v for k, v in evals.items()})
        row["eval/timing/time/total"] = rng.uniform(60.0, 300.0)
        return row

    def final_rows(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rows after the last step: (async) the pending eval, the final eval as an event
        row, and the cost row with the discarded cost."""
        if not self.spec.async_rl:
            return rows
        final_eval = {k: v for k, v in rows[0].items() if k != "step"}
        out = self.pending + [self._eval_row(self.spec.steps, final_eval)]
        self.pending = []
        for row in rows[1:]:
            row["cost/discarded_usd"] = self.discarded_usd
            out.append(row)
        return out

    def files(self, files: dict[str, str]) -> dict[str, str]:
        """`files` with the capture, and a crashed run's last rollouts left mid-write."""
        if self.capture is not None:
            files.update(self.capture.files())
        if self.spec.crash is not None and self.spec.leftover_tmp:
            last = f"iteration_{self._last_step:06d}"
            files.pop(f"{last}/train_rollout_summaries.jsonl", None)
            files[f"{last}/.train_rollout_summaries.jsonl.{TMP_PID}.tmp"] = ""
        return files

    def log_text(self) -> str | None:
        return None if self.log is None else self.log.text()

    _last_step = 0
