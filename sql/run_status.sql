-- Each run's status as of the query, not only as of the last ingest: the macro
-- `run_status_at` (sql/statements/macros.sql, the rule's one home) as of now. `completed` once
-- the run wrote its final checkpoint (`final = true` or the name `final`) or logged
-- `progress/done_frac` >= 1, whatever its files' modification times (a copied tree has fresh
-- ones); else `running` while the newest change the last ingest saw in its files
-- (`runs.source_updated_at`) is less than 120 s older than the query; else `idle` (stopped,
-- crashed, or waiting). `missing` (its directory is gone) is kept from the ingest that noticed
-- it. `runs.status` is the same macro applied as of the ingest.
-- The ingest keeps the final checkpoint and the largest `progress/done_frac` on each `runs`
-- row (statement `run_progress` of sql/statements/summaries.sql says how they are counted),
-- so this view reads `runs` alone (and `run_labels`, the label of each).
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
-- @column run_label: how the run is shown: run_name, with a run_id prefix when two runs share the name (see `run_labels`)
-- @column status: completed / running / idle / missing, as of the query
-- @column final_checkpoint: true when the run wrote a final checkpoint
-- @column done_frac: largest non-NaN live `progress/done_frac` (null when the run logs none)
-- @column source_updated_at: newest modification time of the run's source files, as of the last ingest
-- @column last_error: the exception line ending the last traceback of the run's logs.log since its last command line (an exception group's line, then its sub-exceptions'; null when none): why a crashed run died
select r.run_id,
       r.run_name,
       l.run_label,
       run_status_at(r.status = 'missing', r.final_checkpoint, r.done_frac,
                     r.source_updated_at, current_timestamp) as status,
       r.final_checkpoint,
       r.done_frac,
       r.source_updated_at,
       r.last_error
from runs as r
join run_labels as l on l.run_id = r.run_id
