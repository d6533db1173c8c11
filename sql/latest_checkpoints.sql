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
    select run_id, name, batch, epoch, rolling, state_path, sampler_path, seq,
           coalesce(final, false) or name = 'final' as is_final,
           row_number() over (partition by run_id order by seq desc) as newest,
           count(*) over (partition by run_id) as n
    from checkpoints
),
sampler as (
    select run_id, name, sampler_path,
           row_number() over (partition by run_id order by seq desc) as newest
    from checkpoints
    where sampler_path is not null
),
final_checkpoint as (
    select run_id, name, state_path, sampler_path,
           row_number() over (partition by run_id order by seq desc) as newest
    from numbered
    where is_final
)
select c.run_id,
       r.run_name,
       r.run_label,
       c.n as n_checkpoints,
       c.name as latest_name,
       c.batch,
       c.epoch,
       coalesce(c.rolling, false) as rolling,
       c.state_path,
       c.sampler_path,
       s.name as sampler_name,
       s.sampler_path as latest_sampler_path,
       f.name as final_name,
       f.state_path as final_state_path,
       f.sampler_path as final_sampler_path
from numbered as c
left join run_labels as r on r.run_id = c.run_id
left join sampler as s on s.run_id = c.run_id and s.newest = 1
left join final_checkpoint as f on f.run_id = c.run_id and f.newest = 1
where c.newest = 1
