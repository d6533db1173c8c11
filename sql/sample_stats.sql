-- What the policy sampled, per run, attempt, split, iteration and policy version: one row per
-- group of sampled sequences of the token-level capture (`samples`) that share them. The
-- lengths are token counts (`prompt_len`, `sampled_len`); `mean_logprob` is the mean logprob
-- of every sampled token of the group (the sum of the sequences' logprob sums over their
-- token count: a long sequence weighs more than a short one). In async RL an iteration's
-- sequences come from several policy versions: one row per version makes the staleness
-- visible (0.6.1 often leaves `policy_version` null; `sample_rollouts.staleness` then gives
-- it from the rollout summaries). Capture coordinates are what user code set in its scope.
-- @column run_id: run whose directory holds the capture file
-- @column run_name: run path relative to the ingest root
-- @column run_attempt: scope `run_attempt` (0, then 1 after a resume)
-- @column split: scope `split`
-- @column iteration: scope `iteration`
-- @column policy_version: the sampling client's model path (null when the record has none)
-- @column n_sequences: sampled sequences
-- @column n_calls: SDK sample calls (records) they came from
-- @column prompt_len_mean: mean prompt length (tokens)
-- @column prompt_len_max: longest prompt
-- @column sampled_len_min: shortest sampled sequence
-- @column sampled_len_p50: median sampled length
-- @column sampled_len_mean: mean sampled length
-- @column sampled_len_p90: 90th percentile of the sampled lengths
-- @column sampled_len_max: longest sampled sequence
-- @column mean_logprob: mean logprob per sampled token (NaN when one is NaN)
-- @column n_stopped_by_length: sequences whose `stop_reason` is `length` (cut at max_tokens)
-- @column first_created_at: earliest call time
-- @column last_created_at: latest call time
select s.run_id,
       r.run_name,
       s.run_attempt,
       s.split,
       s.iteration,
       s.policy_version,
       count(*) as n_sequences,
       count(distinct s.seq) as n_calls,
       avg(s.prompt_len) as prompt_len_mean,
       max(s.prompt_len) as prompt_len_max,
       min(s.sampled_len) as sampled_len_min,
       percentile_cont(0.5) within group (order by s.sampled_len) as sampled_len_p50,
       avg(s.sampled_len) as sampled_len_mean,
       percentile_cont(0.9) within group (order by s.sampled_len) as sampled_len_p90,
       max(s.sampled_len) as sampled_len_max,
       sum(s.logprob_sum) / nullif(sum(s.n_logprobs), 0) as mean_logprob,
       count(*) filter (where s.stop_reason = 'length') as n_stopped_by_length,
       min(s.created_at) as first_created_at,
       max(s.created_at) as last_created_at
from samples as s
left join runs as r on r.run_id = s.run_id
group by s.run_id, r.run_name, s.run_attempt, s.split, s.iteration, s.policy_version
