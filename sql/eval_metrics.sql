-- Evaluator metrics in long form: one row per run, step and metric logged by an evaluator,
-- i.e. every live metric named `<evaluator>/env/...` (e.g. `test/env/all/reward/total`).
-- `metric` keeps the `env/...` part, so it reads like the training metric of the same name
-- and the two can be joined (`metric = 'env/all/reward/total'`).
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
-- @column run_label: how the run is shown: run_name, with a run_id prefix when two runs share the name (see `run_labels`)
-- @column step: training step of the evaluation
-- @column evaluator: evaluator name, the part of the key before the first `/env/` (e.g. `test`, `aime2025`)
-- @column metric: the rest of the key from `env/` on (e.g. `env/all/reward/total`)
-- @column value: numeric value (null for string values); NaN and ±Infinity kept
select m.run_id,
       r.run_name,
       r.run_label,
       m.step,
       substring(m.key, 1, strpos(m.key, '/env/') - 1) as evaluator,
       substring(m.key, strpos(m.key, '/env/') + 1) as metric,
       m.value
from metrics as m
left join run_labels as r on r.run_id = m.run_id
where strpos(m.key, '/env/') > 1
