-- How each run is shown to people: its `run_label`, the one definition every view, command,
-- chart and page reads. A run's identity is `run_id`; its `run_name` (the path relative to the
-- ingest root) is for people, and two runs ingested from trees of the same layout share it.
-- The label is the run_name when no other run holds that name, else the name followed by the
-- first 8 characters of the run_id in brackets (`math/lr_4e-5 [3f2a9c01]`), which is itself a
-- RUN argument (a unique run_id prefix) and tells the runs apart in every legend and table.
-- A name that itself ends like that (` [` and 8 characters and `]`) is followed by its run's
-- too, so no plain name can equal another run's label: labels are as unique as names with
-- their run_id prefixes.
-- @column run_id: run
-- @column run_name: run path relative to the ingest root (two runs may share it)
-- @column run_label: run_name when unique, else `run_name [first 8 characters of run_id]` (also when the name ends like that)
-- @column run_path: absolute path (or URI) of the run's source directory
select run_id,
       run_name,
       case when count(*) over (partition by run_name) > 1 or run_name like '% [________]'
            then run_name || ' [' || substr(run_id, 1, 8) || ']'
            else run_name end as run_label,
       run_path
from runs
