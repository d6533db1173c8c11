"""What a generated tree holds: `RunSpec` (one run or decoy directory) and the canned trees.

Contract: a `RunSpec` validates itself on construction (`ValueError` naming the run) and says
nothing about how its files are written. `default_specs()`, `awkward_specs()` and
`bench_specs()` return fresh lists of specs; the constants (`KINDS`, `LAYOUTS`, `DECOYS`, the
fake home that appears inside files, ...) are the closed sets and fixed values a spec uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

# Fake absolute locations that appear inside the files (log_path, logtree `path`, code.diff).
FAKE_HOME = "/home/researcher"
FAKE_RUNS_ROOT = FAKE_HOME + "/runs"
FAKE_MODULE_PATH = FAKE_HOME + "/.venv/lib/python3.11/site-packages/tinker_cookbook"

MTIME_AGE_SECONDS = 24 * 3600
# The seed of the demo tree: `runstore demo` writes it, and the docs' shown outputs, screenshots
# and the tests' demo fixtures come from it, so what the docs show is what the demo answers.
DEMO_SEED = 7

KINDS = ("rl", "sl", "dpo")
LAYOUTS = ("iteration_dirs", "flat")
RESUME_STYLES = ("truncate", "duplicate")
DECOYS = ("metrics_json", "jsonl_bak", "config_yaml", "empty_iteration_dir")
BENCH_PROFILES = ("wide", "real")
# What a run of the `problems` scenario plants (problems.py): a finding of `runstore doctor`.
PROBLEMS = ("reward_stuck", "parse_errors", "no_improvement", "reward_collapse",
            "entropy_collapse", "length_at_limit", "no_signal", "rollout_errors", "stale_policy",
            "slow_steps", "crashed", "eval_gap")


@dataclass(frozen=True)
class RunSpec:
    """What to write for one run directory (or one decoy directory).

    Fields after `final_checkpoint` extend the brief's API; all have harmless defaults.
    """

    name: str  # POSIX path relative to the root, e.g. "math_rl_sweep/qwen3-8b/lr_1e-4"
    kind: str = "rl"  # "rl" | "sl" | "dpo"
    layout: str = "iteration_dirs"  # "iteration_dirs" | "flat" (RL only; also picks the era)
    steps: int = 40
    model_name: str = "Qwen/Qwen3-8B"
    learning_rate: float = 1e-4
    kl_spike_at: int | None = None  # steps >= this: KL v1 and v2 well above 0.01
    kl_v2_only_spike_at: int | None = None  # steps >= this: only v2 above 0.01
    kl_exact_threshold_at: int | None = None  # that step's v1 is exactly 0.01 (must not flag)
    nan_kl_at: tuple[int, ...] = ()  # steps whose KL v1 and v2 are NaN
    inf_kl_at: tuple[int, ...] = ()  # steps whose KL v1 is +Infinity
    unprefixed_kl: bool = False  # kl_sample_train_v1/v2 and entropy without "optim/"
    resumed_at: int | None = None  # crash after this checkpoint, then resume from it
    resume_style: str = "truncate"  # "truncate" (0.6.x pre_resume copy) | "duplicate" (pre-0.6)
    spike_overwritten_by_resume: bool = False  # superseded pre-crash rows carry a KL spike
    trace: bool = False  # write trace_events.jsonl (and SDK spans, as enable_trace does)
    logtree: bool = True  # write *_logtree.json + .html every `logtree_every` iterations
    rollouts_every: int = 1  # train rollout summaries every N iterations (0: never)
    eval_every: int = 10  # 0: never
    save_every: int = 10  # 0: never
    groups: int = 2  # groups per batch (dataset batch_size)
    group_size: int = 4
    multi_turn: bool = False  # tool-call conversations instead of Prompt/Policy Response
    metric_keys: int | None = None  # pad RL rows with per-tag env families to about this many keys
    spans_per_step: int = 8  # target span count of an RL step (min: 2 groups x 2 trajectories)
    cut_last_line: bool = False  # metrics.jsonl ends with half a line and no newline
    config_only: bool = False  # only config.json
    empty_metrics: bool = False  # config.json + code.diff + an empty metrics.jsonl
    string_metric: bool = False  # `state_path` strings at checkpoint rows (always on for DPO)
    nulls_in_metrics: bool = False  # some metric values are null
    stepless_rows: int = 0  # rows without "step" (log_summary), spread through the file
    final_checkpoint: bool = True  # the run completed: "final" checkpoint and final eval rows
    # --- extensions ---
    logtree_every: int = 10  # train/eval logtrees at iterations divisible by this (+ final eval)
    groups_to_log: int = 2  # config num_groups_to_log: groups shown in each logtree
    rolling_save_every: int = 0  # rolling checkpoints (state_path only, "rolling": true)
    write_config: bool = True  # False: a run made only of metrics.jsonl (no config.json)
    schema_drift: bool = False  # a key that starts a third in and one that stops two thirds in
    truncated_logtree: bool = False  # the first train logtree is cut mid-way
    empty_logtree: bool = False  # a train logtree file is empty (0 bytes)
    huge_message: bool = False  # a ~200 KB message containing a NUL in the first logtree
    trace_unmatched_tail: bool = False  # trace ends right after a "B" whose "E" was lost
    decoy: str | None = None  # not a run: one of DECOYS
    # --- what tinker-cookbook 0.6.1 writes beyond the logging guide (RL; see extras.py) ---
    async_rl: bool = False  # the async trainer's rows: late evals with by_step/by_cost/by_time
    #                         copies, step-less cost rows, staleness keys, a 000000 checkpoint
    capture: bool = False  # capture/sample.jsonl and capture/train_op.jsonl (token-level)
    logs: bool = False  # logs.log (RL; SL runs always write one)
    crash: str | None = None  # the exception the run dies with after `steps` of its steps + 3:
    #                           logs.log ends with its traceback
    next_in_sweep: str | None = None  # logs.log ends with this sweep point's Configuration block
    leftover_tmp: bool = False  # with `crash`: the last rollouts left as `.NAME.PID.tmp`
    rollout_status: bool = False  # rollout summaries carry the fields of newer versions
    evals_of: tuple[str, ...] = ()  # not a run: an eval store of these runs' checkpoints (each
    #                                 regular save and the final one) and of the base model
    problem: str | None = None  # RL only: plant one of PROBLEMS (the `problems` scenario)

    def __post_init__(self) -> None:
        _check_name(self.name)
        if self.evals_of:
            return
        if self.decoy is not None:
            if self.decoy not in DECOYS:
                raise ValueError(f"{self.name}: unknown decoy {self.decoy!r}")
            return
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: unknown kind {self.kind!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"{self.name}: unknown layout {self.layout!r}")
        if self.resume_style not in RESUME_STYLES:
            raise ValueError(f"{self.name}: unknown resume_style {self.resume_style!r}")
        if self.steps < 1 or self.groups < 1 or self.group_size < 1:
            raise ValueError(f"{self.name}: steps, groups and group_size must be >= 1")
        if self.resumed_at is not None and not 0 < self.resumed_at < self.steps:
            raise ValueError(f"{self.name}: resumed_at must be within (0, steps)")
        if self.crash is not None and self.final_checkpoint:
            raise ValueError(f"{self.name}: a run that crashes writes no final checkpoint "
                             "(final_checkpoint=False)")
        if self.problem is not None and (self.problem not in PROBLEMS or self.kind != "rl"):
            raise ValueError(f"{self.name}: problem is one of {', '.join(PROBLEMS)}, for an RL "
                             f"run; got {self.problem!r} for a {self.kind} run")

    @property
    def is_run(self) -> bool:
        """False for decoy directories (which hold no config.json / metrics.jsonl) and eval
        stores."""
        return self.decoy is None and not self.evals_of


def _check_name(name: str) -> None:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or str(path) != name:
        raise ValueError(f"run name must be a normalised relative POSIX path: {name!r}")


# ---------------------------------------------------------------------------------------------
# Canned trees
# ---------------------------------------------------------------------------------------------


def default_specs() -> list[RunSpec]:
    """The demo tree: RL sweeps in both layouts, SL, DPO, one KL spike, two resumes, decoys.

    Small on purpose (a few MB, generated in about a second).
    """
    # Logtrees are ~300 KB each, so only two runs keep them (num_groups_to_log=1).
    flat = dict(kind="rl", layout="flat", steps=40, eval_every=10, save_every=20, logtree=False)
    tool = dict(kind="rl", layout="iteration_dirs", steps=30, eval_every=10, save_every=10,
                multi_turn=True, model_name="Qwen/Qwen3-4B-Instruct-2507", logtree=False)
    with_logtree = dict(logtree=True, groups_to_log=1)
    async_061 = dict(kind="rl", layout="iteration_dirs", steps=6, eval_every=3, save_every=3,
                     groups=2, group_size=2,
                     multi_turn=True, model_name="Qwen/Qwen3-4B-Instruct-2507", logtree=False,
                     async_rl=True, capture=True, logs=True)
    specs = [
        # Flat layout (older release), single-turn math, 3 levels deep.
        RunSpec("math_rl_sweep/qwen3-8b/lr_1e-5", learning_rate=1e-5,
                **{**flat, **with_logtree, "logtree_every": 20}),
        RunSpec("math_rl_sweep/qwen3-8b/lr_3e-5", learning_rate=3e-5, **flat),
        RunSpec("math_rl_sweep/qwen3-8b/lr_1e-4", learning_rate=1e-4, **flat),
        # Pre-0.6 resume: the steps between the last checkpoint and the crash are logged twice.
        RunSpec("math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5", learning_rate=4e-5,
                model_name="meta-llama/Llama-3.1-8B-Instruct", resumed_at=20,
                resume_style="duplicate", **flat),
        # 0.6.1 per-iteration dirs, multi-turn tool use, 4 levels deep.
        RunSpec("gsm8k_tool_rl/sweep/lr_1e-4/seed_0", learning_rate=1e-4,
                **{**tool, **with_logtree, "logtree_every": 30}),
        RunSpec("gsm8k_tool_rl/sweep/lr_1e-4/seed_1", learning_rate=1e-4, **tool),
        RunSpec("gsm8k_tool_rl/sweep/lr_3e-4/seed_0", learning_rate=3e-4, **tool),
        # The one run whose KL crosses 0.01 (too high a learning rate).
        RunSpec("gsm8k_tool_rl/sweep/lr_1e-3/seed_0", learning_rate=1e-3, kl_spike_at=22, **tool),
        # 0.6.x resume: truncated metrics + pre_resume copy; the crash's KL spike is superseded.
        RunSpec("gsm8k_tool_rl/sweep/lr_3e-4/seed_1", learning_rate=3e-4, resumed_at=20,
                resume_style="truncate", spike_overwritten_by_resume=True, trace=True, **tool),
        RunSpec("sl/tulu3_qwen3-8b_lr2e-4", kind="sl", steps=60, learning_rate=2e-4,
                eval_every=20, save_every=50, rolling_save_every=10, trace=True,
                trace_unmatched_tail=True),
        RunSpec("dpo/hh_llama-3.1-8b_beta0.1", kind="dpo", steps=40, learning_rate=1e-5,
                model_name="meta-llama/Llama-3.1-8B-Instruct", eval_every=10, save_every=20,
                string_metric=True),
        # tinker-cookbook 0.6.1's async trainer in a sequential sweep (as in
        # ../shared/sample-runs-0.6.1): token-level capture, logs.log, late evals on three
        # axes, cost summaries; the first point resumes once, the second dies of a full disk
        # mid-write; both points' checkpoints are evaluated into an eval store beside them.
        RunSpec("tool_rl_async/learning_rate=2e-05", learning_rate=2e-5, resumed_at=3,
                next_in_sweep="tool_rl_async/learning_rate=8e-05", rollout_status=True,
                **async_061),
        RunSpec("tool_rl_async/learning_rate=8e-05", learning_rate=8e-5,
                final_checkpoint=False, crash="OSError: [Errno 28] No space left on device",
                leftover_tmp=True, **{**async_061, "steps": 5}),
        RunSpec("tool_rl_async/evals", evals_of=("tool_rl_async/learning_rate=2e-05",
                                                 "tool_rl_async/learning_rate=8e-05")),
        # Decoys: look like runs to a careless reader, are not runs.
        RunSpec("math_rl_sweep/notes", decoy="metrics_json"),
        RunSpec("gsm8k_tool_rl/backup/lr_1e-4", decoy="jsonl_bak"),
        RunSpec("configs/math_rl", decoy="config_yaml"),
        RunSpec("gsm8k_tool_rl/sweep/lr_3e-3/seed_0", decoy="empty_iteration_dir"),
    ]
    return specs


def awkward_specs() -> list[RunSpec]:
    """One run per 'Things a reader must tolerate' case of FORMATS.md, plus KL edge cases.

    Names say what each run covers; they nest 2 to 4 levels deep under `awkward/`.
    """
    small = dict(steps=12, eval_every=5, save_every=5, logtree=False)
    flat = dict(small, layout="flat")
    # Logtree runs log one group at iterations 0 and 10 (+ the final eval) to stay small.
    logged = dict(steps=12, eval_every=5, save_every=5, logtree_every=10, groups_to_log=1)
    return [
        # KL edge cases.
        RunSpec("awkward/kl/exact_threshold", kl_exact_threshold_at=6, **small),
        RunSpec("awkward/kl/nan_only", nan_kl_at=tuple(range(12)), **small),
        RunSpec("awkward/kl/infinity", inf_kl_at=(4, 9), **small),
        RunSpec("awkward/kl/v2_only_spike", kl_v2_only_spike_at=8, **small),
        RunSpec("awkward/kl/unprefixed_names", unprefixed_kl=True, **flat),
        RunSpec("awkward/kl/spike_overwritten/truncate", resumed_at=5, resume_style="truncate",
                spike_overwritten_by_resume=True, trace=True, **small),
        RunSpec("awkward/kl/spike_overwritten/duplicate", resumed_at=5, resume_style="duplicate",
                spike_overwritten_by_resume=True, **flat),
        # Run-level oddities.
        RunSpec("awkward/config_only", config_only=True, **small),
        RunSpec("awkward/empty_metrics", empty_metrics=True, **small),
        RunSpec("awkward/metrics_only", write_config=False, **small),
        RunSpec("awkward/cut_last_line", cut_last_line=True, final_checkpoint=False, **small),
        RunSpec("awkward/values/strings", string_metric=True, **small),
        RunSpec("awkward/values/nulls", nulls_in_metrics=True, **flat),
        RunSpec("awkward/values/stepless_rows", stepless_rows=3, **small),
        RunSpec("awkward/values/schema_drift", schema_drift=True, **flat),
        RunSpec("awkward/values/dpo_strings_and_nulls", kind="dpo", steps=12, eval_every=5,
                save_every=5, nulls_in_metrics=True),
        # Logtree oddities.
        RunSpec("awkward/logtree/truncated", truncated_logtree=True, **logged),
        RunSpec("awkward/logtree/empty", empty_logtree=True, layout="flat", **logged),
        RunSpec("awkward/logtree/huge_nul_message", huge_message=True, **logged),
        # Trace with lost end events (the restart of pid/ts is in kl/spike_overwritten/truncate).
        RunSpec("awkward/trace/unmatched_tail", kind="sl", steps=12, eval_every=5, save_every=5,
                rolling_save_every=2, trace=True, trace_unmatched_tail=True),
        # Depth 2 and depth 4.
        RunSpec("awkward/shallow", **flat),
        RunSpec("awkward/deep/nested/run", multi_turn=True, **small),
        # Decoys.
        RunSpec("awkward/decoys/metrics_json", decoy="metrics_json"),
        RunSpec("awkward/decoys/jsonl_bak", decoy="jsonl_bak"),
        RunSpec("awkward/decoys/config_yaml", decoy="config_yaml"),
        RunSpec("awkward/decoys/empty_iteration_dir", decoy="empty_iteration_dir"),
    ]


def bench_specs(n_runs: int = 100, steps: int = 2000, *, profile: str = "wide") -> list[RunSpec]:
    """RL runs with ~50 spans a step, rollouts+logtrees every 250 steps.

    Both layouts, nested 3-4 levels deep; every 20th run has a KL spike and every 25th resumes.
    `profile="wide"` pads every row to ~60 metric keys with per-tag env families. `"real"`
    writes the rows tinker-cookbook's writers write for such a run (FORMATS.md and the sample
    runs): no padding, so ~46-60 keys a row by era; every other flat-layout (older release)
    run traces its SDK calls (`time/*_async` keys and `trace_events.jsonl`, as
    `enable_trace` does); resumes follow each era's rule, truncation with a
    `metrics.jsonl.pre_resume_*` copy for 0.6.1 and logging the replayed steps twice before it.
    """
    if profile not in BENCH_PROFILES:
        raise ValueError(f"unknown bench profile {profile!r}; one of {', '.join(BENCH_PROFILES)}")
    real = profile == "real"
    lrs = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3)
    models = ("Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct")
    every = min(250, max(1, steps // 4))
    specs = []
    for i in range(n_runs):
        lr = lrs[i % len(lrs)]
        model = models[(i // len(lrs)) % len(models)]
        short = model.split("/")[-1].lower()
        flat = i % 2 == 1
        name = (f"bench/math_rl/{short}/lr_{_lr_label(lr)}_{i:03d}" if flat
                else f"bench/gsm8k/sweep_{i // 10:02d}/lr_{_lr_label(lr)}/seed_{i % 10}")
        specs.append(RunSpec(
            name, kind="rl", layout="flat" if flat else "iteration_dirs", steps=steps,
            model_name=model, learning_rate=lr, groups=4, group_size=4,
            metric_keys=None if real else 60, spans_per_step=50, rollouts_every=every,
            logtree_every=every, eval_every=every, save_every=every,
            kl_spike_at=(steps * 3) // 4 if i % 20 == 7 else None,
            resumed_at=((steps // 2 // every) * every or None) if i % 25 == 11 else None,
            resume_style="duplicate" if real and flat else "truncate",
            trace=real and flat and i % 4 == 1,
        ))
    return specs


def _lr_label(lr: float) -> str:
    """1e-05 -> "1e-5", 0.0003 -> "3e-4" (the spelling sweep directories use)."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"
