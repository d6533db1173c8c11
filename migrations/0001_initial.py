"""Create the first schema: every public table as an empty Delta table."""

# The column list is frozen here as it was at schema version 1; later migrations change it.
# Types are pyarrow type names understood by `ctx.create_table`.
TABLES = {
    "runs": [("run_id", "string"), ("run_name", "string"), ("run_path", "string"),
             ("kind", "string"), ("layout", "string"), ("model_name", "string"),
             ("learning_rate", "float64"), ("config", "string"), ("code_diff", "string"),
             ("status", "string"), ("last_step", "int64"), ("n_metric_rows", "int64"),
             ("source_updated_at", "timestamp[us, tz=UTC]"),
             ("ingested_at", "timestamp[us, tz=UTC]")],
    "config": [("run_id", "string"), ("key", "string"), ("value", "string"),
               ("value_num", "float64"), ("value_str", "string"), ("source_id", "int64")],
    "metrics_raw": [("run_id", "string"), ("step", "int64"), ("key", "string"),
                    ("value", "float64"), ("value_str", "string"), ("seq", "int64"),
                    ("pre_resume", "bool"), ("source_id", "int64")],
    "checkpoints": [("run_id", "string"), ("name", "string"), ("batch", "int64"),
                    ("epoch", "int64"), ("final", "bool"), ("state_path", "string"),
                    ("sampler_path", "string"), ("rolling", "bool"), ("extra", "string"),
                    ("seq", "int64"), ("source_id", "int64")],
    "trajectories": [("run_id", "string"), ("split", "string"), ("iteration", "int64"),
                     ("group_idx", "int64"), ("traj_idx", "int64"), ("tags", "list<string>"),
                     ("sampling_client_step", "int64"), ("total_reward", "float64"),
                     ("final_reward", "float64"), ("final_ob_len", "int64"),
                     ("n_steps", "int64"), ("metrics", "string"), ("source_id", "int64")],
    "rollout_steps": [("run_id", "string"), ("split", "string"), ("iteration", "int64"),
                      ("group_idx", "int64"), ("traj_idx", "int64"), ("step_idx", "int64"),
                      ("ob_len", "int64"), ("ac_len", "int64"), ("reward", "float64"),
                      ("episode_done", "bool"), ("metrics", "string"), ("logs", "string"),
                      ("stop_reason", "string"), ("extra", "string"), ("source_id", "int64")],
    "conversations": [("run_id", "string"), ("split", "string"), ("iteration", "int64"),
                      ("conversation_id", "string"), ("section", "string"),
                      ("group_idx", "int64"), ("traj_idx", "int64"), ("n_messages", "int64"),
                      ("title", "string"), ("source_id", "int64")],
    "messages": [("run_id", "string"), ("conversation_id", "string"), ("message_idx", "int64"),
                 ("role", "string"), ("content", "string"), ("parts", "string"),
                 ("tool_calls", "string"), ("tool_call_id", "string"), ("name", "string"),
                 ("trainable", "bool"), ("source_id", "int64")],
    "spans": [("run_id", "string"), ("step", "int64"), ("name", "string"),
              ("duration_s", "float64"), ("wall_start_s", "float64"), ("wall_end_s", "float64"),
              ("depth", "int32"), ("parent", "string"), ("span_idx", "int32"),
              ("source_id", "int64")],
    "trace_slices": [("run_id", "string"), ("name", "string"), ("start_us", "float64"),
                     ("dur_us", "float64"), ("pid", "int64"), ("track", "string"),
                     ("thread", "string"), ("args", "string"), ("depth", "int32"),
                     ("segment", "int32"), ("source_id", "int64")],
}


def migrate(ctx):
    for name, columns in TABLES.items():
        ctx.create_table(name, columns)
