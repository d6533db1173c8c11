-- rollout_errors: too many rollouts failed (exceptions, timeouts, context overflows).
-- Three shares. Two over the run's live finite values: the failed rollouts, the largest value of
-- `rollout_errors/total` (tinker-cookbook's cumulative count of rollouts that raised, logged
-- once the first one did) against the episodes that finished (the sum of
-- `env/all/total_episodes`) plus those failures; and the episodes ended by a context overflow
-- or a rollout timeout: the sum of `env/all/stop/context_overflow` and
-- `env/all/stop/rollout_timeout` over the run's steps, divided by the number of steps that
-- log `env/all/total_episodes` (a step that logs neither counts 0). The third from the rollout
-- summaries of newer tinker-cookbook versions, which say each trajectory's `status`
-- (`trajectories.status`, `error_type`): the training trajectories whose status is not `ok`
-- against those that have a status. Fires when any share is above `threshold`. First step:
-- the first step with a failure counted, such a stop or a failed trajectory; last step: the
-- last step where the count reached its largest value, or such a stop or failed trajectory
-- happened. The evidence names the error types (`rollout_errors/<type>`: the keys statement
-- `keys` below lists them, bound as `$keys`; and the summaries' `error_type`, else their
-- status).
-- @severity warning
-- @param threshold = 0.05: a share of failed or cut rollouts above this is too many
-- @chart rollout_errors/total
-- @try OOM / timeout: reduce batch_size, group_size or max_tokens (the logging guide); look at logs.log for the exceptions, and raise per_rollout_timeout only if the environment is just slow.

-- name: keys
-- The stored keys of the error types (`rollout_errors/<type>`), from the per-key summary.
select distinct key
from metric_keys
where starts_with(key, 'rollout_errors/')
  and key not in ('rollout_errors/total', 'rollout_errors/groups_skipped')
order by key

-- name: finding
with counted as (
    select run_id, step, value as total
    from metrics
    where key = 'rollout_errors/total' and value is not null and isfinite(value)
),
errors as (
    -- The count is cumulative: it stops growing at the step where it reaches its largest value.
    select run_id, max(total) as failed,
           min(step) filter (where total > 0) as first_step,
           arg_min(step, [-total, step]) as last_step
    from counted
    group by run_id
),
by_type as (
    select run_id,
           string_agg(format('{} {:g}', substr(key, length('rollout_errors/') + 1), value),
                      ', ' order by value desc, key) as types
    from (select run_id, key, max(value) as value
          from metrics
          where list_contains($keys, key) and value is not null and isfinite(value)
            and value > 0
          group by run_id, key)
    group by run_id
),
stops as (
    -- Per run: the episodes that finished, how many steps log them, and the sums of the two
    -- stop shares (0 where a step logs neither).
    select run_id,
           sum(value) filter (where key = 'env/all/total_episodes') as episodes,
           count(*) filter (where key = 'env/all/total_episodes') as n_steps,
           sum(value) filter (where key <> 'env/all/total_episodes') as stopped,
           min(step) filter (where key <> 'env/all/total_episodes' and value > 0) as first_step,
           max(step) filter (where key <> 'env/all/total_episodes' and value > 0) as last_step
    from metrics
    where key in ('env/all/total_episodes', 'env/all/stop/context_overflow',
                  'env/all/stop/rollout_timeout')
      and value is not null and isfinite(value)
    group by run_id
),
summaries as (
    -- The training trajectories of the rollout summaries that say their status, and those
    -- that failed (a status other than `ok`), with the steps and types of the failures.
    select run_id, count(*) as n_traj,
           count(*) filter (where status <> 'ok') as n_failed,
           min(iteration) filter (where status <> 'ok') as first_step,
           max(iteration) filter (where status <> 'ok') as last_step
    from trajectories
    where split = 'train' and status is not null
    group by run_id
),
summary_types as (
    select run_id, string_agg(format('{} {}', kind, n), ', ' order by n desc, kind) as types
    from (select run_id, coalesce(error_type, status) as kind, count(*) as n
          from trajectories
          where split = 'train' and status is not null and status <> 'ok'
          group by all)
    group by run_id
),
judged as (
    select coalesce(e.run_id, s.run_id, u.run_id) as run_id, e.failed, s.episodes,
           case when s.n_steps > 0 then coalesce(s.stopped, 0) / s.n_steps end as stop_share,
           case when e.failed > 0 then e.failed / (coalesce(s.episodes, 0) + e.failed) end
               as failed_share,
           u.n_traj as summarized, u.n_failed as summary_failed,
           u.n_failed / u.n_traj as summary_share,
           least(e.first_step, s.first_step, u.first_step) as first_step,
           greatest(case when e.failed > 0 then e.last_step end, s.last_step, u.last_step)
               as last_step
    from errors as e
    full join stops as s on s.run_id = e.run_id
    full join summaries as u on u.run_id = coalesce(e.run_id, s.run_id)
),
found as (
    select * from judged
    where failed_share > $threshold or stop_share > $threshold or summary_share > $threshold
)
select r.run_id,
       case when j.run_id is null
            then 'logs no rollout_errors/total and no env/all/total_episodes, and its rollout '
                 || 'summaries say no status' end as missing,
       f.run_id is not null as fired,
       f.first_step, f.last_step,
       case when f.run_id is not null then
           concat_ws('; ',
               case when f.failed > 0
                    then format('{:g} rollouts failed (rollout_errors/total{}) against {:g} '
                                || 'finished episodes: {:.1f}%', f.failed,
                                coalesce(': ' || t.types, ''), coalesce(f.episodes, 0),
                                100 * f.failed_share) end,
               case when f.stop_share > 0
                    then format('{:.1f}% of episodes ended by a context overflow or a rollout '
                                || 'timeout (env/all/stop/context_overflow, rollout_timeout)',
                                100 * f.stop_share) end,
               case when f.summary_failed > 0
                    then format('{} of the {} training trajectories the rollout summaries '
                                || 'give a status for failed ({}): {:.1f}%', f.summary_failed,
                                f.summarized, u.types, 100 * f.summary_share) end)
           || format('; steps {}-{}', f.first_step, f.last_step)
       end as evidence,
       case when f.run_id is not null then
           to_json({'failed': f.failed, 'episodes': f.episodes, 'failed_share': f.failed_share,
                    'stop_share': f.stop_share, 'summarized': f.summarized,
                    'summary_failed': f.summary_failed,
                    'summary_share': f.summary_share})::varchar
       end as facts
from runs as r
left join judged as j on j.run_id = r.run_id
left join found as f on f.run_id = r.run_id
left join by_type as t on t.run_id = r.run_id
left join summary_types as u on u.run_id = r.run_id

-- name: evidence
-- The counts the metrics log at those steps, and the failed training trajectories of the
-- rollout summaries per step and type (as `trajectories.status: TYPE`).
select step, key, value
from metrics
where run_id = $run_id and step between $first_step and $last_step
  and (key = 'rollout_errors/total' or list_contains($keys, key)
       or key in ('env/all/total_episodes', 'env/all/stop/context_overflow',
                  'env/all/stop/rollout_timeout'))
union all
select iteration as step, 'trajectories.status: ' || coalesce(error_type, status) as key,
       count(*) as value
from trajectories
where run_id = $run_id and iteration between $first_step and $last_step
  and split = 'train' and status is not null and status <> 'ok'
group by all
order by step, key
