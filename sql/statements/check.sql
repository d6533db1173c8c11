-- runstore check: every health rule over live metrics, in one statement (runstore.health).
--
-- Rules travel as bound lists, unnested into the `rules`, `rule_keys` and `rule_kl_keys`
-- relations, so no name or number from a user is ever part of this text:
--   $rule_idx, $rule_name, $rule_op, $rule_value   one entry per rule
--   $rule_v1, $rule_v2                             whether the rule reads KL v1, v2
--   $key_rule, $key_series, $key_name, $key_pref   one per stored key of a non-KL series
--   $keys                                          those keys again, as one filter
--   $klk_rule, $klk_name, $kl_keys                 the stored keys of the rules' KL families
--   $kl_floor, $since_step, $runs                  the optional narrowing and filters
-- A KL family is read from `metric_kl`, the KL values the ingest merged (the merge rules live
-- in statement `summaries.metric_kl`, which `kl_steps` reads too); every other series from
-- `metrics`. runstore.query.statements.check drops the branch of `picked` a rule set does not
-- use (an unused branch would still scan its table) and adds the filters as sqlglot
-- expressions; with `$kl_floor` (every rule that reads KL reads only KL and fires only above
-- a value at least the floor) it reads the KL values of the runs with a KL write at or above
-- the floor alone (statement `kl_over_floor` below); for KL series alone it drops the grouping
-- of `steps` (one row per run, step and rule already) and `outcome` from `seen`. Result: one
-- row per (run, rule) that fired (part 0), then one row per rule with its counts (part 1), in
-- that order.

-- name: check
with rules as (
    select unnest($rule_idx) as rule_idx, unnest($rule_name) as rule,
           unnest($rule_op) as op, unnest($rule_value) as threshold,
           unnest($rule_v1) as use_v1, unnest($rule_v2) as use_v2
),
rule_keys as (
    -- Which stored keys feed which rule: `series` numbers the rule's metrics, `pref` orders the
    -- spellings of one family (0 is `optim/...`, the one used when a step logs both).
    select unnest($key_rule) as rule_idx, unnest($key_series) as series,
           unnest($key_name) as key, unnest($key_pref) as pref
),
metric_values as (
    -- One value per (run, step, rule, series): the preferred spelling's live value, NaN kept.
    -- Strings and booleans have no numeric value and are not compared.
    select m.run_id, m.step, k.rule_idx, arg_min(m.value, k.pref) as value
    from metrics as m
    join rule_keys as k on k.key = m.key
    where m.value is not null and list_contains($keys, m.key)
    group by m.run_id, m.step, k.rule_idx, k.series
),
rule_kl_keys as (
    -- The stored keys of each rule's KL families.
    select unnest($klk_rule) as rule_idx, unnest($klk_name) as key
),
keys as (
    -- The per-key summary the ingest keeps, for the KL keys: read once, for the runs the KL
    -- values are read for (`kl_over_floor`) and the runs each rule was checked on.
    select run_id, key, max_value, n_step_numbers, pre_resume
    from metric_keys
    where list_contains($kl_keys, key)
),
kl_values as (
    -- One value per (run, step, rule) that logs one of the rule's KL families: the most
    -- extreme non-NaN of them in the direction of the rule's comparison, which compares true
    -- exactly when one of them does (NaN when all are NaN: it never fires, and the step still
    -- counts).
    select k.run_id, k.step, r.rule_idx,
           coalesce(case when r.op in ('>', '>=')
                         then greatest(case when r.use_v1 and not isnan(k.v1) then k.v1 end,
                                       case when r.use_v2 and not isnan(k.v2) then k.v2 end)
                         else least(case when r.use_v1 and not isnan(k.v1) then k.v1 end,
                                    case when r.use_v2 and not isnan(k.v2) then k.v2 end) end,
                    'NaN'::double) as value
    from metric_kl as k
    cross join rules as r
    where (r.use_v1 and k.v1 is not null) or (r.use_v2 and k.v2 is not null)
),
picked as (
    select run_id, step, rule_idx, value from metric_values
    union all
    select run_id, step, rule_idx, value from kl_values
),
steps as (
    -- One row per (run, rule, step that logs the rule's metrics). "Over" is the macro
    -- `over_threshold` (sql/statements/macros.sql), its one home: NaN never fires, for any op
    -- (DuckDB sorts NaN above every number); +Infinity compares as the largest number.
    select p.run_id, p.rule_idx, p.step,
           bool_or(over_threshold(p.value, r.op, r.threshold)) as is_over,
           -- The rule's value at this step: its most extreme non-NaN series in the direction
           -- of the comparison (null when every series is NaN).
           case when r.op in ('>', '>=') then max(p.value) filter (where not isnan(p.value))
                else min(p.value) filter (where not isnan(p.value)) end as value
    from picked as p
    join rules as r on r.rule_idx = p.rule_idx
    group by p.run_id, p.rule_idx, p.step, r.op
),
outcome as (
    -- One row per (run, rule) whose metrics the run logs, fired or not: a green check still
    -- says how many runs it looked at.
    select s.run_id, s.rule_idx,
           bool_or(s.is_over) as fired,
           min(s.step) filter (where s.is_over) as first_step,
           max(s.step) filter (where s.is_over) as last_step,
           count(*) filter (where s.is_over) as steps_over,
           case when r.op in ('>', '>=') then max(s.value) filter (where s.is_over)
                else min(s.value) filter (where s.is_over) end as peak,
           arg_max(coalesce(s.value, 'NaN'::double), s.step) as latest,
           -- The longest streak of over-steps: the steps' marks in step order as text, `1`
           -- over and `0` not, cut at each `0`; the pieces are runs of `1`s, and the longest
           -- is also the largest as text. One ordered aggregate of the few steps here costs
           -- less than a window over them (gaps and islands).
           length(list_max(string_split(
               string_agg(case when s.is_over then '1' else '0' end, '' order by s.step),
               '0'))) as longest_streak
    from steps as s
    join rules as r on r.rule_idx = s.rule_idx
    group by s.run_id, s.rule_idx, r.op
),
status as (
    -- Each run's shown name and status, read once for the fired rows and the scope count.
    -- A fired row's `run_name` is the run's `run_label` (the name, with a run_id prefix when
    -- two runs share it); `run_id` is its identity.
    select run_id, run_label as run_name, status from run_status
),
scope as (
    -- The runs the check covers (the --runs filter is added here too).
    select count(*) as n from status
),
kl_logged as (
    -- The runs each KL rule was checked on: every run with a numeric live-file KL write of
    -- the rule's families at a step. `kl_values` may read only the runs with a write at or
    -- above `$kl_floor`, so the count cannot come from it; the per-key summary the ingest
    -- keeps (`metric_keys.n_step_numbers`) gives the same count either way without reading
    -- a metric row (with `$since_step`, statement `kl_logged_since` below takes its place).
    -- It counts a run whose every KL number was superseded by a string, which `metric_kl`
    -- leaves out: "checked" means "logged a KL number".
    select distinct k.rule_idx, m.run_id
    from keys as m
    join rule_kl_keys as k on k.key = m.key
    where m.n_step_numbers > 0 and not m.pre_resume
),
seen as (
    -- One row per (rule, run) the rule was checked on.
    select rule_idx, run_id from outcome
    union
    select rule_idx, run_id from kl_logged
),
answer as (
    -- Part 0: one row per (run, rule) that fired. Part 1: one row per rule with its counts.
    -- The parts come in that order, so the fired rows are a prefix of the result and callers
    -- slice instead of filtering (pyarrow's filter imports pandas: ~1 s in a fresh process).
    select 0 as part, f.run_id, st.run_name, r.rule, f.first_step, f.last_step, f.steps_over,
           f.longest_streak, f.peak, f.latest, st.status, f.rule_idx,
           null::bigint as checked, null::bigint as fired_runs, null::bigint as scope_runs
    from outcome as f
    join rules as r on r.rule_idx = f.rule_idx
    left join status as st on st.run_id = f.run_id
    where f.fired
    union all
    select 1, null, null, r.rule, null, null, null, null, null, null, null, r.rule_idx,
           count(s.run_id), count(s.run_id) filter (where f.fired), (select n from scope)
    from rules as r
    left join seen as s on s.rule_idx = r.rule_idx
    left join outcome as f on f.rule_idx = s.rule_idx and f.run_id = s.run_id
    group by r.rule_idx, r.rule
)
select * exclude (part) from answer
order by part, run_name, rule_idx

-- name: kl_logged_since
-- `kl_logged` of a check from `$since_step` on: the summary does not say at which steps a run
-- logged KL numbers, so they are read from `metrics_raw` (the step filter is added to it).
select distinct k.rule_idx, m.run_id
from metrics_raw as m
join rule_kl_keys as k on k.key = m.key
where list_contains($kl_keys, m.key) and live_write(m.step, m.pre_resume)
  and m.value is not null

-- name: kl_over_floor
-- The runs with a stored KL write at or above `$kl_floor`, from the per-key summary the
-- ingest keeps (`keys` above: `metric_keys.max_value`, the largest non-NaN value of each read),
-- so no metric row is read for it. Any write counts, a superseded one or a `pre_resume` copy
-- too: a superset of the runs with a KL step at or above the floor, so of the runs that can
-- fire a rule that fires only above a value at least the floor (runstore.health.evaluate).
select run_id from keys where max_value >= $kl_floor
