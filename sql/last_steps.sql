-- The last 10 steps of every run and metric key: for each (run, key), the 10 (the macro
-- `recent_steps`) largest steps whose live value is a number (NaN and ±Infinity count; a step
-- whose latest write is a string or boolean does not, nor a step-less row), with the number.
-- The one home of "a run's last N steps": `run_summary`'s 10-step average reads it; ask it for the latest
-- values of any key (`where key = '...' and nth_last <= 3`).
-- It reads little, in one pass over the key's rows: for a (run, key) pair whose writes are
-- plain (the macro `plain_writes`: one write per step), the per-key summary the ingest keeps
-- (`metric_keys`) says where its 10th-last number is at the earliest: k numbers at distinct
-- whole-number steps from `first` on put it at `first + k - 10` or above, so only its rows
-- from there on are kept. A pair whose writes are not plain (a resumed run's steps logged
-- again) keeps all its rows, and the latest write of each step wins (`write_rank`).
-- @column run_id: run
-- @column key: metric name as written
-- @column step: training step
-- @column value: the live number at that step; NaN and ±Infinity kept as IEEE values
-- @column nth_last: 1 for the run's last step with a number under the key, 2 for the one before, … 10
with tails as (
    select run_id, key,
           plain_writes(steps_exact, source_id, n_points, n_numbers, n_strings, n_stepless)
               as plain,
           min(first_step) + sum(n_step_numbers) - recent_steps() as tail_from
    from metric_keys
    where not pre_resume
    group by run_id, key
),
live as (
    select m.run_id, m.key, m.step, m.value,
           write_rank(m.run_id, m.step, m.key, m.seq) as rn
    from metrics_raw as m
    join tails as t on t.run_id = m.run_id and t.key = m.key
    where live_write(m.step, m.pre_resume)
      and (m.step >= t.tail_from or not t.plain)
)
select run_id, key, step, value, nth_last
from (select run_id, key, step, value,
             row_number() over (partition by run_id, key order by step desc) as nth_last
      from live
      where rn = 1 and value is not null) as ranked
where nth_last <= recent_steps()
