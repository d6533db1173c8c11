-- What a sweep bought with its money: one row per run that logs its cost (0.6.x writes
-- `cost/cumulative_usd`), with its total cost and tokens (`runs`), its final and best
-- training reward (`env/all/reward/total`, live values; NaN left out) and each per dollar.
-- Group or filter by config to compare sweep points, e.g. `order by best_per_usd desc`.
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
-- @column model_name: config.json `model_name`
-- @column learning_rate: config.json `learning_rate`
-- @column cost_usd: the run's total cost (its last `cost/cumulative_usd`)
-- @column tokens_sampled: its total sampled tokens
-- @column tokens_trained: its total trained tokens
-- @column final_reward: reward at the run's last step that logs one
-- @column best_reward: largest reward
-- @column final_per_usd: final_reward / cost_usd (null when the cost is 0)
-- @column best_per_usd: best_reward / cost_usd (null when the cost is 0)
with reward as (
    select run_id,
           arg_max(value, step) as final_reward,
           max(value) as best_reward
    from metrics
    where key = 'env/all/reward/total' and value is not null and not isnan(value)
    group by run_id
)
select r.run_id,
       r.run_name,
       r.model_name,
       r.learning_rate,
       r.cost_usd,
       r.tokens_sampled,
       r.tokens_trained,
       w.final_reward,
       w.best_reward,
       w.final_reward / nullif(r.cost_usd, 0) as final_per_usd,
       w.best_reward / nullif(r.cost_usd, 0) as best_per_usd
from runs as r
left join reward as w on w.run_id = r.run_id
where r.cost_usd is not null
