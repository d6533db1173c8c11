-- stale_policy: async training kept learning from samples of policies too many steps old.
-- Over the run's live finite `async/staleness_mean` (how many optimizer steps behind the
-- current policy the trained samples were drawn, on average; written by async RL): with at
-- least `window` values, fires when their mean over the last `window` steps (after the run's
-- last such step minus `window`) is above `threshold`. First step: where the stretch of values
-- above `threshold` running into those last steps starts (the step after the last value at or
-- below it before them; the run's first such step when there is none); last step: the run's
-- last such step. The evidence adds `async/staleness_max` over those last steps and the
-- config's `async_config.max_steps_off_policy`.
-- @severity info
-- @param threshold = 2.0: a mean staleness above this many steps is stale
-- @param window = 5: the mean is taken over the run's last `window` steps
-- @chart async/staleness_mean
-- @try Lower async_config.max_steps_off_policy (or make sampling keep up with training: fewer or shorter rollouts) so that samples come from a recent policy; watch kl_sample_train, which staleness raises.

-- name: finding
with series as (
    select run_id, step, value as q
    from metrics
    where key = 'async/staleness_mean' and value is not null and isfinite(value)
),
ends as (
    select run_id, count(*) as n, max(step) as last_step from series group by run_id
),
per_run as (
    select s.run_id, any_value(e.n) as n, any_value(e.last_step) as last_step,
           avg(s.q) filter (where s.step > e.last_step - $window::hugeint) as recent,
           max(s.step) filter (where s.step <= e.last_step - $window::hugeint and not s.q > $threshold)
               as last_ok
    from series as s
    join ends as e on e.run_id = s.run_id
    group by s.run_id
),
found as (
    select p.run_id, p.recent, p.last_step,
           min(s.step) filter (where p.last_ok is null or s.step > p.last_ok) as first_step
    from per_run as p
    join series as s on s.run_id = p.run_id
    where p.n >= $window and p.recent > $threshold
    group by all
),
peaks as (
    select f.run_id, max(m.value) as recent_max
    from found as f
    join metrics as m on m.run_id = f.run_id and m.step > f.last_step - $window::hugeint
    where m.key = 'async/staleness_max' and m.value is not null and isfinite(m.value)
    group by f.run_id
),
allowed as (
    select run_id, value_num as max_off_policy
    from config
    where key = 'async_config.max_steps_off_policy'
)
select r.run_id,
       case when e.run_id is null then 'logs no async/staleness_mean (not async RL)'
            when e.n < $window then format('only {} steps log async/staleness_mean (fewer than {})',
                                           e.n, $window) end as missing,
       f.run_id is not null as fired,
       f.first_step, f.last_step,
       case when f.run_id is not null then
           format('async/staleness_mean averaged {:.3g} steps over the last {} steps, above {:g} '
                  || 'from step {} on', f.recent, $window, $threshold, f.first_step)
           || case when k.recent_max is not null
                   then format(' (async/staleness_max up to {:g})', k.recent_max) else '' end
           || case when a.max_off_policy is not null
                   then format('; the config allows max_steps_off_policy = {:g}', a.max_off_policy)
                   else '' end
       end as evidence,
       case when f.run_id is not null then
           to_json({'recent': f.recent, 'recent_max': k.recent_max,
                    'max_steps_off_policy': a.max_off_policy})::varchar
       end as facts
from runs as r
left join ends as e on e.run_id = r.run_id
left join found as f on f.run_id = r.run_id
left join peaks as k on k.run_id = r.run_id
left join allowed as a on a.run_id = r.run_id

-- name: evidence
select step, key, value
from metrics
where run_id = $run_id and step between $first_step and $last_step
  and key in ('async/staleness_mean', 'async/staleness_max', 'async/staleness_min')
order by step, key
