-- Live metrics: one row per (run, step, key), the later write winning.
-- Resumed runs log some steps twice; the row written last (largest seq) is the true one.
-- Step-less summary rows and rows kept in `metrics.jsonl.pre_resume_*` copies are not live
-- and are left out (they stay queryable in `metrics_raw`). The run's name and label come
-- from `run_labels`.
-- The latest-write rule (the macro `write_rank`) runs only where there is a choice to make:
-- for the (run, key) pairs whose live writes are not one per step, as the per-key summary the
-- ingest keeps beside `metrics_raw` in the same commit says (`metric_keys`: one live file,
-- each read's steps after the ones before, as many rows at a step as distinct steps). Every
-- other pair's writes are its live rows as they are. So a question about a few keys reads
-- those keys' rows once, and merges only the few pairs that need it (DuckDB pushes the key
-- filter into both branches), instead of ranking every row of the key.
-- @column run_id: run
-- @column run_name: run path relative to the ingest root (two runs may share it)
-- @column run_label: how the run is shown: run_name, with a run_id prefix when two runs share the name (see `run_labels`)
-- @column step: training step
-- @column key: metric name as written (e.g. `optim/kl_sample_train_v1`)
-- @column value: numeric value; NaN and ±Infinity kept as IEEE values
-- @column value_str: string or boolean value (`true`/`false`), else null
-- @column seq: line number of the winning write in metrics.jsonl
with merged as (
    -- The (run, key) pairs whose live writes need the rule: not `plain_writes` (the macro,
    -- sql/statements/macros.sql: more than one live file, a read that logged steps again, or
    -- more rows at a step than steps).
    select run_id, key
    from metric_keys
    where not pre_resume
    group by run_id, key
    having not plain_writes(steps_exact, source_id, n_points, n_numbers, n_strings, n_stepless)
),
live as (
    select run_id, step, key, value, value_str, seq
    from metrics_raw
    where live_write(step, pre_resume)
      and (run_id, key) not in (select run_id, key from merged)
    union all
    select run_id, step, key, value, value_str, seq
    from (
        select run_id, step, key, value, value_str, seq,
               write_rank(run_id, step, key, seq) as rn
        from metrics_raw
        where live_write(step, pre_resume)
          and (run_id, key) in (select run_id, key from merged)
    ) as ranked
    where rn = 1
)
select live.run_id, l.run_name, l.run_label, live.step, live.key, live.value,
       live.value_str, live.seq
from live
left join run_labels as l on l.run_id = live.run_id
