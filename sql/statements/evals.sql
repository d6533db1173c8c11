-- Eval stores: what the query layer computes about them when it reads them.

-- name: eval_run_links
-- Per eval run (`eval_runs`' stored rows, the files `$stored`), the training run whose
-- checkpoint it evaluated: the run whose `checkpoints.jsonl` lists the eval's
-- `checkpoint_path` as a checkpoint's `sampler_path` or `state_path` (tinker paths name the
-- training session, so they are unique to a run). Null when no ingested run lists it (the
-- base model, or a run not ingested yet) or when several do (the same run ingested from two
-- copies). Computed when queried, not at ingest, so an eval store ingested before the
-- training run it evaluated is linked as soon as that run is. The query layer joins this to
-- the stored rows to make the `eval_runs` table (runstore.query.connect).
select e.eval_store_id,
       e.eval_run_id,
       case when count(distinct c.run_id) = 1 then min(c.run_id) end as run_id
from read_parquet($stored, union_by_name = true) as e
join checkpoints as c
  on e.checkpoint_path = c.sampler_path or e.checkpoint_path = c.state_path
group by e.eval_store_id, e.eval_run_id
