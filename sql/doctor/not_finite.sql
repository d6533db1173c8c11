-- not_finite: a loss, the reward, KL or a gradient norm became NaN or ±Infinity.
-- Over the run's live values (the latest write of each step, no `pre_resume` copies) of the
-- keys that hold a loss (a name ending in `loss` or `nll`: `train_mean_nll`, `dpo_loss`,
-- `test/nll`), a reward (a name ending in `reward/total`) or a gradient norm (a name part
-- `grad`, `grad_norm`, `gradient` or `gradient_norm`), and of KL v1 and v2 as `kl_steps` shows
-- them: fires when any is NaN, +Infinity or -Infinity. First and last step: the first
-- and last step with one. The evidence counts them per key and kind. The keys statement
-- `keys` below lists the stored keys watched, bound as `$keys`.
-- @severity error
-- @chart optim/kl_sample_train_v1, optim/kl_sample_train_v2, env/all/reward/total, train_mean_nll, dpo_loss
-- @try Look at the steps just before the first one: a NaN loss follows a too-high learning rate, an exploding gradient or a bad batch; lower the learning rate or clip gradients, and resume from the checkpoint before it.

-- name: keys
-- The stored keys that hold a loss, a reward or a gradient, from the per-key summary.
select distinct key
from metric_keys
where regexp_matches(key, '(loss|nll|reward/total)$|(^|/)grad(ient)?(_norm)?(/|$)')
  and n_step_numbers > 0
order by key

-- name: finding
with bad as (
    select run_id, step, key,
           case when isnan(value) then 'NaN' when value > 0 then '+Infinity'
                else '-Infinity' end as kind
    from metrics
    where list_contains($keys, key) and value is not null and not isfinite(value)
    union all
    -- A KL family by its spelling without `optim/` (`kl_keys`, whose rows runstore.families
    -- writes, the one home of the spellings).
    select k.run_id, k.step, n.key,
           case when isnan(k.v1) then 'NaN' when k.v1 > 0 then '+Infinity' else '-Infinity' end
    from metric_kl as k, kl_keys as n
    where n.family = 'v1' and n.pref = 1 and k.v1 is not null and not isfinite(k.v1)
    union all
    select k.run_id, k.step, n.key,
           case when isnan(k.v2) then 'NaN' when k.v2 > 0 then '+Infinity' else '-Infinity' end
    from metric_kl as k, kl_keys as n
    where n.family = 'v2' and n.pref = 1 and k.v2 is not null and not isfinite(k.v2)
),
counts as (
    select run_id, key, kind, count(*) as n, min(step) as first_step, max(step) as last_step
    from bad
    group by run_id, key, kind
),
per_run as (
    select run_id, min(first_step) as first_step, max(last_step) as last_step,
           sum(n) as n,
           string_agg(format('{} {} at {} step{} ({})', key, kind, n,
                             case when n = 1 then '' else 's' end,
                             case when first_step = last_step then format('{}', first_step)
                                  else format('{}-{}', first_step, last_step) end),
                      '; ' order by first_step, key, kind) as what
    from counts
    group by run_id
),
logged as (
    select distinct run_id from metric_keys where list_contains($keys, key) and n_step_numbers > 0
    union
    select distinct run_id from metric_kl
)
select r.run_id,
       case when l.run_id is null then 'logs no loss, reward, KL or gradient' end as missing,
       p.run_id is not null as fired,
       p.first_step, p.last_step,
       case when p.run_id is not null then p.what end as evidence,
       case when p.run_id is not null then to_json({'values': p.n})::varchar end as facts
from runs as r
left join logged as l on l.run_id = r.run_id
left join per_run as p on p.run_id = r.run_id

-- name: evidence
select step, key, value
from metrics
where run_id = $run_id and step between $first_step and $last_step
  and value is not null and not isfinite(value)
order by step, key
