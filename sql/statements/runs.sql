-- Statements shared by the pictures (runstore.present): which runs a chart, the report or a
-- trace export is about. `$runs` is a GLOB over run_name (`*` matches `/` too), or null for
-- every run; `$run` a run_name or a GLOB that should match one run.

-- name: matching
-- How many runs `$runs` matches.
select count(*) as n from runs as r where ($runs is null or r.run_name glob $runs)

-- name: named
-- The run named exactly `$run`.
select run_id, run_name from runs where run_name = $run

-- name: globbed
-- The runs the GLOB `$run` matches, by name.
select run_id, run_name from runs where run_name glob $run order by run_name
