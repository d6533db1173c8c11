-- KL health: one row per run that logs any KL metric, with how high, when and how long its
-- KL between the sampling and the training policy went above the threshold. Built on
-- `kl_steps`, which holds the rules below (one row per run and KL step).
-- The KL families are `optim/kl_sample_train_v1` / `optim/kl_sample_train_v2` (0.6.x) and the
-- same names without `optim/` (older releases); when a step logs both spellings the prefixed
-- one is used. Only live values count (the latest write of each step, no
-- `metrics.jsonl.pre_resume_*` rows), so a spike that a resume overwrote does not flag.
-- A step is over when v1 or v2 is strictly greater than the `kl_threshold` setting (0.01
-- unless `--param kl_threshold=...` or a store setting says otherwise). NaN never counts as
-- over; +Infinity does.
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
-- @column run_label: how the run is shown: run_name, with a run_id prefix when two runs share the name (see `run_labels`)
-- @column max_kl_v1: largest v1 value, NaN ignored (+Infinity kept); null when v1 is never logged or only NaN
-- @column max_kl_v2: largest v2 value, NaN ignored (+Infinity kept); null when v2 is never logged or only NaN
-- @column last_kl_v1: v1 at the last step that logs it, as logged (NaN included)
-- @column last_kl_v2: v2 at the last step that logs it, as logged (NaN included)
-- @column steps_over: number of steps where v1 or v2 is above the threshold
-- @column first_step_over: first step over the threshold (null when none)
-- @column last_step_over: last step over the threshold (null when none)
-- @column longest_streak_over: most consecutive KL-logging steps all over the threshold (0 when none); a logged step that is not over (a NaN one included) ends a streak, a step that logs no KL does not
-- @column nan_steps: number of steps where v1 or v2 is NaN
-- @column flagged: true when any step is over the threshold
with islands as (
    -- Gaps and islands: the number of not-over steps so far is the same for every step of a
    -- streak of over-steps.
    select run_id, step, v1, v2, is_nan, is_over,
           count(case when not is_over then 1 end)
               over (partition by run_id order by step
                     rows between unbounded preceding and current row) as island
    from kl_steps
),
steps as (
    -- The length of each over-step's streak; 0 on not-over steps, which share one partition
    -- per run (a partition per island would be one per not-over step, and slow).
    select run_id, step, v1, v2, is_nan, is_over,
           count(case when is_over then 1 end)
               over (partition by run_id, case when is_over then island end) as streak
    from islands
)
-- Aggregated per run before joining `runs`: the join then sees one row per run.
select s.run_id,
       r.run_name,
       r.run_label,
       s.max_kl_v1, s.max_kl_v2, s.last_kl_v1, s.last_kl_v2, s.steps_over, s.first_step_over,
       s.last_step_over, s.longest_streak_over, s.nan_steps, s.flagged
from (
    select run_id,
           max(case when not isnan(v1) then v1 end) as max_kl_v1,
           max(case when not isnan(v2) then v2 end) as max_kl_v2,
           max_by(v1, case when v1 is not null then step end) as last_kl_v1,
           max_by(v2, case when v2 is not null then step end) as last_kl_v2,
           count(case when is_over then 1 end) as steps_over,
           min(case when is_over then step end) as first_step_over,
           max(case when is_over then step end) as last_step_over,
           max(streak) as longest_streak_over,
           count(case when is_nan then 1 end) as nan_steps,
           count(case when is_over then 1 end) > 0 as flagged
    from steps
    group by run_id
) as s
left join run_labels as r on r.run_id = s.run_id
