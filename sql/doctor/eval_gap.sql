-- eval_gap: the training reward rose while an evaluation's reward fell (overfitting, or the
-- policy gaming the training reward).
-- For each evaluator the run logs (`<name>/env/all/reward/total`, e.g.
-- `test/env/all/reward/total`: the keys statement `keys` below lists them, bound as `$keys`)
-- with at least `min_evals` live finite values: the first half of its values are those before
-- the middle step (halfway between its first and last value's steps), the last half those
-- after it; the training reward's (`env/all/reward/total`) live finite values at the steps
-- from the first to the last step of each half are its halves. Each change (last half's mean
-- minus first half's) is tested with Welch's t, change / sqrt(var_first / n_first + var_last /
-- n_last) with sample variances (0 for a half of one value; ±Infinity by the change's sign when
-- both are 0, 0 for no change). Fires when the training reward rose (change above `margin`,
-- t >= `t_min`) and the evaluator's fell (change below -`margin`, t <= -`t_min`); of several
-- such evaluators the one that fell most is named. First step: the first step of its last
-- half; last step: its last value's step.
-- @severity warning
-- @param min_evals = 6: evaluators with fewer values are not judged
-- @param margin = 0.05: the rise and the fall must each be larger than this (in reward units)
-- @param t_min = 2.0: each change must be this many standard errors from 0
-- @chart env/all/reward/total, test/env/all/reward/total
-- @try Compare the transcripts of the training and eval rollouts at these steps: a reward the policy learned to game (format tricks, grader loopholes) rises in training only; fix the reward or the grader, or keep the checkpoint before the fall.

-- name: keys
-- The stored evaluator reward keys (`<name>/env/all/reward/total`), from the per-key summary.
select distinct key
from metric_keys
where regexp_matches(key, '^[^/]+/env/all/reward/total$') and n_step_numbers > 0
order by key

-- name: finding
with evals as (
    select run_id, key, step, value
    from metrics
    where list_contains($keys, key) and value is not null and isfinite(value)
),
middles as (
    -- Twice the middle step, in HUGEINT: exact, and no overflow at steps near the int64 limits.
    select run_id, key, count(*) as n, min(step)::hugeint + max(step) as twice_middle
    from evals
    group by run_id, key
),
sided as (
    -- Each eval's half of the run: -1 before the middle step, 1 after it, 0 at it (neither).
    select e.run_id, e.key, e.step, e.value, m.n,
           sign(2 * e.step::hugeint - m.twice_middle) as side
    from evals as e
    join middles as m on m.run_id = e.run_id and m.key = e.key
),
halves as (
    select run_id, key, any_value(n) as n,
           avg(value) filter (where side < 0) as eval_first,
           avg(value) filter (where side > 0) as eval_last,
           var_samp(value) filter (where side < 0) as eval_first_var,
           var_samp(value) filter (where side > 0) as eval_last_var,
           count(*) filter (where side < 0) as h_first,
           count(*) filter (where side > 0) as h_last,
           min(step) filter (where side < 0) as first_from,
           max(step) filter (where side < 0) as first_to,
           min(step) filter (where side > 0) as last_from,
           max(step) as last_to
    from sided
    group by run_id, key
),
train as (
    select run_id, step, value
    from metrics
    where key = 'env/all/reward/total' and value is not null and isfinite(value)
),
compared as (
    select h.run_id, h.key, h.n, h.h_first, h.h_last, h.eval_first, h.eval_last,
           h.eval_first_var, h.eval_last_var, h.first_from, h.first_to, h.last_from, h.last_to,
           avg(t.value) filter (where t.step between h.first_from and h.first_to) as train_first,
           avg(t.value) filter (where t.step between h.last_from and h.last_to) as train_last,
           var_samp(t.value) filter (where t.step between h.first_from and h.first_to)
               as train_first_var,
           var_samp(t.value) filter (where t.step between h.last_from and h.last_to)
               as train_last_var,
           count(t.value) filter (where t.step between h.first_from and h.first_to) as n_first,
           count(t.value) filter (where t.step between h.last_from and h.last_to) as n_last
    from halves as h
    join train as t on t.run_id = h.run_id
    where h.n >= $min_evals and h.h_first > 0 and h.h_last > 0
    group by all
),
gaps as (
    -- Welch's t of each change; a half of one value has no variance (0 is used).
    select *, train_last - train_first as train_change, eval_last - eval_first as eval_change,
           sqrt(coalesce(train_first_var, 0) / n_first + coalesce(train_last_var, 0) / n_last)
               as train_se,
           sqrt(coalesce(eval_first_var, 0) / h_first + coalesce(eval_last_var, 0) / h_last)
               as eval_se
    from compared
    where n_first > 0 and n_last > 0
),
tested as (
    select *,
           case when train_se > 0 then train_change / train_se
                when train_change = 0 then 0
                else sign(train_change) * 'Infinity'::double end as train_t,
           case when eval_se > 0 then eval_change / eval_se
                when eval_change = 0 then 0
                else sign(eval_change) * 'Infinity'::double end as eval_t
    from gaps
),
found as (
    -- The evaluator that fell most (the first by name of equal falls).
    select *
    from (select *, row_number() over (partition by run_id order by eval_change, key) as rank
          from tested
          where train_change > $margin and train_t >= $t_min
            and eval_change < -$margin and eval_t <= -$t_min)
    where rank = 1
),
judged as (
    select distinct run_id from tested
),
logged as (
    select distinct run_id from evals
)
select r.run_id,
       case when l.run_id is null then 'logs no <evaluator>/env/all/reward/total'
            when j.run_id is null
                then format('no evaluator with {} values and a training reward beside it',
                            $min_evals) end as missing,
       f.run_id is not null as fired,
       f.last_from as first_step, f.last_to as last_step,
       case when f.run_id is not null then
           format('{} fell from {:.3g} to {:.3g} (t = {}; the means of the first and the '
                  || 'last half of its values, the last from step {}) while env/all/reward/total '
                  || 'rose from {:.3g} to {:.3g} (t = {})',
                  f.key, f.eval_first, f.eval_last, number_text(f.eval_t, '{:.2g}'), f.last_from,
                  f.train_first, f.train_last, number_text(f.train_t, '{:.2g}'))
       end as evidence,
       case when f.run_id is not null then
           to_json({'evaluator': f.key, 'eval_change': f.eval_change, 'eval_t': f.eval_t,
                    'train_change': f.train_change, 'train_t': f.train_t})::varchar
       end as facts
from runs as r
left join logged as l on l.run_id = r.run_id
left join judged as j on j.run_id = r.run_id
left join found as f on f.run_id = r.run_id

-- name: evidence
select step, key, value
from metrics
where run_id = $run_id and (key = 'env/all/reward/total' or list_contains($keys, key))
order by step, key
