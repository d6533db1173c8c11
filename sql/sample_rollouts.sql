-- Each sampled sequence beside the rollout it belongs to: one row per row of `samples`, with
-- the matching trajectory of the rollout summaries (`trajectories`) where there is one. They
-- match on (run, split, iteration, group_idx, traj_idx); the capture's eval split (`test`)
-- also matches the summaries' `eval/test`. The capture's coordinates are what user code set
-- in its scope, so a sequence may match no trajectory (its trajectory columns are null). A
-- multi-turn trajectory has one sequence per turn.
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
-- @column run_attempt: scope `run_attempt`
-- @column split: scope `split`
-- @column iteration: scope `iteration`
-- @column group_idx: scope `group_idx`
-- @column traj_idx: scope `traj_idx`
-- @column sample_idx: the sequence's position in its call's `samples`
-- @column seq: line of the call in its capture file (completion order)
-- @column created_at: call time
-- @column prompt_len: prompt tokens
-- @column sampled_len: sampled tokens
-- @column mean_logprob: the sequence's mean logprob per sampled token
-- @column stop_reason: why sampling stopped
-- @column sampling_client_step: the trajectory's `sampling_client_step` (policy version of the rollout)
-- @column staleness: iteration minus sampling_client_step (how many updates behind the sampler was)
-- @column total_reward: the trajectory's total reward
-- @column rollout_split: the trajectory's split (`train`, `eval/<label>`)
select s.run_id,
       r.run_name,
       s.run_attempt,
       s.split,
       s.iteration,
       s.group_idx,
       s.traj_idx,
       s.sample_idx,
       s.seq,
       s.created_at,
       s.prompt_len,
       s.sampled_len,
       s.logprob_sum / nullif(s.n_logprobs, 0) as mean_logprob,
       s.stop_reason,
       t.sampling_client_step,
       t.iteration - t.sampling_client_step as staleness,
       t.total_reward,
       t.split as rollout_split
from samples as s
left join runs as r on r.run_id = s.run_id
left join trajectories as t
  on t.run_id = s.run_id and t.iteration = s.iteration and t.group_idx = s.group_idx
 and t.traj_idx = s.traj_idx and (t.split = s.split or t.split = 'eval/' || s.split)
