"""`*_rollout_summaries.jsonl` records → `trajectories` and `rollout_steps` rows.

Contract: `normalize(records, ctx) -> {"trajectories": rows, "rollout_steps": rows}` where
`records` yields `(line_number, decoded_object)`; each record is one trajectory (FORMATS.md,
"*_rollout_summaries.jsonl") and each element of its `steps` list one `rollout_steps` row.

* `split` and `iteration` come from the record; when missing or unusable they fall back to
  `ctx.split` / `ctx.iteration` (what the file's name says). Step rows repeat the trajectory's
  split, iteration, group_idx and traj_idx so they join without the parent row.
* `n_steps` = `len(steps)`. `metrics` (from `trajectory_metrics`), and the step `metrics`/`logs`
  are JSON text (`NaN`/`Infinity` kept as bare tokens, as Python writes them); null when absent.
* A step's `step_idx` falls back to its position in `steps` when missing.
* Newer summary versions add trajectory fields, kept when present: `status`, `error_type`,
  `error_message`, `stop_reason`, `model_name` (text) and `conversation` (JSON text).
* Tolerance: a record that is not an object is reported and skipped; so is a step that is not an
  object. A field of the wrong type is coerced when the spelling is unambiguous (integral float
  for an int, int for a float — the nearest double, ±inf past the largest — 0/1 for a bool)
  and otherwise stored as null; all problems of one
  line are reported in a single warning. Missing fields are null without a warning.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from .base import Batch, Context, Output, clean_str as _clean_str, json_text
from .fields import Fields

__all__ = ["Rollouts", "normalize"]


def _json_text(value: Any) -> str | None:
    return None if value is None else json_text(value)


def _tags(value: Any, fields: Fields) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):  # a single tag written bare
        return [_clean_str(value)]
    if not isinstance(value, list):
        fields.bad("tags", value)
        return None
    # Non-string tags are kept as their JSON text rather than dropped.
    return [
        _clean_str(t) if isinstance(t, str) else _clean_str(json.dumps(t, allow_nan=True, default=str))
        for t in value
    ]


# Trajectory keys of newer summary versions, kept when present (strings; `conversation` is
# stored as JSON text).
NEWER_STRINGS = ("status", "error_type", "error_message", "stop_reason", "model_name")
# Step keys with a column of their own; anything else (e.g. upstream's `trace`) goes to `extra`.
_STEP_KEYS = frozenset({"step_idx", "ob_len", "ac_len", "reward", "episode_done", "metrics",
                        "logs", "stop_reason"})


def normalize(records: Iterable[tuple[int, Any]], ctx: Context) -> dict[str, list[dict]]:
    base = ctx.base()
    trajectories: list[dict] = []
    steps_out: list[dict] = []
    for line, rec in records:
        if not isinstance(rec, dict):
            ctx.warn(line, f"rollout record is a JSON {type(rec).__name__}, not an object; skipped")
            continue
        f = Fields()

        split = rec.get("split")
        if not isinstance(split, str):
            if split is not None:
                f.bad("split", split)
            split = ctx.split
        else:
            split = _clean_str(split)
        iteration = f.int(rec, "iteration")
        if iteration is None:
            iteration = ctx.iteration
        group_idx = f.int(rec, "group_idx")
        traj_idx = f.int(rec, "traj_idx")

        steps = rec.get("steps")
        if steps is not None and not isinstance(steps, list):
            f.bad("steps", steps)
            steps = None

        trajectories.append(
            {
                **base,
                "split": split,
                "iteration": iteration,
                "group_idx": group_idx,
                "traj_idx": traj_idx,
                "tags": _tags(rec.get("tags"), f),
                "sampling_client_step": f.int(rec, "sampling_client_step"),
                "total_reward": f.float(rec, "total_reward"),
                "final_reward": f.float(rec, "final_reward"),
                "final_ob_len": f.int(rec, "final_ob_len"),
                "n_steps": len(steps) if steps is not None else None,
                "metrics": _json_text(rec.get("trajectory_metrics")),
                **{k: f.str(rec, k) for k in NEWER_STRINGS},
                "conversation": _json_text(rec.get("conversation")),
            }
        )

        for pos, step in enumerate(steps or ()):
            where = f"steps[{pos}]"
            if not isinstance(step, dict):
                f.problems.append(f"{where} is not an object (skipped)")
                continue
            step_idx = f.int(step, "step_idx", f"{where}.step_idx")
            steps_out.append(
                {
                    **base,
                    "split": split,
                    "iteration": iteration,
                    "group_idx": group_idx,
                    "traj_idx": traj_idx,
                    "step_idx": pos if step_idx is None else step_idx,
                    "ob_len": f.int(step, "ob_len", f"{where}.ob_len"),
                    "ac_len": f.int(step, "ac_len", f"{where}.ac_len"),
                    "reward": f.float(step, "reward", f"{where}.reward"),
                    "episode_done": f.bool(step, "episode_done", f"{where}.episode_done"),
                    "metrics": _json_text(step.get("metrics")),
                    "logs": _json_text(step.get("logs")),
                    "stop_reason": (_clean_str(step["stop_reason"])
                                    if isinstance(step.get("stop_reason"), str) else None),
                    "extra": _json_text({k: v for k, v in step.items() if k not in _STEP_KEYS} or None),
                }
            )

        if f.problems:
            ctx.warn(line, "rollout fields of the wrong type stored as null: " + ", ".join(f.problems))
    return {"trajectories": trajectories, "rollout_steps": steps_out}


class Rollouts:
    """`*_rollout_summaries.jsonl` → `trajectories` and `rollout_steps`."""

    kinds = ("rollouts",)
    tables = ("trajectories", "rollout_steps")

    def normalize(self, batch: Batch) -> Output:
        out = Output()
        out.rows(normalize(batch.records(), batch.ctx))
        return out
