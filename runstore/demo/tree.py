"""Writing generated runs to disk: `generate_tree` and `append_steps`.

Contract: `generate_tree` checks the specs as a tree (no duplicates, no run inside a run),
builds each run's files in memory and writes them, one write per file, with `mtime = now - 1
day`. `append_steps` reads an existing generated run back (metrics.jsonl, config.json, the last
timing line), rebuilds enough of its spec and appends rows that continue it. `write_capture`
writes a large synthetic token-level capture file. These are the only functions of the package
that touch the file system.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import time
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Sequence

from .capture import _capture_lines
from .encoding import _dumps, _jsonl
from .evals import _eval_store
from .rl import _PAD_TAGS, _RLRunBuilder
from .run import _BASE_EPOCH, _RunBuilder
from .specs import MTIME_AGE_SECONDS, RunSpec, default_specs
from .supervised import _DPORunBuilder, _SLRunBuilder

_BUILDERS: dict[str, type[_RunBuilder]] = {
    "rl": _RLRunBuilder, "sl": _SLRunBuilder, "dpo": _DPORunBuilder}


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
    by_name = {s.name: s for s in specs}
    jobs = [(str(root_path), spec, seed, mtime,
             {n: by_name[n] for n in (*spec.evals_of, spec.next_in_sweep) if n in by_name})
            for spec in specs]
    if workers > 1 and len(jobs) > 1:
        # Not fork: the caller may run threads (DuckDB's, Arrow's), and a child forked while
        # one holds a lock can crash or hang, and with it the whole pool. forkserver forks from
        # a clean single-threaded server instead.
        method = ("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                  else "spawn")
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
    builder = _BUILDERS[spec.kind](spec, seed, salt=f"append:{last_step}")
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


def write_capture(path: str | os.PathLike[str], size: int, *, seed: int = 0,
                  distinct: int = 200) -> int:
    """Write a synthetic `capture/sample.jsonl` of about `size` bytes to `path` (for
    benchmarks and crash tests): `distinct` realistic sample records (capture.py) repeated
    with the coordinates of successive iterations (8 groups of 4 trajectories each).
    Returns the number of lines written."""
    rng = random.Random(f"{seed}|capture")
    templates = _capture_lines(rng, distinct)
    written = n = 0
    with open(path, "w", encoding="utf-8") as fh:
        while written < size:
            head, tail = templates[n % distinct]
            line = (f'{head}"iteration": {n // 32}, "group_idx": {n // 4 % 8}, '
                    f'"traj_idx": {n % 4}{tail}\n')
            fh.write(line)
            written += len(line)
            n += 1
    return n


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


def _write_job(job: tuple[str, RunSpec, int, float, dict[str, RunSpec]]) -> None:
    root, spec, seed, mtime, refs = job
    run_dir = Path(root) / spec.name
    empty_dirs: list[str] = []
    if spec.decoy is not None:
        files = _decoy_files(spec)
        if spec.decoy == "empty_iteration_dir":
            empty_dirs.append("iteration_000001")
    elif spec.evals_of:
        files = _eval_store_files(spec, seed, [refs[n] for n in spec.evals_of if n in refs])
    else:
        builder = _BUILDERS[spec.kind](spec, seed)
        following = refs.get(spec.next_in_sweep or "")
        if following is not None and isinstance(builder, _RLRunBuilder):
            builder.extras.next_config = _BUILDERS[following.kind](following, seed)._config()
        files = builder.build()
    run_dir.mkdir(parents=True, exist_ok=True)
    for rel in empty_dirs:
        (run_dir / rel).mkdir(exist_ok=True)
    for rel, content in files.items():
        path = run_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:  # one write per file keeps big trees fast
            fh.write(content.encode("utf-8"))
        os.utime(path, (mtime, mtime))


def _eval_store_files(spec: RunSpec, seed: int, runs: list[RunSpec]) -> dict[str, str]:
    """The eval store `spec`: every regular and final checkpoint of `runs`, then the base
    model (the first run's), evaluated in that order (evals.py)."""
    evaluations: list[tuple[str, str | None, str | None, float, str]] = []
    for run in runs:
        builder = _BUILDERS[run.kind](run, seed)  # its model id, as the run's own files say
        label = run.name.rsplit("/", 1)[-1]
        saved = [k for k in range(1, run.steps + 1) if run.save_every and k % run.save_every == 0]
        names = [(f"{k:06d}", f"{label}_step{k}", k / run.steps) for k in saved]
        if run.final_checkpoint:
            names.append(("final", f"{label}_final", 1.0))
        for name, eval_name, done in names:
            evaluations.append((run.model_name, f"tinker://{builder.model_id}/sampler_weights/{name}",
                                eval_name, 0.3 + 0.4 * done, builder.log_path))
    if runs:
        evaluations.append((runs[0].model_name, None, None, 0.2,
                            _BUILDERS[runs[0].kind](runs[0], seed).log_path))
    rng = random.Random(f"{seed}|{spec.name}|evals")
    return _eval_store(rng, evaluations, _BASE_EPOCH["0.6"] + 6 * 86400)


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
