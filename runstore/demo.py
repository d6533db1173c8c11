"""Generate realistic tinker-cookbook run trees: `runstore demo` data, test fixtures, benchmarks.

Contract
--------
* `generate_tree(root, runs=None, *, seed=0, workers=1)` writes every `RunSpec` under `root`
  (created if needed) and returns the specs it wrote. The bytes written are a pure function of
  `(runs, seed)`: no `hash()`, no clock, no machine paths. Only file modification times depend
  on the clock: every generated file gets `mtime = now - 1 day`, so no run looks "running".
* `append_steps(run_dir, n, *, seed=0)` appends `n` steps (metrics rows and timing-span lines)
  to an existing generated run, continuing after the largest `step` in its `metrics.jsonl`. It
  leaves the mtimes fresh, like a live trainer would.
* `default_specs()`, `awkward_specs()` and `bench_specs()` are the three canned trees.
* The files follow `FORMATS.md` (tinker-cookbook 0.6.1 and the flat-layout releases): JSON is
  written by `json.dumps` with default options (ASCII escapes, bare `NaN`/`Infinity`), JSON-lines
  compact with `\\n` endings, `config.json` and `*_logtree.json` with `indent=2`.
* Two trainer eras are simulated for RL, chosen by `RunSpec.layout`:
  `iteration_dirs` is 0.6.1 (token/cost keys, two extra rows at `step == steps`, full config,
  SDK spans named `sample`, `forward_backward`, ...); `flat` is the older release (no token/cost
  keys, one extra final-eval row, shorter config, SDK spans named `*_async`). SL and DPO runs
  follow 0.6.1 and have no per-iteration files.
* A directory is a run iff it holds `config.json` or `metrics.jsonl`. Decoy specs
  (`RunSpec.decoy`) write directories that are not runs; `RunSpec.is_run` tells them apart.

Only the standard library is used, so this module imports standalone.
"""

from __future__ import annotations

import html
import json
import math
import multiprocessing
import os
import random
import re
import time
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Sequence

__all__ = [
    "RunSpec",
    "append_steps",
    "awkward_specs",
    "bench_specs",
    "default_specs",
    "generate_tree",
]

# Fake absolute locations that appear inside the files (log_path, logtree `path`, code.diff).
FAKE_HOME = "/home/researcher"
FAKE_RUNS_ROOT = FAKE_HOME + "/runs"
FAKE_MODULE_PATH = FAKE_HOME + "/.venv/lib/python3.11/site-packages/tinker_cookbook"

MTIME_AGE_SECONDS = 24 * 3600

KINDS = ("rl", "sl", "dpo")
LAYOUTS = ("iteration_dirs", "flat")
RESUME_STYLES = ("truncate", "duplicate")
DECOYS = ("metrics_json", "jsonl_bak", "config_yaml", "empty_iteration_dir")


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

    def __post_init__(self) -> None:
        _check_name(self.name)
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

    @property
    def is_run(self) -> bool:
        """False for decoy directories (which hold no config.json / metrics.jsonl)."""
        return self.decoy is None


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


def bench_specs(n_runs: int = 100, steps: int = 2000) -> list[RunSpec]:
    """RL runs with ~60 metric keys a row, ~50 spans a step, rollouts+logtrees every 250 steps.

    Both layouts, nested 3-4 levels deep; every 20th run has a KL spike and every 25th resumes.
    """
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
            metric_keys=60, spans_per_step=50, rollouts_every=every, logtree_every=every,
            eval_every=every, save_every=every,
            kl_spike_at=(steps * 3) // 4 if i % 20 == 7 else None,
            resumed_at=((steps // 2 // every) * every or None) if i % 25 == 11 else None,
        ))
    return specs


def _lr_label(lr: float) -> str:
    """1e-05 -> "1e-5", 0.0003 -> "3e-4" (the spelling sweep directories use)."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{float(mantissa):g}e{int(exponent)}"


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


def generate_tree(root: str | os.PathLike[str], runs: list[RunSpec] | None = None, *,
                  seed: int = 0, workers: int = 1) -> list[RunSpec]:
    """Write every run under root (created if needed); default `runs` = default_specs().

    Returns the specs written. `workers > 1` writes runs in that many processes (output is
    identical: each run has its own random stream).
    """
    specs = list(default_specs() if runs is None else runs)
    _check_tree(specs)
    root_path = Path(root)
    root_path.mkdir(parents=True, exist_ok=True)
    mtime = time.time() - MTIME_AGE_SECONDS
    jobs = [(str(root_path), spec, seed, mtime) for spec in specs]
    if workers > 1 and len(jobs) > 1:
        # fork keeps this module importable in the children even when it was loaded by path.
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        with multiprocessing.get_context(method).Pool(workers) as pool:
            for _ in pool.imap_unordered(_write_job, jobs, chunksize=1):
                pass
    else:
        for job in jobs:
            _write_job(job)
    return specs


def append_steps(run_dir: str | os.PathLike[str], n: int, *, seed: int = 0) -> None:
    """Append n steps to a generated run: n metrics.jsonl lines and n timing_spans.jsonl lines.

    Steps continue after the largest `step` found in metrics.jsonl. Rows follow the run's kind,
    era and width (inferred from config.json and the last training row). No evals, checkpoints
    or per-iteration files are written. If metrics.jsonl ends with a cut line, a newline is
    written first so the new rows stay parseable.
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    run = Path(run_dir)
    metrics_path = run / "metrics.jsonl"
    text = metrics_path.read_text(encoding="utf-8") if metrics_path.exists() else ""
    rows = list(_parse_rows(text))
    last_step = max((r["step"] for r in rows if isinstance(r.get("step"), int)), default=-1)
    template = _last_training_row(rows)
    config = _read_json(run / "config.json")
    spec = _spec_from_existing(run, config, template, last_step + n + 1,
                               _last_span_count(run / "timing_spans.jsonl"))
    builder = _RunBuilder(spec, seed, salt=f"append:{last_step}")
    builder.restore_from_row(template)
    first = last_step + 1
    builder.clock = _BASE_EPOCH[builder.era] + 3600.0 + 30.0 * first
    metric_lines = []
    for step in range(first, first + n):
        for row in builder.training_step(step, superseded=False):
            metric_lines.append(_dumps(row))
    span_lines = builder.take_timing_lines()
    _append_lines(metrics_path, metric_lines)
    _append_lines(run / "timing_spans.jsonl", span_lines)


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def _check_tree(specs: Sequence[RunSpec]) -> None:
    """Reject duplicate names and runs nested inside runs (upstream never looks inside a run)."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError("duplicate run names")
    run_names = {s.name for s in specs if s.is_run}
    for name in names:
        for parent in PurePosixPath(name).parents:
            if str(parent) in run_names:
                raise ValueError(f"{name!r} would be nested inside run {str(parent)!r}")


def _write_job(job: tuple[str, RunSpec, int, float]) -> None:
    root, spec, seed, mtime = job
    run_dir = Path(root) / spec.name
    empty_dirs: list[str] = []
    if spec.decoy is not None:
        files = _decoy_files(spec)
        if spec.decoy == "empty_iteration_dir":
            empty_dirs.append("iteration_000001")
    else:
        files = _RunBuilder(spec, seed).build()
    run_dir.mkdir(parents=True, exist_ok=True)
    for rel in empty_dirs:
        (run_dir / rel).mkdir(exist_ok=True)
    for rel, content in files.items():
        path = run_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:  # one write per file keeps big trees fast
            fh.write(content.encode("utf-8"))
        os.utime(path, (mtime, mtime))


def _append_lines(path: Path, lines: list[str]) -> None:
    if not lines:
        return
    prefix = ""
    if path.exists() and path.stat().st_size > 0:
        with open(path, "rb") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                prefix = "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(prefix + "".join(line + "\n" for line in lines))


def _decoy_files(spec: RunSpec) -> dict[str, str]:
    """Directories that a careless scanner might take for runs."""
    if spec.decoy == "metrics_json":
        return {"metrics.json": _dumps({"step": 10, "env/all/reward/total": 0.5}, indent=2),
                "README.txt": "Scratch notes; metrics.json is a hand-made summary, not a run.\n"}
    if spec.decoy == "jsonl_bak":
        rows = [{"step": i, "env/all/reward/total": 0.1 * i, "optim/kl_sample_train_v1": 0.5}
                for i in range(3)]
        return {"metrics.jsonl.bak": _jsonl(_dumps(r) for r in rows)}
    if spec.decoy == "config_yaml":
        return {"config.yaml": "learning_rate: 1.0e-4\nmodel_name: Qwen/Qwen3-8B\nloss_fn: ppo\n"}
    return {}  # empty_iteration_dir: only the empty subdirectory


# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


def _dumps(obj: Any, indent: int | None = None) -> str:
    # Python's defaults on purpose: ensure_ascii=True, allow_nan=True (bare NaN / Infinity).
    if indent is None:
        return json.dumps(obj)
    out: list[str] = []
    _encode_indented(obj, out, "\n", " " * indent)
    return "".join(out)


_encode_str = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def _encode_indented(obj: Any, out: list[str], newline: str, step: str) -> None:
    """Byte-for-byte `json.dumps(obj, indent=...)`, several times faster.

    With `indent` set the stdlib falls back to its pure-Python encoder, which made big logtree
    files dominate benchmark-tree generation.
    """
    if isinstance(obj, str):
        out.append(_encode_str(obj))
    elif isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        inner = newline + step
        sep = "{" + inner
        for key, value in obj.items():
            out.append(sep)
            out.append(_encode_str(key) if isinstance(key, str) else _encode_str(_scalar(key)))
            out.append(": ")
            _encode_indented(value, out, inner, step)
            sep = "," + inner
        out.append(newline + "}")
    elif isinstance(obj, (list, tuple)):
        if not obj:
            out.append("[]")
            return
        inner = newline + step
        sep = "[" + inner
        for value in obj:
            out.append(sep)
            _encode_indented(value, out, inner, step)
            sep = "," + inner
        out.append(newline + "]")
    else:
        out.append(_scalar(obj))


def _scalar(obj: Any) -> str:
    if obj is None:
        return "null"
    if obj is True:
        return "true"
    if obj is False:
        return "false"
    if isinstance(obj, int):
        return int.__repr__(obj)
    if isinstance(obj, float):
        if obj != obj:
            return "NaN"
        if obj in (math.inf, -math.inf):
            return "Infinity" if obj > 0 else "-Infinity"
        return float.__repr__(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def _jsonl(lines: Iterable[str]) -> str:
    return "".join(line + "\n" for line in lines)


def _parse_rows(text: str) -> Iterable[dict[str, Any]]:
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a cut last line
        if isinstance(row, dict):
            yield row


def _last_span_count(path: Path) -> int:
    """Spans in the last complete line of timing_spans.jsonl (8 when unknown)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 8
    for line in reversed(lines):
        try:
            return max(8, len(json.loads(line)["spans"]))
        except (ValueError, KeyError, TypeError):
            continue
    return 8


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


_TRAINING_KEYS = ("progress/batch", "train_mean_nll", "dpo_loss")


def _last_training_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    for row in reversed(rows):
        if any(k in row for k in _TRAINING_KEYS):
            return row
    return {}


def _spec_from_existing(run: Path, config: dict[str, Any], template: dict[str, Any],
                        steps: int, spans_per_step: int) -> RunSpec:
    """Rebuild enough of a RunSpec from files on disk to keep appended rows looking the same."""
    if "dpo_beta" in config or "dpo_loss" in template:
        kind = "dpo"
    elif "loss_fn" in config or "progress/batch" in template:
        kind = "rl"
    elif "num_epochs" in config or "train_mean_nll" in template:
        kind = "sl"
    else:
        kind = "rl"
    has_iter_dirs = any(p.name.startswith("iteration_") for p in run.iterdir() if p.is_dir())
    has_flat = any(p.name.startswith("train_iteration_") for p in run.iterdir())
    if has_iter_dirs:
        layout = "iteration_dirs"
    elif has_flat:
        layout = "flat"
    else:
        layout = "iteration_dirs" if "tokens/sampled" in template else "flat"
    builder_cfg = config.get("dataset_builder") or {}
    padded = any(k.split("/")[1] in _PAD_TAGS for k in template if k.count("/") >= 2)
    return RunSpec(
        run.name, kind=kind, layout=layout, steps=max(steps, 1),
        model_name=str(config.get("model_name", "Qwen/Qwen3-8B")),
        learning_rate=float(template.get("optim/lr", config.get("learning_rate", 1e-4))),
        eval_every=0, save_every=0, rollouts_every=0, logtree=False,
        groups=int(builder_cfg.get("batch_size", 2) or 2) if kind == "rl" else 2,
        group_size=int(builder_cfg.get("group_size", 4) or 4) if kind == "rl" else 4,
        multi_turn=any(k.endswith("/num_tool_calls") for k in template),
        unprefixed_kl="kl_sample_train_v1" in template,
        metric_keys=len(template) if padded else None,
        spans_per_step=spans_per_step,
        trace=bool(config.get("enable_trace", False)),
    )


def _uuid_like(rng: random.Random) -> str:
    h = "%032x" % rng.getrandbits(128)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _tid(track: str) -> int:
    """Chrome-trace tid: a stable stand-in for upstream's salted hash(track) % 1_000_000."""
    sdk = _SDK_TRACK.match(track)
    if sdk:
        return 1_000_000 + int(sdk.group(1))
    return zlib.crc32(track.encode("utf-8")) % 1_000_000


_SDK_TRACK = re.compile(r"^.+:[a-z_]+:(\d+)$")


def _label(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


def _iso(epoch: float, *, micro: bool = True) -> str:
    # Naive "local" time as upstream writes it; UTC keeps the output machine-independent.
    dt = datetime.fromtimestamp(epoch, tz=timezone.utc).replace(tzinfo=None)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%f" if micro else "%Y-%m-%dT%H:%M:%S")


def _clamp(x: float, lo: float, hi: float) -> float:
    return lo if x < lo else hi if x > hi else x


_BASE_EPOCH = {
    "flat": datetime(2026, 3, 13, 9, 58, 24, tzinfo=timezone.utc).timestamp(),
    "0.6": datetime(2026, 9, 2, 6, 13, 22, tzinfo=timezone.utc).timestamp(),
}

# ---------------------------------------------------------------------------------------------
# Text content for transcripts (non-ASCII on purpose: escapes, surrogate pairs, RTL, controls)
# ---------------------------------------------------------------------------------------------

_SYSTEM_PROMPTS = (
    "Solve the problem step by step. Answer with a single number inside \\boxed{}.",
    "Tu es un assistant qui r\u00e9sout des probl\u00e8mes \u2014 "
    "r\u00e9ponds en fran\u00e7ais si possible.",
    "You are a careful mathematician. Put the final answer in \\boxed{}.",
)
_TOOL_SYSTEM_PROMPT = ("You are a helpful assistant with access to a calculator tool. "
                       "Use it when arithmetic is non-trivial.")
_THOUGHTS = (
    "Let's restate the quantities carefully.",
    "Multiply first, then add \u2014 order of operations matters.",
    "Double-check units (km/h) before answering.",
    "I might be overcomplicating this; simplify.",
    "Check: emoji: \U0001F600\U0001F680\U0001F9E0\U0001F44D\U0001F3FD",
    "Check: \u7b54\u6848\u662f 42\u3002",
    "Check: \u0627\u0644\u062c\u0648\u0627\u0628 \u0647\u0648 \u0664\u0662",
    "Check: zero-width\u200bjoiner\u200d and NBSP\u00a0here",
    "Check: \u2211_{k=1}^{n} k = n(n+1)/2",
    "Check: \u041e\u0442\u0432\u0435\u0442: \u0441\u043e\u0440\u043e\u043a \u0434\u0432\u0430.",
    "Check: na\u00efve caf\u00e9 r\u00e9sum\u00e9 \u2014 "
    "\u201cquotes\u201d \u2018single\u2019 \u2026",
    "Check: ANSI \x1b[31mred\x1b[0m escape",
    "Check: backslashes \\n \\t \\\\ and a JSON-looking {\"a\": [1, 2]}",
    "Check: HTML <b>bold</b> & entities &amp; stay text",
)


def _problem(rng: random.Random) -> tuple[str, int, str]:
    """(question, answer, calculator expression)."""
    kind = rng.randrange(5)
    a, b, c = rng.randint(2, 99), rng.randint(2, 60), rng.randint(1, 20)
    if kind == 0:
        hours = rng.randint(2, 12)
        return (f"A train travels {a * hours} km in {hours} hours. "
                "What is its average speed in km/h?", a, f"{a * hours}/{hours}")
    if kind == 1:
        return (f"Ana has {a} coins and buys {c} boxes of {b} more. How many coins now?",
                a + b * c, f"{a}+{b}*{c}")
    if kind == 2:
        return f"Compute {a} \u00d7 {b} \u2212 {c}.", a * b - c, f"{a}*{b}-{c}"
    if kind == 3:
        return (f"Un magasin vend {a} pommes par jour pendant {c} jours. Combien au total\u00a0?",
                a * c, f"{a}*{c}")
    return (f"\u5c0f\u660e\u6709 {a} \u4e2a\u82f9\u679c\uff0c\u53c8\u4e70\u4e86 {b} \u4e2a\u3002"
            "\u73b0\u5728\u6709\u591a\u5c11\u4e2a\uff1f", a + b, f"{a}+{b}")


def _thinking(rng: random.Random, answer: int) -> str:
    lines = [f"Step {i + 1}: {rng.choice(_THOUGHTS)}" for i in range(rng.randint(2, 5))]
    return "\n".join(lines) + f"\nSo the answer is {answer}."


def _huge_text() -> str:
    """A ~200 KB runaway generation with a NUL in the middle (seen in real transcripts)."""
    chunk = "The answer is 42. \u00c9tape suivante\u2026 0123456789abcdef\n"
    half = (chunk * (102_400 // len(chunk) + 1))[:102_400]  # 2 x 100 KiB of text
    return half + "\x00" + half + "\\boxed{42}"


# ---------------------------------------------------------------------------------------------
# Rollout simulation
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# Spans and trace events
# ---------------------------------------------------------------------------------------------


class _Span:
    __slots__ = ("name", "start", "dur", "depth", "track", "thread", "end_args")

    def __init__(self, name: str, start: float, dur: float, depth: int, track: str,
                 thread: str, end_args: dict[str, Any] | None) -> None:
        self.name = name
        self.start = start  # absolute epoch seconds (float, so it carries time.time() noise)
        self.dur = dur  # perf_counter duration: precise, unlike end - start
        self.depth = depth
        self.track = track
        self.thread = thread
        self.end_args = end_args

    @property
    def end(self) -> float:
        return self.start + self.dur


class _Trace:
    """Chrome-trace JSON lines of one run, across process restarts."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lines: list[str] = []
        self.base_us = 0.0
        self.origin = 0.0
        self.seen_tids: set[tuple[int, int]] = set()
        self.pids: dict[str, int] = {}

    def new_process(self, origin: float) -> None:
        # A resumed process: perf_counter restarts at an arbitrary value, pids count from 0
        # again and metadata is re-emitted.
        self.base_us = self.rng.uniform(2e8, 9e9)
        self.origin = origin
        self.seen_tids = set()
        self.pids = {}

    def emit(self, spans: Sequence[_Span]) -> None:
        events = []
        for seq, s in enumerate(spans):
            events.append((s.start, 1, s.depth, seq, "B", s))
            events.append((s.end, 0, -s.depth, seq, "E", s))
        # At equal timestamps ends come first (innermost first), then begins (outermost first).
        events.sort(key=lambda e: e[:4])
        for t, _, _, _, ph, s in events:
            pid = self.pids.setdefault(s.thread, len(self.pids))
            tid = _tid(s.track)
            args = {"track": s.track, "thread": s.thread}
            if ph == "E" and s.end_args:
                args.update(s.end_args)
            ts = self.base_us + (t - self.origin) * 1e6
            self.lines.append(_dumps({"name": s.name, "ph": ph, "pid": pid, "tid": tid,
                                      "ts": ts, "args": args, "cat": "async"}))
            if (pid, tid) not in self.seen_tids:
                first_of_pid = all(p != pid for p, _ in self.seen_tids)
                self.seen_tids.add((pid, tid))
                self.lines.append(_dumps({"name": "thread_name", "ph": "M", "pid": pid,
                                          "tid": tid, "ts": 0, "args": {"name": s.track}}))
                if first_of_pid:
                    self.lines.append(_dumps({"name": "process_name", "ph": "M", "pid": pid,
                                              "tid": 0, "ts": 0,
                                              "args": {"name": f"{s.thread} Thread"}}))

    def text(self, unmatched_tail: bool) -> str:
        lines = self.lines
        if unmatched_tail:
            # Upstream's flusher drops its last batch: end right after the final "B".
            last_b = max(i for i, line in enumerate(lines) if '"ph": "B"' in line)
            lines = lines[: last_b + 1]
        return _jsonl(lines)


def _timing_line(step: int, spans: Sequence[_Span]) -> str:
    origin = min(s.start for s in spans)
    ordered = sorted(spans, key=lambda s: (s.end, -s.depth))  # completion order
    return _dumps({"step": step, "spans": [
        {"name": s.name, "duration": s.dur, "wall_start": s.start - origin,
         "wall_end": s.end - origin} for s in ordered]})


def _timing_metrics(spans: Sequence[_Span], rng: random.Random) -> dict[str, Any]:
    """IterationWindow.get_timing_metrics(): time/<span> or time/<span>:total|:count|:mean|:max."""
    ordered = sorted(spans, key=lambda s: (s.end, -s.depth))
    by_name: dict[str, list[float]] = {}
    for s in ordered:
        by_name.setdefault(s.name, []).append(s.dur)
    out: dict[str, Any] = {}
    for name, durs in by_name.items():
        if len(durs) == 1:
            out["time/" + name] = durs[0]
        else:
            total = sum(durs)
            out[f"time/{name}:total"] = total
            out[f"time/{name}:count"] = len(durs)
            out[f"time/{name}:mean"] = total / len(durs)
            out[f"time/{name}:max"] = max(durs)
    origin = min(s.start for s in spans)
    out["time/total"] = max(s.end for s in spans) - origin - rng.random() * 5e-7
    return out


class _Spans:
    """Collects the spans of one step."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.items: list[_Span] = []

    def add(self, name: str, start: float, dur: float, depth: int, track: str = "Task-1",
            thread: str = "MainThread", end_args: dict[str, Any] | None = None) -> float:
        self.items.append(_Span(name, start, dur, depth, track, thread, end_args))
        return start + dur

    def jitter(self) -> float:
        # Spans that start "together" differ by a few hundred ns; once subtracted from an epoch
        # timestamp this becomes the 2.384185791015625e-07 noise of real files.
        return self.rng.random() * 4e-7


# ---------------------------------------------------------------------------------------------
# Logtree (Trace.to_dict) and its HTML sibling
# ---------------------------------------------------------------------------------------------


def _el(tag: str, children: Iterable[Any] = (), cls: str | None = None,
        data: dict[str, Any] | None = None) -> dict[str, Any]:
    node: dict[str, Any] = {"tag": tag, "attrs": {"class": cls} if cls else {},
                            "children": list(children)}
    if data is not None:
        node["data"] = data
    return node


def _text(s: str) -> str:
    return html.escape(s, quote=False)


def _section(depth: int, title: str, body: list[Any]) -> dict[str, Any]:
    level = min(depth + 1, 6)  # h2..h6 by depth, capped at 6
    return _el("section", [_el(f"h{level}", [_text(title)], f"lt-h{level}"),
                           _el("div", body, "lt-section-body")], "lt-section")


def _table(pairs: Sequence[tuple[str, Any]], caption: str | None = None) -> list[dict[str, Any]]:
    head = _el("thead", [_el("tr", [_el("th", ["key"]), _el("th", ["value"])])])
    body = _el("tbody", [_el("tr", [_el("td", [_text(str(k))]), _el("td", [_text(str(v))])])
                         for k, v in pairs])
    out = [_el("div", [_text(caption)], "lt-table-caption")] if caption else []
    return out + [_el("table", [head, body], "lt-table")]


def _conversation(messages: list[dict[str, Any]]) -> dict[str, Any]:
    # With `data` present upstream omits the raw-HTML children.
    return _el("div", [], data={"type": "conversation", "messages": messages})


_CSS = """
body { font-family: -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, sans-serif;
       line-height: 1.45; max-width: 1200px; margin: 0 auto; padding: 14px; }
.lt-root { background: white; padding: 1.2rem 1.4rem; border-radius: 8px; }
.lt-title { color: #2563eb; border-bottom: 2px solid #e5e7eb; }
.lt-subtitle { color: #666; font-size: 0.875rem; }
.lt-section { margin: 0.95rem 0; padding-left: 0.75rem; border-left: 2px solid #e5e7eb; }
.lt-table { border-collapse: collapse; } .lt-table td, .lt-table th { border: 1px solid #ddd; }
.lt-message { white-space: pre-wrap; margin: 0.3rem 0; }
"""


def _render_html(title: str, root: dict[str, Any]) -> str:
    parts = ["<!doctype html>\n<html lang=\"en\">\n<head>\n<title>", _text(title),
             "</title>\n<meta charset=\"UTF-8\">\n<style>", _CSS, "</style>\n</head>\n"]
    _render_node(root, 0, parts)
    parts.append("</html>\n")
    return "".join(parts)


def _render_node(node: Any, depth: int, out: list[str]) -> None:
    pad = "  " * depth
    if isinstance(node, str):
        out.append(f"{pad}{node}\n")  # already escaped text
        return
    attrs = "".join(f' {k}="{html.escape(v)}"' for k, v in node["attrs"].items())
    out.append(f"{pad}<{node['tag']}{attrs}>\n")
    data = node.get("data")
    if data and data.get("type") == "conversation":
        for m in data["messages"]:
            content = m["content"]
            if not isinstance(content, str):
                content = "\n".join(p.get("text") or p.get("thinking") or "" for p in content)
            # Raw UTF-8 with &, <, > escaped; control characters (even NUL) pass through.
            out.append(f'{pad}  <div class="lt-message lt-message-{m["role"]}">'
                       f"<b>{m['role']}</b>: {_text(content)}</div>\n")
    for child in node["children"]:
        _render_node(child, depth + 1, out)
    out.append(f"{pad}</{node['tag']}>\n")


# ---------------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------------


class _RunBuilder:
    """Simulates one run process by process and collects its files in memory."""

    def __init__(self, spec: RunSpec, seed: int, *, salt: str = "") -> None:
        self.spec = spec
        # str seeds hash with SHA-512 inside random: stable across processes and machines.
        self.rng = random.Random(f"{seed}|{spec.name}|{salt}")
        self.era = "0.6" if spec.kind != "rl" or spec.layout == "iteration_dirs" else "flat"
        self.model_id = _uuid_like(self.rng)
        self.log_path = f"{FAKE_RUNS_ROOT}/{spec.name}"
        self.clock = _BASE_EPOCH[self.era] + self.rng.uniform(0, 5 * 86400)
        self.files: dict[str, str] = {}
        self.checkpoint_lines: list[str] = []
        self.timing_lines: list[str] = []
        self.trace = _Trace(self.rng) if spec.trace else None
        self.cum_tokens = {"sampled": 0, "prefill_cached": 0, "prefill_uncached": 0, "trained": 0}
        self.cum_cost = 0.0
        self.snapshots: dict[str, tuple[dict[str, int], float]] = {}  # counters per checkpoint
        self.task_counter = 1
        self.future_counter = 0
        self.train_logtrees_written = 0
        self.huge_pending = spec.huge_message
        self.eval_labels = ("test", "aime2025") if spec.multi_turn else ("test",)
        self.n_logged_groups = min(spec.groups_to_log, spec.groups) if spec.logtree else 0

    # -- whole run ------------------------------------------------------------------------

    def build(self) -> dict[str, str]:
        spec = self.spec
        if spec.write_config:
            self.files["config.json"] = _dumps(self._config(), indent=2)
        if spec.config_only:
            return self.files
        self.files["code.diff"] = ("### module: tinker_cookbook (not in a git repository)\n"
                                   f"module_path: {FAKE_MODULE_PATH}\n")
        if spec.empty_metrics:
            self.files["metrics.jsonl"] = ""
            return self.files
        processes = self._processes()
        per_process: list[list[tuple[int | None, str]]] = []
        for index, (start, stop) in enumerate(processes):
            self._start_process(index)
            lines: list[tuple[int | None, str]] = []
            for step in range(start, stop):
                superseded = index == 0 and len(processes) > 1 and step >= processes[1][0]
                for row in self.training_step(step, superseded=superseded):
                    lines.append((step, _dumps(row)))
            if index == len(processes) - 1 and spec.final_checkpoint:
                lines.extend((r.get("step"), _dumps(r)) for r in self._finish())
            per_process.append(lines)
        self.files["metrics.jsonl"] = self._metrics_text(per_process)
        if self.checkpoint_lines:
            self.files["checkpoints.jsonl"] = _jsonl(self.checkpoint_lines)
        self.files["timing_spans.jsonl"] = _jsonl(self.timing_lines)
        if self.trace is not None:
            self.files["trace_events.jsonl"] = self.trace.text(spec.trace_unmatched_tail)
        if spec.kind == "sl":
            self.files["logs.log"] = self._logs_log(per_process)
        return self.files

    def _processes(self) -> list[tuple[int, int]]:
        """[(first_step, stop)] per trainer process; two when the run crashed and resumed."""
        spec = self.spec
        if spec.resumed_at is None:
            return [(0, spec.steps)]
        resume = spec.resumed_at
        # Crash a few steps after the checkpoint, before the next one would have been saved.
        if spec.save_every:
            next_save = (resume // spec.save_every + 1) * spec.save_every
        else:
            next_save = spec.steps + 1
        crash = max(resume + 1, min(resume + 3, next_save - 1, spec.steps))
        return [(0, crash), (resume, spec.steps)]

    def _start_process(self, index: int) -> None:
        if index > 0:
            self.clock += self.rng.uniform(600, 3600)  # crash, then someone relaunches it
            if self.spec.write_config:
                self.files["config.json"] = _dumps(self._config(), indent=2)  # rewritten
            # The resumed process reloads its counters from the checkpoint it resumes from.
            snapshot = self.snapshots.get(f"{self.spec.resumed_at:06d}")
            if snapshot is not None:
                self.cum_tokens, self.cum_cost = dict(snapshot[0]), snapshot[1]
        self.task_counter = 1
        self.future_counter = 0
        if self.trace is not None:
            self.trace.new_process(self.clock - self.rng.uniform(5, 30))

    def _metrics_text(self, per_process: list[list[tuple[int | None, str]]]) -> str:
        spec = self.spec
        first = per_process[0]
        if len(per_process) > 1 and spec.resume_style == "truncate":
            resume = spec.resumed_at or 0
            copy = _jsonl(line for _, line in first)  # the file as it was at the crash
            self.files[f"metrics.jsonl.pre_resume_{resume:06d}"] = copy
            first = [(step, line) for step, line in first if step is None or step < resume]
        lines = [line for part in [first, *per_process[1:]] for _, line in part]
        lines = self._insert_stepless(lines)
        text = _jsonl(lines)
        if spec.cut_last_line and lines:
            # A process killed mid-write: half of the last line, no newline.
            text = text[: len(text) - len(lines[-1]) - 1 + len(lines[-1]) // 2]
        return text

    def _insert_stepless(self, lines: list[str]) -> list[str]:
        n = self.spec.stepless_rows
        if n <= 0:
            return lines
        out = list(lines)
        for i in range(n, 0, -1):
            pos = max(1, len(lines) * i // (n + 1))
            row = {"discarded/trajectories": self.rng.randint(0, 6),
                   "discarded/tokens": self.rng.randint(0, 5000),
                   "discarded/frac_stale": round(self.rng.random() * 0.2, 4)}
            out.insert(pos, _dumps(row))
        return out

    def take_timing_lines(self) -> list[str]:
        lines, self.timing_lines = self.timing_lines, []
        return lines

    def restore_from_row(self, row: dict[str, Any]) -> None:
        """Continue cumulative counters from an existing row (append_steps)."""
        for key in self.cum_tokens:
            value = row.get(f"tokens/cumulative/{key}")
            if isinstance(value, (int, float)) and math.isfinite(value):
                self.cum_tokens[key] = int(value)
        cost = row.get("cost/cumulative_usd")
        if isinstance(cost, (int, float)) and math.isfinite(cost):
            self.cum_cost = float(cost)

    # -- dispatch ---------------------------------------------------------------------------

    def training_step(self, step: int, *, superseded: bool) -> list[dict[str, Any]]:
        kind = self.spec.kind
        if kind == "rl":
            return [self._rl_step(step, superseded)]
        if kind == "sl":
            return [self._sl_step(step)]
        return [self._dpo_step(step)]

    def _finish(self) -> list[dict[str, Any]]:
        """What a completed run writes after its last step."""
        spec = self.spec
        rows: list[dict[str, Any]] = []
        if spec.kind == "rl":
            rows.extend(self._rl_final_rows())
        name = "final"
        batch = spec.steps if spec.kind == "rl" else 0
        self._checkpoint(name, batch, rolling=False, final=True)
        if self.trace is not None:
            spans = _Spans(self.rng)
            t = self.clock
            spans.add("save_checkpoint_async", t, self.rng.uniform(1, 4), 0,
                      end_args=self._ckpt_args(name, rolling=False))
            self.trace.emit(spans.items)
        return rows

    # -- checkpoints ------------------------------------------------------------------------

    def _state_path(self, name: str) -> str:
        return f"tinker://{self.model_id}/weights/{name}"

    def _ckpt_args(self, name: str, *, rolling: bool) -> dict[str, Any]:
        args = {"state_path": self._state_path(name)}
        if not rolling:
            args["sampler_path"] = f"tinker://{self.model_id}/sampler_weights/{name}"
        return args

    def _checkpoint(self, name: str, batch: int, *, rolling: bool, final: bool = False) -> None:
        spec = self.spec
        record: dict[str, Any] = {"name": name, "batch": batch}
        if spec.kind != "rl":
            record["epoch"] = 1 if final else 0
        record.update(self._ckpt_args(name, rolling=rolling))
        if spec.kind == "rl" and self.era == "0.6":
            record["cumulative_tokens"] = dict(self.cum_tokens)
            record["discarded_tokens"] = {k: 0 for k in self.cum_tokens}
        if spec.kind == "sl":
            record["elapsed_tokens"] = self.cum_tokens["trained"]
        if rolling:
            record["rolling"] = True
        self.checkpoint_lines.append(_dumps(record))
        self.snapshots[name] = (dict(self.cum_tokens), self.cum_cost)

    def _save_due(self, k: int) -> tuple[bool, bool]:
        """(regular save, rolling save) for checkpoint number k."""
        spec = self.spec
        regular = spec.save_every > 0 and k > 0 and k % spec.save_every == 0
        if spec.resumed_at is not None and k == spec.resumed_at:
            regular = True  # the checkpoint the run resumes from
        rolling = (not regular and spec.rolling_save_every > 0 and k > 0
                   and k % spec.rolling_save_every == 0)
        return regular, rolling

    # -- RL ---------------------------------------------------------------------------------

    def _level(self, step: int) -> float:
        """Expected success rate at a step: a rising curve whose speed and ceiling depend on lr."""
        lr = self.spec.learning_rate
        speed = _clamp(lr / 1e-4, 0.05, 20.0) ** 0.7
        x = (step + 1) / self.spec.steps
        ceiling = 0.85 - 0.3 * _clamp(lr / 3e-4 - 1.0, 0.0, 1.0)  # too-high lr plateaus lower
        return 0.12 + (ceiling - 0.12) * (1.0 - math.exp(-3.0 * speed * x))

    def _batch(self, level: float) -> list[_Group]:
        spec, rng = self.spec, self.rng
        groups = []
        for _ in range(spec.groups):
            hard = rng.random() < 0.5
            p = _clamp(level + (-0.25 if hard else 0.25) * rng.random(), 0.02, 0.98)
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
        evals = {label: self._batch(level * 0.95) for label in self.eval_labels} if is_eval else {}
        batch = self._batch(level)
        tokens = self._tokens_for(batch) if self.era == "0.6" else None
        regular, rolling = self._save_due(step + 1)  # checkpoint k is saved during step k-1
        spans = self._rl_spans(step, is_eval, step + 1 if regular else None,
                               step + 1 if rolling else None)
        row = self._rl_row(step, batch, evals, tokens, spans, superseded, regular)
        self._rl_artifacts(step, batch, evals)
        if regular:
            self._checkpoint(f"{step + 1:06d}", step + 1, rolling=False)
        if rolling:
            self._checkpoint(f"{step + 1:06d}", step + 1, rolling=True)
        self._close_step(step, spans)
        return row

    def _close_step(self, step: int, spans: _Spans) -> None:
        self.timing_lines.append(_timing_line(step, spans.items))
        if self.trace is not None:
            self.trace.emit(spans.items)
        self.clock = max(s.end for s in spans.items) + self.rng.uniform(0.001, 0.05)

    def _rl_row(self, step: int, batch: list[_Group], evals: dict[str, list[_Group]],
                tokens: dict[str, int] | None, spans: _Spans, superseded: bool,
                saved: bool) -> dict[str, Any]:
        spec, rng = self.spec, self.rng
        mt = spec.multi_turn
        row: dict[str, Any] = {"step": step, "progress/batch": step, "optim/lr": spec.learning_rate,
                               "progress/done_frac": (step + 1) / spec.steps}
        if saved and spec.string_metric:
            row["state_path"] = self._state_path(f"{step + 1:06d}")
        for label, groups in evals.items():
            row.update(self._env_families(label + "/env/", groups, mt, pad=0))
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

    def _rl_final_rows(self) -> list[dict[str, Any]]:
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
        return rows

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
        # Fixed phases use 8 spans; the rest of the budget goes to rollout spans.
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
                self.files[roll_path] = self._rollouts("train", iteration, batch)
            if logged:
                self._write_logtree(html_path, tree_path, f"RL Iteration {iteration}", batch,
                                    train=True)
        for label, groups in evals.items():
            base = f"eval_{_label(label)}"
            html_path, tree_path, roll_path = self._iter_paths(base, iteration)
            self.files[roll_path] = self._rollouts(f"eval/{label}", iteration, groups)
            if logged:
                self._write_logtree(html_path, tree_path, f"Running evaluation {label} {iteration}",
                                    groups, train=False)

    def _rollouts(self, split: str, iteration: int, groups: list[_Group]) -> str:
        mt = self.spec.multi_turn
        lines = []
        for gi, group in enumerate(groups):
            answer = group.problem()[1] if mt else 0
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
                lines.append(_dumps(record))
        return _jsonl(lines)

    def _write_logtree(self, html_path: str, tree_path: str, title: str,
                       groups: list[_Group], *, train: bool) -> None:
        started = self.clock - self.rng.uniform(5, 20)
        root = _el("body", [
            _el("h1", [_text(title)], "lt-title"),
            _el("div", [_text("Generated " + _iso(started, micro=False))], "lt-subtitle"),
            _el("p", [_text("This HTML log was generated by logtree during RL training. It shows "
                            "rollouts and rewards for a subset of trajectory groups in this "
                            "iteration.")], "lt-p"),
        ], "lt-root")
        for group in groups[: self.n_logged_groups]:
            root["children"].append(self._group_section(group))
        doc = {"title": title, "started_at": _iso(started),
               "path": f"{self.log_path}/{html_path}", "root": root}
        tree_text = _dumps(doc, indent=2)
        html_text = _render_html(title, root)
        if train:
            defects = [d for d, on in (("truncated", self.spec.truncated_logtree),
                                       ("empty", self.spec.empty_logtree)) if on]
            if self.train_logtrees_written < len(defects):
                defect = defects[self.train_logtrees_written]
                tree_text = "" if defect == "empty" else tree_text[: len(tree_text) // 2]
            self.train_logtrees_written += 1
        self.files[tree_path] = tree_text
        self.files[html_path] = html_text

    def _group_section(self, group: _Group) -> dict[str, Any]:
        mt = self.spec.multi_turn
        rng = random.Random(group.seed)  # text stream separate from the metrics stream
        question, answer, expr = _problem(rng)
        system = _TOOL_SYSTEM_PROMPT if mt else rng.choice(_SYSTEM_PROMPTS)
        body: list[Any] = []
        for t in group.trajs:
            given = answer + t.offset
            if mt:
                expression = expr if t.offset == 0 else f"{expr}{t.offset:+d}"
                messages = self._tool_messages(rng, system, question, answer, expression, t)
                body.append(_section(2, "Conversation", [_conversation(messages)]))
                reward_rows = [("reference_answer", answer), ("correct", t.correct),
                               ("reward", f"{t.total_reward(True):.3f}")]
            else:
                prompt = [{"role": "system", "content": system},
                          {"role": "user", "content": question}]
                text = f"\\boxed{{{given}}}" if t.fmt else f"The answer is {given}"
                if self.huge_pending:
                    text, self.huge_pending = _huge_text(), False
                response = [{"role": "assistant", "content": [
                    {"type": "thinking", "thinking": _thinking(rng, given)},
                    {"type": "text", "text": text}]}]
                body.append(_section(2, "Prompt", [_conversation(prompt)]))
                body.append(_section(2, "Policy Response", [_conversation(response)]))
                reward_rows = [("reference_answer", answer), ("format_valid", t.fmt),
                               ("correct", t.correct), ("format_coef", 0.1),
                               ("reward", f"{t.total_reward(False):.3f}")]
            body.append(_section(2, "Reward", _table(reward_rows, "Reward components")))
        body.append(_section(2, "Trajectory Details",
                             [self._trajectory_details(i, t, answer)
                              for i, t in enumerate(group.trajs)]))
        return _section(1, "Group Rollout", body)

    def _tool_messages(self, rng: random.Random, system: str, question: str, answer: int,
                       expr: str, t: _Traj) -> list[dict[str, Any]]:
        given = answer + t.offset
        messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                          {"role": "user", "content": question}]
        for i in range(len(t.tool_ok)):
            call_id = "call_%010x" % rng.getrandbits(40)
            messages.append({"role": "assistant", "content": [
                {"type": "thinking", "thinking": _thinking(rng, given)},
                {"type": "text", "text": "Let me compute that."}],
                "tool_calls": [{"type": "function", "id": call_id, "function": {
                    "name": "calculator", "arguments": _dumps({"expression": expr})}}]})
            output = t.tool_output(answer, i)
            if self.huge_pending:
                output, self.huge_pending = _huge_text(), False
            messages.append({"role": "tool", "content": output, "tool_call_id": call_id,
                             "name": "calculator"})
        final = f"Final answer: \\boxed{{{given}}}" if t.fmt else f"I think it is {given}."
        messages.append({"role": "assistant", "content": final})
        return messages

    def _trajectory_details(self, index: int, t: _Traj, answer: int) -> dict[str, Any]:
        mt = self.spec.multi_turn
        rewards = t.step_rewards(mt)
        turns = []
        for si in range(t.turns):
            last = si == t.turns - 1
            stats = _table([("ob_len", t.obs[si]), ("ac_len", t.acs[si]),
                            ("step_reward", f"{rewards[si]:.3f}")], "Step stats")
            if mt:
                metrics = ([("format", f"{float(t.fmt):.3f}")] if last
                           else [("tool_call_ok", f"{float(t.tool_ok[si]):.3f}")])
            else:
                metrics = [("format", f"{float(t.fmt):.3f}"),
                           ("correct", f"{float(t.correct):.3f}")]
            body = stats + [_section(5, "Step Metrics",
                                     _table(metrics, "Metrics emitted by env.step"))]
            if mt and not last:
                body.append(_section(5, "Diagnostics", [
                    _el("p", [_text(f"tool_output: {t.tool_output(answer, si)}")], "lt-p"),
                    _el("p", [_text(f"latency_ms: {t.latency[si]}")], "lt-p")]))
            turns.append(_section(5, f"Turn {si + 1}", body))
        summary = _table([("num_turns", t.turns), ("final_ob_len", 0),
                          ("total_return", f"{t.total_reward(mt):.3f}")])
        details = _section(4, "Episode Details", turns + summary)
        return _section(3, f"Trajectory {index} Episode", [details])

    # -- SL ---------------------------------------------------------------------------------

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

    def _logs_log(self, per_process: list[list[tuple[int | None, str]]]) -> str:
        out = [f"root:791 [INFO] Command line invocation: {FAKE_HOME}/train_sl.py "
               f"log_path={self.log_path}\n",
               f"tinker_cookbook.utils.ml_log:729 [INFO] Logging to: {self.log_path}\n"]
        wrote = ("tinker_cookbook.utils.ml_log:236 [INFO] Wrote metrics to "
                 f"{self.log_path}/metrics.jsonl\n")
        for lines in per_process:
            for step, line in lines:
                out.append(wrote)
                if step is not None and step % 10 == 0:
                    row = json.loads(line)
                    keys = [k for k in row if k != "step" and isinstance(row[k], (int, float))][:6]
                    out.append("tinker_cookbook.utils.ml_log:317 [INFO] \n")
                    out.append(f"{'Step ' + str(step):^50}\n")
                    out.append("\u250f" + "\u2501" * 36 + "\u2533" + "\u2501" * 11 + "\u2513\n")
                    out.append(f"\u2503 {'Metric':<34} \u2503 {'Value':<9} \u2503\n")
                    out.append("\u2521" + "\u2501" * 36 + "\u2547" + "\u2501" * 11 + "\u2529\n")
                    for k in keys:
                        out.append(f"\u2502 {k:<34} \u2502 {row[k]:<9.6g} \u2502\n")
                    out.append("\u2514" + "\u2500" * 36 + "\u2534" + "\u2500" * 11 + "\u2518\n")
        return "".join(out)

    # -- DPO --------------------------------------------------------------------------------

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

    # -- config -----------------------------------------------------------------------------

    def _config(self) -> dict[str, Any]:
        builders = {"rl": self._rl_config, "sl": self._sl_config, "dpo": self._dpo_config}
        return builders[self.spec.kind]()

    def _renderer(self) -> str:
        model = self.spec.model_name.lower()
        if "llama" in model:
            return "llama3"
        return "qwen3_instruct" if "instruct" in model else "qwen3"

    def _rl_config(self) -> dict[str, Any]:
        spec = self.spec
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
                                "renderer_name": self._renderer(), "group_size": spec.group_size,
                                "convo_prefix": "standard", "seed": 0},
            "model_name": spec.model_name,
            "recipe_name": "gsm8k_tool" if spec.multi_turn else "math_rl",
            "max_tokens": 1024 if spec.multi_turn else 2048,
            "log_path": self.log_path,
            "eval_every": spec.eval_every,
            "save_every": spec.save_every,
            "evaluator_builders": evaluators,
            "load_checkpoint_path": None,
            "renderer_name": self._renderer(),
            "wandb_project": None,
            "wandb_name": None,
        }
        new = self.era == "0.6"
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
        cfg.update({"enable_trace": spec.trace, "span_chart_every": 0, "async_config": None,
                    "stream_minibatch_config": None, "base_url": None, "ttl_seconds": 604800})
        if new:
            cfg.update({"rolling_save_every": spec.rolling_save_every, "rolling_ttl_seconds": 7200})
        cfg.update({"num_groups_to_log": self.n_logged_groups, "rollout_json_export": True})
        if new:
            cfg.update({"num_epochs": 1, "max_steps": None})
        return cfg

    def _common_sl_config(self, recipe: str) -> dict[str, Any]:
        spec = self.spec
        return {
            "log_path": self.log_path,
            "model_name": spec.model_name,
            "recipe_name": recipe,
            "dataset_builder": {"common_config": {
                "model_name_for_tokenizer": spec.model_name, "renderer_name": self._renderer(),
                "max_length": 16384, "batch_size": 128 if spec.kind == "sl" else 64,
                "train_on_what": "all_assistant_messages"}},
            "load_checkpoint_path": None,
            "renderer_name": self._renderer(),
            "learning_rate": spec.learning_rate,
            "lr_schedule": "linear",
            "num_epochs": 1,
        }

    def _sl_config(self) -> dict[str, Any]:
        spec = self.spec
        cfg = self._common_sl_config("chat_sl")
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

    def _dpo_config(self) -> dict[str, Any]:
        spec = self.spec
        cfg = self._common_sl_config("preference_dpo")
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


_PAD_TAGS = ("algebra", "geometry", "number_theory", "counting_and_probability", "precalculus",
             "prealgebra", "intermediate_algebra")
