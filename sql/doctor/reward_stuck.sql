-- reward_stuck: the training reward sat at its floor (at most 0) for the last steps.
-- Over the run's live finite values of `env/all/reward/total` (the mean total reward of each
-- step's training batch; NaN and ±Infinity set aside, as `not_finite` reports them), the stuck
-- stretch is the run's last reward steps whose every value is at most `at_most` (0: nothing
-- earned). Fires when it holds at least `window` reward steps; first step is where it starts,
-- last step the run's last reward step. The evidence adds, from the rollout summaries, the
-- share of the stretch's training trajectories whose total reward is at most `at_most`.
-- @severity error
-- @param at_most = 0.0: a reward at or below this earns nothing
-- @param window = 10: the stuck stretch must hold at least this many reward steps
-- @chart env/all/reward/total
-- @try Check the rollout summaries: are responses being parsed correctly? (the logging guide); `runstore sql` on the trajectories of these steps shows what the policy answered.

-- name: finding
with reward as (
    select run_id, step, value
    from metrics
    where key = 'env/all/reward/total' and value is not null and isfinite(value)
),
per_run as (
    -- The last reward step above `at_most`: the stuck stretch starts after it.
    select run_id, count(*) as n, max(step) as last_step,
           max(step) filter (where value > $at_most) as last_above
    from reward
    group by run_id
),
stretch as (
    select p.run_id, p.n, min(w.step) as first_step, any_value(p.last_step) as last_step,
           count(w.step) as n_stuck, avg(w.value) as mean, min(w.value) as lowest
    from per_run as p
    left join reward as w
      on w.run_id = p.run_id and (p.last_above is null or w.step > p.last_above)
    group by p.run_id, p.n
),
rollouts as (
    -- The stretch's training trajectories (rollout summaries), and those earning nothing.
    select s.run_id, count(*) as n_traj,
           count(*) filter (where t.total_reward <= $at_most) as n_nothing
    from stretch as s
    join trajectories as t
      on t.run_id = s.run_id and t.split = 'train'
     and t.iteration between s.first_step and s.last_step
    where s.n_stuck >= $window
    group by s.run_id
)
select r.run_id,
       case when s.run_id is null then 'logs no env/all/reward/total'
            when s.n < $window then format('only {} env/all/reward/total steps (fewer than {})',
                                           s.n, $window) end as missing,
       coalesce(s.n_stuck >= $window, false) as fired,
       case when s.n_stuck >= $window then s.first_step end as first_step,
       case when s.n_stuck >= $window then s.last_step end as last_step,
       case when s.n_stuck >= $window then
           format('env/all/reward/total was at most {:g} at each of the last {} reward steps '
                  || '(steps {}-{}; mean {:.3g}, lowest {:.3g})',
                  $at_most, s.n_stuck, s.first_step, s.last_step, s.mean, s.lowest)
           || case when o.n_traj > 0
                   then format('; {:.0f}% of the {} training trajectories of those steps earned '
                               || 'at most {:g} (rollout summaries)',
                               100.0 * o.n_nothing / o.n_traj, o.n_traj, $at_most)
                   else '' end
       end as evidence,
       case when s.n_stuck >= $window then
           to_json({'stuck_steps': s.n_stuck, 'mean': s.mean, 'lowest': s.lowest,
                    'trajectories': o.n_traj, 'earned_nothing': o.n_nothing})::varchar
       end as facts
from runs as r
left join stretch as s on s.run_id = r.run_id
left join rollouts as o on o.run_id = r.run_id

-- name: evidence
select step, value as reward
from metrics
where run_id = $run_id and key = 'env/all/reward/total' and step between $first_step and $last_step
order by step
