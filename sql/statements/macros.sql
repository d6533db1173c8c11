-- DuckDB macros: the rules that SQL and Python share, each defined here and nowhere else.
-- Every query connection creates them before any view (runstore.query.macros); for other
-- engines (`runstore views --dialect`, Spark) each call is replaced by the macro's body; and
-- Python evaluates them here over values it already holds (a chart's points), so it never
-- restates one.

-- name: over_threshold
-- Whether `value` is over `threshold` in the direction of `op` ('>', '>=', '<' or '<='): the
-- one home of "over the threshold", which `kl_steps`, `run_summary`, `runstore check`, the KL
-- chart, the web UI and the doctor (`kl_spike`, `reward_collapse`) read. NaN is never over, for any op: DuckDB and Spark sort NaN above
-- every number, so `NaN > 0.01` would be true there, and NaN is set aside before comparing.
-- +Infinity is above every number and -Infinity below. A null value is not over.
create macro over_threshold(value, op, threshold) as
    coalesce(not isnan(value) and case op when '>' then value > threshold
                                          when '>=' then value >= threshold
                                          when '<' then value < threshold
                                          when '<=' then value <= threshold end,
             false)

-- name: plain_writes
-- An aggregate over rows of the per-key summary the ingest keeps (`metric_keys`): whether the
-- live writes the rows describe are their live rows as they are, with no latest-write rule to
-- apply: one live file (its smallest and largest `source_id` agree), each read's steps after
-- the ones before (`steps_exact`), and as many stepped writes as steps (every row holds a
-- number or a string: nulls are not stored). The one home of that test: the `metrics` view
-- merges the (run, key) pairs it fails for, `last_steps` reads only a plain pair's last rows,
-- `run_summary` reads a plain key's largest value from the summary, and the doctor reads a
-- plain run's rows without the merge. Grouped by run and key it speaks of one key's writes;
-- grouped by run, of all the run's keys. An unknown file (a null `source_id`) is not plain:
-- the merge is always right, only slower.
create macro plain_writes(steps_exact, source_id, n_points, n_numbers, n_strings, n_stepless) as
    coalesce(bool_and(steps_exact and source_id is not null) and min(source_id) = max(source_id)
             and sum(n_numbers + n_strings - n_stepless) = sum(n_points),
             false)

-- name: live_write
-- Whether a `metrics_raw` row can be a live point: it was logged at a step, in the run's live
-- `metrics.jsonl` (not a `metrics.jsonl.pre_resume_*` copy a resume set aside; a null
-- `pre_resume`, from a Parquet file written before the column existed, is the live file).
-- Step-less summary rows are no point. Of such rows, the live one of each (run, step, key) is
-- the latest write (`write_rank`). The `metrics` view, `last_steps`, `run_summary`, the
-- doctor's live rows and `runstore check` read rows with it.
create macro live_write(step, pre_resume) as
    step is not null and not coalesce(pre_resume, false)

-- name: write_rank
-- The latest-write rule: among the writes of one (run, step, key), 1 for the one written last
-- (the largest `seq`: its line in metrics.jsonl), the live one; the others are superseded
-- (a resumed run logs some steps again). A window expression: select it, keep rank 1. The
-- `metrics` view ranks the (run, key) pairs whose writes need it (`plain_writes` fails);
-- `last_steps` and `run_summary` rank the rows they read.
create macro write_rank(run_id, step, key, seq) as
    row_number() over (partition by run_id, step, key order by seq desc)

-- name: number_text
-- `value` as text for people: `format(spec, value)` (`spec` one number's format, e.g.
-- '{:.3g}') for a finite number, and NaN, +Infinity and -Infinity as the run files and every
-- runstore text spell them (`NaN`, `Infinity`, `-Infinity`: runstore.numbers.nonfinite_name),
-- never DuckDB's `nan` and `inf`. A null value is null. The doctor's evidence writes every
-- number that may be non-finite through it (a KL peak of +Infinity, a t statistic).
create macro number_text(value, spec) as
    case when isnan(value) then 'NaN'
         when isinf(value) then case when value > 0 then 'Infinity' else '-Infinity' end
         else format(spec, value) end

-- name: recent_steps
-- How many logged steps a run's recent level spans, the one home of the number (10):
-- `reward_trends`' moving average (`reward_ma10`) averages this many, and `last_steps` keeps
-- each run and key's last this many, from which `run_summary` takes the same average at a
-- run's last reward step.
create macro recent_steps() as 10

-- name: step_wall_s
-- An aggregate over one step's timing spans: the step's wall time, the latest end of its spans
-- (each span's `wall_end_s` counts from the step's start). The one home of that measure:
-- statements `browse.step_times`, `trace.run_spans` and `trace.step_spans` (the trace
-- export's step slices and step windows) and the web UI's timing comparison read it.
create macro step_wall_s(wall_end_s) as max(wall_end_s)

-- name: on_timeline
-- Whether a timing span has a place on a timeline: finite `wall_start_s` and `wall_end_s` (a
-- NaN or missing one would give its slice no start, or make its step's end depend on the
-- order of its spans). The one home of that test: `runstore trace` lays out only these spans
-- (statements `trace.run_spans` and `trace.step_spans`).
create macro on_timeline(wall_start_s, wall_end_s) as
    coalesce(isfinite(wall_start_s) and isfinite(wall_end_s), false)

-- name: running_until
-- Until when a run whose files last changed at `updated_at` is `running` (see `run_status_at`):
-- 120 s after that change. The ingest also keeps the earliest such time of the runs it saw
-- running: until then a re-ingest of unchanged files can change no run's status.
create macro running_until(updated_at) as updated_at + interval 120 second

-- name: run_status_at
-- A run's status as of `as_of`, the one home of the rule: `missing` when its directory is gone;
-- `completed` once it wrote its final checkpoint (`final_checkpoint`) or logged
-- `progress/done_frac` >= 1 (`done_frac`, by `over_threshold`), whatever its files'
-- modification times (a copied tree has fresh ones); else `running` until `running_until(updated_at)` (`updated_at`: the
-- newest change the ingest saw in its files); else `idle` (stopped, crashed, or waiting). The
-- view `run_status` applies it as of the query, the ingest as of the ingest (`runs.status`).
create macro run_status_at(missing, final_checkpoint, done_frac, updated_at, as_of) as
    case when missing then 'missing'
         when final_checkpoint or over_threshold(done_frac, '>=', 1) then 'completed'
         when as_of < running_until(updated_at) then 'running'
         else 'idle' end
