-- The summaries the ingest keeps beside `metrics_raw` (`metric_keys`, `metric_steps`,
-- `metric_kl`) and, last, `run_progress` (the two columns of `runs` the ingest keeps from the
-- run's checkpoints and per-key summary): the one definition of each. The ingest runs each
-- statement over the rows of every read of a source file (runstore.ingest.summaries and
-- runstore.ingest.progress: what Python adds is only how a read joins the reads before it),
-- and the query layer over the stored tables in their place on a snapshot written before the
-- ingest kept them, or kept some of their columns (runstore.query.connect); there each
-- stored file is summarised whole, so every row's `steps_exact` is true. The next ingest (or
-- `runstore migrate`) stores them, and queries stop scanning for them. A migration that
-- fills a summary runs a copy of its statement frozen as it was at the migration's version.

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
-- (runstore.ingest.summaries), and the query layer over all of `metrics_raw` for a
-- snapshot written before the ingest kept `metric_kl`: one text, one answer.
-- The spellings are the rows of `kl_keys` (runstore.families, their one home): `family` v1
-- or v2, `pref` 0 for the prefixed spelling.
select run_id, source_id, step, v1, v2
from (
    select m.run_id, m.source_id, m.step,
           coalesce(arg_max_null(m.value, m.seq) filter (where k.family = 'v1' and k.pref = 0),
                    arg_max_null(m.value, m.seq) filter (where k.family = 'v1' and k.pref = 1))
               as v1,
           coalesce(arg_max_null(m.value, m.seq) filter (where k.family = 'v2' and k.pref = 0),
                    arg_max_null(m.value, m.seq) filter (where k.family = 'v2' and k.pref = 1))
               as v2
    from metrics_raw as m
    join kl_keys as k on k.key = m.key
    where m.step is not null and not coalesce(m.pre_resume, false)
    group by m.run_id, m.source_id, m.step
)
where v1 is not null or v2 is not null
order by run_id, source_id, step

-- name: run_progress
-- Per run with a checkpoint or a per-key summary row: `runs.final_checkpoint` (a checkpoint
-- record with `final` true or the name `final`) and `runs.done_frac` (the largest non-NaN
-- `progress/done_frac` of the live metrics file, any write counting: `metric_keys.max_value`
-- is each read's largest). The ingest keeps both on the `runs` row from its ledger states,
-- which this statement moves on read by read (runstore.ingest.progress); migration
-- 0006_run_progress fills them for the rows stored before, and the query layer joins this to
-- `runs` for a snapshot written before them (runstore.query.connect). A run with neither
-- is not listed: its `final_checkpoint` is false and its `done_frac` null.
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
