-- Scores of eval stores per benchmark, checkpoint and training run: one row per benchmark
-- result of an eval run (`eval_results` with its `eval_runs` row). `run_id` is the training
-- run whose checkpoint was evaluated (resolved through `checkpoints`, null for the base model
-- or a run not ingested); `checkpoint` and `step` are that checkpoint's own name and batch
-- in the run's `checkpoints.jsonl` (its latest record of the path: async runs repeat a name).
-- @column run_id: training run whose checkpoint was evaluated (null: base model, or not ingested)
-- @column run_name: its run path relative to the ingest root
-- @column checkpoint: the checkpoint's name in the run (`000004`, `final`)
-- @column step: the checkpoint's `batch` (training step it was saved at)
-- @column benchmark: benchmark
-- @column score: `score` of the benchmark result
-- @column num_examples: examples evaluated
-- @column num_correct: examples answered correctly
-- @column num_errors: examples that failed to run
-- @column model_name: evaluated model
-- @column checkpoint_name: the eval's own label of the checkpoint
-- @column checkpoint_path: the evaluated weights (`tinker://.../sampler_weights/<name>`)
-- @column eval_run_id: eval run
-- @column eval_store_id: eval store
-- @column timestamp: when the eval run was created (as written)
with latest as (
    select run_id, name, batch, sampler_path, state_path,
           row_number() over (partition by run_id, sampler_path, state_path order by seq desc)
               as newest
    from checkpoints
)
select e.run_id,
       r.run_name,
       c.name as checkpoint,
       c.batch as step,
       x.benchmark,
       x.score,
       x.num_examples,
       x.num_correct,
       x.num_errors,
       e.model_name,
       e.checkpoint_name,
       e.checkpoint_path,
       e.eval_run_id,
       e.eval_store_id,
       e.timestamp
from eval_results as x
join eval_runs as e on e.eval_store_id = x.eval_store_id and e.eval_run_id = x.eval_run_id
left join runs as r on r.run_id = e.run_id
left join latest as c
  on c.run_id = e.run_id and c.newest = 1
 and (c.sampler_path = e.checkpoint_path or c.state_path = e.checkpoint_path)
