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
    -- Per run and path (a record's sampler path and its state path each name it), the latest
    -- record naming that path, taken whole (a struct): one row per run and path, so each eval
    -- result finds at most one checkpoint however the records repeat or mix paths.
    select run_id, path, arg_max_null({'name': name, 'batch': batch}, seq) as rec
    from (select run_id, seq, name, batch, unnest([sampler_path, state_path]) as path
          from checkpoints)
    where path is not null
    group by run_id, path
)
select e.run_id,
       r.run_name,
       c.rec.name as checkpoint,
       c.rec.batch as step,
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
left join latest as c on c.run_id = e.run_id and c.path = e.checkpoint_path
