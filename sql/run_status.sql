-- Each run's status as of the query, not only as of the last ingest. `completed` once the run
-- wrote its final checkpoint (`final = true` or the name `final`) or logged
-- `progress/done_frac` >= 1, whatever its files' modification times (a copied tree has fresh
-- ones); else `running` while the newest change the last ingest saw in its files
-- (`runs.source_updated_at`) is less than 120 s older than the query; else `idle` (stopped,
-- crashed, or waiting). `missing` (its directory is gone) is kept from the ingest that noticed
-- it. `runs.status` is the same rule applied at ingest time, without `progress/done_frac`.
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
-- @column status: completed / running / idle / missing, as of the query
-- @column final_checkpoint: true when the run wrote a final checkpoint
-- @column done_frac: largest non-NaN live `progress/done_frac` (null when the run logs none)
-- @column source_updated_at: newest modification time of the run's source files, as of the last ingest
with final_checkpoint as (
    select run_id, bool_or(coalesce(final, false) or name = 'final') as final_checkpoint
    from checkpoints
    group by run_id
),
progress as (
    -- From the per-key summary the ingest keeps (`metric_keys.max_value`: the largest non-NaN
    -- value of each read of a file), so no metric row is read for it.
    select run_id, max(max_value) as done_frac
    from metric_keys
    where key = 'progress/done_frac' and not pre_resume
    group by run_id
)
select r.run_id,
       r.run_name,
       -- 120 s: ingest.RUNNING_WINDOW_S, the window `runs.status` uses.
       case when r.status = 'missing' then 'missing'
            when coalesce(f.final_checkpoint, false) or p.done_frac >= 1 then 'completed'
            when r.source_updated_at > current_timestamp - interval 120 second then 'running'
            else 'idle' end as status,
       coalesce(f.final_checkpoint, false) as final_checkpoint,
       p.done_frac,
       r.source_updated_at
from runs as r
left join final_checkpoint as f on f.run_id = r.run_id
left join progress as p on p.run_id = r.run_id
