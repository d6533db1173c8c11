-- length_at_limit: responses run into the token budget, or keep growing, to the end of the run.
-- Three pressures, each a series over the run's live finite values, each over at values above
-- 1: `near`, the tokens per turn (`env/all/ac_tokens_per_turn`; `ac_tokens_per_turn`, the older
-- name, for a run that logs no `env/all/ac_tokens_per_turn`) / (config `max_tokens` *
-- `near_max`): responses near the configured budget; `stopped`, `env/all/stop/max_tokens` /
-- `stop_share`: episodes ended by the budget; `grown`, the tokens per turn / (their mean over
-- the run's first `window` steps, before its first such step plus `window`, * `growth`):
-- responses growing without bound. A pressure with at least `window` values is over when its
-- mean over the last `window` steps (after its last step minus `window`: the mean of the values
-- there, over the pressure's denominator) is above 1; the finding fires with the pressure over
-- whose mean is largest. First step: where that
-- pressure's stretch of values above 1 running into those last steps starts (the step after
-- its last value at or below 1 before them; its first value's step when there is none); last
-- step: its last value's step.
-- @severity warning
-- @param near_max = 0.9 above 0: ac_tokens_per_turn above this share of max_tokens is at the limit
-- @param stop_share = 0.2 above 0: a share of episodes stopped by max_tokens above this is too many
-- @param growth = 3.0 above 0: ac_tokens_per_turn above this multiple of its start grows without bound
-- @param window = 10: the start and the end are the run's first and last `window` steps
-- @chart env/all/ac_tokens_per_turn, env/all/stop/max_tokens
-- @try OOM / timeout or cut answers: reduce max_tokens, batch_size or group_size (the logging guide), or penalise length; look at the transcripts of these steps for answers that never end.

-- name: finding
with spelled as (
    -- The run's name for the tokens per turn: `env/all/ac_tokens_per_turn` when it logs it.
    select run_id,
           case when bool_or(key = 'env/all/ac_tokens_per_turn') then 'env/all/ac_tokens_per_turn'
                else 'ac_tokens_per_turn' end as ac_key
    from metric_keys
    where key in ('env/all/ac_tokens_per_turn', 'ac_tokens_per_turn') and not pre_resume
      and n_step_numbers > 0
    group by run_id
),
ac as (
    select m.run_id, m.step, m.value
    from metrics as m
    join spelled as s on s.run_id = m.run_id and s.ac_key = m.key
    where m.key in ('env/all/ac_tokens_per_turn', 'ac_tokens_per_turn')
      and m.value is not null and isfinite(m.value)
),
stopped as (
    select run_id, step, value
    from metrics
    where key = 'env/all/stop/max_tokens' and value is not null and isfinite(value)
),
budgets as (
    -- The configured `max_tokens` (a positive number), when config.json has one.
    select run_id, value_num as max_tokens
    from config
    where key = 'max_tokens' and value_num > 0
),
ac_ends as (
    select run_id, count(*) as n, min(step) as first_step, max(step) as last_step
    from ac
    group by run_id
),
starts as (
    -- The tokens per turn over the run's first `window` steps that log them.
    select a.run_id, avg(a.value) as start_ac
    from ac as a
    join ac_ends as e on e.run_id = a.run_id and a.step < e.first_step + $window::hugeint
    group by a.run_id
),
ac_pressures as (
    -- `near` and `grown` in one pass over the tokens per turn: their recent mean and the last
    -- step at or below each limit before the last `window` steps.
    select a.run_id, any_value(e.n) as n, any_value(e.last_step) as last_step,
           any_value(b.max_tokens) as max_tokens, any_value(s.start_ac) as start_ac,
           avg(a.value) filter (where a.step > e.last_step - $window::hugeint) as recent_ac,
           max(a.step) filter (where a.step <= e.last_step - $window::hugeint
                                 and not a.value / (b.max_tokens * $near_max) > 1)
               as last_ok_near,
           max(a.step) filter (where a.step <= e.last_step - $window::hugeint
                                 and not a.value / (s.start_ac * $growth) > 1)
               as last_ok_grown
    from ac as a
    join ac_ends as e on e.run_id = a.run_id
    left join budgets as b on b.run_id = a.run_id
    left join starts as s on s.run_id = a.run_id
    group by a.run_id
),
stop_ends as (
    select run_id, count(*) as n, max(step) as last_step from stopped group by run_id
),
stop_pressure as (
    select s.run_id, any_value(e.n) as n, any_value(e.last_step) as last_step,
           avg(s.value) filter (where s.step > e.last_step - $window::hugeint) as recent_stopped,
           max(s.step) filter (where s.step <= e.last_step - $window::hugeint
                                 and not s.value / $stop_share > 1) as last_ok
    from stopped as s
    join stop_ends as e on e.run_id = s.run_id
    group by s.run_id
),
pressures as (
    select run_id, 'near' as pressure, n, last_step, recent_ac / (max_tokens * $near_max) as recent,
           recent_ac as recent_raw, last_ok_near as last_ok
    from ac_pressures
    where max_tokens is not null
    union all
    select run_id, 'grown', n, last_step, recent_ac / (start_ac * $growth), recent_ac,
           last_ok_grown
    from ac_pressures
    where start_ac > 0
    union all
    select run_id, 'stopped', n, last_step, recent_stopped / $stop_share, recent_stopped, last_ok
    from stop_pressure
),
worst as (
    -- The pressure over 1 with the largest recent mean (the first by name of equal ones).
    select run_id, first(pressure order by recent desc, pressure) as pressure
    from pressures
    where n >= $window and recent > 1
    group by run_id
),
found as (
    -- Where the chosen pressure's stretch over 1 starts: its first step after `last_ok`.
    select p.run_id, p.pressure, p.recent, p.recent_raw, p.last_step,
           min(v.step) as first_step
    from worst as w
    join pressures as p on p.run_id = w.run_id and p.pressure = w.pressure
    join (select run_id, step, false as is_stop from ac
          union all
          select run_id, step, true from stopped) as v
      on v.run_id = p.run_id and v.is_stop = (p.pressure = 'stopped')
     and (p.last_ok is null or v.step > p.last_ok)
    group by all
),
logged as (
    select run_id, max(n) as n from pressures group by run_id
)
select r.run_id,
       case when not exists (select 1 from ac where ac.run_id = r.run_id)
                 and not exists (select 1 from stopped where stopped.run_id = r.run_id)
            then 'logs no env/all/ac_tokens_per_turn or env/all/stop/max_tokens'
            when coalesce(l.n, 0) < $window
                then format('only {} steps log response lengths (fewer than {})',
                            coalesce(l.n, 0), $window) end as missing,
       f.run_id is not null as fired,
       f.first_step, f.last_step,
       case when f.run_id is not null then
           case f.pressure
                when 'stopped'
                    then format('{:.0f}% of episodes stopped at max_tokens over the last {} steps '
                                || '(env/all/stop/max_tokens)', 100 * f.recent_raw, $window)
                else format('{} averaged {:.4g} over the last {} steps', s.ac_key, f.recent_raw,
                            $window)
                     || case when b.max_tokens is not null
                             then format(', {:.0f}% of max_tokens {:g}',
                                         100 * f.recent_raw / b.max_tokens, b.max_tokens)
                             else '' end
                     || case when a.start_ac > 0
                             then format(', {:.3g}x its start ({:.4g})',
                                         f.recent_raw / a.start_ac, a.start_ac)
                             else '' end end
           || format('; at the limit from step {} on', f.first_step)
       end as evidence,
       case when f.run_id is not null then
           to_json({'pressure': f.pressure, 'recent': f.recent, 'recent_value': f.recent_raw,
                    'max_tokens': b.max_tokens, 'start_ac': a.start_ac})::varchar
       end as facts
from runs as r
left join logged as l on l.run_id = r.run_id
left join found as f on f.run_id = r.run_id
left join spelled as s on s.run_id = r.run_id
left join budgets as b on b.run_id = r.run_id
left join starts as a on a.run_id = r.run_id

-- name: evidence
select step, key, value
from metrics
where run_id = $run_id and step between $first_step and $last_step
  and key in ('env/all/ac_tokens_per_turn', 'ac_tokens_per_turn', 'env/all/stop/max_tokens')
order by step, key
