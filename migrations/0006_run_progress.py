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

# What run_progress reads of the statement `metric_keys` of sql/statements/summaries.sql,
# frozen as it was at version 6: each read's largest non-NaN value of `progress/done_frac`.
DONE_FRAC_KEYS = """
select run_id, source_id, key, coalesce(pre_resume, false) as pre_resume,
       max(value) filter (where not isnan(value)) as max_value
from metrics_raw
where key = 'progress/done_frac'
group by run_id, source_id, key, coalesce(pre_resume, false)
"""
# The statement `run_progress` of sql/statements/summaries.sql as it was at version 6, frozen
# here (a later change to the live statement must not change what this migration does).
RUN_PROGRESS = """
select coalesce(f.run_id, p.run_id) as run_id,
       coalesce(f.final_checkpoint, false) as final_checkpoint,
       p.done_frac
from (select run_id, bool_or(coalesce(final, false) or name = 'final') as final_checkpoint
      from checkpoints
      group by run_id) as f
full join (select run_id, max(max_value) as done_frac
           from metric_keys
           where key = 'progress/done_frac' and not pre_resume
           group by run_id) as p on p.run_id = f.run_id
"""


def migrate(ctx):
    ctx.add_columns("runs", COLUMNS)
    runs = ctx.table_files("runs")
    if not runs:
        return

    def rows(ctx):
        import pyarrow as pa

        from runstore.storage.schema import arrow_type

        def parts(table, columns):  # the table's stored files one by one, then no row
            for f in ctx.table_files(table):
                yield ctx.read_file(f, columns)
            yield pa.table({c: pa.array([], arrow_type(t)) for c, t in columns})

        # metrics_raw, not metric_keys: no migration rewrites it, so its files in the snapshot
        # being migrated are the rows even when an earlier pending migration makes the summary.
        # (All of them are read, one at a time: only the key that matters is kept.)
        keys = pa.concat_tables([ctx.query(DONE_FRAC_KEYS, {"metrics_raw": part})
                                 for part in parts("metrics_raw", METRIC_COLUMNS)])
        facts = {r["run_id"]: (r["final_checkpoint"], r["done_frac"]) for r in ctx.query(
            RUN_PROGRESS, {"checkpoints": pa.concat_tables(list(parts("checkpoints",
                                                                      CHECKPOINT_COLUMNS))),
                           "metric_keys": keys}).to_pylist()}
        stored = pa.concat_tables([ctx.read_file(f, RUN_COLUMNS) for f in runs])
        found = [facts.get(run, (False, None)) for run in stored.column("run_id").to_pylist()]
        final = pa.array([f for f, _ in found], pa.bool_())
        done_frac = pa.array([d for _, d in found], pa.float64())
        return (stored.append_column("final_checkpoint", final)
                .append_column("done_frac", done_frac))

    ctx.rewrite_table("runs", rows)
