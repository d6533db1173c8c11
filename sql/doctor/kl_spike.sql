-- kl_spike: the KL between the sampling and the training policy went above the threshold.
-- The KL values are the ones `kl_steps` shows (the `metric_kl` merge: KL v1 and v2 of
-- `optim/kl_sample_train_v1|v2` or the unprefixed names, the latest write of each step, no
-- `pre_resume` copies). A step is over when v1 or v2 is strictly above the threshold; NaN is
-- never over, +Infinity is (as `runstore check`'s KL rule). Fires for a run with at least one
-- step over; first and last step are the first and last step over. The evidence names the
-- peak, how many of the KL steps among the run's last `window` steps (after its last KL step
-- minus `window`, named from the first of them) are over, and how the run's learning rate
-- ranks among the learning rates of its sweep (the runs whose config.json differs only in
-- `learning_rate` and seed-like keys: seeds, log paths, run names).
-- @severity error
-- @param threshold = kl_threshold: a step is over when KL v1 or v2 is above this (the store's `kl_threshold` setting, 0.01 unless set)
-- @param window = 10: the evidence counts the steps over among the run's last `window` steps
-- @chart optim/kl_sample_train_v1, optim/kl_sample_train_v2
-- @try Lower the learning rate (the logging guide: KL > 0.01 indicates instability); the runs of its sweep with a lower learning rate show how far.

-- name: finding
with kl as (
    -- "Over" is the macro `over_threshold` (sql/statements/macros.sql), its one home: NaN
    -- is never over, +Infinity is.
    select run_id, step, v1, v2,
           over_threshold(v1, '>', $threshold) or over_threshold(v2, '>', $threshold)
               as is_over
    from metric_kl
),
ends as (
    select run_id, max(step) as last_kl_step from kl group by run_id
),
names as (
    -- Each family's name in the evidence: its spelling without `optim/` (`kl_keys`, whose
    -- rows runstore.families writes, the one home of the spellings).
    select max(key) filter (where family = 'v1' and pref = 1) as v1,
           max(key) filter (where family = 'v2' and pref = 1) as v2
    from kl_keys
),
kl_values as (
    -- Each non-NaN KL value of a step over the threshold, by family, for the peak.
    select k.run_id, k.step, n.v1 as family, 1 as is_v1, k.v1 as value
    from kl as k, names as n where k.is_over and k.v1 is not null and not isnan(k.v1)
    union all
    select k.run_id, k.step, n.v2, 0, k.v2
    from kl as k, names as n where k.is_over and k.v2 is not null and not isnan(k.v2)
),
peaks as (
    -- The largest value over the threshold; the earliest step (then v1) among equal ones.
    select run_id, max(value) as peak,
           arg_max(family, (value, -(step::hugeint), is_v1)) as family,
           arg_max(step, (value, -(step::hugeint), is_v1)) as peak_step
    from kl_values
    group by run_id
),
per_run as (
    select k.run_id,
           count(*) filter (where k.is_over) as steps_over,
           min(k.step) filter (where k.is_over) as first_step,
           max(k.step) filter (where k.is_over) as last_step,
           count(*) filter (where k.is_over and k.step > e.last_kl_step - $window::hugeint) as recent_over,
           count(*) filter (where k.step > e.last_kl_step - $window::hugeint) as recent,
           -- The first KL step the window holds: a step the run logged, not the window's edge.
           min(k.step) filter (where k.step > e.last_kl_step - $window::hugeint) as recent_from
    from kl as k
    join ends as e on e.run_id = k.run_id
    group by k.run_id
),
sweeps as (
    -- A run's sweep: its config.json leaves but the ones set aside (`$set_aside`: the
    -- learning rate and the seed-like keys), as one text.
    select run_id, string_agg(key || '=' || value, chr(10) order by key) as sweep
    from config
    where not list_contains($set_aside, key)
    group by run_id
),
rates as (
    -- Each run's learning rate, how many distinct learning rates its sweep has and its rank
    -- among them (1: the largest).
    select s.run_id, any_value(r.learning_rate) as learning_rate,
           count(distinct o.learning_rate) as sweep_rates,
           count(distinct o.learning_rate) filter (where o.learning_rate > r.learning_rate) + 1
               as lr_rank
    from sweeps as s
    join runs as r on r.run_id = s.run_id
    join sweeps as so on so.sweep = s.sweep
    join runs as o on o.run_id = so.run_id
    where r.learning_rate is not null and o.learning_rate is not null
    group by s.run_id
),
found as (
    select p.*, k.peak, k.family, k.peak_step, t.learning_rate, t.sweep_rates, t.lr_rank
    from per_run as p
    left join peaks as k on k.run_id = p.run_id
    left join rates as t on t.run_id = p.run_id
)
select r.run_id,
       case when f.run_id is null
            then 'logs no KL (optim/kl_sample_train_v1 or v2, with or without optim/)' end
           as missing,
       coalesce(f.steps_over > 0, false) as fired,
       f.first_step, f.last_step,
       case when f.steps_over > 0 then
           format('{} peaked at {} at step {}; above {:.3g} at {} of the {} KL steps from '
                  || 'step {} on ({} step{} over in all, steps {}-{})',
                  f.family, number_text(f.peak, '{:.3g}'), f.peak_step, $threshold, f.recent_over, f.recent,
                  f.recent_from, f.steps_over, case when f.steps_over = 1 then '' else 's' end,
                  f.first_step, f.last_step)
           || case when f.learning_rate is null then ''
                   when f.sweep_rates = 1
                       then format('; learning_rate {:g} (no other learning rate in its sweep)',
                                   f.learning_rate)
                   when f.lr_rank = 1
                       then format('; learning_rate {:g} is the largest of the {} in its sweep',
                                   f.learning_rate, f.sweep_rates)
                   else format('; learning_rate {:g} ranks {} of the {} in its sweep (1: the largest)',
                               f.learning_rate, f.lr_rank, f.sweep_rates) end
       end as evidence,
       case when f.steps_over > 0 then
           to_json({'peak': f.peak, 'peak_step': f.peak_step, 'family': f.family,
                    'steps_over': f.steps_over, 'recent_over': f.recent_over,
                    'recent': f.recent, 'learning_rate': f.learning_rate,
                    'lr_rank': f.lr_rank, 'sweep_rates': f.sweep_rates})::varchar
       end as facts
from runs as r
left join found as f on f.run_id = r.run_id

-- name: evidence
select step, v1, v2
from kl_steps
where run_id = $run_id and step between $first_step and $last_step
order by step
