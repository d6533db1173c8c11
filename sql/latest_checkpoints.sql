-- Checkpoints to resume or sample from: one row per run that wrote any checkpoint, with its
-- latest checkpoint by write order (the last line of checkpoints.jsonl), the latest one that
-- has a sampler path (rolling saves have none) and the final one, if any. The final record is
-- recognised by `final = true` or by the name `final` (no 0.6.1 trainer sets the flag).
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
-- @column run_label: how the run is shown: run_name, with a run_id prefix when two runs share the name (see `run_labels`)
-- @column n_checkpoints: checkpoint records written
-- @column latest_name: name of the latest checkpoint (`000050`, `final`)
-- @column batch: its `batch`
-- @column epoch: its `epoch`
-- @column rolling: true when the latest checkpoint is a rolling save (state only)
-- @column state_path: its `state_path` (`tinker://.../weights/<name>`)
-- @column sampler_path: its `sampler_path` (null for rolling saves)
-- @column sampler_name: name of the latest checkpoint that has a sampler path
-- @column latest_sampler_path: that checkpoint's `sampler_path`, the newest weights to sample from
-- @column final_name: name of the final checkpoint (null when the run wrote none)
-- @column final_state_path: `state_path` of the final checkpoint (null when none)
-- @column final_sampler_path: `sampler_path` of the final checkpoint (null when none)
with numbered as (
    select run_id, seq,
           coalesce(final, false) or name = 'final' as is_final,
           {'name': name, 'batch': batch, 'epoch': epoch, 'rolling': rolling,
            'state_path': state_path, 'sampler_path': sampler_path} as c
    from checkpoints
),
per_run as (
    -- One pass over each run's records: the newest record (by `seq`), the newest with a
    -- sampler path and the newest final one, each taken whole from one row (a struct), so a
    -- tie in `seq` cannot mix two records' columns.
    select run_id,
           count(*) as n,
           arg_max_null(c, seq) as latest,
           arg_max_null(c, seq) filter (where c.sampler_path is not null) as sampler,
           arg_max_null(c, seq) filter (where is_final) as final
    from numbered
    group by run_id
)
select c.run_id,
       r.run_name,
       r.run_label,
       c.n as n_checkpoints,
       c.latest.name as latest_name,
       c.latest.batch as batch,
       c.latest.epoch as epoch,
       coalesce(c.latest.rolling, false) as rolling,
       c.latest.state_path as state_path,
       c.latest.sampler_path as sampler_path,
       c.sampler.name as sampler_name,
       c.sampler.sampler_path as latest_sampler_path,
       c.final.name as final_name,
       c.final.state_path as final_state_path,
       c.final.sampler_path as final_sampler_path
from per_run as c
-- One label row per run_id (a group, which `runs` has anyway): a query that reads no label
-- column (run_summary) then skips this join.
left join (select run_id, any_value(run_name) as run_name, any_value(run_label) as run_label
           from run_labels group by run_id) as r on r.run_id = c.run_id
