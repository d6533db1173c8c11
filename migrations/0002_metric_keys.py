"""Add metric_keys, the per-key summary of metrics_raw that `runstore keys` reads, filled from the stored rows."""

# Columns frozen as they were at schema version 2 (runstore/storage/schema.py may add more).
COLUMNS = [("run_id", "string"), ("source_id", "int64"), ("key", "string"),
           ("pre_resume", "bool"), ("n_points", "int64"), ("first_step", "int64"),
           ("last_step", "int64"), ("n_numbers", "int64"), ("n_strings", "int64"),
           ("n_stepless", "int64"), ("steps_exact", "bool")]
# Written before the snapshot lists it: after a kill, readers ignore it and it is written again.
FILLS = ["metric_keys"]
READ = [("run_id", "string"), ("source_id", "int64"), ("key", "string"), ("pre_resume", "bool"),
        ("step", "int64"), ("value", "float64"), ("value_str", "string")]

# The statement `metric_keys` of sql/statements/summaries.sql as it was at version 2, frozen
# here (a later change to the live statement must not change what this migration does): the
# summary of the rows it is given, each (run, source, key) summarised whole.
METRIC_KEYS = """
select run_id, source_id, key, coalesce(pre_resume, false) as pre_resume,
       count(distinct step) as n_points, min(step) as first_step, max(step) as last_step,
       count(value) as n_numbers, count(value_str) as n_strings,
       count(*) filter (where step is null) as n_stepless, true as steps_exact
from metrics_raw
group by run_id, source_id, key, coalesce(pre_resume, false)
"""
# One row per stored file and (source, key): the distinct steps of a (source, key) add up
# over its rows unless the step ranges of two of them meet (a source whose rows span
# several files, stored as a log logged steps again): then none of its rows is exact.
OVERLAPS = """
with ranges as (
    select source_id, key, first_step,
           lag(last_step) over (partition by source_id, key
                                order by first_step, last_step) as last_before
    from parts
    where first_step is not null
),
overlapping as (
    select source_id, key, bool_or(first_step <= last_before) as overlap
    from ranges
    group by source_id, key
)
select p.* replace (p.steps_exact and not coalesce(o.overlap, false) as steps_exact)
from parts as p left join overlapping as o using (source_id, key)
"""


def migrate(ctx):
    def rows(ctx):
        import pyarrow as pa

        from runstore.storage.schema import arrow_type

        # One stored file at a time: memory stays that of one file, on a store of any size.
        parts = [ctx.query(METRIC_KEYS, {"metrics_raw": ctx.read_file(path, READ)})
                 for path in ctx.table_files("metrics_raw")]
        if not parts:  # the statement's columns, no row
            none = pa.table({c: pa.array([], arrow_type(t)) for c, t in READ})
            parts = [ctx.query(METRIC_KEYS, {"metrics_raw": none})]
        return ctx.query(OVERLAPS, {"parts": pa.concat_tables(parts)})

    ctx.fill_table("metric_keys", COLUMNS, rows)
