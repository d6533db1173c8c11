"""Add the `metric_kl` table (the KL values that count per live step, merged at ingest), computed from the stored `metrics_raw` rows, so `kl_steps` (and `kl_health`, `runstore check`, the KL chart) reads it instead of merging every KL write at query time."""

# Columns frozen as they were at schema version 5 (runstore/storage/schema.py may add more).
COLUMNS = [("run_id", "string"), ("source_id", "int64"), ("step", "int64"), ("v1", "float64"),
           ("v2", "float64")]
# Written before the snapshot lists it: after a kill, readers ignore it and it is written again.
FILLS = ["metric_kl"]
READ = [("run_id", "string"), ("source_id", "int64"), ("key", "string"), ("step", "int64"),
        ("value", "float64"), ("seq", "int64"), ("pre_resume", "bool")]

# The KL rows of one stored file: those of the spellings the merge below reads.
KL_ROWS = """
select * from metrics_raw
where key in ('optim/kl_sample_train_v1', 'optim/kl_sample_train_v2',
              'kl_sample_train_v1', 'kl_sample_train_v2')
"""
# The statement `metric_kl` of sql/statements/summaries.sql as it was at version 5, frozen
# here (a later change to the live statement must not change what this migration does).
METRIC_KL = """
select run_id, source_id, step, v1, v2
from (
    select run_id, source_id, step,
           coalesce(arg_max_null(value, seq) filter (where key = 'optim/kl_sample_train_v1'),
                    arg_max_null(value, seq) filter (where key = 'kl_sample_train_v1')) as v1,
           coalesce(arg_max_null(value, seq) filter (where key = 'optim/kl_sample_train_v2'),
                    arg_max_null(value, seq) filter (where key = 'kl_sample_train_v2')) as v2
    from metrics_raw
    where key in ('optim/kl_sample_train_v1', 'optim/kl_sample_train_v2',
                  'kl_sample_train_v1', 'kl_sample_train_v2')
      and step is not null and not coalesce(pre_resume, false)
    group by run_id, source_id, step
)
where v1 is not null or v2 is not null
order by run_id, source_id, step
"""


def migrate(ctx):
    def rows(ctx):
        import pyarrow as pa

        from runstore.storage.schema import arrow_type

        # One stored file read at a time, only its KL rows kept; then the merge over all of
        # them at once (a file's writes of one step may lie in several stored files).
        parts = [ctx.query(KL_ROWS, {"metrics_raw": ctx.read_file(path, READ)})
                 for path in ctx.table_files("metrics_raw")]
        parts.append(pa.table({c: pa.array([], arrow_type(t)) for c, t in READ}))
        return ctx.query(METRIC_KL, {"metrics_raw": pa.concat_tables(parts)})

    ctx.fill_table("metric_kl", COLUMNS, rows)
