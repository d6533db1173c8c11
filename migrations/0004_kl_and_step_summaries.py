"""Add `metric_keys.max_value` and `metric_keys.n_step_numbers` and the `metric_steps` table (per-read step counts), both computed from the stored `metrics_raw` rows, so KL health, check and the run summary read summaries instead of scanning every metric row."""

# Columns frozen as they were at schema version 4 (runstore/storage/schema.py may add more).
KEY_COLUMNS = [("max_value", "float64"), ("n_step_numbers", "int64")]
STEP_COLUMNS = [("run_id", "string"), ("source_id", "int64"), ("pre_resume", "bool"),
                ("n_steps", "int64"), ("first_step", "int64"), ("last_step", "int64"),
                ("steps_exact", "bool")]
# Written before the snapshot lists it: after a kill, readers ignore it and it is written again.
FILLS = ["metric_steps"]
READ = [("run_id", "string"), ("source_id", "int64"), ("key", "string"), ("pre_resume", "bool"),
        ("step", "int64"), ("value", "float64"), ("value_str", "string")]


def migrate(ctx):
    from runstore.ingest.normalize import metric_keys, metric_steps

    def read(path):  # one stored file at a time: memory stays that of one file
        return ctx.read_file(path, READ)

    files = ctx.table_files("metrics_raw")
    ctx.add_columns("metric_keys", KEY_COLUMNS)
    # Every metric_keys row again, now with the new columns: summaries are recomputed from
    # the rows they summarise (the same function the ingest uses), never patched.
    ctx.rewrite_table("metric_keys",
                      lambda ctx: metric_keys.summarize_files(files, read))
    ctx.fill_table("metric_steps", STEP_COLUMNS,
                   lambda ctx: metric_steps.summarize_files(files, read))
