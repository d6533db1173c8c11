-- One row per run: what it is, how far it got, how well it did and whether its KL misbehaved.
-- Every ingested run appears, including runs with only config.json (their step and reward
-- columns are null). Steps are counted over the live metrics rows (distinct steps do not
-- depend on which duplicate write wins), from the per-read counts the ingest keeps.
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
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
with counted as (
    -- Steps from the per-read counts the ingest keeps (`metric_steps`): a run's distinct live
    -- steps are the sum of its live file's reads when each read's steps came after the ones
    -- before (`steps_exact`, the normal case: a log only grows).
    select run_id, cast(sum(n_steps) as bigint) as n_steps, max(last_step) as last_step,
           bool_and(steps_exact) and count(distinct source_id) = 1 as exact
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
          where step is not null and not coalesce(pre_resume, false)
            and run_id in (select run_id from counted where not exact))
    group by run_id
),
steps as (
    select run_id, n_steps, last_step from counted where exact and last_step is not null
    union all
    select run_id, n_steps, last_step from recounted
),
reward as (
    -- One pass over `reward_trends`, without its running-best window (the best of all steps
    -- is the largest non-NaN reward) and without reading the view a second time for the
    -- moving average at the last reward step (`arg_max_null` keeps a null average there).
    select run_id,
           max(reward) filter (where not isnan(reward)) as best_reward,
           arg_max_null(reward_ma10, step) as last_reward_ma10
    from reward_trends
    group by run_id
)
select r.run_id,
       r.run_name,
       r.kind,
       r.model_name,
       r.learning_rate,
       u.status,
       s.n_steps,
       s.last_step,
       w.last_reward_ma10,
       w.best_reward,
       greatest(k.max_kl_v1, k.max_kl_v2) as max_kl,
       k.flagged as kl_flagged,
       coalesce(c.n_checkpoints, 0) as n_checkpoints,
       c.latest_name as last_checkpoint
from runs as r
join run_status as u on u.run_id = r.run_id
left join steps as s on s.run_id = r.run_id
left join reward as w on w.run_id = r.run_id
left join kl_health as k on k.run_id = r.run_id
left join latest_checkpoints as c on c.run_id = r.run_id
