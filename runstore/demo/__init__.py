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
* `write_capture(path, size, *, seed=0)` writes a synthetic token-level capture file of about
  `size` bytes (`capture/sample.jsonl`, as 0.6.1's capture writes it) for benchmarks and crash
  tests.
* `default_specs()`, `awkward_specs()` and `bench_specs()` are the three canned trees, and
  `problem_specs()` the `problems` scenario (problems.py: a run per finding of `runstore
  doctor`, planted with `RunSpec.problem`, plus healthy runs);
  `DEMO_SEED` is the seed `runstore demo` writes `default_specs()` with (the docs show it).
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

Only the standard library is used.

Layout (the names above are the whole public API; the modules are internal):

* `specs` — `RunSpec`, its closed sets and the canned trees.
* `tree` — `generate_tree` and `append_steps`: the only file-system I/O.
* `run` — one run's simulation, common to every kind: processes, metrics.jsonl, checkpoints;
  `rl` and `supervised` (SL, DPO) add each kind's steps; `config` writes config.json.
* `problems` — the `problems` scenario and what each of its problems changes.
* `rollouts`, `spans`, `transcripts` — what RL steps are made of: simulated trajectories,
  timing spans and trace events, logtree transcripts (built on `logtree` and `text`).
* `encoding` — JSON bytes exactly as upstream's `json.dumps` writes them.
"""

from .problems import problem_specs
from .specs import (DECOYS, DEMO_SEED, FAKE_HOME, FAKE_MODULE_PATH, FAKE_RUNS_ROOT, KINDS, LAYOUTS, MTIME_AGE_SECONDS, PROBLEMS, RESUME_STYLES, RunSpec, awkward_specs, bench_specs, default_specs)
from .tree import append_steps, generate_tree, write_capture

__all__ = [
    "RunSpec",
    "append_steps",
    "awkward_specs",
    "bench_specs",
    "default_specs",
    "generate_tree",
    "write_capture",
    "problem_specs",
    # The closed sets a RunSpec takes and the fixed values that appear inside generated files.
    "DECOYS",
    "DEMO_SEED",
    "FAKE_HOME",
    "FAKE_MODULE_PATH",
    "FAKE_RUNS_ROOT",
    "KINDS",
    "LAYOUTS",
    "MTIME_AGE_SECONDS",
    "PROBLEMS",
    "RESUME_STYLES",
]
