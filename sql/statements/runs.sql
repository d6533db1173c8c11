-- Statements shared by the pictures (runstore.present): which runs a chart, the report or a
-- trace export is about. `$runs` is the list of run_ids in scope (runstore.analysis.runs
-- resolves `--runs`), or null for every run.

-- name: matching
-- How many runs are in scope.
select count(*) as n from runs as r where ($runs is null or list_contains($runs, r.run_id))
