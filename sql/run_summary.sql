-- One row per run: what it is, how far it got, how well it did and whether its KL misbehaved.
-- Every ingested run appears, including runs with only config.json (their step and reward
-- columns are null). Steps are counted over the live metrics rows (distinct steps do not
-- depend on which duplicate write wins), from the per-read counts the ingest keeps. The KL and
-- reward columns mean what `kl_health` and `reward_trends` say, but are read from the per-key
-- summary (`metric_keys`) for a run whose writes of the key are plain (one number per step),
-- and merged write by write only for the others (a resume that logged steps again, say), so
-- the view costs little more than the runs themselves. The 10-step average is summed in
-- another order than `reward_trends`' window: the two can differ in the last bit.
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
-- @column run_label: how the run is shown: run_name, with a run_id prefix when two runs share the name (see `run_labels`)
-- @column kind: rl / sl / dpo / unknown
-- @column model_name: config.json `model_name`
-- @column learning_rate: config.json `learning_rate`
-- @column status: completed / running / idle / missing, as of the query (see `run_status`)
-- @column n_steps: distinct steps with live metrics (an RL run's extra final-eval row counts)
-- @column last_step: largest step with live metrics
-- @column last_reward_ma10: `reward_ma10` of the run's last reward step (see `reward_trends`)
-- @column best_reward: largest non-NaN `env/all/reward/total`
-- @column max_kl: largest non-NaN KL of either family (see `kl_health`); null when the run logs no KL
-- @column kl_flagged: `kl_health.flagged`; null when the run logs no KL
-- @column n_checkpoints: checkpoint records written (0 when none)
-- @column last_checkpoint: name of the latest checkpoint by write order (see `latest_checkpoints`)
-- @column cost_usd: the run's total cost (`runs.cost_usd`: its last `cost/cumulative_usd`); null when it logs none
-- @column last_error: the last exception line of the run's logs.log since its last command line (`runs.last_error`)
-- @column tmp_files: leftover `.NAME.PID.tmp` files of an interrupted atomic write, not read (`runs.tmp_files`)
with counted as (
    -- Steps from the per-read counts the ingest keeps (`metric_steps`): a run's distinct live
    -- steps are the sum of its live file's reads when each read's steps came after the ones
    -- before (`steps_exact`, the normal case: a log only grows). One file: its smallest and
    -- largest `source_id` agree (`count(distinct source_id) = 1`, without the extra grouping
    -- and join DuckDB plans a distinct count with, ~10% of this view's time on a small store).
    select run_id, cast(sum(n_steps) as bigint) as n_steps, max(last_step) as last_step,
           bool_and(steps_exact) and coalesce(min(source_id) = max(source_id), false) as exact
    from metric_steps
    where not pre_resume
    group by run_id
),
recounted as (
    -- The other runs (a file that logged steps again below its largest), counted from
    -- `metrics_raw`: distinct (run, step) pairs first, then counted (`count(distinct step)`
    -- beside `max(step)` made DuckDB group every row twice).
    select run_id, count(*) as n_steps, max(step) as last_step
    from (select distinct run_id, step
          from metrics_raw
          where live_write(step, pre_resume)
            and run_id in (select run_id from counted where not exact))
    group by run_id
),
steps as (
    select run_id, n_steps, last_step from counted where exact and last_step is not null
    union all
    select run_id, n_steps, last_step from recounted
),
key_facts as (
    -- Per run and KL or reward key, from the live rows of the per-key summary the ingest keeps
    -- (`metric_keys`): the largest non-NaN value, and whether the run's writes of the key are
    -- plain (the macro `plain_writes`: one file, every write at a step of its own) and all
    -- numbers (no string, no step-less row). A plain key's live values are all its writes, so its largest
    -- live value is the summary's; the other runs are answered by the views that merge writes.
    select run_id, key, max(max_value) as max_value,
           plain_writes(steps_exact, source_id, n_points, n_numbers, n_strings, n_stepless)
           and sum(n_strings) = 0 and sum(n_stepless) = 0 as plain
    from metric_keys
    where not pre_resume
      and (key in (select key from kl_keys) or key = 'env/all/reward/total')
    group by run_id, key
),
kl_facts as (
    -- Plain too when each KL family is logged under one spelling only (with both, the
    -- `optim/` one wins step by step: `kl_health` decides). `kl_keys` names the spellings.
    select f.run_id,
           max(f.max_value) filter (where k.family = 'v1') as max_v1,
           max(f.max_value) filter (where k.family = 'v2') as max_v2,
           bool_and(f.plain)
           and count(*) filter (where k.family = 'v1') <= 1
           and count(*) filter (where k.family = 'v2') <= 1
               as plain
    from key_facts as f
    join kl_keys as k on k.key = f.key
    group by f.run_id
),
kl as (
    -- A plain run is flagged when its largest KL value is over the threshold
    -- (`over_threshold`; NaN is left out of the summary's largest value, +Infinity is over):
    -- one step is over exactly when the largest is, as `kl_health` would say. The other runs
    -- are read from `kl_steps` (the KL merge rules), for them alone.
    select run_id, greatest(max_v1, max_v2) as max_kl,
           over_threshold(greatest(max_v1, max_v2), '>',
                          (select value_num from settings where name = 'kl_threshold'))
               as flagged
    from kl_facts
    where plain
    union all
    select run_id,
           greatest(max(case when not isnan(v1) then v1 end),
                    max(case when not isnan(v2) then v2 end)) as max_kl,
           bool_or(is_over) as flagged
    from kl_steps
    where run_id in (select run_id from kl_facts where not plain)
    group by run_id
),
reward as (
    -- `reward_trends`' 10-step average at the last reward step: the mean of the non-NaN
    -- rewards of the run's 10 last reward steps (`last_steps`).
    select run_id, avg(value) filter (where not isnan(value)) as last_reward_ma10
    from last_steps
    where key = 'env/all/reward/total'
    group by run_id
),
best as (
    -- The best reward of a run whose rewards are not plain numbers (a plain run's is the
    -- summary's largest value): its largest non-NaN live reward, the latest write of each
    -- step winning (`write_rank`), read for those runs alone.
    select run_id, max(value) filter (where not isnan(value)) as best_reward
    from (select run_id, value, write_rank(run_id, step, key, seq) as rn
          from metrics_raw
          where key = 'env/all/reward/total' and live_write(step, pre_resume)
            and run_id in (select run_id from key_facts
                           where key = 'env/all/reward/total' and not plain)) as ranked
    where rn = 1
    group by run_id
)
select r.run_id,
       r.run_name,
       u.run_label,
       r.kind,
       r.model_name,
       r.learning_rate,
       u.status,
       s.n_steps,
       s.last_step,
       w.last_reward_ma10,
       case when f.plain then f.max_value else b.best_reward end as best_reward,
       k.max_kl,
       k.flagged as kl_flagged,
       coalesce(c.n_checkpoints, 0) as n_checkpoints,
       c.latest_name as last_checkpoint,
       r.cost_usd,
       r.last_error,
       r.tmp_files
from runs as r
join run_status as u on u.run_id = r.run_id
left join steps as s on s.run_id = r.run_id
left join reward as w on w.run_id = r.run_id
left join best as b on b.run_id = r.run_id
left join key_facts as f on f.run_id = r.run_id and f.key = 'env/all/reward/total'
left join kl as k on k.run_id = r.run_id
left join latest_checkpoints as c on c.run_id = r.run_id
