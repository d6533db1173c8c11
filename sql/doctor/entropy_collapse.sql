-- entropy_collapse: the policy's per-token entropy fell to a small fraction of its start while
-- the reward stalled.
-- Over the run's entropy, the family `optim/entropy` / `entropy` (the older name) read as every
-- rule reads a family (runstore.families: at each step the live number of `optim/entropy`
-- when the step logs one, else that of `entropy`), its finite values: the start is their mean
-- over the run's first `window` entropy steps (before its first entropy step plus `window`) and
-- q_t = entropy_t / start.
-- With at least 2 * `window` entropy steps and a start above 0, the entropy collapsed when the
-- mean of q over the last `window` steps (after the run's last entropy step minus `window`) is
-- below `fraction`. First step: where the stretch of steps below `fraction` that runs into
-- those last steps starts (the step after the last one at or above it before them; the run's
-- first entropy step when there is none). Fires when the reward stalled too: the mean live
-- finite `env/all/reward/total` from the first step on is at most `min_gain` above its mean
-- over the `window` steps before it (a collapse with no reward before it is not judged). Last
-- step: the run's last entropy step.
-- @severity warning
-- @param fraction = 0.25: entropy below this share of its start has collapsed
-- @param window = 10: the start, the end and the reward before are means over this many steps
-- @param min_gain = 0.02: the reward stalls when it gains at most this much after the collapse
-- @chart optim/entropy, env/all/reward/total
-- @try Entropy collapse makes the policy stop exploring: lower the learning rate, raise the sampling temperature, or add an entropy bonus; check whether the reward is being gamed (eval_gap).

-- name: finding
with entropy as (
    -- Per step, the first spelling with a number (`optim/` first), then its finite values.
    select run_id, step, value
    from (select run_id, step,
                 arg_min(value, case when key = 'optim/entropy' then 0 else 1 end) as value
          from metrics
          where key in ('optim/entropy', 'entropy') and value is not null
          group by run_id, step)
    where isfinite(value)
),
ends as (
    select run_id, count(*) as n, min(step) as first_logged, max(step) as last_step
    from entropy
    group by run_id
),
per_run as (
    select e.run_id, any_value(d.n) as n, any_value(d.last_step) as last_step,
           avg(e.value) filter (where e.step < d.first_logged + $window::hugeint) as start,
           avg(e.value) filter (where e.step > d.last_step - $window::hugeint) as recent_value
    from entropy as e
    join ends as d on d.run_id = e.run_id
    group by e.run_id
),
collapsing as (
    select p.*, p.recent_value / p.start as recent,
           max(e.step) filter (where e.step <= p.last_step - $window::hugeint
                                 and not e.value / p.start < $fraction) as last_ok
    from per_run as p
    join entropy as e on e.run_id = p.run_id
    where p.n >= 2 * $window and p.start > 0 and p.recent_value / p.start < $fraction
    group by all
),
collapsed as (
    select c.*, min(e.step) as first_step
    from collapsing as c
    join entropy as e on e.run_id = c.run_id and (c.last_ok is null or e.step > c.last_ok)
    group by all
),
reward as (
    select run_id, step, value
    from metrics
    where key = 'env/all/reward/total' and value is not null and isfinite(value)
),
stall as (
    -- The reward from the first step on, and over the `window` steps before it.
    select c.run_id,
           avg(w.value) filter (where w.step >= c.first_step) as after,
           avg(w.value) filter (where w.step < c.first_step and w.step >= c.first_step - $window::hugeint)
               as before
    from collapsed as c
    join reward as w on w.run_id = c.run_id
    group by c.run_id
),
found as (
    select c.*, s.after, s.before
    from collapsed as c
    join stall as s on s.run_id = c.run_id
    where s.before is not null and s.after - s.before <= $min_gain
),
rewarded as (
    select distinct run_id from reward
)
select r.run_id,
       case when d.run_id is null then 'logs no optim/entropy (or entropy)'
            when w.run_id is null
                then 'logs no env/all/reward/total (the collapse is judged with the reward)'
            when d.n < 2 * $window
                then format('only {} entropy steps (fewer than {})', d.n, 2 * $window)
            when p.start <= 0 then 'its entropy starts at 0 or below' end as missing,
       f.run_id is not null as fired,
       f.first_step, f.last_step,
       case when f.run_id is not null then
           format('entropy fell to {:.0f}% of its start ({:.3g} over the last {} steps against '
                  || '{:.3g} over the first {}), below {:g} of it from step {} on; '
                  || 'env/all/reward/total averaged {:.3g} from then against {:.3g} before',
                  100 * f.recent, f.recent_value, $window, f.start, $window, $fraction,
                  f.first_step, f.after, f.before)
       end as evidence,
       case when f.run_id is not null then
           to_json({'start': f.start, 'recent': f.recent, 'reward_after': f.after,
                    'reward_before': f.before})::varchar
       end as facts
from runs as r
left join ends as d on d.run_id = r.run_id
left join per_run as p on p.run_id = r.run_id
left join rewarded as w on w.run_id = r.run_id
left join found as f on f.run_id = r.run_id

-- name: evidence
select step, key, value
from metrics
where run_id = $run_id and key in ('optim/entropy', 'entropy', 'env/all/reward/total')
  and step between cast($first_step as hugeint) - 10 and $last_step
order by step, key
