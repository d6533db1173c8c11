"""Add `runs.final_checkpoint` and `runs.done_frac` (a final checkpoint written, the largest `progress/done_frac` logged), computed for the stored runs from their checkpoints and metrics, so `run_status` (and `runstore check`, the Runs page) reads `runs` alone."""

# Columns frozen as they were at schema version 6 (runstore/storage/schema.py may add more).
COLUMNS = [("final_checkpoint", "bool"), ("done_frac", "float64")]
RUN_COLUMNS = [("run_id", "string"), ("run_name", "string"), ("run_path", "string"),
               ("kind", "string"), ("layout", "string"), ("model_name", "string"),
               ("learning_rate", "float64"), ("config", "string"), ("code_diff", "string"),
               ("status", "string"), ("last_step", "int64"), ("n_metric_rows", "int64"),
               ("source_updated_at", "timestamp[us, tz=UTC]"),
               ("ingested_at", "timestamp[us, tz=UTC]")]
CHECKPOINT_COLUMNS = [("run_id", "string"), ("name", "string"), ("final", "bool")]
METRIC_COLUMNS = [("run_id", "string"), ("source_id", "int64"), ("key", "string"),
                  ("pre_resume", "bool"), ("step", "int64"), ("value", "float64"),
                  ("value_str", "string")]


def migrate(ctx):
    ctx.add_columns("runs", COLUMNS)
    runs = ctx.table_files("runs")
    if not runs:
        return

    def rows(ctx):
        import pyarrow as pa
        import pyarrow.compute as pc

        from runstore.ingest import progress
        from runstore.ingest.normalize import metric_keys
        from runstore.storage.schema import arrow_type

        def empty(columns):
            return pa.Table.from_batches([], pa.schema([(c, arrow_type(t)) for c, t in columns]))

        def done_frac_rows(path):  # one stored file at a time, only the key that matters
            part = ctx.read_file(path, METRIC_COLUMNS)
            return part.filter(pc.equal(part.column("key"), progress.DONE_KEY))

        # metrics_raw, not metric_keys: no migration rewrites it, so its files in the snapshot
        # being migrated are the rows even when an earlier pending migration makes the summary.
        keys = metric_keys.summarize_files(ctx.table_files("metrics_raw"), done_frac_rows)
        checkpoints = [ctx.read_file(f, CHECKPOINT_COLUMNS) for f in ctx.table_files("checkpoints")]
        facts = progress.from_tables(
            pa.concat_tables(checkpoints) if checkpoints else empty(CHECKPOINT_COLUMNS), keys)
        stored = pa.concat_tables([ctx.read_file(f, RUN_COLUMNS) for f in runs])
        found = [facts.get(run, (False, None)) for run in stored.column("run_id").to_pylist()]
        final = pa.array([f for f, _ in found], pa.bool_())
        done_frac = pa.array([d for _, d in found], pa.float64())
        return (stored.append_column("final_checkpoint", final)
                .append_column("done_frac", done_frac))

    ctx.rewrite_table("runs", rows)
