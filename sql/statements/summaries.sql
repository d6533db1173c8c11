-- The summaries the ingest keeps beside `metrics_raw` (`metric_keys`, `metric_steps`), computed
-- from `metrics_raw` itself: what a query reads in their place on a snapshot written before
-- the ingest kept them, or kept some of their columns (runstore.query.connect). Each stored
-- file is summarised whole here, so every row's `steps_exact` is true. The next ingest (or
-- `runstore migrate`) stores them, and queries stop scanning for them.

-- name: metric_keys
select run_id, source_id, key, coalesce(pre_resume, false) as pre_resume,
       count(distinct step) as n_points, min(step) as first_step, max(step) as last_step,
       count(value) as n_numbers, count(value_str) as n_strings,
       count(*) filter (where step is null) as n_stepless, true as steps_exact,
       max(value) filter (where not isnan(value)) as max_value,
       count(value) filter (where step is not null) as n_step_numbers
from metrics_raw
group by run_id, source_id, key, coalesce(pre_resume, false)

-- name: metric_steps
select run_id, source_id, coalesce(pre_resume, false) as pre_resume,
       count(distinct step) as n_steps, min(step) as first_step, max(step) as last_step,
       true as steps_exact
from metrics_raw
group by run_id, source_id, coalesce(pre_resume, false)
