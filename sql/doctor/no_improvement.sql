-- no_improvement: the run's objective shows no real trend for the better over the run.
-- The objective is `env/all/reward/total` (rising is better) for a run that logs it, else
-- `train_mean_nll` (SL), else `dpo_loss` (DPO), falling being better; its live finite values
-- y against their steps x. With n >= `min_steps` values (and n >= 3), the trend is the
-- least-squares slope b = Sxy / Sxx and the test statistic t = b / sqrt(SSE / (n - 2) / Sxx),
-- SSE = Syy - Sxy^2 / Sxx
-- (negated for a loss): how many standard errors the trend is for the better, so noise around
-- a real trend does not fire and a flat noisy run does. Fires when t < `t_min` (a run whose
-- values lie exactly on a line has t = ±Infinity by its slope's sign, or 0 when flat). With
-- span = floor(`part` * (last step - first step)), first step: the last step minus span; last
-- step: the last step. The evidence adds the means over the first and the last span of steps.
-- @severity warning
-- @param min_steps = 20: runs with fewer values of the objective are not judged
-- @param part = 0.25 in [0, 1]: the evidence compares the first and the last this share of the steps
-- @param t_min = 2.0: a trend for the better is real when its t reaches this (about 97.5% one-sided)
-- @chart env/all/reward/total, train_mean_nll, dpo_loss
-- @try Training not improving: check metrics.jsonl — is loss decreasing? are rewards increasing? (the logging guide). Try a larger learning rate if KL stays low, or see reward_stuck, parse_errors and no_signal for why.

-- name: finding
with objective as (
    -- The run's objective key: reward when it logs one, else the SL, else the DPO loss.
    select run_id,
           case when bool_or(key = 'env/all/reward/total') then 'env/all/reward/total'
                when bool_or(key = 'train_mean_nll') then 'train_mean_nll'
                else 'dpo_loss' end as key
    from metric_keys
    where key in ('env/all/reward/total', 'train_mean_nll', 'dpo_loss')
      and not pre_resume and n_step_numbers > 0
    group by run_id
),
series as (
    select m.run_id, o.key, m.step, m.value,
           case when o.key = 'env/all/reward/total' then 1 else -1 end as better
    from metrics as m
    join objective as o on o.run_id = m.run_id and o.key = m.key
    where m.key in ('env/all/reward/total', 'train_mean_nll', 'dpo_loss')
      and m.value is not null and isfinite(m.value)
),
ends as (
    select run_id, min(step) as first_step, max(step) as last_step,
           -- In HUGEINT: steps at both ends of int64 are 2^64 apart.
           floor($part * (max(step)::hugeint - min(step)))::hugeint as span
    from series
    group by run_id
),
fits as (
    select s.run_id, any_value(s.key) as key, any_value(s.better) as better, count(*) as n,
           regr_sxx(s.value, s.step) as sxx, regr_syy(s.value, s.step) as syy,
           regr_sxy(s.value, s.step) as sxy,
           any_value(e.first_step) as start_first, any_value(e.first_step + e.span)::bigint as start_last,
           any_value(e.last_step - e.span)::bigint as end_first, any_value(e.last_step) as last_step,
           avg(s.value) filter (where s.step <= e.first_step + e.span) as start_mean,
           avg(s.value) filter (where s.step >= e.last_step - e.span) as end_mean
    from series as s
    join ends as e on e.run_id = s.run_id
    group by s.run_id
),
tested as (
    select *, sxy / sxx as slope,
           -- SSE can come out a hair below 0 by rounding: a perfect line.
           greatest(syy - sxy * sxy / sxx, 0) / (n - 2) / sxx as slope_var
    from fits
    where n >= $min_steps and n >= 3 and sxx > 0
),
judged as (
    select *,
           case when slope_var > 0 then better * slope / sqrt(slope_var)
                when better * slope > 0 then 'Infinity'::double
                when better * slope < 0 then '-Infinity'::double
                else 0 end as t
    from tested
)
select r.run_id,
       case when o.run_id is null then 'logs no env/all/reward/total, train_mean_nll or dpo_loss'
            when j.run_id is null
                then format('only {} finite values of {} (fewer than {})', coalesce(p.n, 0),
                            o.key, greatest($min_steps, 3)) end as missing,
       coalesce(j.t < $t_min, false) as fired,
       case when j.t < $t_min then j.end_first end as first_step,
       case when j.t < $t_min then j.last_step end as last_step,
       case when j.t < $t_min then
           format('{} trend {:+.3g} a step over {} steps, t = {} (a real {} has t >= {:g})',
                  j.key, j.slope, j.n, number_text(j.t, '{:.2g}'),
                  case when j.better = 1 then 'rise' else 'fall' end, $t_min)
           || format('; mean {:.3g} over steps {}-{} against {:.3g} over steps {}-{}',
                     j.end_mean, j.end_first, j.last_step, j.start_mean, j.start_first,
                     j.start_last)
       end as evidence,
       case when j.t < $t_min then
           to_json({'key': j.key, 'n': j.n, 'slope': j.slope, 't': j.t,
                    'start_mean': j.start_mean, 'end_mean': j.end_mean})::varchar
       end as facts
from runs as r
left join objective as o on o.run_id = r.run_id
left join fits as p on p.run_id = r.run_id
left join judged as j on j.run_id = r.run_id

-- name: evidence
select step, key, value
from metrics
where run_id = $run_id and key in ('env/all/reward/total', 'train_mean_nll', 'dpo_loss')
order by key, step
