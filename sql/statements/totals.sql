-- A run's total cost and tokens, computed from `metrics_raw`: what a query reads in place of
-- the `runs` columns on a snapshot written before the ingest kept them.

-- name: run_totals
-- Per run whose live metrics file logs a cumulative total: the last numeric write (largest
-- line number) of `cost/cumulative_usd`, `tokens/cumulative/sampled` and
-- `tokens/cumulative/trained`, whatever the row (a step-less `log_summary` row included; a
-- `metrics.jsonl.pre_resume_*` copy is not live). A token count that is not a whole number is
-- null. The ingest keeps the same on each `runs` row from its ledger states, which this
-- statement moves on read by read (runstore.ingest.run_facts); migration 0008 fills them
-- for the rows stored before, and the query layer joins this to `runs` for a snapshot written
-- before them (runstore.query.connect).
select run_id,
       cost_usd,
       -- 9.2e18: a whole number past the int64 range is no token count either.
       case when isfinite(sampled) and sampled = floor(sampled) and abs(sampled) < 9.2e18
            then cast(sampled as bigint) end as tokens_sampled,
       case when isfinite(trained) and trained = floor(trained) and abs(trained) < 9.2e18
            then cast(trained as bigint) end as tokens_trained
from (
    select run_id,
           arg_max(value, seq) filter (where key = 'cost/cumulative_usd') as cost_usd,
           arg_max(value, seq) filter (where key = 'tokens/cumulative/sampled') as sampled,
           arg_max(value, seq) filter (where key = 'tokens/cumulative/trained') as trained
    from metrics_raw
    where key in ('cost/cumulative_usd', 'tokens/cumulative/sampled', 'tokens/cumulative/trained')
      and value is not null and not coalesce(pre_resume, false)
    group by run_id
)
