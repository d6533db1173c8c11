-- Which runs a question is about: RUN resolution's one query (`resolve`), and the statements
-- the pictures (runstore.present) share: which runs a chart, the report or a trace export is
-- about: there `$runs` is the list of run_ids in scope (runstore.analysis.runs resolves
-- `--runs`), or null for every run.

-- name: matching
-- How many runs are in scope.
select count(*) as n from runs as r where ($runs is null or list_contains($runs, r.run_id))

-- name: resolve
-- Every run a pattern matches in some tier of RUN resolution (runstore.analysis.runs: the
-- tiers and their precedence), with the tiers it matches in: one row per (pattern, run).
-- `$patterns` are the patterns as given, `$paths` each one's spellings as a directory (a
-- list per pattern), `$idx` their positions, `$min_prefix` the shortest run_id prefix that
-- names a run.
with asked as (
    select unnest($patterns) as pattern, unnest($paths) as paths, unnest($idx) as i
),
tiers as (
    select a.i, r.run_id, r.run_label, r.run_path,
           r.run_id = a.pattern as is_id,
           list_contains(a.paths, r.run_path) as is_path,
           r.run_name = a.pattern or r.run_label = a.pattern as is_name,
           length(a.pattern) >= $min_prefix and starts_with(r.run_id, a.pattern) as is_id_prefix,
           r.run_name glob a.pattern as is_glob,
           starts_with(r.run_name, a.pattern) as is_name_prefix
    from asked as a
    cross join run_labels as r
)
select * from tiers
where is_id or is_path or is_name or is_id_prefix or is_glob or is_name_prefix
order by i, run_label
