"""The real sample runs in ../shared/sample-runs (written by tinker-cookbook's own writers).

Skipped when that directory is absent: the project's own tests never depend on it. Counts are
computed from the files by `oracle`; names, kinds and layouts are the README's table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import oracle
import runstore

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "sample-runs"

# From sample-runs/README.md.
SAMPLE_RUNS = [
    ("dpo/hh_llama-3.1-8b_beta0.1", "dpo", "none"),
    ("gsm8k_tool_rl/sweep/lr_3e-4/seed_1", "rl", "iteration_dirs"),
    ("math_rl_sweep/llama-3.1-8b-instruct/lr_1e-5", "rl", "flat"),
    ("math_rl_sweep/llama-3.1-8b-instruct/lr_4e-5", "rl", "flat"),
    ("sl/tulu3_qwen3-8b_lr2e-4", "sl", "none"),
]
TABLES = ("runs", "config", "metrics_raw", "checkpoints", "trajectories", "rollout_steps",
          "conversations", "messages", "spans", "trace_slices")

pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"{SAMPLES} does not exist")


@pytest.fixture(scope="module")
def samples_store(tmp_path_factory: pytest.TempPathFactory):
    before = oracle.fingerprint(SAMPLES)
    store = runstore.open(tmp_path_factory.mktemp("samples") / "store")
    report = store.ingest([SAMPLES])
    assert oracle.fingerprint(SAMPLES) == before  # shared files: never written
    return store, report


def test_sample_counts_equal_oracle(samples_store) -> None:
    store, report = samples_store
    q = " union all ".join(f"select '{t}' as t, count(*) as n from {t}" for t in TABLES)
    got = {r["t"]: r["n"] for r in store.arrow(q).to_pylist()}
    want = oracle.expected_counts(SAMPLES)
    assert got == {t: want.get(t, 0) for t in TABLES}
    assert report.warnings == []


def test_sample_runs_kinds_and_layouts(samples_store) -> None:
    store, _ = samples_store
    got = store.sql("select run_name, kind, layout from runs order by 1").rows()
    assert got == SAMPLE_RUNS
    # and the oracle agrees with the README
    assert [(r.relative_to(SAMPLES).as_posix(), oracle.run_kind(r), oracle.layout_of(r))
            for r in oracle.run_dirs(SAMPLES)] == SAMPLE_RUNS


def test_sample_live_metrics(samples_store) -> None:
    store, _ = samples_store
    got = {}
    for r in store.arrow("select r.run_name, m.step, m.key, m.value, m.value_str "
                         "from metrics m join runs r using (run_id)").to_pylist():
        got[(r["run_name"], r["step"], r["key"])] = r["value_str"] if r["value"] is None \
            else r["value"]
    want = {}
    for run in oracle.run_dirs(SAMPLES):
        name = run.relative_to(SAMPLES).as_posix()
        for (step, key), v in oracle.live_metrics(run).items():
            if isinstance(v, bool):
                v = "true" if v else "false"
            want[(name, step, key)] = v if isinstance(v, str) else float(v)
    assert got.keys() == want.keys()
    bad = [k for k in want if not (got[k] == want[k] or got[k] != got[k] and want[k] != want[k])]
    assert not bad, bad[:5]


def test_sample_status(samples_store) -> None:
    store, _ = samples_store
    got = dict(store.sql("select run_name, status from runs").rows())
    want = {}
    for run in oracle.run_dirs(SAMPLES):
        want[run.relative_to(SAMPLES).as_posix()] = \
            "completed" if oracle.has_final_checkpoint(run) else "idle"
    # A sample file touched in the last two minutes would make its run `running`.
    assert {k: v for k, v in got.items() if v != "running"} == \
        {k: v for k, v in want.items() if got[k] != "running"}
