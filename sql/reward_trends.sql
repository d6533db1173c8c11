-- Reward over training: one row per run and step that logs `env/all/reward/total` (the mean
-- total reward of the step's training batch), with a 10-step moving average (the macro
-- `recent_steps`) and the best value so far. Live values only (the `metrics` view). NaN
-- rewards are kept in `reward` but ignored by the average and the running best, so one bad
-- step does not blank them out.
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
-- @column run_label: how the run is shown: run_name, with a run_id prefix when two runs share the name (see `run_labels`)
-- @column step: training step
-- @column reward: `env/all/reward/total` at this step, as logged
-- @column reward_ma10: mean of the non-NaN rewards of this and the 9 previous logged steps (null when all are NaN)
-- @column best_so_far: largest non-NaN reward up to and including this step
with reward as (
    select run_id, step, value as reward,
           -- NaN is larger than every number in max() and poisons avg(): null it first.
           case when isnan(value) then null else value end as clean
    from metrics
    where key = 'env/all/reward/total' and value is not null
)
select w.run_id,
       r.run_name,
       r.run_label,
       w.step,
       w.reward,
       avg(w.clean) over (partition by w.run_id order by w.step
                          rows between recent_steps() - 1 preceding and current row)
           as reward_ma10,
       max(w.clean) over (partition by w.run_id order by w.step
                          rows between unbounded preceding and current row) as best_so_far
from reward as w
left join run_labels as r on r.run_id = w.run_id
