-- Statements behind the plotly charts (runstore.present.charts). Each answers one chart from
-- the canned views; `$runs` is a GLOB over run_name, or null for every run.

-- name: run_config
-- The value of config key `$key` for each run in scope (null for a run that lacks it), to
-- colour runs by.
select r.run_name, c.value, c.value_num, c.value_str
from runs as r
left join config as c on c.run_id = r.run_id and c.key = $key
where ($runs is null or r.run_name glob $runs)

-- name: metric_series
-- Live numeric values of the keys in the list `$keys`: one row per run, key and step, the
-- keys in the order given.
select r.run_name, m.key, m.step, m.value
from metrics as m
join runs as r on r.run_id = m.run_id
where list_contains($keys, m.key) and m.value is not null
  and ($runs is null or r.run_name glob $runs)
order by r.run_name, list_position($keys, m.key), m.step

-- name: kl_series
-- KL per step of the runs `$runs` matches, from `metric_kl` (the KL values that count, as the
-- merge rules kept them at ingest: what `kl_steps` shows): one row per run that logs KL, its
-- steps and v1, v2 values as three lists of one order, and the `kl_threshold` setting. One
-- statement, so names and steps come from one snapshot. Neither the runs nor the lists are
-- sorted here (a sorted list aggregate, or an ORDER BY carrying the lists, costs more than
-- the caller's sort): runstore.present.charts.metrics.kl_series flags a run with a value
-- above the threshold (`kl_steps.is_over` at some step, what `kl_health` flags), puts
-- unflagged runs first, then by name, and sorts a run whose steps are out of order (rows come
-- out of the table in the order the ingest wrote them, by step within each of its reads).
with per_run as (
    select run_id, list(step) as steps, list(v1) as v1, list(v2) as v2
    from metric_kl
    group by run_id
)
select r.run_name, p.steps, p.v1, p.v2,
       (select value_num from settings where name = 'kl_threshold') as threshold
from per_run as p
join runs as r on r.run_id = p.run_id
where ($runs is null or r.run_name glob $runs)

-- name: reward_series
-- reward_trends per run and step.
select r.run_name, t.step, t.reward, t.reward_ma10
from reward_trends as t
join runs as r on r.run_id = t.run_id
where ($runs is null or r.run_name glob $runs)
order by r.run_name, t.step

-- name: span_steps
-- The steps of run `$run` (a run_id) that have timing spans.
select distinct step from spans where run_id = $run order by step

-- name: step_spans
-- The spans of step `$step` of run `$run`, in completion order.
select name, wall_start_s, wall_end_s, duration_s, depth, parent, span_idx
from spans
where run_id = $run and step = $step
order by span_idx

-- name: span_shares
-- Per step and top-level span name of run `$run`: seconds and share of the step's time. Step
-- time is the step's `time/total` metric, or the summed duration of its top-level spans when
-- the step logs none (the denominator slowest_spans uses, per step).
with top as (
    select step, name, sum(duration_s) as seconds from spans
    where run_id = $run and depth = 0 group by step, name
),
total as (
    select step, value from metrics
    where run_id = $run and key = 'time/total' and not isnan(value)
),
top_sum as (select step, sum(seconds) as seconds from top group by step)
select t.step, t.name, t.seconds, coalesce(tt.value, ts.seconds) as step_seconds,
       t.seconds / nullif(coalesce(tt.value, ts.seconds), 0) as share
from top as t
left join total as tt on tt.step = t.step
left join top_sum as ts on ts.step = t.step
order by t.step, t.name
