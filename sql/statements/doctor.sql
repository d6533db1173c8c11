-- Statements behind `runstore doctor` (runstore.health.doctor): the live metric values its
-- findings read (each finding's statement reads them as `metrics`), and the series of its
-- trend rules. The findings themselves are the files of sql/doctor/, one statement each.

-- name: unplain_runs
-- The runs whose live metrics rows are not simply their live files' rows: a live metrics file
-- that logs a key twice at one step (a pre-0.6 resume appends the replayed steps again), more
-- than one live metrics file, or a read whose steps may repeat earlier ones. Read from the
-- per-key summary the ingest keeps (`metric_keys`) by the macro `plain_writes`, over all the
-- run's keys (the test the `metrics` view makes per key). Every other run's
-- rows with a step in its live file are exactly its `metrics` rows.
select run_id
from metric_keys
where not pre_resume
group by run_id
having not plain_writes(steps_exact, source_id, n_points, n_numbers, n_strings, n_stepless)

-- name: live_metrics
-- The `metrics` view's rows for the keys in `$live_keys`: for every run but those in
-- `$live_unplain`
-- (statement `unplain_runs`), its live file's rows with a step (`live_write`), which are
-- those rows already (one write per step and key) and cost a filtered scan instead of the
-- view's window; for the runs in `$live_unplain`, the view's rule (`write_rank`), as
-- `run_summary` reads rewards. (The doctor names this relation `metrics` for its findings, so it cannot
-- read the view itself.) tests/health/test_doctor.py holds it equal to the view.
select run_id, step, key, value, value_str, seq
from metrics_raw
where list_contains($live_keys, key) and live_write(step, pre_resume)
  and not list_contains($live_unplain, run_id)
union all
select run_id, step, key, value, value_str, seq
from (select run_id, step, key, value, value_str, seq,
             write_rank(run_id, step, key, seq) as rn
      from metrics_raw
      where list_contains($live_keys, key) and live_write(step, pre_resume)
        and list_contains($live_unplain, run_id)) as ranked
where rn = 1

-- name: series
-- The live numeric values of metric families for the trend rules: `$spellings` lists every
-- family's stored spellings, `$family` the family of each and `$pref` its rank in it (0 first,
-- as runstore.query.keys.family orders them). Per run, family and step the first spelling
-- with a number, as runstore.health.trends reads it; one row per run and family with two
-- lists (in no particular order: the rules sort), so that few rows leave DuckDB. `metrics`
-- here is `live_metrics` (runstore.health.doctor.diagnose names it so).
with spellings as (
    select unnest($spellings::varchar[]) as key, unnest($family::bigint[]) as family,
           unnest($pref::bigint[]) as pref
)
select run_id, family, list(step) as steps, list(value) as "values"
from (select m.run_id, s.family, m.step, arg_min(m.value, s.pref) as value
      from metrics as m
      join spellings as s on s.key = m.key
      where m.value is not null
      group by m.run_id, s.family, m.step)
group by run_id, family
