-- What `runstore diff` compares (runstore.analysis.diff): the runs' config leaves and their
-- code.diff. `$ids` is the list of the runs' run_ids.

-- name: config_and_code
-- The runs' config leaves (`key`, the value as JSON text, `value_num`) and each run's
-- code.diff (a row whose `key` is null), in one statement: each statement costs a process
-- its planning, and a diff of many runs would otherwise run two.
select run_id, key, value, value_num, null as code_diff from config
where list_contains($ids, run_id)
union all
select run_id, null, null, null, code_diff from runs where list_contains($ids, run_id)

-- name: code
-- Each run's code.diff as ingested (`runstore diff --code`).
select run_id, code_diff from runs where list_contains($ids, run_id)
