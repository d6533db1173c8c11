-- Transcripts: one row per message of every logtree conversation, with where it was logged
-- (run, split, iteration, header path) and, where the logtree tells which trajectory the
-- conversation belongs to (`conversations.traj_idx` known), that trajectory's total reward
-- from its rollout summary, matched on (run, split, iteration, group, trajectory).
-- @column run_id: run
-- @column run_name: run path relative to the ingest root
-- @column run_label: how the run is shown: run_name, with a run_id prefix when two runs share the name (see `run_labels`)
-- @column split: `train` or `eval/<label>`
-- @column iteration: training step of the logged batch
-- @column section: header path of the conversation in the logtree, e.g. `Group Rollout / Prompt`
-- @column group_idx: group within the batch (null when the tree does not say)
-- @column traj_idx: trajectory within the group (null when the tree does not say)
-- @column conversation_id: conversation (see `conversations`)
-- @column message_idx: position of the message in its conversation
-- @column role: system / user / assistant / tool
-- @column content: all text parts of the message joined with a newline (thinking included)
-- @column tool_calls: the message's tool calls as JSON text (null when none)
-- @column total_reward: the trajectory's `total_reward` (null when the trajectory is not known or has no rollout summary)
with trajectory as (
    -- One row per trajectory key, so that the join cannot repeat a message.
    select run_id, split, iteration, group_idx, traj_idx, max(total_reward) as total_reward
    from trajectories
    group by run_id, split, iteration, group_idx, traj_idx
)
select m.run_id,
       r.run_name,
       r.run_label,
       c.split,
       c.iteration,
       c.section,
       c.group_idx,
       c.traj_idx,
       m.conversation_id,
       m.message_idx,
       m.role,
       m.content,
       m.tool_calls,
       t.total_reward
from messages as m
join conversations as c on c.run_id = m.run_id and c.conversation_id = m.conversation_id
left join run_labels as r on r.run_id = m.run_id
left join trajectory as t
    on t.run_id = c.run_id and t.split = c.split and t.iteration = c.iteration
    and t.group_idx = c.group_idx and t.traj_idx = c.traj_idx
