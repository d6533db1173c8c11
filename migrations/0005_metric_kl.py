"""Add the `metric_kl` table (the KL values that count per live step, merged at ingest), computed from the stored `metrics_raw` rows, so `kl_steps` (and `kl_health`, `runstore check`, the KL chart) reads it instead of merging every KL write at query time."""

# Columns frozen as they were at schema version 5 (runstore/storage/schema.py may add more).
COLUMNS = [("run_id", "string"), ("source_id", "int64"), ("step", "int64"), ("v1", "float64"),
           ("v2", "float64")]
# Written before the snapshot lists it: after a kill, readers ignore it and it is written again.
FILLS = ["metric_kl"]
READ = [("run_id", "string"), ("source_id", "int64"), ("key", "string"), ("step", "int64"),
        ("value", "float64"), ("seq", "int64"), ("pre_resume", "bool")]


def migrate(ctx):
    from runstore.ingest.normalize import metric_kl

    files = ctx.table_files("metrics_raw")
    # One stored file read at a time, only its KL rows kept; then the merge over all of them
    # at once (a file's writes of one step may lie in several stored files).
    ctx.fill_table("metric_kl", COLUMNS,
                   lambda ctx: metric_kl.summarize_files(files, lambda p: ctx.read_file(p, READ)))
