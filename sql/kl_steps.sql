-- KL per step: one row per run and step that logs a KL value, with the value that counts for
-- each KL family after the merge rules, and whether the step is over the threshold.
-- `kl_health` and the KL chart read this view (`runstore check`'s KL rules read `metric_kl`
-- with each rule's own threshold).
-- The families are `optim/kl_sample_train_v1` / `optim/kl_sample_train_v2` (0.6.x) and the same
-- names without `optim/` (older releases). Per family and step, the latest write of the
-- prefixed name is used when it is a number, else the latest write of the unprefixed name; a
-- string written later supersedes a number of the same name (it has no value). Only the live
-- file counts (no `metrics.jsonl.pre_resume_*` rows) and only rows with a step. The merge is
-- done once, at ingest, into the `metric_kl` table, by the statement `metric_kl` of
-- sql/statements/summaries.sql (the one home of those rules; a snapshot written before the
-- table existed runs that statement over `metrics_raw` in its place). A step is over
-- (`over_threshold`) when v1 or v2 is strictly greater than the `kl_threshold` setting (0.01 unless
-- `--param kl_threshold=...` or a store setting says otherwise); NaN is never over, +Infinity is.
-- @column run_id: run
-- @column step: training step
-- @column v1: KL v1 at this step as logged (NaN and ±Infinity kept); null when the step logs no numeric v1
-- @column v2: KL v2 at this step as logged (NaN and ±Infinity kept); null when the step logs no numeric v2
-- @column is_nan: true when v1 or v2 is NaN
-- @column is_over: true when v1 or v2 is above the threshold (NaN never is)
with threshold as (
    select value_num as t from settings where name = 'kl_threshold'
)
-- "Over" is the macro `over_threshold` (sql/statements/macros.sql), its one home: NaN never
-- is (DuckDB and Spark sort NaN above every number), +Infinity always is.
select k.run_id, k.step, k.v1, k.v2,
       coalesce(isnan(k.v1), false) or coalesce(isnan(k.v2), false) as is_nan,
       over_threshold(k.v1, '>', t) or over_threshold(k.v2, '>', t) as is_over
from metric_kl as k
cross join threshold
