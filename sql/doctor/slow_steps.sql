-- slow_steps: step time climbed well above its running median, and which span grew.
-- This is `runstore check`'s rise rule, `rise(time/total, smooth) > threshold`
-- (docs/checks.md, trend rules): the debiased EMA of the run's live `time/total` against the
-- median of its earlier raw values, once 10 earlier values exist. The rule is evaluated by
-- runstore.health.trends (its one definition), and its fired rows reach this statement as the
-- bound lists `$rise_*`. Fires for a run the rule fires for; first and last step are the
-- rule's first and last step over. The evidence names the top-level span (timing_spans.jsonl,
-- depth 0) whose mean duration per step grew the most from the steps before the first step to
-- the steps from it on.
-- @severity warning
-- @param threshold = 2.0: the smoothed step time above this multiple of its running median is slow
-- @param smooth = trend_weight: the EMA weight of the rise rule (0.9 unless given)
-- @trend rise time/total
-- @chart time/total
-- @try Find what grew in the span named (`runstore plot spans RUN` or the Timing page): slower sampling means longer responses (length_at_limit) or a busier service; a growing save or eval span means checkpoints or evals got heavier.

-- name: finding
with fired as (
    select unnest($rise_run_id::varchar[]) as run_id,
           unnest($rise_first_step::bigint[]) as first_step,
           unnest($rise_last_step::bigint[]) as last_step,
           unnest($rise_peak::double[]) as peak,
           unnest($rise_latest::double[]) as latest
),
times as (
    select run_id, count(*) as n
    from metrics
    where key = 'time/total' and value is not null and isfinite(value)
    group by run_id
),
span_means as (
    -- Mean duration per step of each top-level span, before the first step and from it on.
    select f.run_id, s.name,
           sum(s.duration_s) filter (where s.step < f.first_step)
               / nullif(count(distinct s.step) filter (where s.step < f.first_step), 0) as before,
           sum(s.duration_s) filter (where s.step >= f.first_step)
               / nullif(count(distinct s.step) filter (where s.step >= f.first_step), 0) as after
    from fired as f
    join spans as s on s.run_id = f.run_id
    where s.depth = 0
    group by f.run_id, s.name
),
grown as (
    select run_id, arg_max(name, [after - before]) as span,
           arg_max(before, [after - before]) as before, arg_max(after, [after - before]) as after
    from span_means
    where before is not null and after is not null
    group by run_id
)
select r.run_id,
       case when t.run_id is null then 'logs no time/total'
            when t.n < 11 then format('only {} steps of time/total (the running median needs 10 '
                                      || 'earlier ones)', t.n) end as missing,
       f.run_id is not null as fired,
       f.first_step, f.last_step,
       case when f.run_id is not null then
           format('the smoothed time/total (EMA weight {:g}) reached {:.3g}x its running median '
                  || '(from step {} on; {:.3g}x at the last step; the rise rule fires above {:g})',
                  $smooth, f.peak, f.first_step, f.latest, $threshold)
           || case when g.span is not null
                   then format('; span {} grew most: {:.3g} s a step before step {}, {:.3g} s from it on',
                               g.span, g.before, f.first_step, g.after)
                   else '' end
       end as evidence,
       case when f.run_id is not null then
           to_json({'peak': f.peak, 'latest': f.latest, 'span': g.span,
                    'span_before': g.before, 'span_after': g.after})::varchar
       end as facts
from runs as r
left join times as t on t.run_id = r.run_id
left join fired as f on f.run_id = r.run_id
left join grown as g on g.run_id = r.run_id

-- name: evidence
-- The step time the rule read (`time/total`) and the top-level spans, from 10 steps before
-- (counted as HUGEINT: a first step near the smallest BIGINT has no BIGINT 10 before it).
select step, key as name, value as seconds
from metrics
where run_id = $run_id and key = 'time/total'
  and step between cast($first_step as hugeint) - 10 and $last_step
union all
select step, name, duration_s as seconds
from spans
where run_id = $run_id and depth = 0
  and step between cast($first_step as hugeint) - 10 and $last_step
order by step, name
