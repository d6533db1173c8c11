"""What tinker-cookbook 0.6.1 writes beyond the logging guide (issue 32), checked against an
independent reading of the files (tests/oracle.py: `json.loads` of the lines, no runstore).

The demo tree's async sweep (`tool_rl_async/`) holds every such artifact: the token-level
capture (`samples`, `capture_events`), an eval store (`eval_runs`, `eval_results`,
`eval_trajectories`), `logs.log` (`run_logs`, `runs.command`, `runs.last_error`,
`runs.last_error_line`), step-less cost rows (`runs.cost_usd`, `tokens_*`), late eval rows on
three axes (`eval_points`), newer rollout summary fields and a leftover `.NAME.PID.tmp`. Each table and view is compared row by
row with the oracle; then the files are appended to, truncated and rewritten, and each read
again must give exactly the oracle's rows again.
"""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import oracle
import runstore

ASYNC = "tool_rl_async"
LR2 = f"{ASYNC}/learning_rate=2e-05"
LR8 = f"{ASYNC}/learning_rate=8e-05"


@pytest.fixture(scope="module")
def ingested(_demo_template: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[Path, runstore.Store, Any]:
    """(tree, store, report): the demo tree ingested once (read-only for the tests here)."""
    base = tmp_path_factory.mktemp("artifacts")
    tree = base / "runs"
    shutil.copytree(_demo_template, tree, symlinks=True)
    store = runstore.open(base / "store")
    report = store.ingest([tree])
    return tree, store, report


def rid(store: runstore.Store, run: Path) -> str:
    return store.sql("select run_id from runs where run_path = $p",
                     {"p": str(run.resolve())})["run_id"][0]


def same_float(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or a == b


# --------------------------------------------------------------------------- the demo's artifacts


def test_the_demo_holds_every_artifact(ingested) -> None:
    """Guards the tests below against a demo that lost what they check."""
    tree, store, report = ingested
    assert report.warnings == []
    assert report.eval_stores == 1
    for table in ("samples", "capture_events", "eval_runs", "eval_results", "eval_trajectories",
                  "run_logs"):
        assert store.sql(f"select count(*) as n from {table}")["n"][0] > 0, table
    attempts = store.sql("select distinct run_attempt from samples join runs using (run_id) "
                         "where run_name = $n order by 1", {"n": LR2})["run_attempt"].to_list()
    assert attempts == [0, 1]  # a resumed run's capture: both attempts
    statuses = set(store.sql("select status from capture_events where kind = 'sample'")
                   ["status"].to_list())
    assert statuses == {"cancelled"}
    assert store.sql("select count(*) as n from metrics_raw where step is null "
                     "and key = 'cost/cumulative_usd'")["n"][0] > 0
    assert store.sql("select count(*) as n from trajectories where status = 'error'")["n"][0] > 0


def test_counts_equal_the_oracle(ingested) -> None:
    tree, store, report = ingested
    want = oracle.artifact_counts(tree)
    for table, n in want.items():
        assert store.sql(f"select count(*) as n from {table}")["n"][0] == n, table
        assert report.rows_added.get(table, 0) == n, table


def test_samples_rows_equal_the_capture_lines(ingested) -> None:
    """Every sampled sequence, with its coordinates, token lists and logprobs, is the
    oracle's `json.loads` of the capture lines; never expanded into rows."""
    tree, store, _ = ingested
    for run in oracle.run_dirs(tree):
        want, events = oracle.capture_rows(run)
        got = store.arrow("select * from samples where run_id = $r order by seq, sample_idx",
                          {"r": rid(store, run)}).to_pylist()
        assert len(got) == len(want), run
        want.sort(key=lambda w: (w["seq"], w["sample_idx"]))
        for g, w in zip(got, want):
            for k in ("seq", "sample_idx", "run_attempt", "iteration", "group_idx", "traj_idx",
                      "split", "purpose", "prompt_tokens", "sampled_tokens", "stop_reason"):
                assert g[k] == w[k], (run, k, w["seq"])
            assert len(g["logprobs"]) == len(w["logprobs"])
            assert all(same_float(a, b) for a, b in zip(g["logprobs"], w["logprobs"]))
            assert g["prompt_len"] == len(w["prompt_tokens"])
            assert g["sampled_len"] == len(w["sampled_tokens"])
            assert same_float(g["logprob_sum"], math.fsum(w["logprobs"]))
            meta = json.loads(g["metadata"])
            assert meta["stop_reason"] == w["stop_reason"] and "prompt_tokens" not in meta
        # Events come from several files (their lines numbered per file): compared as sets.
        got_events = store.arrow("select seq, kind, status, op, payload from capture_events "
                                 "where run_id = $r", {"r": rid(store, run)}).to_pylist()
        assert sorted((e["seq"], e["kind"], e["status"], e["op"],
                       json.dumps(json.loads(e["payload"]), sort_keys=True))
                      for e in got_events) == \
            sorted((e["seq"], e["kind"], e["status"], e["op"],
                    json.dumps(e["record"], sort_keys=True)) for e in events)


def test_eval_tables_equal_the_eval_store_files(ingested) -> None:
    tree, store, _ = ingested
    (evals,) = oracle.eval_stores(tree)
    want = oracle.eval_store_rows(evals)
    runs = store.arrow("select * from eval_runs order by eval_run_id").to_pylist()
    assert [r["eval_run_id"] for r in runs] == sorted(w["eval_run_id"] for w in want["eval_runs"])
    by_id = {w["eval_run_id"]: w for w in want["eval_runs"]}
    for r in runs:
        w = by_id[r["eval_run_id"]]
        assert r["eval_store"] == str(evals.resolve())
        assert (r["model_name"], r["checkpoint_name"], r["checkpoint_path"], r["timestamp"],
                r["benchmarks"]) == (w["model_name"], w["checkpoint_name"],
                                     w["checkpoint_path"], w["timestamp"], w["benchmarks"])
        assert json.loads(r["scores"]) == w["scores"] and json.loads(r["config"]) == w["config"]
    results = store.arrow("select * from eval_results order by eval_run_id, benchmark").to_pylist()
    assert [(r["eval_run_id"], r["benchmark"], r["score"], r["num_examples"], r["num_correct"],
             r["num_errors"], r["num_truncated"], r["time_s"]) for r in results] == sorted(
        (w["eval_run_id"], w["benchmark"], w["score"], w["num_examples"], w["num_correct"],
         w["num_errors"], w["num_truncated"], w["time_seconds"]) for w in want["eval_results"])
    trajs = store.arrow("select * from eval_trajectories").to_pylist()
    assert sorted((t["eval_run_id"], t["benchmark"], t["seq"], t["idx"], t["example_id"],
                   t["reward"], t["error"], t["n_turns"]) for t in trajs) == sorted(
        (w["eval_run_id"], w["benchmark"], w["seq"], w["idx"], w["example_id"], w["reward"],
         w["error"], len(w["turns"])) for w in want["eval_trajectories"])


def test_an_eval_store_is_not_a_run(ingested) -> None:
    tree, store, report = ingested
    names = set(store.sql("select run_name from runs")["run_name"])
    assert f"{ASYNC}/evals" not in names
    assert report.runs_new == len(oracle.run_dirs(tree))


def test_eval_scores_link_each_eval_to_the_run_and_checkpoint_it_evaluated(ingested) -> None:
    """The training run and checkpoint come from the run's checkpoints.jsonl: the record
    whose sampler path is the eval's checkpoint path."""
    tree, store, _ = ingested
    (evals,) = oracle.eval_stores(tree)
    want = oracle.eval_store_rows(evals)
    owner: dict[str, tuple[str, str, int]] = {}
    for run in oracle.run_dirs(tree):
        for rec in oracle.checkpoint_records(run):
            if rec.get("sampler_path"):
                owner[rec["sampler_path"]] = (str(run.resolve()), rec["name"], rec["batch"])
    meta = {w["eval_run_id"]: w for w in want["eval_runs"]}
    expect = []
    for w in want["eval_results"]:
        run_path, name, batch = owner.get(meta[w["eval_run_id"]]["checkpoint_path"],
                                          (None, None, None))
        expect.append((w["eval_run_id"], w["benchmark"], run_path, name, batch, w["score"]))
    got = store.arrow("select e.eval_run_id, e.benchmark, r.run_path, e.checkpoint, e.step, "
                      "e.score from eval_scores as e left join runs as r using (run_id)"
                      ).to_pylist()
    assert sorted((g["eval_run_id"], g["benchmark"], g["run_path"], g["checkpoint"], g["step"],
                   g["score"]) for g in got) == sorted(expect, key=str)
    assert any(e[2] is None for e in expect) and any(e[2] is not None for e in expect)


def test_eval_scores_has_one_row_per_result_however_checkpoint_records_repeat(
        _demo_template: Path, tmp_path: Path) -> None:
    """A checkpoint path named by several records of a run (the same sampler weights saved
    again beside new state: the records differ in their state paths) still gives each eval
    result one row, with the latest record that names the path (the last such line of
    checkpoints.jsonl), where each record used to give one."""
    tree = tmp_path / "runs"
    shutil.copytree(_demo_template / ASYNC, tree / ASYNC)
    (evals,) = oracle.eval_stores(tree)
    paths = {w["checkpoint_path"] for w in oracle.eval_store_rows(evals)["eval_runs"]}
    runs = [r for r in oracle.run_dirs(tree)
            if any(c.get("sampler_path") in paths for c in oracle.checkpoint_records(r))]
    for n, run in enumerate(runs):
        again = next(c for c in oracle.checkpoint_records(run)
                     if c.get("sampler_path") in paths)
        with (run / "checkpoints.jsonl").open("a") as f:
            f.write(json.dumps({"name": f"{again['name']}-again", "batch": 100 + n,
                                "state_path": f"{again['state_path']}-again",
                                "sampler_path": again["sampler_path"]}) + "\n")
    store = runstore.open(tmp_path / "store")
    store.ingest([tree])
    latest: dict[str, tuple[str, int]] = {}
    for run in oracle.run_dirs(tree):
        for rec in oracle.checkpoint_records(run):  # in line order: the last one stays
            for key in ("sampler_path", "state_path"):
                if rec.get(key):
                    latest[rec[key]] = (rec.get("name"), rec.get("batch"))
    want = oracle.eval_store_rows(evals)
    meta = {w["eval_run_id"]: w for w in want["eval_runs"]}
    expect = sorted(((w["eval_run_id"], w["benchmark"],
                      *latest.get(meta[w["eval_run_id"]]["checkpoint_path"], (None, None)))
                     for w in want["eval_results"]), key=str)
    got = store.rows("select eval_run_id, benchmark, checkpoint, step from eval_scores").data
    assert sorted(got, key=str) == expect
    assert runs and any(e[2] and e[2].endswith("-again") for e in expect)


def test_run_logs_and_the_runs_row_facts(ingested) -> None:
    tree, store, _ = ingested
    for run in oracle.run_dirs(tree):
        r = rid(store, run)
        lines = store.arrow("select line_no, text from run_logs where run_id = $r "
                            "order by line_no", {"r": r}).to_pylist()
        assert [x["text"] for x in lines] == oracle.log_lines(run), run
        assert [x["line_no"] for x in lines] == list(range(1, len(lines) + 1))
        row = store.arrow("select command, last_error, last_error_line, cost_usd, "
                          "tokens_sampled, tokens_trained from runs where run_id = $r",
                          {"r": r}).to_pylist()[0]
        assert {k: row[k] for k in ("command", "last_error", "last_error_line")} == \
            oracle.log_facts(run), run
        totals = oracle.run_totals(run)
        assert same_float(row["cost_usd"], totals["cost_usd"]), run
        assert (row["tokens_sampled"], row["tokens_trained"]) == \
            (totals["tokens_sampled"], totals["tokens_trained"]), run
    crashed = store.sql("select run_name, status, last_error from run_status "
                        "where last_error is not null").rows()
    assert crashed == [(LR8, "idle", "OSError: [Errno 28] No space left on device")]


def test_log_levels_follow_their_records(ingested) -> None:
    """A line's level is that of the last `<logger>:<lineno> [<LEVEL>]` line at or before it."""
    tree, store, _ = ingested
    run = tree / LR8
    want, level = [], None
    for line in oracle.log_lines(run):
        head = oracle._RECORD.match(line)
        if head:
            level = line.split("[", 1)[1].split("]", 1)[0]
        want.append(level)
    got = store.sql("select level from run_logs where run_id = $r order by line_no",
                    {"r": rid(store, run)})["level"].to_list()
    assert got == want and "ERROR" in got and "WARNING" in got


def test_leftover_temporary_files_are_noted_not_read(ingested) -> None:
    tree, store, _ = ingested
    tmp = sorted(p.relative_to(tree / LR8).as_posix()
                 for p in (tree / LR8).rglob(".*.tmp"))
    assert tmp and store.sql("select tmp_files from runs where run_name = $n",
                             {"n": LR8})["tmp_files"].to_list() == [tmp]
    assert store.sql("select count(*) as n from runs where tmp_files is not null")["n"][0] == 1


def _percentile_cont(values: list[float], q: float) -> float:
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def test_sample_stats_equal_a_recount_of_the_capture(ingested) -> None:
    tree, store, _ = ingested
    want: dict[tuple, dict[str, Any]] = {}
    for run in oracle.run_dirs(tree):
        groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
        for s in oracle.capture_rows(run)[0]:
            groups[(str(run.resolve()), s["run_attempt"], s["split"], s["iteration"])].append(s)
        for key, rows in groups.items():
            sampled = [len(r["sampled_tokens"]) for r in rows]
            logprobs = [x for r in rows for x in r["logprobs"]]
            want[key] = {"n_sequences": len(rows), "n_calls": len({r["seq"] for r in rows}),
                         "prompt_len_max": max(len(r["prompt_tokens"]) for r in rows),
                         "sampled_len_min": min(sampled), "sampled_len_max": max(sampled),
                         "sampled_len_p50": _percentile_cont(sampled, 0.5),
                         "sampled_len_p90": _percentile_cont(sampled, 0.9),
                         "mean_logprob": math.fsum(logprobs) / len(logprobs)}
    got = store.arrow("select r.run_path, s.* from sample_stats as s join runs as r "
                      "using (run_id)").to_pylist()
    assert len(got) == len(want) > 10
    for g in got:
        w = want[(g["run_path"], g["run_attempt"], g["split"], g["iteration"])]
        assert g["policy_version"] is None  # 0.6.1 leaves it null: one row per iteration
        for k, v in w.items():
            assert g[k] == pytest.approx(v, rel=1e-12), k


def test_eval_points_are_the_by_step_copies_at_their_snapshot(ingested) -> None:
    tree, store, _ = ingested
    want = set()
    for run in oracle.run_dirs(tree):
        live = oracle.live_metrics(run)
        for (step, key), value in live.items():
            if key.startswith("eval/by_step/"):
                name = key[len("eval/by_step/"):]
                # The other two axes hold the same value: one metric, three coordinates.
                assert live[(step, f"eval/by_cost/{name}")] == value == \
                    live[(step, f"eval/by_time/{name}")]
                want.add((str(run.resolve()), step, name, value,
                          live.get((step, "eval/snapshot/cumulative_cost_usd")),
                          live.get((step, "eval/snapshot/elapsed_seconds"))))
    got = {(r["run_path"], r["step"], r["metric"], r["value"], r["cost_usd"], r["elapsed_s"])
           for r in store.arrow("select r.run_path, e.* from eval_points as e join runs as r "
                                "using (run_id)").to_pylist()}
    assert got == want and want


def test_late_eval_rows_are_stored_at_their_training_step(ingested) -> None:
    """An async eval arrives after later training steps: it is stored at the step of the
    weights it evaluated (`eval/snapshot/training_step`), its line number keeps the order."""
    tree, store, _ = ingested
    rows = [(step, key, line) for step, key, _, line in
            oracle.metric_rows(tree / LR2 / "metrics.jsonl")
            if key == "eval/snapshot/training_step"]
    late = [(step, line) for step, _, line in rows
            if any(s > step and ln < line for s, _, _, ln in
                   oracle.metric_rows(tree / LR2 / "metrics.jsonl") if s is not None)]
    assert late  # at least one evaluation arrived after a later step's row
    got = store.sql("select e.step, e.seq from eval_points as e join runs as r using (run_id) "
                    "where r.run_name = $n group by e.step, e.seq order by e.step",
                    {"n": LR2}).rows()
    assert set(late) <= set(got)


def test_reward_per_dollar_equals_a_recount(ingested) -> None:
    tree, store, _ = ingested
    want = {}
    for run in oracle.run_dirs(tree):
        cost = oracle.run_totals(run)["cost_usd"]
        if cost is None:
            continue
        rewards = {s: v for (s, k), v in oracle.live_numbers(run).items()
                   if k == oracle.REWARD_KEY and not math.isnan(v)}
        final = rewards[max(rewards)] if rewards else None
        best = max(rewards.values()) if rewards else None
        want[str(run.resolve())] = (final, best, None if final is None or cost == 0
                                    else final / cost)
    got = {r["run_path"]: (r["final_reward"], r["best_reward"], r["final_per_usd"])
           for r in store.arrow("select r.run_path, p.* from reward_per_dollar as p "
                                "join runs as r using (run_id)").to_pylist()}
    assert got.keys() == want.keys()
    for k, (final, best, per) in want.items():
        assert got[k][0] == final and got[k][1] == best
        assert same_float(got[k][2], per) or got[k][2] == pytest.approx(per, rel=1e-15)


def test_the_ingest_totals_equal_the_statement_over_stored_rows(ingested) -> None:
    """runs.cost_usd and tokens_* (kept read by read in the ledger) are what the statement
    a snapshot without them computes from `metrics_raw` (sql/statements/totals.sql)."""
    from runstore.resources import statement

    _, store, _ = ingested
    kept = store.arrow("select run_id, cost_usd, tokens_sampled, tokens_trained from runs "
                       "where cost_usd is not null order by run_id").to_pylist()
    computed = store.arrow(f"select * from ({statement('totals.run_totals')}) order by run_id"
                           ).to_pylist()
    assert kept == computed and len(kept) >= 8


def test_totals_past_a_token_count_read_by_read(tmp_path: Path) -> None:
    """Cumulative writes the statement reads as no token count (past the int64 range, not a
    whole number, a string) leave the column null without stopping the ingest, read by read
    and in one read: the `runs` row is the oracle's and the statement's over stored rows.
    (Python's own last-write rule once turned 1e20 into an int64 overflow: a crash.)"""
    from runstore.resources import statement

    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"model_name": "m"}))
    writes = [{"step": 0, "tokens/cumulative/sampled": 1e20, "cost/cumulative_usd": 0.5},
              {"step": 1, "tokens/cumulative/trained": 2.5, "tokens/cumulative/sampled": 40},
              {"tokens/cumulative/sampled": 1e20},
              {"step": 2, "tokens/cumulative/trained": 64, "cost/cumulative_usd": "n/a"},
              {"step": 3, "tokens/cumulative/sampled": 41.0}]
    stores = {"read by read": tmp_path / "a", "at once": tmp_path / "b"}
    for i, w in enumerate(writes):
        with open(run / "metrics.jsonl", "a") as f:
            f.write(json.dumps(w) + "\n")
        for how, path in stores.items():
            if how == "read by read" or i == len(writes) - 1:
                store = runstore.open(path)
                store.ingest([run.parent])
                row = store.arrow("select cost_usd, tokens_sampled, tokens_trained from runs"
                                  ).to_pylist()[0]
                assert row == oracle.run_totals(run), (how, i)
                computed = store.arrow("select cost_usd, tokens_sampled, tokens_trained from ("
                                       f"{statement('totals.run_totals')})").to_pylist()
                assert [row] == computed, (how, i)


def test_totals_of_a_ledger_from_before_are_seeded_by_the_statement(tmp_path: Path) -> None:
    """A ledger whose metrics states hold no `run_totals` (an earlier runstore kept the last
    writes themselves, `totals`, or nothing) gets them from the stored rows by the statement;
    an append then adds to them: every `runs` row is the oracle's."""
    from runstore.ingest import run_facts
    from runstore.storage import ledger as ledger_mod
    from runstore.storage.location import location
    from runstore.storage.manifest import read_manifest

    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"model_name": "m"}))
    (run / "metrics.jsonl").write_text("".join(json.dumps(w) + "\n" for w in [
        {"step": 0, "tokens/cumulative/sampled": 10, "cost/cumulative_usd": 0.5},
        {"step": 1, "tokens/cumulative/trained": 3, "cost/cumulative_usd": 0.75}]))
    path = tmp_path / "store"
    runstore.open(path).ingest([run.parent])
    root = location(path)
    m = read_manifest(root)
    led = ledger_mod.read(root, m)
    for e in led.entries.values():
        if e.kind == "metrics":
            assert e.state.pop(run_facts.STATE) == {"cost/cumulative_usd": 0.75,
                                                    "tokens/cumulative/sampled": 10,
                                                    "tokens/cumulative/trained": 3}
            e.state[run_facts.OLD_STATE] = {"cost/cumulative_usd": [2, 0.75]}
    (path / m.ledger).unlink()
    ledger_mod.write(root, m.ledger, led.to_arrow())
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 2, "tokens/cumulative/trained": 5}) + "\n")
    store = runstore.open(path)
    store.ingest([run.parent])
    row = store.arrow("select cost_usd, tokens_sampled, tokens_trained from runs").to_pylist()
    assert row == [oracle.run_totals(run)] == [
        {"cost_usd": 0.75, "tokens_sampled": 10, "tokens_trained": 5}]
    states = [e.state for e in ledger_mod.read(root, read_manifest(root)).entries.values()
              if e.kind == "metrics"]
    assert [run_facts.OLD_STATE in s for s in states] == [False]


# --------------------------------------------------------------------------- appends, rewrites


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def table_rows(store: runstore.Store, table: str, run: Path) -> list[dict[str, Any]]:
    return store.arrow(f"select * exclude (source_id) from {table} where run_id = $r "
                       "order by all", {"r": rid(store, run)}).to_pylist()


def fresh_rows(tmp_path: Path, table: str, run: Path) -> list[dict[str, Any]]:
    """The rows of `table` for `run` in a store ingested once from the run's files as they
    are (the run alone: a run's rows depend on its own files only, and the other runs of the
    tree would cost a whole ingest of the demo tree each time)."""
    store = runstore.open(tmp_path / f"fresh-{len(list(tmp_path.iterdir()))}")
    store.ingest([run])
    return table_rows(store, table, run)


@pytest.mark.parametrize("rel,table", [("capture/sample.jsonl", "samples"),
                                       ("capture/train_op.jsonl", "capture_events"),
                                       ("logs.log", "run_logs")])
def test_appends_and_rewrites_equal_a_fresh_ingest(demo_tree: Path, tmp_path: Path, rel: str,
                                                   table: str) -> None:
    """A file written in pieces (one cut mid-line), then truncated, then rewritten in place:
    after each ingest the table holds exactly a fresh ingest's rows of the file as it is."""
    run = demo_tree / LR2
    path = run / rel
    full = path.read_bytes()
    cut = len(full) // 3
    store = runstore.open(tmp_path / "store")
    path.write_bytes(full[:cut])  # ends mid-line: the half line waits
    store.ingest([demo_tree])
    assert table_rows(store, table, run) == fresh_rows(tmp_path, table, run)
    path.write_bytes(full)  # the rest appended
    report = store.ingest([demo_tree])
    assert report.warnings == []
    assert table_rows(store, table, run) == fresh_rows(tmp_path, table, run)
    whole = lines_of(path)
    path.write_bytes(b"".join(whole[: len(whole) // 2]))  # truncated (a rewrite)
    store.ingest([demo_tree])
    assert table_rows(store, table, run) == fresh_rows(tmp_path, table, run)
    rewritten = b"".join(whole[len(whole) // 2:][: len(whole) // 2])  # same size? no matter
    path.write_bytes(rewritten)
    store.ingest([demo_tree])
    assert table_rows(store, table, run) == fresh_rows(tmp_path, table, run)
    if rel == "logs.log":
        facts = store.arrow("select command, last_error, last_error_line from runs "
                            "where run_id = $r",
                            {"r": rid(store, run)}).to_pylist()[0]
        assert facts == oracle.log_facts(run)


def eval_rows(store: runstore.Store) -> dict[str, list[tuple]]:
    return {t: sorted(map(tuple, (r.values() for r in store.arrow(
        f"select * exclude (source_id) from {t}").to_pylist())), key=repr)
            for t in ("eval_runs", "eval_results", "eval_trajectories")}


def test_eval_store_grows_and_is_rewritten(demo_tree: Path, tmp_path: Path) -> None:
    """A new eval run, a finalized metadata.json (rewritten with its scores), trajectories
    appended then truncated: each ingest equals a fresh one of the store as it is then."""
    evals = demo_tree / ASYNC / "evals"
    store = runstore.open(tmp_path / "store")
    store.ingest([demo_tree])

    def check() -> None:
        fresh = runstore.open(tmp_path / f"fresh-{len(list(tmp_path.iterdir()))}")
        fresh.ingest([demo_tree])
        assert eval_rows(store) == eval_rows(fresh)
        assert {t: len(v) for t, v in eval_rows(store).items()} == {
            t: len(v) for t, v in oracle.eval_store_rows(evals).items()}

    src = sorted((evals / "runs").iterdir())[0]
    new = evals / "runs" / "copy_20260101_000000_abcdef"
    shutil.copytree(src, new)
    meta = json.loads((new / "metadata.json").read_text())
    meta.update(run_id=new.name, scores={})
    (new / "metadata.json").write_text(json.dumps(meta, indent=2))
    with open(evals / "runs.jsonl", "a") as f:
        f.write(json.dumps({"run_id": new.name, "timestamp": meta["timestamp"],
                            "model": meta["model_name"], "checkpoint": None}) + "\n")
    store.ingest([demo_tree])
    check()
    meta["scores"] = {"gsm8k": 0.5, "math500": 0.25}  # finalize_run rewrites it
    (new / "metadata.json").write_text(json.dumps(meta, indent=2))
    traj = new / "gsm8k" / "trajectories.jsonl"
    with open(traj, "a") as f:
        f.write(lines_of(traj)[0].decode())
    store.ingest([demo_tree])
    check()
    assert json.loads(store.sql("select scores from eval_runs where eval_run_id = $i",
                                {"i": new.name})["scores"][0]) == meta["scores"]
    traj.write_bytes(b"".join(lines_of(traj)[:2]))
    result = new / "math500" / "result.json"
    rewritten = json.loads(result.read_text())
    rewritten["score"] = 0.125  # a benchmark run again over the same directory
    result.write_text(json.dumps(rewritten, indent=2))
    store.ingest([demo_tree])
    check()
    assert store.sql("select score from eval_results where eval_run_id = $i and "
                     "benchmark = 'math500'", {"i": new.name})["score"].to_list() == [0.125]


def test_an_eval_store_ingested_before_its_runs_links_to_them_later(demo_tree: Path,
                                                                     tmp_path: Path) -> None:
    store = runstore.open(tmp_path / "store")
    store.ingest([demo_tree / ASYNC / "evals"])
    assert store.sql("select count(*) as n from runs")["n"][0] == 0
    assert store.sql("select count(run_id) as n from eval_runs")["n"][0] == 0
    store.ingest([demo_tree])
    linked = store.sql("select count(run_id) as n, count(*) as all from eval_runs").row(0)
    assert linked == (4, 5)  # every checkpoint's eval; the base model's has no run


def test_an_eval_store_inside_a_run(demo_tree: Path, tmp_path: Path) -> None:
    """A run's `eval/` or `eval_store/` (where tinker-cookbook's RunRegistry looks) holds an
    eval store of its own: found, and still not a run."""
    run = demo_tree / LR2
    shutil.copytree(demo_tree / ASYNC / "evals", run / "eval_store")
    store = runstore.open(tmp_path / "store")
    report = store.ingest([run])
    assert report.warnings == [] and report.eval_stores == 1 and report.runs_new == 1
    stores = store.sql("select distinct eval_store from eval_runs")["eval_store"].to_list()
    assert stores == [str((run / "eval_store").resolve())]
    assert store.sql("select count(*) as n from eval_runs where run_id is not null")["n"][0] == 3


# --------------------------------------------------------------------------- hostile input


def sample_record(**over: Any) -> dict[str, Any]:
    rec = {"kind": "sample", "scope": {"run_id": "x", "run_attempt": 0, "split": "train",
                                       "iteration": 3, "group_idx": 0, "traj_idx": 1,
                                       "purpose": "rollout"},
           "created_at": 1790411432.5, "num_samples": 1, "sampling_session_id": "s:sample:0",
           "seq_id": 7, "prompt_tokens": [1, 2, 3], "prompt_length": 3,
           "samples": [{"tokens": [4, 5], "logprobs": [-0.5, -1.0], "stop_reason": "stop"}],
           "status": "ok", "latency_sec": 1.5}
    rec.update(over)
    return rec


def test_hostile_capture_lines_cost_only_themselves(tmp_path: Path) -> None:
    """A token list with a string in it, a 10 MB line, a line missing run coordinates, a
    line that is not an object, a cut last line: each good field and line is kept, each bad
    one is named with its file and line, and the rest of the file is read."""
    run = tmp_path / "runs" / "r"
    (run / "capture").mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 0, "loss": 1.0}\n')
    huge = list(range(1_300_000))  # ~10 MB of token ids on one line
    lines = [
        json.dumps(sample_record()),
        json.dumps(sample_record(samples=[{"tokens": [4, "five", 6], "logprobs": [-0.1, -0.2,
                                                                            -0.3]}])),
        json.dumps(sample_record(prompt_tokens=huge)),
        json.dumps(sample_record(scope={"run_id": "x"})),  # no coordinates: null, no warning
        "[1, 2, 3]",
        '{"kind": "sample", "samples": [{"tokens": [1.5], "logprobs": [true]}], "seq_id": 1e99}',
        "x" * (10 << 20),  # a 10 MB line that is not JSON
        json.dumps(sample_record(scope="not a scope")),
        json.dumps(sample_record()),
    ]
    path = run / "capture" / "sample.jsonl"
    path.write_text("\n".join(lines) + "\n" + json.dumps(sample_record())[:40])
    store = runstore.open(tmp_path / "store")
    report = store.ingest([tmp_path / "runs"])
    warned = {w.split(": ", 1)[0]: w for w in report.warnings}
    assert set(warned) == {"r/capture/sample.jsonl:2", "r/capture/sample.jsonl:5",
                           "r/capture/sample.jsonl:6", "r/capture/sample.jsonl:7",
                           "r/capture/sample.jsonl:8"}, report.warnings
    assert "samples[0].tokens" in warned["r/capture/sample.jsonl:2"]
    assert all(k in warned["r/capture/sample.jsonl:6"]
               for k in ("samples[0].tokens", "samples[0].logprobs", "seq_id"))
    rows = store.arrow("select seq, iteration, traj_idx, prompt_len, sampled_tokens, logprobs "
                       "from samples order by seq").to_pylist()
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 6, 8, 9]
    assert rows[1]["sampled_tokens"] is None and rows[1]["logprobs"] == [-0.1, -0.2, -0.3]
    assert rows[2]["prompt_len"] == len(huge)
    assert store.sql("select prompt_tokens from samples where seq = 3")["prompt_tokens"][0
                                                                                    ].to_list() == huge
    assert (rows[3]["iteration"], rows[3]["traj_idx"]) == (None, None)
    assert store.sql("select count(*) as n from capture_events")["n"][0] == 0
    # The cut last line is read once it is whole.
    with open(path, "a") as f:
        f.write(json.dumps(sample_record())[40:] + "\n")
    store.ingest([tmp_path / "runs"])
    assert store.sql("select max(seq) as m from samples")["m"][0] == 10


def test_a_sample_record_without_a_sequence_is_an_event(tmp_path: Path) -> None:
    """A `sample` record whose `samples` holds no object (a list of other values, empty, or
    no list) is a capture_events row with its status and latency, never lost; a list with
    some objects is a samples row per object, the others named. As the oracle reads them."""
    run = tmp_path / "runs" / "r"
    (run / "capture").mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 0, "loss": 1.0}\n')
    odd = ([None, 5, "x"], "nope", [], [None, {"tokens": [1, 2], "logprobs": [-0.5, -0.25]}])
    (run / "capture" / "sample.jsonl").write_text("".join(
        json.dumps({"kind": "sample", "seq_id": i, "status": "ok", "latency_sec": 1.5,
                    "samples": seqs}) + "\n" for i, seqs in enumerate(odd)))
    store = runstore.open(tmp_path / "store")
    report = store.ingest([tmp_path / "runs"])
    assert sorted(w.split(": ", 1)[0] for w in report.warnings) == [
        "r/capture/sample.jsonl:1", "r/capture/sample.jsonl:2", "r/capture/sample.jsonl:4"]
    samples, events = oracle.capture_rows(run)
    assert [(e["seq"], e["status"]) for e in events] == [(1, "ok"), (2, "ok"), (3, "ok")]
    assert store.sql("select seq, status, latency_s from capture_events order by seq").rows() \
        == [(e["seq"], e["status"], 1.5) for e in events]
    assert [(r["seq"], r["sample_idx"]) for r in samples] == [(4, 1)]
    assert store.sql("select seq, sample_idx, sampled_tokens from samples").rows() == \
        [(4, 1, [1, 2])]


def test_hostile_logs_and_eval_files(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = root / "r"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 0, "loss": 1.0}\n')
    (run / "logs.log").write_bytes(b"root:791 [INFO] Command line invocation: a.py \xff\xfe\n"
                                   b"\x00nul and \x1b[31mcolour\n"
                                   b"x.main:9 [ERROR] failed \xc3\n"
                                   b"Traceback (most recent call last):\n"
                                   b'  File "x.py", line 1, in <module>\n'
                                   b"ValueError: bad \xc3\n")
    evals = root / "evals"
    (evals / "runs" / "a").mkdir(parents=True)
    (evals / "runs" / "b" / "gsm8k").mkdir(parents=True)
    (evals / "runs.jsonl").write_text('{"run_id": "a"}\n{"run_id": "b"}\n')
    (evals / "runs" / "a" / "metadata.json").write_text('{"model_name": "m", "check')
    (evals / "runs" / "b" / "metadata.json").write_text(json.dumps(
        {"run_id": "b", "model_name": 7, "checkpoint_path": None, "benchmarks": "gsm8k"}))
    (evals / "runs" / "b" / "gsm8k" / "result.json").write_text('{"score": "high"}')
    (evals / "runs" / "b" / "gsm8k" / "trajectories.jsonl").write_text(
        '{"idx": 1, "reward": 1.0, "turns": []}\n[]\n{"idx": "two", "turns": 3}\n')
    store = runstore.open(tmp_path / "store")
    report = store.ingest([root])
    where = sorted(w.split(": ", 1)[0] for w in report.warnings)
    assert where == ["evals/runs/a/metadata.json", "evals/runs/b/gsm8k/result.json",
                     "evals/runs/b/gsm8k/trajectories.jsonl:2",
                     "evals/runs/b/gsm8k/trajectories.jsonl:3",
                     "evals/runs/b/metadata.json"], report.warnings
    assert store.sql("select command, last_error from runs").row(0) == (
        "a.py \ufffd\ufffd", "ValueError: bad \ufffd")
    assert store.sql("select count(*) as n from run_logs")["n"][0] == 6
    assert store.sql("select eval_run_id, model_name, benchmarks from eval_runs").rows() == \
        [("b", None, None)]
    assert store.sql("select score from eval_results").rows() == [(None,)]
    assert store.sql("select idx, n_turns from eval_trajectories order by seq").rows() == \
        [(1, 0), (None, None)]


def test_temporary_files_of_atomic_writes_are_never_read(demo_tree: Path, tmp_path: Path) -> None:
    """`.NAME.PID.tmp` (tinker-cookbook's LocalStorage.write, renamed over NAME when done) is
    not NAME: a leftover one is noted on the runs row, and one that is renamed away or
    appears later updates the note."""
    run = demo_tree / LR2
    (run / ".metrics.jsonl.4242.tmp").write_text('{"step": 99, "x": 1}\n')
    (run / "capture" / ".sample.jsonl.4242.tmp").write_text("not json\n")
    store = runstore.open(tmp_path / "store")
    report = store.ingest([demo_tree])
    assert report.warnings == []
    assert store.sql("select max(step) as m from metrics_raw join runs using (run_id) "
                     "where run_name = $n", {"n": LR2})["m"][0] < 99
    note = lambda: store.sql("select tmp_files from runs where run_name = $n",  # noqa: E731
                             {"n": LR2})["tmp_files"].to_list()[0]
    assert sorted(note()) == [".metrics.jsonl.4242.tmp", "capture/.sample.jsonl.4242.tmp"]
    (run / ".metrics.jsonl.4242.tmp").unlink()
    (run / "capture" / ".sample.jsonl.4242.tmp").unlink()
    report = store.ingest([demo_tree])
    assert report.runs_updated == 1 and note() is None


# --------------------------------------------------------------------------- logs.log, piece by piece

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

LOG_PIECES = [
    "root:791 [INFO] Command line invocation: train.py lr=1",
    "root:791 [INFO] Command line invocation: train.py lr=2",
    "tinker_cookbook.rl.train:1513 [INFO] [training_loop] Step 3: Will train on batch",
    "tinker_cookbook.rl.rollout_strategy:248 [WARNING] Trajectory failed (RuntimeError)",
    "tinker_cookbook.recipes.chat_sl.sweep.runner:202 [ERROR] Run failed: x",
    "tinker_cookbook.rl.train:88 [CRITICAL] Giving up",
    "tinker_cookbook.rl.train:271 [INFO] Trajectory Group",
    "tinker_cookbook.utils.ml_log:317 [INFO] ",
    "Traceback (most recent call last):",
    '  File "a.py", line 1, in <module>',
    "    main()",
    "    ^^^^^^",
    "OSError: [Errno 28] No space left on device",
    "ValueError: first line",
    "second line of the message",
    "",
    "During handling of the above exception, another exception occurred:",
    "Configuration:",
    "  learning_rate: 8e-05",
    "│ cost/cumulative_usd │ 0.1 │",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(LOG_PIECES), max_size=40), st.lists(st.integers(0, 40),
                                                                    max_size=4))
def test_logs_read_in_pieces_equal_one_read_and_the_oracle(lines: list[str],
                                                           cuts: list[int]) -> None:
    """Whatever the log holds and wherever the appends fall between lines, reading it piece
    by piece (the state carried in between) gives the rows and facts of one read, and those
    are the oracle's (which looks at the file backwards, not line by line)."""
    import tempfile

    from runstore.ingest import run_facts
    from runstore.ingest.normalize import logs

    data = "".join(line + "\n" for line in lines).encode()
    whole_state: dict[str, Any] = {}
    whole = logs.normalize(data, 1, whole_state)
    state: dict[str, Any] = {}
    pieces: dict[str, list[Any]] = defaultdict(list)
    bounds = sorted({min(c, len(lines)) for c in cuts} | {0, len(lines)})
    for a, b in zip(bounds, bounds[1:]):
        part = logs.normalize("".join(x + "\n" for x in lines[a:b]).encode(), a + 1, state)
        for k, v in part.items():
            pieces[k] += v
    assert dict(pieces) == {k: v for k, v in whole.items() if v} or not lines
    assert run_facts.log_facts(state) == run_facts.log_facts(whole_state)
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "logs.log").write_bytes(data)
        assert run_facts.log_facts(whole_state) == oracle.log_facts(Path(d))


def test_only_a_traceback_an_error_record_logs_is_the_last_error(tmp_path: Path) -> None:
    """A traceback in an INFO record (a tool's error in a rollout's transcript) or a WARNING
    (a retried call logged with its traceback) is text the run logged, not the error it met:
    `last_error` stays the ERROR record's, however many such records come after it."""
    from runstore.ingest import run_facts
    from runstore.ingest.normalize import logs

    tool_error = ("Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
                  "ZeroDivisionError: division by zero\n")
    text = ("root:791 [INFO] Command line invocation: train.py\n"
            "tinker_cookbook.recipes.chat_sl.sweep.runner:202 [ERROR] Run failed: x\n"
            "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n"
            "OSError: [Errno 28] No space left on device\n"
            "tinker_cookbook.rl.train:271 [INFO] Trajectory Group\n<|im_start|> tool\n"
            + tool_error +
            "tinker_cookbook.rl.rollout_strategy:248 [WARNING] Trajectory failed, retrying\n"
            + tool_error.replace("ZeroDivisionError: division by zero",
                                 "RuntimeError: sandbox exited"))
    (tmp_path / "logs.log").write_text(text)
    state: dict[str, Any] = {}
    logs.normalize(text.encode(), 1, state)
    want = {"last_error": "OSError: [Errno 28] No space left on device", "last_error_line": 2}
    facts = run_facts.log_facts(state)
    assert {k: facts[k] for k in want} == want
    assert {k: oracle.log_facts(tmp_path)[k] for k in want} == want


def test_an_exception_groups_record_is_its_last_errors(tmp_path: Path) -> None:
    """An exception group logged by `logger.exception` (Python's framed traceback): its
    record is `last_error_line`, the log's last record until another record follows it."""
    import traceback

    from runstore.ingest import run_facts
    from runstore.ingest.normalize import logs

    try:
        raise ExceptionGroup("eg", [OSError(28, "No space left on device"), ValueError("v")])
    except ExceptionGroup as e:
        framed = "".join(traceback.format_exception(e))
    text = ("root:791 [INFO] Command line invocation: train.py\n"
            "tinker_cookbook.rl.train:10 [INFO] step 0\n"
            "tinker_cookbook.recipes.chat_sl.sweep.runner:202 [ERROR] Run failed: x\n" + framed)
    assert "+ Exception Group Traceback" in text
    (tmp_path / "logs.log").write_text(text)
    state: dict[str, Any] = {}
    logs.normalize(text.encode(), 1, state)
    facts = run_facts.log_facts(state)
    assert facts == oracle.log_facts(tmp_path)
    assert facts["last_error"].startswith("ExceptionGroup: eg (2 sub-exceptions): OSError")
    assert facts["last_error_line"] == 3 and oracle.log_ends_in_error(tmp_path)
    more = "tinker_cookbook.rl.train:12 [INFO] retrying\n"
    (tmp_path / "logs.log").write_text(text + more)
    logs.normalize(more.encode(), text.count("\n") + 1, state)
    assert run_facts.log_facts(state) == facts  # the same error and record
    assert not oracle.log_ends_in_error(tmp_path)


def test_a_rebuilt_ledger_knows_the_eval_store(demo_tree: Path, tmp_path: Path) -> None:
    """`runstore repair` rebuilding a lost ledger from the tables finds an eval store's files
    by its id (its rows carry `eval_store_id`, not a run_id): the next ingest reads them again
    and replaces their rows, never adds them twice."""
    from runstore.storage.manifest import read_manifest

    store = runstore.open(tmp_path / "store")
    store.ingest([demo_tree])
    before = eval_rows(store)
    ledger = read_manifest(tmp_path / "store").ledger
    (tmp_path / "store" / ledger).unlink()
    report = store.repair()
    assert any("rebuilt the ingest ledger" in a for a in report.actions), report.actions
    store.ingest([demo_tree])
    assert eval_rows(store) == before
    assert {t: len(v) for t, v in eval_rows(store).items()} == {
        t: len(v) for t, v in oracle.eval_store_rows(demo_tree / ASYNC / "evals").items()}


def test_wide_rows_publish_in_batches_of_bytes(demo_tree: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch ends at `BATCH_BYTES` of staged rows too (a capture row holds whole token
    lists, so a row count alone would not bound memory): more snapshots, the same rows."""
    from runstore.ingest import run as ingest_run

    monkeypatch.setattr(ingest_run, "BATCH_BYTES", 300_000)
    store = runstore.open(tmp_path / "store")
    report = store.ingest([demo_tree])
    assert report.snapshots > 3
    for table, n in oracle.artifact_counts(demo_tree).items():
        assert store.sql(f"select count(*) as n from {table}")["n"][0] == n, table


# Lines of exception groups' tracebacks as Python 3.11+ draws them (`traceback` frames each
# behind a margin of spaces and `| `), a nested group among them.
GROUP_PIECES = [
    "  + Exception Group Traceback (most recent call last):",
    '  |   File "a.py", line 9, in main',
    "  | ExceptionGroup: unhandled errors in a TaskGroup (2 sub-exceptions)",
    "  +-+---------------- 1 ----------------",
    "    | Traceback (most recent call last):",
    '    |   File "a.py", line 5, in bad',
    "    | OSError: [Errno 28] No space left on device",
    "    +---------------- 2 ----------------",
    "    | ValueError: second",
    "    +------------------------------------",
    "    + Exception Group Traceback (most recent call last):",
    "    | ExceptionGroup: nested (1 sub-exception)",
    "    +-+---------------- 1 ----------------",
    "      | KeyError: 'k'",
    "      +------------------------------------",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(LOG_PIECES + GROUP_PIECES), max_size=40),
       st.lists(st.integers(0, 40), max_size=4))
def test_exception_groups_read_in_pieces_equal_one_read_and_the_oracle(
        lines: list[str], cuts: list[int]) -> None:
    """Logs holding exception groups' framed tracebacks among plain ones: read piece by piece
    or at once, the last error is the oracle's (which reads each frame backwards)."""
    test_logs_read_in_pieces_equal_one_read_and_the_oracle.hypothesis.inner_test(lines, cuts)


def test_a_task_groups_crash_is_the_last_error_at_every_append(tmp_path: Path) -> None:
    """A crash through an `asyncio.TaskGroup`, logged by Python's own `logging` (the format
    tinker-cookbook's logs.log has), then a chained group of sub-exceptions raised without
    tracebacks: after an ingest at every line, `last_error` is the group's line and its
    sub-exceptions' lines, as the oracle reads them from the file."""
    import asyncio
    import io
    import logging

    async def fails(e: Exception) -> None:
        raise e

    async def main() -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(fails(OSError(28, "No space left on device")))
            group.create_task(fails(ValueError("second")))

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(name)s:%(lineno)d [%(levelname)s] %(message)s"))
    log = logging.getLogger("runstore-test-crash")
    log.addHandler(handler)
    log.propagate = False
    try:
        log.error("Command line invocation: train.py")
        try:
            asyncio.run(main())
        except Exception:
            log.exception("training failed")
        first = out.getvalue()
        try:
            try:
                raise KeyError("k")
            except KeyError as e:
                raise ExceptionGroup("eg", [RuntimeError("inner"), TypeError("t")]) from e
        except Exception:
            log.exception("chained")
        chained_text = out.getvalue()

        async def many() -> None:
            async with asyncio.TaskGroup() as group:
                for i in range(8):
                    group.create_task(fails(TimeoutError(f"rollout {i}")))

        try:
            asyncio.run(many())
        except Exception:
            log.exception("eight rollouts failed")
    finally:
        log.removeHandler(handler)
    text, last = chained_text, out.getvalue()
    assert "+ Exception Group Traceback" in first
    crash = ("ExceptionGroup: unhandled errors in a TaskGroup (2 sub-exceptions): "
             "OSError: [Errno 28] No space left on device; ValueError: second")
    chained = "ExceptionGroup: eg (2 sub-exceptions): RuntimeError: inner; TypeError: t"
    run = tmp_path / "runs" / "crashed"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 0, "loss": 1.0}\n')
    store = runstore.open(tmp_path / "store")
    lines = text.splitlines(keepends=True)
    for n in range(1, len(lines) + 1):
        (run / "logs.log").write_text("".join(lines[:n]))
        store.ingest([tmp_path / "runs"])
        got = store.sql("select last_error from runs").rows()[0][0]
        assert got == oracle.log_facts(run)["last_error"], n
        if "".join(lines[:n]) == first:
            assert got == crash
    assert got == chained
    # Eight sub-exceptions: the first five are named, the others counted.
    (run / "logs.log").write_text(last)
    store.ingest([tmp_path / "runs"])
    got = store.sql("select last_error from runs").rows()[0][0]
    assert got == oracle.log_facts(run)["last_error"] == (
        "ExceptionGroup: unhandled errors in a TaskGroup (8 sub-exceptions): "
        + "; ".join(f"TimeoutError: rollout {i}" for i in range(5)) + "; 3 more")
