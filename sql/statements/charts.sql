-- Statements behind the plotly charts (runstore.present.charts). Each answers one chart from
-- the canned views; `$runs` is the list of run_ids in scope (runstore.analysis.runs resolves
-- `--runs`), or null for every run. Rows carry `run_id`, the identity charts group by, and
-- `run_label` (see `run_labels`), what legends show.

-- name: run_config
-- The value of config key `$key` for each run in scope (null for a run that lacks it), to
-- colour runs by.
select r.run_id, r.run_label, c.value, c.value_num, c.value_str
from run_labels as r
left join config as c on c.run_id = r.run_id and c.key = $key
where ($runs is null or list_contains($runs, r.run_id))

-- name: metric_series
-- Live numeric values of the keys in the list `$keys`: one row per run, key and step, the
-- keys in the order given.
select m.run_id, m.run_label, m.key, m.step, m.value
from metrics as m
where list_contains($keys, m.key) and m.value is not null
  and ($runs is null or list_contains($runs, m.run_id))
order by m.run_label, m.run_id, list_position($keys, m.key), m.step

-- name: metric_lines
-- The rows of `metric_series` as lines: one row per run and key, its steps and values as two
-- lists of one order (what a chart draws, read as plain rows without a Python row per point).
-- Neither the lines nor the lists are sorted here (as `kl_series`, below):
-- runstore.present.charts.metrics.metric_chart orders the lines by label, run_id and the
-- key's place in `$keys`, and sorts a line whose steps are out of order.
select m.run_id, m.run_label, m.key, list(m.step) as step_list, list(m.value) as value_list
from metrics as m
where list_contains($keys, m.key) and m.value is not null
  and ($runs is null or list_contains($runs, m.run_id))
group by m.run_id, m.run_label, m.key

-- name: kl_series
-- KL per step of the runs `$runs` matches, from `metric_kl` (the KL values that count, as the
-- merge rules kept them at ingest: what `kl_steps` shows): one row per run that logs KL, its
-- steps and v1, v2 values as three lists of one order, the `kl_threshold` setting, and
-- whether the run is flagged: `over_threshold` (the one home of "over") of its largest
-- non-NaN value, which is over exactly when one of its steps is (`kl_steps.is_over` at some
-- step: what `kl_health` flags). One statement, so labels and steps come from one snapshot.
-- Neither the runs nor the lists are sorted here (a sorted list aggregate, or an ORDER BY
-- carrying the lists, costs more than the caller's sort):
-- runstore.present.charts.metrics.kl_series puts unflagged runs first, then by label, and
-- sorts a run whose steps are out of order (rows come out of the table in the order the
-- ingest wrote them, by step within each of its reads).
with per_run as (
    -- `peak`: the largest value of either family that can be over (DuckDB's max would take a
    -- NaN for the largest), in one aggregate beside the lists.
    select run_id, list(step) as steps, list(v1) as v1, list(v2) as v2,
           max(greatest(case when not isnan(v1) then v1 end,
                        case when not isnan(v2) then v2 end)) as peak
    from metric_kl
    group by run_id
),
threshold as (
    select value_num as t from settings where name = 'kl_threshold'
)
select p.run_id, r.run_label, p.steps, p.v1, p.v2, t.t as threshold,
       over_threshold(p.peak, '>', t.t) as flagged
from per_run as p
join run_labels as r on r.run_id = p.run_id
cross join threshold as t
where ($runs is null or list_contains($runs, p.run_id))

-- name: reward_series
-- reward_trends per run and step.
select t.run_id, t.run_label, t.step, t.reward, t.reward_ma10
from reward_trends as t
where ($runs is null or list_contains($runs, t.run_id))
order by t.run_label, t.run_id, t.step

-- name: reward_lines
-- The rows of `reward_series` as lines: one row per run, its steps, rewards and reward_ma10
-- as three lists in step order (nulls kept in place).
select t.run_id, t.run_label, list(t.step order by t.step) as step_list,
       list(t.reward order by t.step) as reward_list,
       list(t.reward_ma10 order by t.step) as ma10_list
from reward_trends as t
where ($runs is null or list_contains($runs, t.run_id))
group by t.run_id, t.run_label
order by t.run_label, t.run_id

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
