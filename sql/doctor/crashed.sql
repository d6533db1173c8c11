-- crashed: the run stopped before completing, with an exception or silently.
-- A run whose status (`run_status`) is neither `completed` (a final checkpoint, or
-- `progress/done_frac` >= 1) nor `missing` is found two ways. At once, when its log's last
-- record is the one whose traceback gave its last error (`runs.last_error_line`: the process
-- logged the exception and nothing after it) and the run is `idle` (no file changed within
-- `running_until`). And by `runstore check`'s stale rule, `stale > minutes` (docs/checks.md,
-- trend rules), whatever its log says (killed without a traceback, or hung): its source files
-- last changed (as of the last ingest) more than `minutes` before now. The stale rule is
-- evaluated by runstore.health.trends (its one definition), and its fired rows reach this
-- statement as the bound lists `$stale_*` (run, minutes since the last change). First and last
-- step: the run's last step. The evidence says which way it was found, how long ago the files
-- last changed when the stale rule fired (in minutes below two hours, then hours, then days;
-- `facts.minutes` exact, null when only the log found it), how far the run got and, when the
-- store keeps it (`runs.last_error`, from logs.log), the last error its log shows.
-- @severity error
-- @param minutes = 60.0: a run unchanged for longer than this has stopped
-- @trend stale
-- @optional runs.last_error: logs.log (the last error of its traceback)
-- @chart env/all/reward/total, optim/kl_sample_train_v1, train_mean_nll, dpo_loss
-- @try Look at the end of its logs.log for the exception (OOM or timeout: reduce batch_size, group_size or max_tokens, as the logging guide says); resume from its last checkpoint once the cause is fixed.

-- name: finding
with stale_fired as (
    select unnest($stale_run_id::varchar[]) as run_id,
           unnest($stale_minutes::double[]) as minutes
),
last_record as (
    select run_id, max(record_line) as record_line
    from run_logs
    group by run_id
),
judged as (
    -- Each run, and which way it is found: `stale` (the stale rule fired) and `ended` (its
    -- log's last record logged its last error, and it stopped writing). `last_error` is
    -- named: a store without the column reads it as a typed null under the same name.
    select r.run_id, r.source_updated_at, r.last_step, r.last_error as last_error, s.done_frac,
           f.minutes,
           f.run_id is not null as stale,
           coalesce(g.record_line = r.last_error_line and s.status = 'idle', false) as ended
    from runs as r
    join run_status as s on s.run_id = r.run_id
    left join stale_fired as f on f.run_id = r.run_id
    left join last_record as g on g.run_id = r.run_id
)
select j.run_id,
       case when j.source_updated_at is null and not j.ended
            then 'no source modification time is known' end as missing,
       j.fired,
       case when j.fired then j.last_step end as first_step,
       case when j.fired then j.last_step end as last_step,
       case when j.fired then
           format('not completed (no final checkpoint{}; last step {}{}); {}',
                  case when j.done_frac is not null
                       then format(', progress/done_frac {:.3g}', j.done_frac) else '' end,
                  coalesce(j.last_step::varchar, 'none'),
                  case when c.latest_name is not null
                       then format(', last checkpoint {}', c.latest_name)
                       else '' end,
                  -- which way it was found: the log, then the stale rule or the idle run
                  concat_ws(', and ',
                      case when j.ended
                           then 'its log''s last record is an exception''s traceback' end,
                      case when j.stale then
                          format('its files last changed {} before this check (as of the '
                                 || 'last ingest; the stale rule fires above {:g} minutes)',
                                 -- minutes, hours or days: words that stay the same while a
                                 -- reader looks
                                 case when j.minutes < 120
                                          then format('{:.0f} minutes', j.minutes)
                                      when j.minutes < 2880
                                          then format('{:.0f} hours', j.minutes / 60)
                                      else format('{:.0f} days', j.minutes / 1440) end,
                                 $minutes)
                      else 'nothing has changed since (the run is idle, as of the last '
                           || 'ingest)' end))
           || coalesce('; last error: ' || j.last_error, '')
       end as evidence,
       case when j.fired then
           to_json({'minutes': j.minutes, 'log_ends_in_error': j.ended,
                    'done_frac': j.done_frac, 'last_step': j.last_step,
                    'last_checkpoint': c.latest_name, 'last_error': j.last_error})::varchar
       end as facts
from (select *, stale or ended as fired from judged) as j
-- The latest checkpoint by write order, as `latest_checkpoints` (its one definition) says.
left join latest_checkpoints as c on c.run_id = j.run_id

-- name: evidence
select r.run_name, s.status, s.final_checkpoint, s.done_frac, r.last_step, r.source_updated_at,
       r.last_error, r.last_error_line
from runs as r
join run_status as s on s.run_id = r.run_id
where r.run_id = $run_id
