-- Statements behind the HTML report (runstore.present.report): one per section, each over a
-- canned view. `$runs` is the list of run_ids in scope (runstore.analysis.runs resolves
-- `--runs`), or null for every run; runs are shown and ordered by `run_label`.

-- name: summary
select * from run_summary as r where ($runs is null or list_contains($runs, r.run_id)) order by r.run_label

-- name: kl
-- Flagged runs first.
select * from kl_health as r
where ($runs is null or list_contains($runs, r.run_id))
order by r.flagged desc, r.steps_over desc, r.run_name

-- name: spans
-- The `$top` slowest span names of each run.
select * from slowest_spans as r
where ($runs is null or list_contains($runs, r.run_id)) and r.rank <= $top
order by r.run_label, r.rank

-- name: checkpoints
select * from latest_checkpoints as r
where ($runs is null or list_contains($runs, r.run_id))
order by r.run_label
