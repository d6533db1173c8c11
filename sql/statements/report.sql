-- Statements behind the HTML report (runstore.present.report): one per section, each over a
-- canned view. `$runs` is a GLOB over run_name, or null for every run.

-- name: summary
select * from run_summary as r where ($runs is null or r.run_name glob $runs) order by r.run_name

-- name: kl
-- Flagged runs first.
select * from kl_health as r
where ($runs is null or r.run_name glob $runs)
order by r.flagged desc, r.steps_over desc, r.run_name

-- name: spans
-- The `$top` slowest span names of each run.
select * from slowest_spans as r
where ($runs is null or r.run_name glob $runs) and r.rank <= $top
order by r.run_name, r.rank

-- name: checkpoints
select * from latest_checkpoints as r
where ($runs is null or r.run_name glob $runs)
order by r.run_name
