-- KL per step: one row per run and step that logs a KL value, with the value that counts for
-- each KL family after the merge rules, and whether the step is over the threshold. The one
-- home of those rules: `kl_health`, `runstore check`'s KL rules and the KL chart read this view.
-- The families are `optim/kl_sample_train_v1` / `optim/kl_sample_train_v2` (0.6.x) and the same
-- names without `optim/` (older releases). Per family and step, the latest write of the
-- prefixed name is used when it is a number, else the latest write of the unprefixed name; a
-- string written later supersedes a number of the same name (it has no value). Only the live
-- file counts (no `metrics.jsonl.pre_resume_*` rows) and only rows with a step. A step is over
-- when v1 or v2 is strictly greater than the `kl_threshold` setting (0.01 unless
-- `--param kl_threshold=...` or a store setting says otherwise); NaN is never over, +Infinity is.
-- @column run_id: run
-- @column step: training step
-- @column v1: KL v1 at this step as logged (NaN and ±Infinity kept); null when the step logs no numeric v1
-- @column v2: KL v2 at this step as logged (NaN and ±Infinity kept); null when the step logs no numeric v2
-- @column is_nan: true when v1 or v2 is NaN
-- @column is_over: true when v1 or v2 is above the threshold (NaN never is)
-- @column run_writes_over: true on every step of a run that has a KL write above the threshold stored anywhere (a superseded write, a `pre_resume` copy or a step-less row too), false on every step of the other runs, which have no step over. Filtering on it reads only the pages of the runs that can be over
with threshold as (
    -- Named once: each scalar subquery on `settings` is one more join to plan.
    select value_num as t from settings where name = 'kl_threshold'
),
over_runs as (
    -- Runs with a stored KL write above the threshold, from the per-key summary the ingest
    -- keeps (`metric_keys.max_value`: the largest non-NaN value of each read of a file), so
    -- no metric row is read for it. Any write counts, including superseded ones and
    -- `pre_resume` copies: a superset of the runs with a step over is all the fast paths need.
    select distinct run_id
    from metric_keys
    where key in ('optim/kl_sample_train_v1', 'optim/kl_sample_train_v2',
                  'kl_sample_train_v1', 'kl_sample_train_v2')
      and max_value > (select t from threshold)
),
writes as (
    -- `run_writes_over` is attached to each write, before the merge, so that a filter on it
    -- goes down through the aggregation to this join (then an inner join whose run_id list
    -- also prunes the scan), instead of being applied to merged rows of every run.
    select m.run_id, m.step, m.key, m.value, m.seq, o.run_id is not null as run_writes_over
    from metrics_raw as m
    left join over_runs as o on o.run_id = m.run_id
    where m.key in ('optim/kl_sample_train_v1', 'optim/kl_sample_train_v2',
                    'kl_sample_train_v1', 'kl_sample_train_v2')
      and m.step is not null and not coalesce(m.pre_resume, false)
),
merged as (
    -- arg_max_null keeps a latest write that has no number (a string: value null), so a
    -- number it superseded is not used; Spark's and Trino's max_by behave so already.
    select run_id, step, run_writes_over,
           coalesce(arg_max_null(value, seq) filter (where key = 'optim/kl_sample_train_v1'),
                    arg_max_null(value, seq) filter (where key = 'kl_sample_train_v1')) as v1,
           coalesce(arg_max_null(value, seq) filter (where key = 'optim/kl_sample_train_v2'),
                    arg_max_null(value, seq) filter (where key = 'kl_sample_train_v2')) as v2
    from writes
    group by run_id, step, run_writes_over
)
-- NaN > 0.01 is true in DuckDB (and Spark): NaN sorts above every number. So NaN is tested
-- first and never reaches the comparison; +Infinity > 0.01 is true, as it should be. A run
-- without a write over the threshold has no step over, which `run_writes_over and` states
-- for the optimizer.
select run_id, step, v1, v2,
       coalesce(isnan(v1), false) or coalesce(isnan(v2), false) as is_nan,
       run_writes_over
       and (coalesce(not isnan(v1) and v1 > t, false) or coalesce(not isnan(v2) and v2 > t, false))
           as is_over,
       run_writes_over
from merged
cross join threshold
where v1 is not null or v2 is not null  -- a step whose KL writes are all strings logs none
