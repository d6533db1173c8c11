"""Add what tinker-cookbook 0.6.1 writes beyond the logging guide: tables `samples`, `capture_events` (token-level capture), `eval_runs`, `eval_results`, `eval_trajectories` (eval stores) and `run_logs` (logs.log); `runs.command`, `last_error`, `cost_usd`, `tokens_sampled`, `tokens_trained` (the totals computed from the stored metrics rows), `tmp_files`; the newer rollout summary fields of `trajectories`."""

# Columns frozen as they were at schema version 8 (runstore/storage/schema.py may add more).
TABLES = {
    "samples": [("run_id", "string"), ("run_attempt", "int64"), ("split", "string"),
                ("iteration", "int64"), ("group_idx", "int64"), ("traj_idx", "int64"),
                ("sample_idx", "int64"), ("purpose", "string"), ("policy_version", "string"),
                ("created_at", "timestamp[us, tz=UTC]"), ("prompt_tokens", "list<int64>"),
                ("sampled_tokens", "list<int64>"), ("logprobs", "list<float64>"),
                ("prompt_len", "int64"), ("sampled_len", "int64"), ("n_logprobs", "int64"),
                ("logprob_sum", "float64"), ("stop_reason", "string"),
                ("sampling_session_id", "string"), ("seq_id", "int64"),
                ("capture_run_id", "string"), ("metadata", "string"), ("seq", "int64"),
                ("source_id", "int64")],
    "capture_events": [("run_id", "string"), ("kind", "string"), ("op", "string"),
                       ("status", "string"), ("error", "string"),
                       ("created_at", "timestamp[us, tz=UTC]"), ("latency_s", "float64"),
                       ("run_attempt", "int64"), ("split", "string"), ("iteration", "int64"),
                       ("group_idx", "int64"), ("traj_idx", "int64"), ("purpose", "string"),
                       ("capture_run_id", "string"), ("event_id", "string"),
                       ("payload", "string"), ("seq", "int64"), ("source_id", "int64")],
    "eval_runs": [("eval_store_id", "string"), ("eval_store", "string"),
                  ("eval_run_id", "string"), ("model_name", "string"),
                  ("checkpoint_name", "string"), ("checkpoint_path", "string"),
                  ("run_id", "string"), ("timestamp", "string"),
                  ("benchmarks", "list<string>"), ("scores", "string"), ("config", "string"),
                  ("source_id", "int64")],
    "eval_results": [("eval_store_id", "string"), ("eval_run_id", "string"),
                     ("benchmark", "string"), ("score", "float64"), ("num_examples", "int64"),
                     ("num_correct", "int64"), ("num_errors", "int64"),
                     ("num_truncated", "int64"), ("time_s", "float64"), ("metrics", "string"),
                     ("pass_at_k", "string"), ("source_id", "int64")],
    "eval_trajectories": [("eval_store_id", "string"), ("eval_run_id", "string"),
                          ("benchmark", "string"), ("idx", "int64"), ("example_id", "string"),
                          ("reward", "float64"), ("error", "string"), ("time_s", "float64"),
                          ("n_turns", "int64"), ("turns", "string"), ("metrics", "string"),
                          ("logs", "string"), ("seq", "int64"), ("source_id", "int64")],
    "run_logs": [("run_id", "string"), ("line_no", "int64"), ("level", "string"),
                 ("logger", "string"), ("record_line", "int64"), ("text", "string"),
                 ("source_id", "int64")],
}
RUN_COLUMNS = [("command", "string"), ("last_error", "string"), ("cost_usd", "float64"),
               ("tokens_sampled", "int64"), ("tokens_trained", "int64"),
               ("tmp_files", "list<string>")]
TRAJECTORY_COLUMNS = [("status", "string"), ("error_type", "string"),
                      ("error_message", "string"), ("stop_reason", "string"),
                      ("model_name", "string"), ("conversation", "string")]
# The `runs` columns as they were at schema version 6, read back to be rewritten.
STORED_RUN_COLUMNS = [("run_id", "string"), ("run_name", "string"), ("run_path", "string"),
                      ("kind", "string"), ("layout", "string"), ("model_name", "string"),
                      ("learning_rate", "float64"), ("config", "string"),
                      ("code_diff", "string"), ("status", "string"), ("last_step", "int64"),
                      ("n_metric_rows", "int64"), ("source_updated_at", "timestamp[us, tz=UTC]"),
                      ("ingested_at", "timestamp[us, tz=UTC]"), ("final_checkpoint", "bool"),
                      ("done_frac", "float64")]
METRIC_COLUMNS = [("run_id", "string"), ("key", "string"), ("value", "float64"),
                  ("seq", "int64"), ("pre_resume", "bool")]
TOTALS = {"cost_usd": "cost/cumulative_usd", "tokens_sampled": "tokens/cumulative/sampled",
          "tokens_trained": "tokens/cumulative/trained"}
# A frozen copy of the rule of runstore/ingest/run_facts.py: per run, the last numeric write
# (largest line number) of each cumulative key in the live metrics file.
TOTALS_SQL = """
select run_id, key, arg_max(value, seq) as value
from rows
where value is not null and not coalesce(pre_resume, false)
group by run_id, key
"""


def migrate(ctx):
    for name, columns in TABLES.items():
        ctx.create_table(name, columns)
    ctx.add_columns("trajectories", TRAJECTORY_COLUMNS)
    ctx.add_columns("runs", RUN_COLUMNS)
    runs = ctx.table_files("runs")
    if not runs:
        return

    def rows(ctx):
        import duckdb
        import pyarrow as pa
        import pyarrow.compute as pc

        keys = pa.array(list(TOTALS.values()), pa.string())
        parts = []
        for path in ctx.table_files("metrics_raw"):  # one stored file at a time
            part = ctx.read_file(path, METRIC_COLUMNS)
            parts.append(part.filter(pc.is_in(part.column("key"), value_set=keys)))
        totals: dict[tuple[str, str], float] = {}
        if parts:
            con = duckdb.connect(":memory:")
            try:
                con.register("rows", pa.concat_tables(parts))
                for run_id, key, value in con.execute(TOTALS_SQL).fetchall():
                    totals[(run_id, key)] = value
            finally:
                con.close()
        stored = pa.concat_tables([ctx.read_file(f, STORED_RUN_COLUMNS) for f in runs])
        ids = stored.column("run_id").to_pylist()
        for column, key in TOTALS.items():
            values = [totals.get((run_id, key)) for run_id in ids]
            if column == "cost_usd":
                stored = stored.append_column(column, pa.array(values, pa.float64()))
                continue
            whole = [int(v) if v is not None and v == v and abs(v) != float("inf")
                     and float(v).is_integer() else None for v in values]
            stored = stored.append_column(column, pa.array(whole, pa.int64()))
        return stored

    ctx.rewrite_table("runs", rows)
