-- no_signal: most GRPO groups had one reward for every member, so there was nothing to learn.
-- Per step, q = 1 - `env/all/by_group/frac_mixed` (the share of groups whose trajectories all
-- succeeded or all failed, `frac_all_good` + `frac_all_bad`: constant reward, no advantage),
-- over the run's live finite values. With at least `window` values, fires when the mean of q
-- over the last `window` steps (after the run's last such step minus `window`) is above
-- `threshold`. First step: where the stretch of values above `threshold` running into those
-- last steps starts (the step after the last value at or below it before them; the run's
-- first such step when there is none); last step: the run's last such step. The evidence adds
-- `frac_all_good` and `frac_all_bad` over those last steps.
-- @severity warning
-- @param threshold = 0.9: a share of constant-reward groups above this leaves no learning signal
-- @param window = 10: the mean is taken over the run's last `window` steps
-- @chart env/all/by_group/frac_mixed
-- @try The tasks are too easy or too hard for the policy: pick data (or a curriculum) at its level, raise group_size so that groups mix successes and failures, or check the grader when everything fails.

-- name: finding
with series as (
    select run_id, step, 1 - value as q
    from metrics
    where key = 'env/all/by_group/frac_mixed' and value is not null and isfinite(value)
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
sides as (
    -- `frac_all_good` and `frac_all_bad` over the finding's last steps.
    select f.run_id,
           avg(m.value) filter (where m.key = 'env/all/by_group/frac_all_good') as good,
           avg(m.value) filter (where m.key = 'env/all/by_group/frac_all_bad') as bad
    from found as f
    join metrics as m on m.run_id = f.run_id and m.step > f.last_step - $window::hugeint
    where m.key in ('env/all/by_group/frac_all_good', 'env/all/by_group/frac_all_bad')
      and m.value is not null and isfinite(m.value)
    group by f.run_id
)
select r.run_id,
       case when e.run_id is null then 'logs no env/all/by_group/frac_mixed'
            when e.n < $window then format('only {} steps log the group shares (fewer than {})',
                                           e.n, $window) end as missing,
       f.run_id is not null as fired,
       f.first_step, f.last_step,
       case when f.run_id is not null then
           format('{:.0f}% of groups had one reward for all members over the last {} steps '
                  || '(1 - env/all/by_group/frac_mixed), above {:.0f}% from step {} on',
                  100 * f.recent, $window, 100 * $threshold, f.first_step)
           || case when s.good is not null or s.bad is not null
                   then format('; all good {:.0f}%, all bad {:.0f}%', 100 * coalesce(s.good, 0),
                               100 * coalesce(s.bad, 0))
                   else '' end
       end as evidence,
       case when f.run_id is not null then
           to_json({'recent': f.recent, 'all_good': s.good, 'all_bad': s.bad})::varchar
       end as facts
from runs as r
left join ends as e on e.run_id = r.run_id
left join found as f on f.run_id = r.run_id
left join sides as s on s.run_id = r.run_id

-- name: evidence
select step, key, value
from metrics
where run_id = $run_id and step between $first_step and $last_step
  and key in ('env/all/by_group/frac_all_good', 'env/all/by_group/frac_all_bad',
              'env/all/by_group/frac_mixed')
order by step, key
