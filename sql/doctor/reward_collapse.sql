-- reward_collapse: the smoothed training reward fell far below its best.
-- This is `runstore check`'s drop rule, `drop(env/all/reward/total, smooth) > threshold`
-- (docs/checks.md, trend rules): s_t is the debiased EMA of the run's live
-- `env/all/reward/total` with weight `smooth`, and the rule's value at step t is the best s so
-- far minus s_t. The rule is evaluated by runstore.health.trends (its one definition), and its
-- fired rows reach this statement as the bound lists `$drop_*` (run, first and last step over,
-- peak and latest value); this statement adds the raw reward's best and last values. Fires for
-- a run the rule fires for whose value at its last reward step is still above `threshold` (the
-- reward has not come back: an early dip the run recovered from is not a collapse; NaN there,
-- a last reward that is not a number, says nothing, as NaN never fires); first and last step
-- are the rule's first and last step over.
-- @severity error
-- @param threshold = 0.2: how far (in reward units) the smoothed reward must fall below its best
-- @param smooth = trend_weight: the EMA weight of the drop rule (0.9 unless given)
-- @trend drop env/all/reward/total
-- @chart env/all/reward/total
-- @try Look at what changed at the first step: a KL spike (lower the learning rate), an entropy collapse, or a change in the data; resume from the checkpoint before it with a lower learning rate.

-- name: finding
with rule_rows as (
    select unnest($drop_run_id::varchar[]) as run_id,
           unnest($drop_first_step::bigint[]) as first_step,
           unnest($drop_last_step::bigint[]) as last_step,
           unnest($drop_peak::double[]) as peak,
           unnest($drop_latest::double[]) as latest
),
fired as (
    -- Whether the rule's value at the run's last reward step is still over the threshold: the
    -- macro `over_threshold` (sql/statements/macros.sql), its one home (NaN is never over).
    select *, over_threshold(latest, '>', $threshold) as still_over
    from rule_rows
),
reward as (
    select run_id, step, value
    from metrics
    where key = 'env/all/reward/total' and value is not null and isfinite(value)
),
raw as (
    -- The raw reward's best (the earliest step among equal ones) and its last value.
    select run_id, max(value) as best, arg_max(step, (value, -(step::hugeint))) as best_step,
           arg_max(value, step) as last_value, max(step) as last_step
    from reward
    group by run_id
)
select r.run_id,
       case when w.run_id is null then 'logs no env/all/reward/total' end as missing,
       coalesce(f.still_over, false) as fired,
       case when f.still_over then f.first_step end as first_step,
       case when f.still_over then f.last_step end as last_step,
       case when f.still_over then
           format('the smoothed env/all/reward/total (EMA weight {:g}) fell up to {:.3g} below '
                  || 'its best from step {} on ({:.3g} below at the last step; the drop rule '
                  || 'fires above {:g}); raw reward best {:.3g} at step {}, {:.3g} at step {}',
                  $smooth, f.peak, f.first_step, f.latest, $threshold, w.best, w.best_step,
                  w.last_value, w.last_step)
       end as evidence,
       case when f.still_over then
           to_json({'peak': f.peak, 'latest': f.latest, 'best': w.best,
                    'best_step': w.best_step, 'last_value': w.last_value})::varchar
       end as facts
from runs as r
left join raw as w on w.run_id = r.run_id
left join fired as f on f.run_id = r.run_id

-- name: evidence
select step, value as reward
from metrics
where run_id = $run_id and key = 'env/all/reward/total'
order by step
