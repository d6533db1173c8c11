"""config.json of a generated run, per kind and trainer era.

Contract: `_rl_config`, `_sl_config` and `_dpo_config` return the dict that tinker-cookbook's
`chz` config of that trainer serialises to (key order included), from the spec and the few
facts of the run that appear in it (log path, era, groups logged). Pure functions.
"""

from __future__ import annotations

from typing import Any

from .specs import RunSpec


def _renderer(model_name: str) -> str:
    model = model_name.lower()
    if "llama" in model:
        return "llama3"
    return "qwen3_instruct" if "instruct" in model else "qwen3"


def _rl_config(spec: RunSpec, *, era: str, log_path: str,
               n_logged_groups: int) -> dict[str, Any]:
    renderer = _renderer(spec.model_name)
    if spec.multi_turn:
        builder_type = "tinker_cookbook.recipes.tool_use.gsm8k_tool.Gsm8kToolRLDatasetBuilder"
    else:
        builder_type = "tinker_cookbook.recipes.math_rl.math_env.MathDatasetBuilder"
    evaluators = ([{"__type__": "tinker_cookbook.eval.benchmarks.AimeEvaluatorBuilder",
                    "name": "aime2025", "max_tokens": 4096}] if spec.multi_turn else [])
    cfg: dict[str, Any] = {
        "learning_rate": spec.learning_rate,
        "dataset_builder": {"__type__": builder_type, "batch_size": spec.groups,
                            "model_name_for_tokenizer": spec.model_name,
                            "renderer_name": renderer, "group_size": spec.group_size,
                            "convo_prefix": "standard", "seed": 0},
        "model_name": spec.model_name,
        "recipe_name": "gsm8k_tool" if spec.multi_turn else "math_rl",
        "max_tokens": 1024 if spec.multi_turn else 2048,
        "log_path": log_path,
        "eval_every": spec.eval_every,
        "save_every": spec.save_every,
        "evaluator_builders": evaluators,
        "load_checkpoint_path": None,
        "renderer_name": renderer,
        "wandb_project": None,
        "wandb_name": None,
    }
    new = era == "0.6"
    if new:
        cfg["session_name"] = None
    cfg.update({"kl_penalty_coef": 0.0, "kl_discount_factor": 0.0})
    if new:
        cfg["kl_reference_config"] = None
    cfg.update({"loss_fn": "ppo" if spec.multi_turn else "importance_sampling",
                "loss_fn_config": None, "num_substeps": 1,
                "lora_rank": 64 if spec.multi_turn else 32, "temperature": 1.0,
                "compute_post_kl": False, "remove_constant_reward_groups": False})
    if new:
        cfg.update({"rollout_error_tolerance": None, "termination": None})
    # A `stale_policy` run of the problems scenario trains asynchronously (problems.py).
    async_config = ({"max_steps_off_policy": 4, "groups_per_batch": spec.groups}
                    if spec.problem == "stale_policy" else None)
    cfg.update({"enable_trace": spec.trace, "span_chart_every": 0, "async_config": async_config,
                "stream_minibatch_config": None, "base_url": None, "ttl_seconds": 604800})
    if new:
        cfg.update({"rolling_save_every": spec.rolling_save_every, "rolling_ttl_seconds": 7200})
    cfg.update({"num_groups_to_log": n_logged_groups, "rollout_json_export": True})
    if new:
        cfg.update({"num_epochs": 1, "max_steps": None})
    return cfg


def _common_sl_config(spec: RunSpec, recipe: str, log_path: str) -> dict[str, Any]:
    renderer = _renderer(spec.model_name)
    return {
        "log_path": log_path,
        "model_name": spec.model_name,
        "recipe_name": recipe,
        "dataset_builder": {"common_config": {
            "model_name_for_tokenizer": spec.model_name, "renderer_name": renderer,
            "max_length": 16384, "batch_size": 128 if spec.kind == "sl" else 64,
            "train_on_what": "all_assistant_messages"}},
        "load_checkpoint_path": None,
        "renderer_name": renderer,
        "learning_rate": spec.learning_rate,
        "lr_schedule": "linear",
        "num_epochs": 1,
    }


def _sl_config(spec: RunSpec, *, log_path: str) -> dict[str, Any]:
    cfg = _common_sl_config(spec, "chat_sl", log_path)
    cfg["dataset_builder"].update({"file_path": "/data/tulu3_sft_mixture_\U0001F9EA.jsonl",
                                   "test_size": 256, "shuffle_seed": 0})
    cfg.update({"lora_rank": 32, "base_url": None, "evaluator_builders": [],
                "infrequent_evaluator_builders": [], "save_every": spec.save_every,
                "save_every_tokens": 0, "save_every_seconds": 0.0,
                "eval_every": spec.eval_every, "infrequent_eval_every": 100,
                "ttl_seconds": 604800, "rolling_save_every": spec.rolling_save_every,
                "rolling_ttl_seconds": 7200, "async_periodic_saves": False,
                "adam_beta1": 0.9, "adam_beta2": 0.95, "adam_eps": 1e-08,
                "wandb_project": None, "wandb_name": None, "session_name": None,
                "enable_trace": spec.trace, "span_chart_every": 0, "max_steps": None,
                "submit_ahead": 1})
    return cfg


def _dpo_config(spec: RunSpec, *, log_path: str) -> dict[str, Any]:
    cfg = _common_sl_config(spec, "preference_dpo", log_path)
    cfg.update({"dpo_beta": 0.1, "lora_rank": 32, "num_replicas": 8, "base_url": None,
                "evaluator_builders": [], "infrequent_evaluator_builders": [],
                "save_every": spec.save_every, "eval_every": spec.eval_every,
                "infrequent_eval_every": 100, "ttl_seconds": 604800,
                "rolling_save_every": spec.rolling_save_every, "rolling_ttl_seconds": 7200,
                "adam_beta1": 0.9, "adam_beta2": 0.95, "adam_eps": 1e-08,
                "wandb_project": None, "wandb_name": None, "session_name": None,
                "enable_trace": spec.trace, "span_chart_every": 0,
                "reference_model_name": None, "max_steps": None})
    return cfg
