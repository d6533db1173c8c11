"""RL runs: metrics rows, KL, tokens and cost, step spans and per-iteration artefacts.

Contract: `_RLRunBuilder` is the `_RunBuilder` of `kind="rl"`. Each step samples a batch of
`_Group`s (and eval batches at eval steps) from the run's random stream, derives the metrics
row, spans and checkpoints from them, and writes the iteration's rollout summaries and logtrees
(`iteration_dirs` or `flat` naming, by layout). The layout also picks the trainer era: 0.6.1
(token/cost keys, SDK spans named `sample`, ...) or the older flat release (`*_async` spans).
"""

from __future__ import annotations

import math
import random
import re
from typing import Any, Sequence

from .config import _rl_config
from .extras import _Extras
from .rollouts import _env_family, _family_keys, _Group, _rollout_summaries, _Traj
from .run import _clamp, _RunBuilder
from .spans import _Spans, _timing_metrics
from .specs import RunSpec
from .transcripts import _LogtreeWriter


def _label(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


_PAD_TAGS = ("algebra", "geometry", "number_theory", "counting_and_probability", "precalculus",
             "prealgebra", "intermediate_algebra")


class _RLRunBuilder(_RunBuilder):
    """An RL run: rows, spans and per-iteration files derived from simulated rollouts."""

    def __init__(self, spec: RunSpec, seed: int, *, salt: str = "") -> None:
        super().__init__(spec, seed, salt=salt)
        self.task_counter = 1  # asyncio task names (Task-N) of the current process
        self.future_counter = 0  # SDK futures of the current process (0.6.x trace tracks)
        self.eval_labels = ("test", "aime2025") if spec.multi_turn else ("test",)
        self.n_logged_groups = min(spec.groups_to_log, spec.groups) if spec.logtree else 0
        self.logtrees = _LogtreeWriter(spec, self.log_path, self.n_logged_groups)
        # 0.6.1's other artefacts, from a stream of their own (extras.py).
        self.extras = _Extras(self, random.Random(f"{seed}|{spec.name}|{salt}|0.6.1"))
        self.step_evals: dict[str, Any] = {}  # an async step's eval metrics, logged late

    def training_step(self, step: int, *, superseded: bool) -> list[dict[str, Any]]:
        row = self._rl_step(step, superseded)
        evals, self.step_evals = self.step_evals, {}
        return self.extras.rows_of_step(step, row, evals)

    def build(self) -> dict[str, str]:
        return self.extras.files(super().build())

    def _logs_log(self, per_process: list[list[tuple[int | None, str]]]) -> str | None:
        return self.extras.log_text()

    def _end_process(self, index: int, last: bool) -> None:
        self.extras.end_process(index, last)

    def _config(self) -> dict[str, Any]:
        return _rl_config(self.spec, era=self.era, log_path=self.log_path,
                          n_logged_groups=self.n_logged_groups)

    def _start_process(self, index: int) -> None:
        super()._start_process(index)
        self.task_counter = 1
        self.future_counter = 0
        self.extras.start_process(index)
        if self.spec.async_rl:
            # The async trainer saves the weights it starts from (a resumed one, its resume
            # checkpoint's name again).
            start = 0 if index == 0 else self.spec.resumed_at or 0
            self._checkpoint(f"{start:06d}", start, rolling=False)
            self.extras.checkpoint_saved(f"{start:06d}")

    # -- metrics rows -------------------------------------------------------------------------

    def _level(self, step: int) -> float:
        """Expected success rate at a step: a rising curve whose speed and ceiling depend on lr."""
        lr = self.spec.learning_rate
        speed = _clamp(lr / 1e-4, 0.05, 20.0) ** 0.7
        x = (step + 1) / self.spec.steps
        ceiling = 0.85 - 0.3 * _clamp(lr / 3e-4 - 1.0, 0.0, 1.0)  # too-high lr plateaus lower
        level = 0.12 + (ceiling - 0.12) * (1.0 - math.exp(-3.0 * speed * x))
        return self.planted.level(step, level) if self.planted else level

    def _batch(self, level: float) -> list[_Group]:
        spec, rng = self.spec, self.rng
        groups = []
        for _ in range(spec.groups):
            hard = rng.random() < 0.5
            p = _clamp(level + (-0.25 if hard else 0.25) * rng.random(), 0.02, 0.98)
            if self.planted:
                p = self.planted.group_p(p, rng)
            tags = ["gsm8k", "hard" if hard else "easy"] if spec.multi_turn else ["math"]
            trajs = [self._traj(p) for _ in range(spec.group_size)]
            groups.append(_Group(tags, trajs, rng.getrandbits(32)))
        return groups

    def _traj(self, p: float) -> _Traj:
        rng = self.rng
        t = _Traj()
        t.correct = rng.random() < p
        t.fmt = t.correct or rng.random() < 0.75
        if not t.correct:
            t.offset = (-3, -2, -1, 1, 2, 7, 10)[int(rng.random() * 7)]
        if not self.spec.multi_turn:
            ob = 90 + int(rng.random() * 110)
            t.obs.append(ob)
            t.acs.append(150 + int(rng.random() * 750))
            t.cached = int(ob * rng.random() * 0.5)
            if self.planted:
                self.planted.trajectory(t, rng)
            return t
        n_calls = 1 + (rng.random() < 0.5) + (rng.random() < 0.15)
        ob = 140 + int(rng.random() * 120)
        for _ in range(n_calls):
            t.obs.append(ob)
            ac = 70 + int(rng.random() * 320)
            t.acs.append(ac)
            t.tool_ok.append(rng.random() < 0.93)
            t.latency.append(3 + int(rng.random() * 80))
            # The next observation repeats the whole conversation so far: that prefix is cached.
            t.cached += int((ob + ac) * rng.uniform(0.85, 1.0))
            ob = ob + ac + 20 + int(rng.random() * 10)
        t.obs.append(ob)
        t.acs.append(60 + int(rng.random() * 200))
        return t

    def _kl(self, step: int, superseded: bool) -> tuple[float, float]:
        spec, rng = self.spec, self.rng
        scale = _clamp(spec.learning_rate / 1e-4, 0.1, 4.0) ** 0.5
        v1 = math.exp(rng.gauss(math.log(7e-4 * scale), 0.45))
        if not 1.0e-4 <= v1 <= 3.0e-3:  # stay in the normal band without piling up on its edges
            v1 = rng.uniform(1.0e-4, 3.0e-3)
        r = rng.random()
        if r < 0.03:
            v2 = 0.0  # v2 is exactly 0 now and then ...
        elif r < 0.09:
            v2 = -v1 * rng.uniform(0.05, 0.3)  # ... or slightly negative
        else:
            v2 = v1 * rng.uniform(0.2, 0.9)
        spiking = (spec.kl_spike_at is not None and step >= spec.kl_spike_at) or (
            superseded and spec.spike_overwritten_by_resume)
        if spiking:
            v1 = rng.uniform(0.02, 0.08) * rng.uniform(1.0, 2.5)  # 2x to 20x the threshold
            v2 = v1 * rng.uniform(0.5, 0.9)
        if spec.kl_v2_only_spike_at is not None and step >= spec.kl_v2_only_spike_at:
            v2 = rng.uniform(0.015, 0.06)
        if spec.kl_exact_threshold_at == step:
            v1 = 0.01
        if step in spec.nan_kl_at:
            v1 = v2 = math.nan
        if step in spec.inf_kl_at:
            v1 = math.inf
        return v1, v2

    def _tokens_for(self, groups: Sequence[_Group]) -> dict[str, int]:
        sampled = sum(sum(t.acs) for g in groups for t in g.trajs)
        ob = sum(sum(t.obs) for g in groups for t in g.trajs)
        cached = sum(t.cached for g in groups for t in g.trajs)
        step = {"sampled": sampled, "prefill_cached": cached, "prefill_uncached": ob - cached,
                "trained": sampled + ob}
        for k, v in step.items():
            self.cum_tokens[k] += v
        return step

    def _rl_step(self, step: int, superseded: bool) -> dict[str, Any]:
        spec = self.spec
        level = self._level(step)
        is_eval = spec.eval_every > 0 and step % spec.eval_every == 0
        eval_level = level * 0.95
        if self.planted:
            self.planted.step = step
            eval_level = self.planted.eval_level(step, eval_level)
        evals = {label: self._batch(eval_level) for label in self.eval_labels} if is_eval else {}
        batch = self._batch(level)
        tokens = self._tokens_for(batch) if self.era == "0.6" else None
        regular, rolling = self._save_due(step + 1)  # checkpoint k is saved during step k-1
        spans = self._rl_spans(step, is_eval, step + 1 if regular else None,
                               step + 1 if rolling else None)
        row = self._rl_row(step, batch, evals, tokens, spans, superseded, regular)
        self._rl_artifacts(step, batch, evals)
        self.extras.samples(step, batch, evals)
        if regular:
            self._checkpoint(f"{step + 1:06d}", step + 1, rolling=False)
            self.extras.checkpoint_saved(f"{step + 1:06d}")
        if rolling:
            self._checkpoint(f"{step + 1:06d}", step + 1, rolling=True)
        self._close_step(step, spans)
        return row

    def _rl_row(self, step: int, batch: list[_Group], evals: dict[str, list[_Group]],
                tokens: dict[str, int] | None, spans: _Spans, superseded: bool,
                saved: bool) -> dict[str, Any]:
        spec, rng = self.spec, self.rng
        mt = spec.multi_turn
        # A run that crashes was meant to train 3 more steps than it wrote.
        planned = spec.steps + (3 if spec.crash else 0)
        row: dict[str, Any] = {"step": step, "progress/batch": step, "optim/lr": spec.learning_rate,
                               "progress/done_frac": (step + 1) / planned}
        if saved and spec.string_metric:
            row["state_path"] = self._state_path(f"{step + 1:06d}")
        for label, groups in evals.items():
            # The async trainer logs its evals in rows of their own, later (extras.py).
            (self.step_evals if spec.async_rl else row).update(
                self._env_families(label + "/env/", groups, mt, pad=0))
        kl1, kl2 = self._kl(step, superseded)
        entropy = 0.62 * math.exp(-0.7 * (step + 1) / spec.steps) + rng.gauss(0, 0.02)
        timing = _timing_metrics(spans.items, rng)
        extra = (3 + (len(tokens) * 2 + 2 if tokens else 0) + len(timing) + len(row))
        pad_to = (spec.metric_keys or 0) - extra
        row.update(self._env_families("env/", batch, mt, pad=pad_to))
        if spec.schema_drift and step >= spec.steps // 3:
            row["env/all/format_parse"] = row["env/all/format"]  # a key that starts mid-run
        prefix = "" if spec.unprefixed_kl else "optim/"
        row[prefix + "kl_sample_train_v1"] = kl1
        row[prefix + "kl_sample_train_v2"] = kl2
        if not (spec.schema_drift and step >= (2 * spec.steps) // 3):  # a key that stops
            row[prefix + "entropy"] = entropy
        if tokens is not None:
            for k, v in tokens.items():
                row["tokens/" + k] = v
            for k, v in self.cum_tokens.items():
                row["tokens/cumulative/" + k] = v
            cost = (tokens["sampled"] * 2.4 + tokens["prefill_uncached"] * 0.6
                    + tokens["prefill_cached"] * 0.15 + tokens["trained"] * 0.9) / 1e6
            self.cum_cost += cost
            row["cost/step_usd"] = cost
            row["cost/cumulative_usd"] = self.cum_cost
        row.update(timing)
        if self.planted:
            self.planted.row(step, row, prefix, rng)
        if spec.nulls_in_metrics and step % 5 == 3:
            row[prefix + "entropy"] = None
            row["env/all/ac_tokens_per_turn"] = None
        return row

    def _env_families(self, prefix: str, groups: list[_Group], mt: bool,
                      pad: int) -> dict[str, Any]:
        """Per-tag families (when a tag covers a strict subset of groups), padding, then all."""
        out: dict[str, Any] = {}
        tags: dict[str, list[_Group]] = {}
        for g in groups:
            for tag in g.tags:
                tags.setdefault(tag, []).append(g)
        if any(len(gs) < len(groups) for gs in tags.values()):
            for tag, gs in tags.items():
                out.update(_env_family(f"{prefix}{tag}/", gs, mt))
        family_size = len(_family_keys(prefix, mt))
        pad -= len(out) + family_size
        i = 0
        while pad > 0 and len(groups) > 1:
            # Padding for wide benchmark rows: subject tags, each covering half the groups.
            tag = _PAD_TAGS[i % len(_PAD_TAGS)] + ("" if i < len(_PAD_TAGS) else f"_{i}")
            subset = groups[i % 2::2]
            out.update(_env_family(f"{prefix}{tag}/", subset, mt))
            pad -= family_size
            i += 1
        out.update(_env_family(prefix + "all/", groups, mt))
        return out

    def _final_rows(self) -> list[dict[str, Any]]:
        """After the last step: the final eval row (and in 0.6.1 the token/cost summary row)."""
        spec = self.spec
        level = self._level(spec.steps - 1)
        evals = {label: self._batch(level * 0.95) for label in self.eval_labels}
        rows = [{"step": spec.steps}]
        for label, groups in evals.items():
            rows[0].update(self._env_families(label + "/env/", groups, spec.multi_turn, pad=0))
        self._rl_artifacts(spec.steps, None, evals)
        if self.era == "0.6":
            summary: dict[str, Any] = {"step": spec.steps}
            for k, v in self.cum_tokens.items():
                summary["tokens/cumulative/" + k] = v
            for k in self.cum_tokens:
                summary["tokens/discarded/" + k] = 0
            summary["cost/cumulative_usd"] = self.cum_cost
            rows.append(summary)
        return self.extras.final_rows(rows)

    # -- RL spans -----------------------------------------------------------------------------

    def _task(self) -> str:
        self.task_counter += 1
        return f"Task-{self.task_counter}"

    def _sdk(self, name: str) -> str:
        return name + "_async" if self.era == "flat" else name

    def _rl_spans(self, step: int, is_eval: bool, save_k: int | None,
                  rolling_k: int | None) -> _Spans:
        spec, rng = self.spec, self.rng
        spans = _Spans(rng)
        t = self.clock
        if is_eval:
            t = self._eval_spans(spans, step, t)
        # Fixed phases use 8 spans; the rest of the budget goes to rollout spans, keeping at
        # least two groups of two concurrent trajectories.
        budget = max(spec.spans_per_step - 8, 0)
        turns = 2 if spec.multi_turn else 1
        n_groups = min(spec.groups, max(2, budget // 6))
        per_traj = 2 * turns + (turns if spec.trace else 0)
        per_group_fixed = 3 if self.era == "0.6" else 2
        trajs = min(spec.group_size, max(2, (budget // n_groups - per_group_fixed) // per_traj))
        t_sampled = self._rollout_spans(spans, t, n_groups, trajs, turns, depth=1)
        spans.add("sampling", t, t_sampled - t + 1e-7, 0)
        t = self._train_spans(spans, t_sampled, step, save_k)
        if rolling_k is not None:
            track = f"rolling_checkpoint_{rolling_k:06d}"
            # Rolling saves run in their own task, overlapping the training phase.
            dur = rng.uniform(0.5, 2.0) + (t - t_sampled) * 0.5
            spans.add("save_checkpoint_async", t_sampled, dur, 0, track=track,
                      end_args=self._ckpt_args(f"{rolling_k:06d}", rolling=True))
        return spans

    def _eval_spans(self, spans: _Spans, step: int, t0: float) -> float:
        ends = []
        for label in self.eval_labels:
            track = f"eval_{_label(label)}_iteration_{step:06d}"
            start = t0 + spans.jitter()
            end = self._rollout_spans(spans, start, 1, 2, 2 if self.spec.multi_turn else 1, depth=3)
            spans.add("run_single_evaluation", start, end - start, 2, track=track)
            ends.append(end)
        end = max(ends)
        spans.add("run_evaluations_parallel", t0, end - t0, 1)
        spans.add("run_evals", t0, end - t0 + 1e-7, 0)
        return end

    def _rollout_spans(self, spans: _Spans, t0: float, n_groups: int, n_trajs: int,
                       turns: int, depth: int) -> float:
        rng = self.rng
        group_ends = []
        for _ in range(n_groups):
            group_track = self._task()
            g_start = t0 + spans.jitter()
            traj_ends = []
            for _ in range(n_trajs):
                track = self._task()
                t = g_start + spans.jitter()
                for _ in range(turns):
                    d = rng.uniform(1.2, 7.5) / turns
                    if self.planted:
                        d *= self.planted.slowdown()
                    if self.spec.trace:
                        spans.add(self._sdk("sample"), t + 2e-5, d - 4e-5, depth + 2, track=track)
                    t = spans.add("policy_sample", t, d, depth + 1, track=track)
                    env_dur = rng.uniform(0.03, 0.3) if turns > 1 else rng.uniform(0.001, 0.02)
                    t = spans.add("env_step", t, env_dur, depth + 1, track=track)
                traj_ends.append(t)
            t = max(traj_ends)
            reward_dur = rng.uniform(0.1, 0.55)
            if self.era == "0.6":
                # Grading runs in a worker thread: a second OS thread, hence pid 1 in the trace.
                spans.add("grade_group", t + 1e-5, reward_dur - 2e-5, depth + 2,
                          track="sync:ThreadPoolExecutor-0_0", thread="ThreadPoolExecutor-0_0")
            t = spans.add("compute_group_rewards", t, reward_dur, depth + 1, track=group_track)
            spans.add("do_group_rollout_and_filter_constant_reward", g_start, t - g_start, depth,
                      track=group_track)
            group_ends.append(t)
        return max(group_ends)

    def _train_spans(self, spans: _Spans, t0: float, step: int, save_k: int | None) -> float:
        rng, trace = self.rng, self.spec.trace
        assemble = rng.uniform(0.02, 0.08)
        spans.add("assemble_training_data", t0, assemble, 2)
        t = spans.add("prepare_minibatch", t0, assemble + 1e-6, 1)
        train = rng.uniform(3.0, 6.0)
        if trace:
            # The SDK calls only time their submission, so they are near 0 (0.6.x: own futures).
            t_sdk = t + rng.uniform(0.01, 0.05)
            for method in ("forward_backward", "optim_step"):
                self.future_counter += 1
                future_track = f"Task-1:{method}:{self.future_counter}"
                t_sdk = spans.add(self._sdk(method), t_sdk, rng.uniform(0.001, 0.01), 2,
                                  track=future_track if self.era == "0.6" else "Task-1")
        t_train = spans.add("train_step", t, train, 1)
        kl = rng.uniform(0.007, 0.02)
        t_kl = spans.add("compute_kl_sample_train", t_train, kl, 2)
        save = rng.uniform(1.0, 2.8)
        if trace:
            spans.add(self._sdk("save_weights_and_get_sampling_client"), t_kl + 1e-6,
                      save - 2e-6, 3)
        if save_k is not None:
            name = f"{save_k:06d}"
            spans.add("save_checkpoint_async", t_kl + 2e-6, save * 0.6, 3,
                      end_args=self._ckpt_args(name, rolling=False))
        t_save = spans.add("save_checkpoint", t_kl, save, 2)
        spans.add("compute_full_batch_metrics_and_get_sampling_client", t_train,
                  t_save - t_train, 1)
        return spans.add("do_train_step_and_get_sampling_client", t0, t_save - t0 + 1e-7, 0)

    # -- RL per-iteration artefacts ---------------------------------------------------------

    def _iter_paths(self, base: str, iteration: int) -> tuple[str, str, str]:
        if self.spec.layout == "iteration_dirs":
            d = f"iteration_{iteration:06d}/{base}"
        else:
            d = f"{base}_iteration_{iteration:06d}"
        return d + ".html", d + "_logtree.json", d + "_rollout_summaries.jsonl"

    def _rl_artifacts(self, iteration: int, batch: list[_Group] | None,
                      evals: dict[str, list[_Group]]) -> None:
        """Rollout summaries and logtrees of one iteration; batch None is the final eval."""
        spec = self.spec
        # Real trainers write a logtree at every eval; a logtree weighs ~300 KB, so the
        # generator thins them out with logtree_every to keep demo trees small.
        logged = spec.logtree and (batch is None or (
            spec.logtree_every > 0 and iteration % spec.logtree_every == 0))
        if batch is not None:
            html_path, tree_path, roll_path = self._iter_paths("train", iteration)
            if spec.rollouts_every > 0 and iteration % spec.rollouts_every == 0:
                self.files[roll_path] = _rollout_summaries("train", iteration, batch,
                                                           spec.multi_turn, self._newer())
            if logged:
                self._write_logtree(html_path, tree_path, f"RL Iteration {iteration}", batch,
                                    train=True)
        for label, groups in evals.items():
            base = f"eval_{_label(label)}"
            html_path, tree_path, roll_path = self._iter_paths(base, iteration)
            self.files[roll_path] = _rollout_summaries(f"eval/{label}", iteration, groups,
                                                     spec.multi_turn, self._newer())
            if logged:
                self._write_logtree(html_path, tree_path, f"Running evaluation {label} {iteration}",
                                    groups, train=False)

    def _newer(self) -> str | None:
        """The model name when the run's rollout summaries carry the newer fields."""
        return self.spec.model_name if self.spec.rollout_status else None

    def _write_logtree(self, html_path: str, tree_path: str, title: str,
                       groups: list[_Group], *, train: bool) -> None:
        started = self.clock - self.rng.uniform(5, 20)
        tree_text, html_text = self.logtrees.render(html_path, title, groups, started,
                                                    train=train)
        self.files[tree_path] = tree_text
        self.files[html_path] = html_text
