"""Add metric_keys, the per-key summary of metrics_raw that `runstore keys` reads, filled from the stored rows."""

# Columns frozen as they were at schema version 2 (runstore/storage/schema.py may add more).
COLUMNS = [("run_id", "string"), ("source_id", "int64"), ("key", "string"),
           ("pre_resume", "bool"), ("n_points", "int64"), ("first_step", "int64"),
           ("last_step", "int64"), ("n_numbers", "int64"), ("n_strings", "int64"),
           ("n_stepless", "int64"), ("steps_exact", "bool")]
# Written before the snapshot lists it: after a kill, readers ignore it and it is written again.
FILLS = ["metric_keys"]
READ = ["run_id", "source_id", "key", "pre_resume", "step", "value", "value_str"]


def migrate(ctx):
    from runstore.ingest.normalize.metric_keys import summarize_files

    def rows(ctx):
        # One stored file at a time: memory stays that of one file, on a store of any size.
        import pyarrow as pa

        types = {"run_id": pa.string(), "source_id": pa.int64(), "key": pa.string(),
                 "pre_resume": pa.bool_(), "step": pa.int64(), "value": pa.float64(),
                 "value_str": pa.string()}

        def read(path):  # files a Delta delete rewrote hold string_view columns
            part = ctx.read_file(path).select(READ)
            return part.cast(pa.schema([(c, types[c]) for c in READ]))

        # The summary's columns as of version 2: later versions' columns (0004) come later.
        table = summarize_files(ctx.table_files("metrics_raw"), read)
        return table.select([c for c, _ in COLUMNS])

    ctx.fill_table("metric_keys", COLUMNS, rows)
