-- Async evaluations on their three axes: one row per run, step and evaluated metric that the
-- async evaluation loop of tinker-cookbook 0.6.x logged. It logs each eval metric `<name>`
-- three times, as `eval/by_step/<name>`, `eval/by_cost/<name>` and `eval/by_time/<name>`,
-- one copy per axis, with the coordinates of the weights it evaluated in the same row
-- (`eval/snapshot/training_step`, `eval/snapshot/cumulative_cost_usd`,
-- `eval/snapshot/elapsed_seconds`): here that is one metric with three coordinates. The row
-- is stored at the weights' training step, which the eval may have reached after later
-- steps were logged (its `seq` says when it arrived); a step evaluated twice keeps its later
-- evaluation, as the `metrics` view does.
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
-- @column step: training step of the evaluated weights
-- @column metric: the evaluated metric (e.g. `test/env/all/reward/total`)
-- @column value: its value (`eval/by_step/<metric>`)
-- @column cost_usd: cumulative cost of training when the weights were taken (null when not logged)
-- @column elapsed_s: seconds of training when the weights were taken (null when not logged)
-- @column seq: line of the evaluation in metrics.jsonl (arrival order)
select m.run_id,
       r.run_name,
       m.step,
       substring(m.key, length('eval/by_step/') + 1) as metric,
       m.value,
       c.value as cost_usd,
       t.value as elapsed_s,
       m.seq
from metrics as m
left join runs as r on r.run_id = m.run_id
left join metrics as c
  on c.run_id = m.run_id and c.step = m.step and c.key = 'eval/snapshot/cumulative_cost_usd'
left join metrics as t
  on t.run_id = m.run_id and t.step = m.step and t.key = 'eval/snapshot/elapsed_seconds'
where m.key like 'eval/by\_step/%' escape '\'
