"""Add `metric_keys.max_value` and `metric_keys.n_step_numbers` and the `metric_steps` table (per-read step counts), both computed from the stored `metrics_raw` rows, so KL health, check and the run summary read summaries instead of scanning every metric row."""

# Columns frozen as they were at schema version 4 (runstore/storage/schema.py may add more).
KEY_COLUMNS = [("max_value", "float64"), ("n_step_numbers", "int64")]
STEP_COLUMNS = [("run_id", "string"), ("source_id", "int64"), ("pre_resume", "bool"),
                ("n_steps", "int64"), ("first_step", "int64"), ("last_step", "int64"),
                ("steps_exact", "bool")]
# Written before the snapshot lists it: after a kill, readers ignore it and it is written again.
FILLS = ["metric_steps"]
READ = ["run_id", "source_id", "key", "pre_resume", "step", "value", "value_str"]


def migrate(ctx):
    from runstore.ingest.normalize import metric_keys, metric_steps

    def reader(ctx):
        # One stored file at a time: memory stays that of one file, on a store of any size.
        import pyarrow as pa

        types = {"run_id": pa.string(), "source_id": pa.int64(), "key": pa.string(),
                 "pre_resume": pa.bool_(), "step": pa.int64(), "value": pa.float64(),
                 "value_str": pa.string()}

        def read(path):  # files a Delta delete rewrote hold string_view columns
            part = ctx.read_file(path).select(READ)
            return part.cast(pa.schema([(c, types[c]) for c in READ]))

        return read

    files = ctx.table_files("metrics_raw")
    ctx.add_columns("metric_keys", KEY_COLUMNS)
    # Every metric_keys row again, now with the new columns: summaries are recomputed from
    # the rows they summarise (the same function the ingest uses), never patched.
    ctx.rewrite_table("metric_keys",
                      lambda ctx: metric_keys.summarize_files(files, reader(ctx)))
    ctx.fill_table("metric_steps", STEP_COLUMNS,
                   lambda ctx: metric_steps.summarize_files(files, reader(ctx)))
