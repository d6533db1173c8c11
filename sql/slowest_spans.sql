-- Where step time goes: one row per run and span name, over the live timing spans of every
-- step (`spans`: when a resumed run logs a step twice only the later record counts).
-- Two measures of a name's time, each with its share of the run's step time:
-- `total_s`/`share` add up every span's duration, as tinker's own `time/<name>:total` does, so
-- spans running at once (e.g. a batch's `policy_sample` calls) count once each and `share`
-- can pass 1; `wall_s`/`wall_share` count the wall time during which at least one span of the
-- name was open (the union of its intervals in each step), which never exceeds the step.
-- `total_s / wall_s` is how many ran at once on average. The union is computed at ingest, one
-- timing record (one step) at a time: `spans.wall_add_s` is what each span adds to its name's
-- union in its step (a sweep in start order: the part of its interval that ends after every
-- span of the name that started before it), so wall_s here is a plain sum, no sort; a store
-- not migrated yet (`runstore migrate`) has no wall_add_s and shows wall_s null.
-- Spans nest (a parent's time includes its children), so the shares of different names add up
-- to more than 1 either way; compare names at the same depth, or look at `rank`.
-- p50/p95 are exact, interpolated percentiles (`percentile_cont`); `runstore views --dialect
-- spark` writes them as Spark's exact `percentile()`, not sqlglot's default approximation.
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
-- @column run_label: how the run is shown: run_name, with a run_id prefix when two runs share the name (see `run_labels`)
-- @column name: span name
-- @column calls: number of spans with this name (over all steps)
-- @column total_s: summed duration in seconds: concurrent spans each count (tinker's `time/<name>:total`, summed over steps)
-- @column mean_s: mean duration in seconds
-- @column p50_s: median duration in seconds
-- @column p95_s: 95th percentile of the duration in seconds
-- @column max_s: longest duration in seconds
-- @column share: total_s divided by the run's summed `time/total` metric, or by the summed duration of its top-level spans (depth 0) when the run logs no `time/total`; above 1 for spans that run concurrently (e.g. `policy_sample` across a batch), whose durations add up to more than the wall time
-- @column wall_s: wall time in seconds during which at least one span of this name was open: per step the length of the union of its [wall_start_s, wall_end_s] intervals, summed over steps; at most the step's span, and equal to total_s (up to clock noise) for a name whose spans never overlap; null when no span of the name has both wall times
-- @column wall_share: wall_s divided by the same step time as share; at most 1 when `time/total` covers the step's spans
-- @column rank: 1 for the name with the largest total_s in the run, 2 for the next, ... (ties broken by name)
with per_name as (
    select run_id, name,
           count(*) as calls,
           sum(duration_s) as total_s,
           avg(duration_s) as mean_s,
           -- Both percentiles from one sort of the name's durations (two aggregates sort twice).
           percentile_cont([0.5, 0.95]) within group (order by duration_s) as percentiles,
           max(duration_s) as max_s,
           sum(wall_add_s) as wall_s
    from spans
    group by run_id, name
),
time_total as (
    select run_id, sum(value) as seconds
    from metrics
    where key = 'time/total' and not isnan(value)
    group by run_id
),
top_level as (
    select run_id, sum(duration_s) as seconds
    from spans
    where depth = 0
    group by run_id
)
select p.run_id,
       r.run_name,
       r.run_label,
       p.name,
       p.calls,
       p.total_s,
       p.mean_s,
       p.percentiles[1] as p50_s,
       p.percentiles[2] as p95_s,
       p.max_s,
       p.total_s / nullif(coalesce(t.seconds, l.seconds), 0) as share,
       p.wall_s,
       p.wall_s / nullif(coalesce(t.seconds, l.seconds), 0) as wall_share,
       row_number() over (partition by p.run_id order by p.total_s desc, p.name) as rank
from per_name as p
left join run_labels as r on r.run_id = p.run_id
left join time_total as t on t.run_id = p.run_id
left join top_level as l on l.run_id = p.run_id
