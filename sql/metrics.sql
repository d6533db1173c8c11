-- Live metrics: one row per (run, step, key), the later write winning.
-- Resumed runs log some steps twice; the row written last (largest seq) is the true one.
-- Step-less summary rows and rows kept in `metrics.jsonl.pre_resume_*` copies are not live
-- and are left out (they stay queryable in `metrics_raw`).
-- @column run_id: run
-- @column step: training step
-- @column key: metric name as written (e.g. `optim/kl_sample_train_v1`)
-- @column value: numeric value; NaN and ±Infinity kept as IEEE values
-- @column value_str: string or boolean value (`true`/`false`), else null
-- @column seq: line number of the winning write in metrics.jsonl
select run_id, step, key, value, value_str, seq
from (
    select run_id, step, key, value, value_str, seq,
           row_number() over (partition by run_id, step, key order by seq desc) as rn
    from metrics_raw
    -- coalesce: Parquet files written before the column existed read it as null.
    where step is not null and not coalesce(pre_resume, false)
) as ranked
where rn = 1
