"""The real runs tinker-cookbook 0.6.1's own writers made (`../shared/sample-runs-0.6.1/`, see
its README): they ingest with no warning, and every fact the README states is answered by the
documented table or view, checked against `tests/oracle.py`'s reading of the files. Runs when
the directory is there (it lies beside the repository, not in it)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

import oracle
import runstore

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "sample-runs-0.6.1"
SWEEP = "sweeps/20260926_083012"
LR2, LR8 = f"{SWEEP}/learning_rate=2e-05", f"{SWEEP}/learning_rate=8e-05"

pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"no {SAMPLES}")


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, runstore.Store, Any]:
    base = tmp_path_factory.mktemp("samples061")
    tree = base / "sample-runs-0.6.1"
    shutil.copytree(SAMPLES, tree)
    store = runstore.open(base / "store")
    return tree, store, store.ingest([tree])


def one(store: runstore.Store, sql: str, **params: Any) -> Any:
    rows = store.sql(sql, params).rows()
    assert len(rows) == 1, rows
    return rows[0] if len(rows[0]) > 1 else rows[0][0]


def test_they_ingest_with_no_warning_and_every_row(ingested) -> None:
    tree, store, report = ingested
    assert report.warnings == []
    assert report.runs_new == 2 and report.eval_stores == 1  # evals/ is not a run
    assert sorted(store.sql("select run_name from runs")["run_name"]) == [LR2, LR8]
    for table, n in oracle.expected_counts(tree).items():
        assert store.sql(f"select count(*) as n from {table}")["n"][0] == n, table


def test_capture_raw_records_one_per_sdk_call(ingested) -> None:
    """capture/sample.jsonl: one `samples` row per sequence of a record's `samples[]` (the
    probe calls sample 4), records without sequences and train_op records are events."""
    tree, store, _ = ingested
    for name in (LR2, LR8):
        want, events = oracle.capture_rows(tree / name)
        assert one(store, "select count(*) from samples join runs using (run_id) "
                          "where run_name = $n", n=name) == len(want)
        got = dict(store.sql("select e.kind || '/' || coalesce(e.op, e.status), count(*) "
                             "from capture_events as e join runs as r using (run_id) "
                             "where r.run_name = $n group by all", {"n": name}).rows())
        expect: dict[str, int] = {}
        for e in events:
            key = f"{e['kind']}/{e['op'] or e['status']}"
            expect[key] = expect.get(key, 0) + 1
        assert got == expect
    assert one(store, "select max(sample_idx) from samples where split = 'probe'") == 3
    assert one(store, "select count(*) from capture_events as e join runs as r using (run_id) "
                      "where r.run_name = $n and e.status = 'cancelled'", n=LR8) == 5


def test_step_less_summaries_give_the_runs_totals(ingested) -> None:
    tree, store, _ = ingested
    for name in (LR2, LR8):
        assert one(store, "select count(*) from metrics_raw join runs using (run_id) "
                          "where run_name = $n and step is null", n=name) > 0
        got = store.arrow("select cost_usd, tokens_sampled, tokens_trained from runs "
                          "where run_name = $n", {"n": name}).to_pylist()[0]
        assert got == oracle.run_totals(tree / name)


def test_late_eval_rows_arrive_after_later_steps(ingested) -> None:
    """The async loop's eval of the step-4 weights arrives after step 5's row: eval_points has
    it at step 4, its seq after step 5's, with its snapshot cost and time."""
    tree, store, _ = ingested
    rows = oracle.metric_rows(tree / LR2 / "metrics.jsonl")
    step5 = max(line for step, key, _, line in rows if step == 5)
    step4_eval = one(store, "select distinct seq from eval_points where run_name = $n "
                            "and step = 4", n=LR2)
    assert step4_eval > step5
    live = oracle.live_metrics(tree / LR2)
    assert one(store, "select distinct cost_usd from eval_points where run_name = $n "
                      "and step = 4", n=LR2) == \
        live[(4, "eval/snapshot/cumulative_cost_usd")]


def test_the_eval_store_three_runs_two_checkpoints_and_the_base_model(ingested) -> None:
    tree, store, _ = ingested
    assert one(store, "select count(*) from eval_runs") == 3
    rows = store.sql("select run_name, checkpoint, benchmark, score from eval_scores "
                     "order by checkpoint nulls last, benchmark").rows()
    (evals,) = oracle.eval_stores(tree)
    want = oracle.eval_store_rows(evals)
    score = {(meta["checkpoint_name"], r["benchmark"]): r["score"]
             for meta in want["eval_runs"] for r in want["eval_results"]
             if r["eval_run_id"] == meta["eval_run_id"]}
    assert rows == [
        (LR2, "000004", "gsm8k", score[("learning_rate=2e-05_step4", "gsm8k")]),
        (LR2, "000004", "math500", score[("learning_rate=2e-05_step4", "math500")]),
        (LR2, "final", "gsm8k", score[("learning_rate=2e-05_final", "gsm8k")]),
        (LR2, "final", "math500", score[("learning_rate=2e-05_final", "math500")]),
        (None, None, "gsm8k", score[(None, "gsm8k")]),
        (None, None, "math500", score[(None, "math500")]),
    ]


def test_logs_the_sweeps_next_configuration_block_and_the_crash(ingested) -> None:
    tree, store, _ = ingested
    for name in (LR2, LR8):
        facts = store.arrow("select command, last_error, last_error_line from runs "
                            "where run_name = $n",
                            {"n": name}).to_pylist()[0]
        assert facts == oracle.log_facts(tree / name)
    # 2e-05's log ends with the next point's Configuration block: no error for it.
    last = store.sql("select text from run_logs join runs using (run_id) where run_name = $n "
                     "order by line_no desc limit 1", {"n": LR2})["text"][0]
    assert last.startswith("  max_steps")
    assert one(store, "select last_error from run_status where run_name = $n", n=LR2) is None
    assert one(store, "select status, final_checkpoint, last_error from run_status "
                      "where run_name = $n", n=LR8) == (
        "idle", False, "OSError: [Errno 28] No space left on device")


def test_the_leftover_temporary_file_is_noted(ingested) -> None:
    _, store, _ = ingested
    assert one(store, "select tmp_files from runs where run_name = $n", n=LR8) == \
        ["iteration_000003/.train_rollout_summaries.jsonl.29285.tmp"]
    assert one(store, "select tmp_files from runs where run_name = $n", n=LR2) is None
