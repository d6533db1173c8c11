-- parse_errors: a large share of the policy's responses fail to parse, to the end of the run.
-- Three failure shares, each a series of the run's live finite values: 1 - `env/all/format`
-- (the share of well-formed responses; `env/all/format_parse`, the older name, for a run that
-- logs no `env/all/format`), `env/all/stop/parse_error` (episodes ended by a parse error) and
-- `env/all/parse_error_masked` (turns masked out of training for one). A share with at least
-- `window` values is over when its mean over the last `window` steps (the steps after its
-- last step minus `window`) is above `threshold`; the finding fires with the share over
-- whose mean is largest. First step: where that share's stretch of values above `threshold`
-- running into those last steps starts (the step after its last value at or below it before
-- them; its first value's step when there is none); last step: its last value's step. The
-- evidence adds its mean before the first step and the tool replies in the logged transcripts
-- of those steps that are errors.
-- @severity warning
-- @param threshold = 0.3: the share of responses failing to parse that is too many
-- @param window = 10: the mean is taken over the run's last `window` steps
-- @chart env/all/format, env/all/format_parse, env/all/stop/parse_error, env/all/parse_error_masked
-- @try Check the rollout summaries: are responses being parsed correctly? (the logging guide); compare the transcripts of these steps with the format the renderer and the grader expect.

-- name: finding
with spelled as (
    -- The run's name for the format share: `env/all/format` when it logs it.
    select run_id,
           case when bool_or(key = 'env/all/format') then 'env/all/format'
                else 'env/all/format_parse' end as format_key
    from metric_keys
    where key in ('env/all/format', 'env/all/format_parse') and not pre_resume
      and n_step_numbers > 0
    group by run_id
),
series as (
    select m.run_id, m.step,
           case when m.key = 'env/all/stop/parse_error' then m.key
                when m.key = 'env/all/parse_error_masked' then m.key
                else '1 - ' || m.key end as share,
           case when m.key in ('env/all/format', 'env/all/format_parse') then 1 - m.value
                else m.value end as q
    from metrics as m
    left join spelled as s on s.run_id = m.run_id
    where m.key in ('env/all/format', 'env/all/format_parse', 'env/all/stop/parse_error',
                    'env/all/parse_error_masked')
      and m.value is not null and isfinite(m.value)
      and (m.key not in ('env/all/format', 'env/all/format_parse') or m.key = s.format_key)
),
ends as (
    select run_id, share, count(*) as n, max(step) as last_step
    from series
    group by run_id, share
),
shares as (
    select s.run_id, s.share, any_value(e.n) as n, any_value(e.last_step) as last_step,
           avg(s.q) filter (where s.step > e.last_step - $window::hugeint) as recent,
           max(s.step) filter (where s.step <= e.last_step - $window::hugeint and not s.q > $threshold)
               as last_ok
    from series as s
    join ends as e on e.run_id = s.run_id and e.share = s.share
    group by s.run_id, s.share
),
worst as (
    -- The share over the threshold with the largest recent mean (the first by name of equal ones).
    select run_id, first(share order by recent desc, share) as share, max(recent) as recent
    from shares
    where n >= $window and recent > $threshold
    group by run_id
),
found as (
    select w.run_id, w.share, w.recent, any_value(h.last_step) as last_step,
           any_value(h.last_ok) as last_ok,
           min(s.step) filter (where h.last_ok is null or s.step > h.last_ok) as first_step,
           avg(s.q) filter (where s.step <= h.last_ok) as before
    from worst as w
    join shares as h on h.run_id = w.run_id and h.share = w.share
    join series as s on s.run_id = w.run_id and s.share = w.share
    group by w.run_id, w.share, w.recent
),
tools as (
    -- Tool replies in the logged transcripts of the finding's steps, and the errors among them.
    select f.run_id, count(*) as n_tool,
           count(*) filter (where m.content ilike 'error%') as n_error
    from found as f
    join conversations as c
      on c.run_id = f.run_id and c.split = 'train'
     and c.iteration between f.first_step and f.last_step
    join messages as m on m.run_id = c.run_id and m.conversation_id = c.conversation_id
    where m.role = 'tool'
    group by f.run_id
),
logged as (
    select run_id, max(n) as n from ends group by run_id
)
select r.run_id,
       case when l.run_id is null
            then 'logs no env/all/format, env/all/stop/parse_error or env/all/parse_error_masked'
            when l.n < $window then format('only {} steps log a parse share (fewer than {})',
                                           l.n, $window) end as missing,
       f.run_id is not null as fired,
       f.first_step, f.last_step,
       case when f.run_id is not null then
           format('{:.0f}% of responses failed to parse over the last {} steps ({} averaged '
                  || '{:.3g}), above {:g} from step {} on',
                  100 * f.recent, $window, f.share, f.recent, $threshold, f.first_step)
           || case when f.before is not null then format(' ({:.3g} before)', f.before) else '' end
           || case when t.n_tool > 0
                   then format('; {} of {} tool replies in the transcripts of those steps are errors',
                               t.n_error, t.n_tool)
                   else '' end
       end as evidence,
       case when f.run_id is not null then
           to_json({'share': f.share, 'recent': f.recent, 'before': f.before,
                    'tool_replies': t.n_tool, 'tool_errors': t.n_error})::varchar
       end as facts
from runs as r
left join logged as l on l.run_id = r.run_id
left join found as f on f.run_id = r.run_id
left join tools as t on t.run_id = r.run_id

-- name: evidence
select step, key, value
from metrics
where run_id = $run_id and step between $first_step and $last_step
  and key in ('env/all/format', 'env/all/format_parse', 'env/all/stop/parse_error',
              'env/all/parse_error_masked')
order by step, key
