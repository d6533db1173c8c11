-- Statements behind `Store`'s reading of one run in detail (runstore/store/browsing.py: the
-- agents' tools and anyone who wants a run's rollouts, transcripts, spans, config or
-- checkpoints as frames). `$run` is one run_id (runstore.analysis.runs resolved the RUN the
-- caller gave); `$runs` a list of run_ids or null for every run. Pages are `$limit` rows from
-- `$offset`, and a paged statement also says how many rows there are in all (`n_total`,
-- counted before the page is cut).

-- name: run_config
-- The run's flattened config: one row per leaf (dotted key, JSON text value), by key.
select key, value
from config
where run_id = $run
order by key

-- name: run_checkpoints
-- The run's checkpoint records, newest first (by write order).
select name, batch, epoch, final, rolling, state_path, sampler_path, seq
from checkpoints
where run_id = $run
order by seq desc

-- name: rollout_index
-- What was logged of the run's rollouts, per split and iteration: trajectories (with their
-- mean total reward, NaN left out) and logtree conversations.
with t as (
    select split, iteration, count(*) as n_trajectories,
           avg(total_reward) filter (where not isnan(total_reward)) as mean_reward,
           min(total_reward) filter (where not isnan(total_reward)) as min_reward,
           max(total_reward) filter (where not isnan(total_reward)) as max_reward
    from trajectories
    where run_id = $run
    group by split, iteration
),
c as (
    select split, iteration, count(*) as n_conversations
    from conversations
    where run_id = $run
    group by split, iteration
)
select coalesce(t.split, c.split) as split, coalesce(t.iteration, c.iteration) as iteration,
       coalesce(t.n_trajectories, 0) as n_trajectories, t.mean_reward, t.min_reward,
       t.max_reward, coalesce(c.n_conversations, 0) as n_conversations
from t
full outer join c on c.split = t.split and c.iteration = t.iteration
order by split, iteration

-- name: trajectories
-- One page of the trajectories of the run at `$split`, `$iteration` (a null `$limit`: all
-- of them from `$offset`): lowest total reward
-- first, or highest first when `$highest` (ties by group, then trajectory; NaN and null
-- rewards last either way), with how many conversations the logtree ties to each
-- (`n_conversations`: to the trajectory itself, else to its group, `conversations_of`).
with conv as (
    select group_idx, traj_idx, count(*) as n
    from conversations
    where run_id = $run and split = $split and iteration = $iteration
    group by group_idx, traj_idx
),
ranked as (
    select t.group_idx, t.traj_idx, t.total_reward, t.final_reward, t.n_steps,
           t.final_ob_len, t.tags, t.sampling_client_step, t.metrics,
           coalesce(exact.n, grp.n, 0) as n_conversations,
           case when exact.n is not null then 'trajectory'
                when grp.n is not null then 'group' end as conversations_of,
           count(*) over () as n_total
    from trajectories as t
    left join conv as exact on exact.group_idx = t.group_idx and exact.traj_idx = t.traj_idx
    left join conv as grp on grp.group_idx = t.group_idx and grp.traj_idx is null
    where t.run_id = $run and t.split = $split and t.iteration = $iteration
)
select *
from ranked
order by isnan(total_reward) nulls last,
         case when $highest then -total_reward else total_reward end nulls last,
         group_idx, traj_idx
limit $limit offset $offset

-- name: messages
-- The messages of the run's conversations at `$split`, `$iteration` in the groups `$groups`,
-- each message's text cut to its first `$chars` characters (`content_chars` is its whole
-- length), by conversation then position.
select c.conversation_id, c.section, c.group_idx, c.traj_idx, m.message_idx, m.role, m.name,
       left(coalesce(m.content, ''), $chars) as content,
       length(coalesce(m.content, '')) as content_chars, m.tool_calls
from messages as m
join conversations as c on c.run_id = m.run_id and c.conversation_id = m.conversation_id
where c.run_id = $run and c.split = $split and c.iteration = $iteration
  and list_contains($groups, c.group_idx)
order by c.group_idx, c.traj_idx nulls first, c.conversation_id, m.message_idx

-- name: search
-- One page of the messages (the `transcripts` view) whose text contains `$text`, in any case,
-- of the runs `$runs` (null: every run), of role `$role` ('' for any): where they were logged
-- and `$context` characters either side of the first match (`snippet`, with `…` where the
-- text goes on), by run, split, iteration, conversation and position.
with found as (
    select run_id, run_label, split, iteration, group_idx, traj_idx, conversation_id,
           message_idx, role, total_reward, content,
           instr(lower(content), lower($text)) as hit_at
    from transcripts
    where contains(lower(content), lower($text))
      and ($role = '' or role = $role)
      and ($runs is null or list_contains($runs, run_id))
)
select run_id, run_label, split, iteration, group_idx, traj_idx, conversation_id,
       message_idx, role, total_reward,
       case when hit_at > $context + 1 then '…' else '' end
       || substring(content, greatest(hit_at - $context, 1),
                    least(hit_at - 1, $context) + length($text) + $context)
       || case when hit_at + length($text) + $context <= length(content) then '…' else '' end
           as snippet,
       count(*) over () as n_total
from found
order by run_label, run_id, split, iteration, conversation_id, message_idx
limit $limit offset $offset

-- name: step_times
-- The run's steps with timing spans: each step's wall time (`step_wall_s`), how
-- many spans it recorded, and its longest top-level span (depth 0) with that span's seconds.
with steps as (
    select step, step_wall_s(wall_end_s) as wall_s, count(*) as n_spans
    from spans
    where run_id = $run
    group by step
),
top as (
    select step, arg_max(name, duration_s) as longest_span, max(duration_s) as longest_s
    from spans
    where run_id = $run and depth = 0
    group by step
)
select s.step, s.wall_s, s.n_spans, t.longest_span, t.longest_s
from steps as s
left join top as t on t.step = s.step
order by s.step

-- name: step_spans
-- The spans of the run's step `$step`, in start order (a parent before its children): name,
-- nesting depth and parent, start and end in seconds from the step's first span, duration,
-- and the span's position in its timing record (`span_idx`, the last tie-break).
select name, depth, parent, wall_start_s as start_s, wall_end_s as end_s, duration_s, span_idx
from spans
where run_id = $run and step = $step
order by wall_start_s, wall_end_s desc, depth, span_idx

-- name: slowest_spans
-- Where the run's step time goes: its rows of the `slowest_spans` view, by rank.
select name, calls, total_s, mean_s, p50_s, p95_s, max_s, share, wall_s, wall_share, rank
from slowest_spans
where run_id = $run
order by rank
