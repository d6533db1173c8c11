-- Statements behind `runstore trace` (runstore.present.trace_export): one run's trace
-- slices and timing spans. `$run` is a run_id.

-- name: slice_count
select count(*) as n from trace_slices where run_id = $run

-- name: slices
-- Every trace slice of the run.
select name, start_us, dur_us, pid, track, thread, args, depth, segment
from trace_slices
where run_id = $run

-- name: segment_slices
-- The slices of process session `$segment`.
select name, start_us, dur_us, pid, track, thread, args, depth, segment
from trace_slices
where run_id = $run and segment = $segment

-- name: segments
select distinct segment from trace_slices where run_id = $run order by 1

-- name: step_tagged_slices
-- Slices whose args say `step = $step`. try_cast: `step` in args is whatever the trainer
-- wrote (an int, a string, a float).
select name, start_us, dur_us, pid, track, thread, args, depth, segment
from trace_slices
where run_id = $run and try_cast(json_extract_string(args, '$.step') as double) = $step

-- name: window_slices
-- Slices of segment `$seg` starting between `$lo` and `$hi` µs.
select name, start_us, dur_us, pid, track, thread, args, depth, segment
from trace_slices
where run_id = $run and segment = $seg and start_us >= $lo and start_us <= $hi

-- name: step_span_count
select count(*) as n from spans where run_id = $run and step = $step

-- name: step_spans
-- The timing spans of step `$step` that have a shape to find the step by in the trace's
-- clock: a place on a timeline (the macro `on_timeline`) and a finite duration (a NaN would
-- make the anchor's duration or the window's end NaN, and nothing would match); each with
-- the step's wall time over them (`step_wall_s`).
select name, wall_start_s, wall_end_s, duration_s, step_wall_s(wall_end_s) over () as step_wall_s
from spans
where run_id = $run and step = $step and on_timeline(wall_start_s, wall_end_s)
  and isfinite(duration_s)

-- name: anchor_candidates
-- Slices named `$name` whose duration lies between `$lo` and `$hi` µs.
select segment, start_us from trace_slices
where run_id = $run and name = $name and dur_us between $lo and $hi

-- name: slices_between
-- Slices of segment `$seg` starting between `$lo` and `$hi` µs (to score a candidate).
select name, start_us, dur_us from trace_slices
where run_id = $run and segment = $seg and start_us between $lo and $hi

-- name: run_spans
-- The run's timing spans (of step `$step`, or every step when null), in time order (ties in
-- the order the record lists them), each with whether it has a place on a timeline
-- (`placed`, the macro `on_timeline`) and its step's wall time (`step_wall_s`) over the spans
-- that have one.
select step, name, duration_s, wall_start_s, wall_end_s, depth, parent,
       on_timeline(wall_start_s, wall_end_s) as placed,
       step_wall_s(wall_end_s) filter (where on_timeline(wall_start_s, wall_end_s))
           over (partition by step) as step_wall_s
from spans
where run_id = $run and ($step is null or step = $step)
order by step, wall_start_s, wall_end_s desc, depth, span_idx

-- name: span_step_range
select min(step) as lo, max(step) as hi, count(distinct step) as n from spans where run_id = $run
