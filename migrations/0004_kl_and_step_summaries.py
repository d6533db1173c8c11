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

# The statements `metric_keys` and `metric_steps` of sql/statements/summaries.sql as they were
# at version 4, frozen here (a later change to the live statements must not change what this
# migration does): each summarises the rows it is given whole.
METRIC_KEYS = """
select run_id, source_id, key, coalesce(pre_resume, false) as pre_resume,
       count(distinct step) as n_points, min(step) as first_step, max(step) as last_step,
       count(value) as n_numbers, count(value_str) as n_strings,
       count(*) filter (where step is null) as n_stepless, true as steps_exact,
       max(value) filter (where not isnan(value)) as max_value,
       count(value) filter (where step is not null) as n_step_numbers
from metrics_raw
group by run_id, source_id, key, coalesce(pre_resume, false)
"""
METRIC_STEPS = """
select run_id, source_id, coalesce(pre_resume, false) as pre_resume,
       count(distinct step) as n_steps, min(step) as first_step, max(step) as last_step,
       true as steps_exact
from metrics_raw
group by run_id, source_id, coalesce(pre_resume, false)
"""
# One row per stored file and (source, key) / source: its counts add up over the rows of its
# (source, key) / source unless the step ranges of two of them meet (a source whose rows span
# several files, stored as a log logged steps again): then none of those rows is exact.
KEY_OVERLAPS = """
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
STEP_OVERLAPS = """
with ranges as (
    select source_id, first_step,
           lag(last_step) over (partition by source_id
                                order by first_step, last_step) as last_before
    from parts
    where first_step is not null
),
overlapping as (
    select source_id, bool_or(first_step <= last_before) as overlap
    from ranges
    group by source_id
)
select p.* replace (p.steps_exact and not coalesce(o.overlap, false) as steps_exact)
from parts as p left join overlapping as o using (source_id)
"""


def migrate(ctx):
    files = ctx.table_files("metrics_raw")

    def summary(statement, overlaps):
        def rows(ctx):
            import pyarrow as pa

            from runstore.storage.schema import arrow_type

            # One stored file at a time: memory stays that of one file.
            parts = [ctx.query(statement, {"metrics_raw": ctx.read_file(path, READ)})
                     for path in files]
            if not parts:  # the statement's columns, no row
                none = pa.table({c: pa.array([], arrow_type(t)) for c, t in READ})
                parts = [ctx.query(statement, {"metrics_raw": none})]
            return ctx.query(overlaps, {"parts": pa.concat_tables(parts)})
        return rows

    ctx.add_columns("metric_keys", KEY_COLUMNS)
    # Every metric_keys row again, now with the new columns: summaries are recomputed from
    # the rows they summarise, never patched.
    ctx.rewrite_table("metric_keys", summary(METRIC_KEYS, KEY_OVERLAPS))
    ctx.fill_table("metric_steps", STEP_COLUMNS, summary(METRIC_STEPS, STEP_OVERLAPS))
