-- The summaries the ingest keeps beside `metrics_raw` (`metric_keys`, `metric_steps`,
-- `metric_kl`), computed from `metrics_raw` itself: what a query reads in their place on a
-- snapshot written before the ingest kept them, or kept some of their columns
-- (runstore.query.connect). Each stored file is summarised whole here, so every row's
-- `steps_exact` is true. The next ingest (or `runstore migrate`) stores them, and queries
-- stop scanning for them.

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

-- name: metric_kl
-- The KL merge rules, the one home of them: per run, live metrics file and step, the KL
-- value that counts for each family. The families are `optim/kl_sample_train_v1` /
-- `optim/kl_sample_train_v2` (0.6.x) and the same names without `optim/` (older releases).
-- Per family and step, the latest write (largest `seq`) of the prefixed name is used when it
-- is a number, else the latest write of the unprefixed name; a string written later
-- supersedes a number of the same name (it has no value): `arg_max_null` keeps a latest write
-- whose value is null, as Spark's and Trino's `max_by` do. Only live files count (no
-- `metrics.jsonl.pre_resume_*` rows) and only rows with a step; a step whose KL writes are
-- all strings logs no KL. NaN and ±Infinity are kept as logged.
-- The ingest runs this same text over the rows of each read of a metrics file
-- (runstore.ingest.normalize.metric_kl), and the query layer over all of `metrics_raw` for a
-- snapshot written before the ingest kept `metric_kl`: one text, one answer.
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
