"""The read-only statements behind the UI's pages, over the public tables and canned views.

Contract: every function returns `(sql, params)` for `Store.arrow(sql, params)`, which runs
the read-only guard and binds the params: values (run_ids, steps, search text, metric
keys) travel only as `$name` parameters, never in the SQL text. A run is always named by its
`run_id` here (`$run`, `$a`, `$b`, the lists): the API resolves what the page sent
(`analysis.runs`, the one RUN resolution) before it asks. Runs are shown by `run_label`. Fixed statements are plain
constants; the ones whose shape depends on the request (a list of run names, of config
keys) are built as sqlglot trees. Nothing here reads a file or touches DuckDB itself.
"""

from __future__ import annotations

from typing import Any, Sequence

Statement = tuple[str, dict[str, Any]]


def _in_list(column: str, values: Sequence[str], prefix: str,
             table: str | None = None) -> tuple[Any, dict[str, Any]]:
    """`column IN ($p0, $p1, ...)` as a sqlglot condition, with its params."""
    from sqlglot import exp

    params = {f"{prefix}{i}": v for i, v in enumerate(values)}
    cond = exp.column(column, table=table).isin(*[exp.Placeholder(this=k) for k in params])
    return cond, params


def config_columns(keys: Sequence[str]) -> Statement:
    """One row per (run, config key) for the chosen keys: `run_id, key, value` (JSON text)."""
    from sqlglot import exp

    cond, params = _in_list("key", keys, "k", table="c")
    query = (exp.select(exp.column("run_id", table="c"), exp.column("key", table="c"),
                        exp.column("value", table="c"))
             .from_(exp.table_("config", alias="c"))
             .where(cond))
    return query.sql(dialect="duckdb"), params


CONFIG_KEYS = """
select key, count(distinct run_id) as n_runs
from config
group by key
order by key
"""


def series(metric: str, runs: Sequence[str] | None, step_min: int | None = None,
           step_max: int | None = None) -> Statement:
    """Live numeric values of one metric key: `run_id, run_label, step, value` for the runs
    (run_ids) `runs` (every run when None), optionally within a step range."""
    from sqlglot import exp

    def col(name: str, table: str) -> exp.Column:
        return exp.column(name, table=table)

    params: dict[str, Any] = {"metric": metric}
    query = (exp.select(col("run_id", "m"), col("run_label", "m"), col("step", "m"),
                        col("value", "m"))
             .from_(exp.table_("metrics", alias="m"))
             .where(col("key", "m").eq(exp.Placeholder(this="metric")))
             .where(col("value", "m").is_(exp.null()).not_()))
    if runs is not None:
        cond, names = _in_list("run_id", runs, "r", table="m")
        query = query.where(cond)
        params.update(names)
    if step_min is not None:
        query = query.where(col("step", "m") >= exp.Placeholder(this="step_min"))
        params["step_min"] = step_min
    if step_max is not None:
        query = query.where(col("step", "m") <= exp.Placeholder(this="step_max"))
        params["step_max"] = step_max
    return query.sql(dialect="duckdb"), params


LATEST_CHECKPOINTS = "select * from latest_checkpoints order by run_label, run_id"

# The best checkpoint of a run: the one saved when the 10-step moving average of the training
# reward was highest. A checkpoint named for batch B holds the weights trained on the batches
# before B, so the reward it is judged by is `reward_ma10` at the last reward step < B.
BEST_CHECKPOINTS = """
with judged as (
    select c.run_id, c.name, c.batch, c.state_path, c.sampler_path, c.seq,
           t.step as reward_step, t.reward_ma10,
           row_number() over (partition by c.run_id, c.seq order by t.step desc) as newest
    from checkpoints as c
    join reward_trends as t on t.run_id = c.run_id and t.step < c.batch
    where t.reward_ma10 is not null and not isnan(t.reward_ma10)
),
ranked as (
    select *, row_number() over (partition by run_id
                                 order by reward_ma10 desc, seq desc) as best
    from judged
    where newest = 1
)
select r.run_id, r.run_label, b.name as best_name, b.batch as best_batch, b.reward_step,
       b.reward_ma10 as best_reward_ma10, b.state_path as best_state_path,
       b.sampler_path as best_sampler_path
from ranked as b
join run_labels as r on r.run_id = b.run_id
where b.best = 1
order by r.run_label, r.run_id
"""

TIMING_RUNS = """
select r.run_id, r.run_label
from run_labels as r
where r.run_id in (select run_id from spans)
order by r.run_label, r.run_id
"""

ROLLOUT_RUNS = """
select r.run_id, r.run_label
from run_labels as r
where r.run_id in (select run_id from trajectories union select run_id from conversations)
order by r.run_label, r.run_id
"""

CONVERSATIONS = """
select c.conversation_id, c.section, c.title, c.group_idx, c.traj_idx, c.n_messages
from conversations as c
join runs as r on r.run_id = c.run_id
where r.run_id = $run and c.split = $split and c.iteration = $iteration
order by c.group_idx nulls last, c.traj_idx nulls last, c.conversation_id
"""

MESSAGES = """
select c.conversation_id, c.split, c.iteration, c.section, c.title, c.group_idx, c.traj_idx,
       m.message_idx, m.role, m.name, m.content, m.tool_calls, m.tool_call_id
from messages as m
join conversations as c on c.run_id = m.run_id and c.conversation_id = m.conversation_id
join runs as r on r.run_id = m.run_id
where r.run_id = $run and m.conversation_id = $conversation
order by m.message_idx
"""

# Conversations of one trajectory: the ones the logtree ties to it, else (when the tree only
# names the group) the group's conversations.
TRAJECTORY_CONVERSATIONS = """
select c.conversation_id, c.traj_idx is not null as exact
from conversations as c
join runs as r on r.run_id = c.run_id
where r.run_id = $run and c.split = $split and c.iteration = $iteration
  and c.group_idx = $group and (c.traj_idx = $traj or c.traj_idx is null)
order by exact desc, c.conversation_id
"""

TABLE_COLUMNS = """
select table_name, column_name, data_type
from information_schema.columns
where table_schema = 'main'
order by table_name, ordinal_position
"""

# "Which run got slower": two runs (`$a`, `$b`) side by side, per span name and per step.
# A step's wall time is the macro `step_wall_s` (as in statement `browse.step_times`); a
# name's seconds per step are its summed durations over the run's steps with spans, so runs
# of different lengths compare; `added_s` is how many seconds per step the name costs `b`
# more than `a`.
TIMING_COMPARE_STEPS = """
with steps as (
    select s.run_id, s.step, step_wall_s(s.wall_end_s) as wall_s
    from spans as s
    where s.run_id in ($a, $b)
    group by s.run_id, s.step
)
select run_id, count(*) as n_steps,
       median(wall_s) as median_step_s, avg(wall_s) as mean_step_s, max(wall_s) as max_step_s
from steps
group by run_id
"""

TIMING_COMPARE_SPANS = """
with n as (
    select s.run_id, count(distinct s.step) as n_steps
    from spans as s
    where s.run_id in ($a, $b)
    group by s.run_id
),
per_name as (
    select s.run_id, s.name, count(*) as calls, avg(s.duration_s) as mean_s,
           sum(s.duration_s) as total_s
    from spans as s
    where s.run_id in ($a, $b)
    group by s.run_id, s.name
),
names as (select distinct name from per_name)
select x.name,
       a.calls as calls_a, b.calls as calls_b,
       a.mean_s as mean_s_a, b.mean_s as mean_s_b,
       b.mean_s / nullif(a.mean_s, 0) as mean_ratio,
       a.total_s / na.n_steps as per_step_s_a, b.total_s / nb.n_steps as per_step_s_b,
       coalesce(b.total_s / nb.n_steps, 0) - coalesce(a.total_s / na.n_steps, 0) as added_s
from names as x
left join per_name as a on a.name = x.name and a.run_id = $a
left join per_name as b on b.name = x.name and b.run_id = $b
left join n as na on na.run_id = $a
left join n as nb on nb.run_id = $b
order by added_s desc, x.name
"""


def code_diffs(runs: Sequence[str]) -> Statement:
    """`run_id, code_diff` of the runs (run_ids; their code.diff as ingested)."""
    from sqlglot import exp

    cond, params = _in_list("run_id", runs, "r")
    query = (exp.select("run_id", "code_diff").from_("runs").where(cond)
             .order_by("run_id"))
    return query.sql(dialect="duckdb"), params
